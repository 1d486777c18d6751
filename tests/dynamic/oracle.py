"""Oracle for dynamic-table tests: a query evaluated from scratch over time-travelled sources."""

from __future__ import annotations

import datetime as dt_
from collections.abc import Mapping
from typing import Any

from sqlglot import exp

from differentiation import ChangeStats
from dtables.dynamic import definition as defs
from dtables.dynamic import history
from dtables.dynamic.definition import ROW_ID_COLUMN
from dtables.dynamic.frontier import resolve_source
from dtables.dynamic.plan import decide
from dtables.dynamic.sources import RefreshSources
from dtables.sql.dialect import parse_one, to_spark
from dtables.sql.references import replace_table
from dtables.testing import assert_same_rows


def latest_record(dt: Any, name: str) -> history.RefreshRecord:
    return history.records(dt.store, name)[-1]


def _version_at(dt: Any, source: str, at: Any) -> int:
    """Independent of the executor's resolution: DESCRIBE HISTORY (base tables) or the upstream's history."""
    obj = dt.catalog.lookup(source)
    if obj["kind"] == "DYNAMIC_TABLE":
        version = history.version_at_data_timestamp(dt.store, source, at)
        assert version is not None, f"{source} has no refresh to {at}"
        return version
    rows = dt.spark.sql(f"DESCRIBE HISTORY delta.`{obj['location']}`").select("version", "timestamp").collect()
    at_naive = at.astimezone().replace(tzinfo=None)  # DESCRIBE HISTORY timestamps are session-local, naive
    return max(r["version"] for r in rows if r["timestamp"] <= at_naive)


def oracle_rows(dt: Any, name: str) -> list[tuple]:
    """The table's query as written (not the one over intermediates that its refreshes maintain) over its sources
    as of its data timestamp, evaluated from scratch with time travel."""
    d = defs.require(dt.store, name)
    tree = parse_one(d.text)
    for table in list(tree.find_all(exp.Table)):
        source = f"{table.db}.{table.name}".lower()
        obj = dt.catalog.lookup(source) if table.db else None
        if obj is None:
            continue  # a CTE
        version = _version_at(dt, source, d.data_timestamp)
        pinned = parse_one(f"SELECT * FROM delta.`{obj['location']}` VERSION AS OF {version} AS "
                           f"{table.alias_or_name}").find(exp.Table)
        assert pinned is not None
        replace_table(table, pinned)
    return [tuple(r) for r in dt.spark.sql(to_spark(tree)).collect()]


def table_rows(dt: Any, name: str) -> list[tuple]:
    return [tuple(r) for r in dt.table(name).drop(ROW_ID_COLUMN).collect()]


def change_query_plan(dt: Any, name: str, stats: Mapping[str, ChangeStats]) -> str:
    """The physical plan of the change query the next refresh of `name` runs, with `stats` the kinds of change of
    its sources (tests count the scans in it)."""
    d = defs.require(dt.store, name)
    at = dt_.datetime.now(dt_.timezone.utc)
    sources = {s: resolve_source(dt, d.name, s, at) for s in d.sources}
    action = decide(d, sources, stats, at, ())
    assert action.action == "INCREMENTAL" and action.derivative is not None
    refresh = RefreshSources(dt.spark.newSession(), d.frontier, sources, settings=dt.spark)
    refresh.spark.conf.set("spark.sql.adaptive.enabled", "false")  # as incremental refreshes run (executor.py)
    return str(refresh.spark.sql(to_spark(refresh.changes_query(action.derivative)))._jdf.queryExecution()
               .executedPlan().toString())


def refreshes_match(dt: Any, names: list[str]) -> None:
    """Refresh `names`: each succeeds INCREMENTAL (or NO_DATA) and then equals its query from scratch."""
    for record in dt.refresh(names):
        assert record.state == "SUCCEEDED", record.error
        assert record.action in ("INCREMENTAL", "NO_DATA"), (record.name, record.action, record.reason)
        assert_same_rows(table_rows(dt, record.name), oracle_rows(dt, record.name))
