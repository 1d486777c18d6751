"""Refresh history: one record per refresh, in the state store; queryable as ``dtables.refresh_history``.

A record is written as EXECUTING before the refresh runs and finished (SUCCEEDED, FAILED, CANCELLED,
UPSTREAM_FAILED) when it ends, so an interrupted refresh leaves an EXECUTING record that the next refresh of the
table resolves from the Delta log (recovered as SUCCEEDED, or CANCELLED when nothing was committed).
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import types as T
from sqlglot import exp

from dtables.catalog import normalize, qualified
from dtables.dynamic.definition import from_iso, now_utc, to_iso
from dtables.sql.dialect import to_spark
from dtables.sql.references import aliased_table, replace_table
from dtables.state import StateStore
from dtables.catalog.warehouse import Warehouse
from scheduler.vocabulary import RefreshState

VIRTUAL_TABLE = "dtables.refresh_history"
_VIEW = "__dtables_refresh_history"

COLUMNS = (
    ("name", "string"), ("refresh_id", "string"), ("sequence", "bigint"), ("trigger", "string"),
    ("action", "string"), ("reason", "string"), ("data_timestamp", "timestamp"), ("frontier_before", "string"),
    ("frontier_after", "string"), ("rows_inserted", "bigint"), ("rows_deleted", "bigint"),
    ("rows_updated", "bigint"), ("target_version", "bigint"), ("started_at", "timestamp"),
    ("ended_at", "timestamp"), ("state", "string"), ("error", "string"), ("write_kind", "string"),
    ("spark_jobs", "bigint"), ("job_seconds", "double"), ("driver_seconds", "double"), ("bytes_read", "bigint"),
    ("records_read", "bigint"), ("pruning", "string"), ("estimate_incremental_s", "double"),
    ("estimate_full_s", "double"), ("cost_choice", "string"), ("cost_reason", "string"), ("source_bytes", "bigint"),
    ("change_bytes", "bigint"),
)


@dataclass(frozen=True)
class RefreshRecord:
    """One refresh as the history holds it."""

    name: str
    refresh_id: str
    sequence: int | None
    trigger: str
    action: str | None
    reason: str | None
    data_timestamp: dt.datetime
    frontier_before: dict[str, int] | None
    frontier_after: dict[str, int] | None
    rows_inserted: int | None
    rows_deleted: int | None
    rows_updated: int | None
    target_version: int | None
    started_at: dt.datetime
    ended_at: dt.datetime | None
    state: str
    error: str | None
    write_kind: str | None = None  # how the new contents were written (see dynamic.vocabulary.Write)
    spark_jobs: int | None = None  # where the refresh spent its time (dtables.spark.jobs.WorkCost)
    job_seconds: float | None = None
    driver_seconds: float | None = None
    bytes_read: int | None = None
    records_read: int | None = None
    pruning: str | None = None  # JSON: the snapshot reads narrowed by change keys, files read of all (keys.py)
    estimate_incremental_s: float | None = None  # AUTO's cost model (dynamic/cost.py): estimates, choice, why
    estimate_full_s: float | None = None
    cost_choice: str | None = None
    cost_reason: str | None = None
    source_bytes: int | None = None  # what the estimates scale with: sources' bytes, bytes of the changed files
    change_bytes: int | None = None

    @property
    def seconds(self) -> float | None:
        return (self.ended_at - self.started_at).total_seconds() if self.ended_at else None


def new_refresh_id() -> str:
    return uuid.uuid4().hex


def start(store: StateStore, name: str, refresh_id: str, trigger: str, data_timestamp: dt.datetime,
          frontier_before: Mapping[str, int] | None, state: str = RefreshState.EXECUTING) -> None:
    store.execute(
        "INSERT INTO refresh_history(refresh_id, name, trigger, data_timestamp, frontier_before, started_at, state) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (refresh_id, normalize(name), trigger, to_iso(data_timestamp),
         json.dumps(dict(frontier_before), sort_keys=True) if frontier_before is not None else None,
         to_iso(now_utc()), state))


def update(store: StateStore, refresh_id: str, **values: Any) -> None:
    """Set fields of a record; frontiers are given as dicts, ``ended_at`` defaults to now when a state ends it."""
    if "state" in values and values["state"] != RefreshState.EXECUTING and "ended_at" not in values:
        values["ended_at"] = now_utc()
    for key in ("frontier_before", "frontier_after"):
        if isinstance(values.get(key), Mapping):
            values[key] = json.dumps(dict(values[key]), sort_keys=True)
    for key in ("ended_at", "data_timestamp"):
        if isinstance(values.get(key), dt.datetime):
            values[key] = to_iso(values[key])
    assignments = ", ".join(f"{k} = ?" for k in values)
    store.execute(f"UPDATE refresh_history SET {assignments} WHERE refresh_id = ?", (*values.values(), refresh_id))


def _record(row: Any) -> RefreshRecord:
    r = dict(row)
    return RefreshRecord(
        name=r["name"], refresh_id=r["refresh_id"], sequence=r["sequence"], trigger=r["trigger"],
        action=r["action"], reason=r["reason"], data_timestamp=from_iso(r["data_timestamp"]),  # type: ignore[arg-type]
        frontier_before=json.loads(r["frontier_before"]) if r["frontier_before"] else None,
        frontier_after=json.loads(r["frontier_after"]) if r["frontier_after"] else None,
        rows_inserted=r["rows_inserted"], rows_deleted=r["rows_deleted"], rows_updated=r["rows_updated"],
        target_version=r["target_version"], started_at=from_iso(r["started_at"]),  # type: ignore[arg-type]
        ended_at=from_iso(r["ended_at"]), state=r["state"], error=r["error"], write_kind=r.get("write_kind"),
        spark_jobs=r.get("spark_jobs"), job_seconds=r.get("job_seconds"), driver_seconds=r.get("driver_seconds"),
        bytes_read=r.get("bytes_read"), records_read=r.get("records_read"), pruning=r.get("pruning"),
        **{k: r.get(k) for k in _COST_FIELDS})


_COST_FIELDS = ("estimate_incremental_s", "estimate_full_s", "cost_choice", "cost_reason", "source_bytes",
                "change_bytes")


def records(store: StateStore, name: str | None = None, since: dt.datetime | None = None,
            states: tuple[str, ...] | None = None) -> list[RefreshRecord]:
    """History records, oldest first; filtered by table, start time and states."""
    where, params = [], []
    if name is not None:
        where.append("name = ?")
        params.append(normalize(name))
    if since is not None:
        where.append("started_at >= ?")
        params.append(to_iso(since) or "")
    if states:
        where.append(f"state IN ({', '.join('?' for _ in states)})")
        params.extend(states)
    sql = "SELECT * FROM refresh_history" + (" WHERE " + " AND ".join(where) if where else "")
    return [_record(r) for r in store.query(sql + " ORDER BY started_at, rowid", params)]


def latest(store: StateStore, name: str) -> RefreshRecord | None:
    """The newest history record of one table (any trigger, any state), or None."""
    rows = store.query("SELECT * FROM refresh_history WHERE name = ? ORDER BY started_at DESC, rowid DESC LIMIT 1",
                       (normalize(name),))
    return _record(rows[0]) if rows else None


def recent(store: StateStore, name: str, where: str, limit: int, *, other_tables: bool = False
           ) -> list[RefreshRecord]:
    """The newest SUCCEEDED records of one table (or, with ``other_tables``, of every table but that one) matching the
    SQL condition ``where`` (constant text), newest first."""
    rows = store.query(f"SELECT * FROM refresh_history WHERE name {'<>' if other_tables else '='} ? AND state = ? "
                       f"AND ({where}) "
                       "ORDER BY started_at DESC, rowid DESC LIMIT ?", (normalize(name), RefreshState.SUCCEEDED, limit))
    return [_record(r) for r in rows]


def get(store: StateStore, refresh_id: str) -> RefreshRecord | None:
    rows = store.query("SELECT * FROM refresh_history WHERE refresh_id = ?", (refresh_id,))
    return _record(rows[0]) if rows else None


def version_at_data_timestamp(store: StateStore, name: str, at: dt.datetime) -> int | None:
    """The version of dynamic table ``name`` that holds its data as of ``at`` (its successful refresh to ``at``)."""
    rows = store.query("SELECT target_version FROM refresh_history WHERE name = ? AND data_timestamp = ? AND "
                       "state = ? AND target_version IS NOT NULL ORDER BY started_at DESC LIMIT 1",
                       (normalize(name), to_iso(at), RefreshState.SUCCEEDED))
    return int(rows[0][0]) if rows else None


# -- SQL access -----------------------------------------------------------------------------------------------------


def dataframe(session: Warehouse, name: str | None = None, since: dt.datetime | None = None) -> Any:
    """The history as a Spark DataFrame (columns ``COLUMNS``), oldest first."""
    types = {"string": T.StringType(), "bigint": T.LongType(), "timestamp": T.TimestampType(),
             "double": T.DoubleType()}
    schema = T.StructType([T.StructField(c, types[t], True) for c, t in COLUMNS])
    rows = []
    for r in records(session.store, name, since):
        rows.append(tuple(
            json.dumps(v, sort_keys=True) if isinstance(v, dict) else v
            for v in (getattr(r, c) for c, _ in COLUMNS)))
    return session.spark.createDataFrame(rows, schema)


def point_at_virtual_tables(session: Warehouse, tree: exp.Expr, statement: str) -> tuple[exp.Expr, str]:
    """Replace references to ``dtables.refresh_history`` with a temp view of the current history rows."""
    hits = [t for t in tree.find_all(exp.Table) if qualified(t.db, t.name).lower() == VIRTUAL_TABLE]
    if not hits:
        return tree, statement
    dataframe(session).createOrReplaceTempView(_VIEW)
    tree = tree.copy()
    for table in [t for t in tree.find_all(exp.Table) if qualified(t.db, t.name).lower() == VIRTUAL_TABLE]:
        replace_table(table, aliased_table(_VIEW, table.alias or "refresh_history"))
    return tree, to_spark(tree)
