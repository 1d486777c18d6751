"""Helpers shared by the change-read tests: the root conftest's multiset comparison, importable by name."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("_root_conftest", Path(__file__).parents[1] / "conftest.py")
assert _spec is not None and _spec.loader is not None
_root = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_root)

assert_same_rows = _root.assert_same_rows
rows_multiset = _root.rows_multiset
