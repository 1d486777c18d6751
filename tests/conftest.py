"""Shared fixtures: one Spark session per test run, temporary warehouses, row-multiset comparison."""

from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The one SparkSession of the run, with Delta configured (local[2], few shuffle partitions)."""
    from dtables.spark.builder import build_spark

    wh = tmp_path_factory.mktemp("spark-warehouse")
    session = build_spark(wh.as_uri(), master="local[2]")
    yield session
    session.stop()


def rows_multiset(rows: Iterable[Any]) -> collections.Counter:
    """A multiset of rows as tuples (Spark Rows, tuples or dicts)."""
    out: collections.Counter = collections.Counter()
    for r in rows:
        if hasattr(r, "asDict"):
            r = tuple(r)
        elif isinstance(r, dict):
            r = tuple(r.values())
        out[tuple(r)] += 1
    return out


def assert_same_rows(actual: Iterable[Any], expected: Iterable[Any]) -> None:
    """Compare two row collections as multisets, both ways, with a readable diff."""
    a, e = rows_multiset(actual), rows_multiset(expected)
    missing, extra = e - a, a - e
    if missing or extra:
        lines = ["row multisets differ"]
        lines += [f"  missing x{n}: {r}" for r, n in sorted(missing.items(), key=repr)]
        lines += [f"  extra   x{n}: {r}" for r, n in sorted(extra.items(), key=repr)]
        raise AssertionError("\n".join(lines))


@pytest.fixture
def warehouse(tmp_path: Any) -> Any:
    """A fresh, empty warehouse folder."""
    return tmp_path / "warehouse"


@pytest.fixture
def connect(spark: Any, warehouse: Any) -> Any:
    """Factory: ``connect()`` opens a dtables session on the test's warehouse, sharing the run's Spark."""
    import dtables

    def _connect(path: Any = None) -> Any:
        return dtables.connect(path or warehouse, spark=spark)

    return _connect


@pytest.fixture
def dt(connect: Any) -> Any:
    """A dtables session on a fresh warehouse."""
    return connect()
