"""Load generated TPC-H data into Delta tables created (and so change-tracked) by dtables."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.tpch.schema import TABLES, columns, key_statements


def load(session: Any, data: Path, tables: Iterable[str] = TABLES, keys: bool = True) -> dict[str, int]:
    """CREATE TABLE each TPC-H table (or those named) through dtables, then INSERT the Parquet rows cast to the
    spec's types; with ``keys``, declare the specification's primary and foreign keys (RELY) on all eight.

    Returns the row count of each table. tpchgen-cli already writes DECIMAL(15,2) and DATE; the casts pin the
    column types (BIGINT keys, INT sizes) whatever the generator's version picks.
    """
    counts = {}
    for table in tables:
        session.sql(f"CREATE TABLE {table} ({TABLES[table]})")
        select = ", ".join(f"CAST({name} AS {type_}) AS {name}" for name, type_ in columns(table))
        path = (data / f"{table}.parquet").resolve()
        session.sql(f"INSERT INTO {table} SELECT {select} FROM parquet.`{path}`")
        counts[table] = session.table(table).count()
    if keys:
        for statement in key_statements(set(counts)):
            session.sql(statement)
    return counts
