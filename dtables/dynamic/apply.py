"""Writing a refresh to the dynamic table: one Delta commit that carries the new frontier.

Every write runs on the refresh's cloned session with Delta's idempotent-write settings (``txnAppId`` =
``dtables-refresh:<table>``, ``txnVersion`` = the refresh sequence) and the refresh's identity and frontier as the
commit's user metadata. Delta honours ``txnAppId``/``txnVersion`` for appends, overwrites and MERGE (checked on
Delta 4.4: a second write with the same pair commits nothing), so a rerun after a crash never applies twice, and
the store can be repaired from the log (``committed_refresh``).

Writes by action: APPEND (the change set has inserts only: a plain append), MERGE (insert/update/delete matched on
the hidden row id, so one copy of a duplicated row is deleted exactly), OVERWRITE (FULL and REINITIALIZE: recompute
and replace in one commit).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from differentiation import render_changes, render_snapshot
from dtables.changes.idempotent import logged_commits, make_idempotent
from dtables.changes.log import DeltaLog
from dtables.changes.storage import Storage
from dtables.dynamic.definition import ROW_ID_COLUMN, Column
from dtables.dynamic.plan import STATE_VIEW, RefreshAction, stored_name
from dtables.dynamic.sources import RefreshSources

METADATA_KEY = "dtables_refresh"


@dataclass(frozen=True)
class CommitMetadata:
    """What a refresh commit records about itself (the commit's ``userMetadata``)."""

    refresh_id: str
    sequence: int
    data_timestamp: str
    frontier: Mapping[str, int]
    definition_hash: str
    source_identities: Mapping[str, str]

    def to_json(self) -> str:
        return json.dumps({METADATA_KEY: {
            "refresh_id": self.refresh_id, "sequence": self.sequence, "data_timestamp": self.data_timestamp,
            "frontier": dict(self.frontier), "definition_hash": self.definition_hash,
            "source_identities": dict(self.source_identities)}}, sort_keys=True)

    @staticmethod
    def from_json(text: str | None) -> CommitMetadata | None:
        try:
            body = json.loads(text or "")[METADATA_KEY]
        except (ValueError, KeyError, TypeError):
            return None
        return CommitMetadata(body["refresh_id"], int(body["sequence"]), body["data_timestamp"], body["frontier"],
                              body["definition_hash"], body["source_identities"])


@dataclass(frozen=True)
class WrittenCommit:
    """A refresh commit found in the log, with the row counts of its operation metrics."""

    version: int
    metadata: CommitMetadata
    rows_inserted: int | None
    rows_deleted: int | None
    rows_updated: int | None


def configure_idempotent_write(clone: Any, name: str, metadata: CommitMetadata) -> None:
    make_idempotent(clone, f"dtables-refresh:{name}", metadata.sequence, metadata.to_json())


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _cast_select(source_columns: Sequence[str], target: Sequence[Column]) -> str:
    """Positional mapping of the rendered plan's columns to the table's, cast to the stored types (hidden state
    columns, typed None, keep the plan's own types)."""
    if len(source_columns) != len(target):
        raise ValueError(f"the query produces {len(source_columns)} columns, the table has {len(target)}")
    return ", ".join(f"CAST({_q(s)} AS {t.type}) AS {_q(t.name)}" if t.type else f"{_q(s)} AS {_q(t.name)}"
                     for s, t in zip(source_columns, target))


def stored_columns(action: RefreshAction, columns: Sequence[Column]) -> list[Column]:
    """The table's columns this write fills: the query's, then the hidden aggregate state the plan maintains."""
    plan_cols = action.plan.columns() if action.plan is not None else ()
    helpers = plan_cols[len(columns):]
    return list(columns) + [Column(stored_name(h), "") for h in helpers]


def register_state(clone: Any, location: str, version: int, action: RefreshAction, columns: Sequence[Column]) -> None:
    """The table's stored state at ``version`` as the temp view the algebraic change plan reads (``STATE_VIEW``):
    the helper columns under the names the plan gives them."""
    assert action.plan is not None
    helpers = action.plan.columns()[len(columns):]
    (clone.read.format("delta").option("versionAsOf", version).load(location)
     .selectExpr(*(f"{_q(stored_name(h))} AS {_q(h)}" for h in helpers))
     .createOrReplaceTempView(STATE_VIEW))


def write(clone: Any, location: str, action: RefreshAction, sources: RefreshSources, query: str,
          columns: Sequence[Column], state_version: int | None = None) -> None:
    """Apply ``action`` to the table at ``location`` in one commit (the session must be configured first).

    ``state_version`` is the table version holding the previous result (needed by plans that keep aggregate
    state, whose change set is computed from the stored groups)."""
    target = f"delta.{_q(location)}"
    if action.write == "OVERWRITE":
        if action.plan is not None:
            body = render_snapshot(action.plan, sources, "end")
            select = (f"SELECT {_cast_select(action.plan.columns(), stored_columns(action, columns))}, "
                      f"__row_id AS {_q(ROW_ID_COLUMN)}")
        else:  # no plan (the query cannot be built into one): any unique id will do, FULL overwrites every time
            body = sources.plain_query(query)
            df_cols = clone.sql(body).columns
            select = f"SELECT {_cast_select(df_cols, columns)}, uuid() AS {_q(ROW_ID_COLUMN)}"
        df = clone.sql(f"{select} FROM ({body}) AS q")
        (df.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(location))
        return
    assert action.derivative is not None and action.plan is not None
    targets = stored_columns(action, columns)
    if len(targets) > len(columns):
        if state_version is None:
            raise ValueError("an aggregate maintained from its stored state needs the table version holding it")
        register_state(clone, location, state_version, action, columns)
    changes = render_changes(action.derivative, sources)
    plan_cols = action.plan.columns()
    if action.write == "APPEND":
        df = clone.sql(f"SELECT {_cast_select(plan_cols, targets)}, `METADATA$ROW_ID` AS {_q(ROW_ID_COLUMN)} "
                       f"FROM ({changes}) AS c WHERE `METADATA$ACTION` = 'INSERT'")
        df.write.format("delta").mode("append").save(location)
        return
    # One row per row id: its INSERT if it has one (new values), else its DELETE (flagged).
    source = (f"SELECT {_cast_select(plan_cols, targets)}, `METADATA$ROW_ID` AS __dt_rid, "
              f"`METADATA$ACTION` = 'DELETE' AS __dt_delete FROM (SELECT *, row_number() OVER (PARTITION BY "
              f"`METADATA$ROW_ID` ORDER BY `METADATA$ACTION` DESC) AS __dt_pick FROM ({changes}) AS c0) AS c "
              f"WHERE __dt_pick = 1")
    sets = ", ".join(f"t.{_q(c.name)} = s.{_q(c.name)}" for c in targets)
    names = ", ".join(_q(c.name) for c in targets)
    values = ", ".join(f"s.{_q(c.name)}" for c in targets)
    clone.sql(f"MERGE INTO {target} AS t USING ({source}) AS s ON t.{_q(ROW_ID_COLUMN)} = s.__dt_rid "
              f"WHEN MATCHED AND s.__dt_delete THEN DELETE "
              f"WHEN MATCHED THEN UPDATE SET {sets} "
              f"WHEN NOT MATCHED AND NOT s.__dt_delete THEN INSERT ({names}, {_q(ROW_ID_COLUMN)}) "
              f"VALUES ({values}, s.__dt_rid)")


def _metric(metrics: Mapping[str, Any], *keys: str) -> int | None:
    for key in keys:
        if key in metrics:
            return int(metrics[key])
    return None


def _removed_rows(spark: Any, location: str, version: int) -> int | None:
    text = Storage(spark, location).read_text(f"_delta_log/{version:020d}.json") or ""
    total = 0
    for line in text.splitlines():
        if line.startswith('{"remove"'):
            stats = json.loads(line)["remove"].get("stats")
            if not stats:
                return None
            total += int(json.loads(stats).get("numRecords", 0))
    return total


def committed_refresh(spark: Any, location: str, *, min_sequence: int = 1, look_back: int = 20) -> WrittenCommit | None:
    """The newest refresh commit in the table's log with a sequence >= ``min_sequence``, or None.

    Looks at the last ``look_back`` commits only: refresh commits are the only writes to a dynamic table, so the
    newest one is near the end (maintenance commits such as OPTIMIZE may follow it).
    """
    log = DeltaLog(spark, location)
    if not log.exists:
        return None
    for commit in logged_commits(spark, location, after=log.latest_version - look_back, newest_first=True):
        info, version = commit.info, commit.version
        meta = CommitMetadata.from_json(info.get("userMetadata"))
        if meta is None:
            continue
        if meta.sequence < min_sequence:
            return None
        metrics = info.get("operationMetrics") or {}
        inserted = _metric(metrics, "numTargetRowsInserted", "numOutputRows")
        deleted = _metric(metrics, "numTargetRowsDeleted")
        if deleted is None and info.get("operation") in ("WRITE", "CREATE OR REPLACE TABLE AS SELECT") \
                and (info.get("operationParameters") or {}).get("mode") == "Overwrite":
            deleted = _removed_rows(spark, location, version)
        elif deleted is None:
            deleted = 0
        updated = _metric(metrics, "numTargetRowsUpdated")
        return WrittenCommit(version, meta, inserted, deleted, updated if updated is not None else 0)
    return None
