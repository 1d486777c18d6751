"""Shared fixtures: one Spark session per test run, temporary warehouses, row-multiset comparison."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dtables.testing import assert_same_rows, rows_multiset  # noqa: F401  (re-exported for tests)


HEAVY = Path(__file__).with_name("heavy.txt")


@pytest.hookimpl(tryfirst=True)  # before pytest's own hook deselects by -m
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests listed in heavy.txt ``heavy``: the default suite leaves them to ``pytest -m heavy``."""
    heavy = {line.strip() for line in HEAVY.read_text().splitlines() if line.strip() and not line.startswith("#")}
    for item in items:
        if item.nodeid in heavy:
            item.add_marker(pytest.mark.heavy)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The one SparkSession of the run, with Delta configured (local[2], few shuffle partitions)."""
    from dtables.spark.builder import build_spark

    wh = tmp_path_factory.mktemp("spark-warehouse")
    session = build_spark(wh.as_uri(), master="local[2]")
    yield session
    session.stop()


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
