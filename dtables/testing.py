"""Helpers for testing code built on dtables: compare row collections as multisets, with a readable diff."""

from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import Any


def rows_multiset(rows: Iterable[Any]) -> collections.Counter:
    """A multiset of rows as tuples (Spark Rows, tuples or dicts)."""
    out: collections.Counter = collections.Counter()
    for r in rows:
        if isinstance(r, dict):
            r = tuple(r.values())
        out[tuple(r)] += 1
    return out


def assert_same_rows(actual: Iterable[Any], expected: Iterable[Any]) -> None:
    """Compare two row collections as multisets, both ways; the error lists missing and extra rows."""
    a, e = rows_multiset(actual), rows_multiset(expected)
    missing, extra = e - a, a - e
    if missing or extra:
        lines = ["row multisets differ"]
        lines += [f"  missing x{n}: {r}" for r, n in sorted(missing.items(), key=repr)]
        lines += [f"  extra   x{n}: {r}" for r, n in sorted(extra.items(), key=repr)]
        raise AssertionError("\n".join(lines))
