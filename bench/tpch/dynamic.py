"""One dynamic table per TPC-H query (REFRESH_MODE = AUTO) and its FULL twin; timed refreshes; the equality check."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from bench.tpch.workload import Query
from dtables.testing import assert_same_rows

ROW_ID = "__dtables_row_id"
TARGET_LAG = "1 hour"  # nothing refreshes on its own: the bench triggers every refresh


def names(query: Query) -> tuple[str, str]:
    """(the AUTO table, its FULL twin)."""
    return query.name, f"{query.name}_full"


def incremental_twin(query: Query) -> str:
    """The REFRESH_MODE = INCREMENTAL twin, which the cost model never turns into FULL (`--incremental-twin`)."""
    return f"{query.name}_inc"


def create(session: Any, query: Query, *, full_twin: bool = True, forced_incremental: bool = False) -> None:
    auto, full = names(query)
    session.sql(f"CREATE DYNAMIC TABLE {auto} TARGET_LAG = '{TARGET_LAG}' REFRESH_MODE = AUTO AS {query.dynamic}")
    if full_twin:
        session.sql(f"CREATE DYNAMIC TABLE {full} TARGET_LAG = '{TARGET_LAG}' REFRESH_MODE = FULL AS {query.dynamic}")
    if forced_incremental:
        session.sql(f"CREATE DYNAMIC TABLE {incremental_twin(query)} TARGET_LAG = '{TARGET_LAG}' "
                    f"REFRESH_MODE = INCREMENTAL AS {query.dynamic}")


def chosen_mode(session: Any, name: str) -> tuple[str, str | None]:
    """The refresh mode AUTO chose for `name` and why (from SHOW DYNAMIC TABLES)."""
    row = session.sql(f"SHOW DYNAMIC TABLES LIKE '{name}'").first()
    return row["refresh_mode"], row["refresh_mode_reason"]


@dataclass(frozen=True)
class Refresh:
    table: str
    action: str  # INCREMENTAL, FULL, NO_DATA...
    reason: str | None
    seconds: float
    jobs: int  # Spark jobs the refresh launched
    rows_inserted: int
    rows_deleted: int
    rows_updated: int
    pruned: str = ""  # snapshot reads narrowed by the change's join keys: "lineitem@I1 1/5 files, ..."

    @property
    def rows_touched(self) -> int:
        return self.rows_inserted + self.rows_deleted + self.rows_updated


def refresh(session: Any, name: str, data_timestamp: Any) -> Refresh:
    """Refresh one dynamic table to `data_timestamp` (its intermediates first, in the time); its Spark jobs come from
    the refresh history (each refresh tags its jobs with a job group of its own)."""
    start = time.perf_counter()
    records = session.refresh([name], data_timestamp=data_timestamp)
    seconds = time.perf_counter() - start
    record = records[-1]
    jobs = sum(r.spark_jobs or 0 for r in records)
    return Refresh(name, record.action, record.reason, seconds, jobs, record.rows_inserted or 0,
                   record.rows_deleted or 0, record.rows_updated or 0, pruned_reads(record.pruning))


def pruned_reads(pruning: str | None) -> str:
    """The history's `pruning` JSON in short: table@end files read/of the version's files, per narrowed read."""
    reads = json.loads(pruning) if pruning else []
    return ", ".join(f"{r['table'].split('.')[-1]}@{'I0' if r['at'] == 'start' else 'I1'} {r['files']}/{r['of']}"
                     for r in reads)


def query_columns(session: Any, name: str) -> list[str]:
    return [c for c in session.table(name).columns if c != ROW_ID]


def check(session: Any, query: Query, name: str) -> None:
    """The dynamic table holds exactly the rows of its query evaluated from scratch (multisets, both ways)."""
    actual = session.table(name).select(*query_columns(session, name)).collect()
    expected = session.sql(query.dynamic).collect()
    try:
        assert_same_rows(actual, expected)
    except AssertionError as e:
        raise AssertionError(f"{name} differs from {query.name} evaluated from scratch: {e}") from None
