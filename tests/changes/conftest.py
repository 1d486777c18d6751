"""Fixtures for change-read tests: tracked Delta tables at fresh paths, and running a list of statements.

DML on Delta costs seconds on a local[2] session, so tables that several tests only read are module-scoped.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

TRACKED = (
    "delta.enableChangeDataFeed = true, delta.enableRowTracking = true, delta.enableDeletionVectors = false"
)
_counter = itertools.count()


@pytest.fixture(scope="session")
def make_table(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., str]:
    """``make_table("id INT, name STRING", properties=...)`` -> a ``delta.`path``` identifier of a new table."""
    folder = tmp_path_factory.mktemp("changes")

    def make(columns: str, properties: str = TRACKED, partitioned_by: str | None = None) -> str:
        ident = f"delta.`{folder / f't{next(_counter)}'}`"
        partition = f" PARTITIONED BY ({partitioned_by})" if partitioned_by else ""
        props = f" TBLPROPERTIES ({properties})" if properties else ""
        spark.sql(f"CREATE TABLE {ident} ({columns}) USING delta{partition}{props}")
        return ident

    return make


@pytest.fixture(scope="session")
def run(spark: Any) -> Callable[..., None]:
    """Run SQL statements in order; ``{t}`` in each is replaced by the table identifier."""

    def execute(table: str, *statements: str) -> None:
        for statement in statements:
            spark.sql(statement.replace("{t}", table))

    return execute
