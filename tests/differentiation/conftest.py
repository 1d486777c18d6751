"""Fixtures for differentiation tests (the `spark` fixture comes from tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from diff_harness import BaseTable, TableSet


@pytest.fixture
def tables(spark: Any) -> Callable[[Mapping[str, BaseTable]], TableSet]:
    """Factory: register base tables (states + redundant delta) as fresh temp views."""
    return lambda ts: TableSet(spark, ts)
