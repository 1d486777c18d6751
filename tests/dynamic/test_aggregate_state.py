"""Top-level COUNT/SUM/AVG dynamic tables: groups updated from their stored state (old + ΣΔ), never a base rescan."""

from __future__ import annotations

import datetime as dt_
from typing import Any

import pytest

from differentiation import ChangeStats, changes_query
from dtables.changes.log import DeltaLog
from dtables.dynamic import apply
from dtables.dynamic import definition as defs
from dtables.dynamic.frontier import resolve_source
from dtables.dynamic.plan import decide
from dtables.dynamic.sources import RefreshSources
from dtables.testing import assert_same_rows
from oracle import latest_record, oracle_rows, table_rows

QUERY = ("SELECT region, count(*) AS n, count(amount) AS n_amount, sum(amount) AS total, avg(amount) AS mean, "
         "sum(qty) AS units FROM sales GROUP BY region")


def stored_columns(dt: Any, name: str) -> list[str]:
    obj = dt.catalog.lookup(name)
    return list(dt.spark.read.format("delta").load(obj["location"]).columns)


def test_groups_maintained_from_stored_state_match_recompute(dt: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # each refresh rewrites the table probing its old rows with the change's ids broadcast, as for a table of a
    # megabyte or more (apply.rewrite); the other refresh tests' small tables take the full outer join
    monkeypatch.setattr(apply, "REWRITE_BROADCAST_MIN_BYTES", 0)
    dt.sql("CREATE TABLE sales (id INT, region STRING, amount DECIMAL(10,2), qty INT)")
    dt.sql("INSERT INTO sales VALUES (1, 'eu', 10.00, 1), (2, 'eu', 10.00, 1), (3, 'us', NULL, 2), "
           "(4, NULL, 5.50, 3), (5, 'ap', 1.25, NULL)")
    dt.sql(f"CREATE DYNAMIC TABLE by_region TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS {QUERY}")
    # the state lives in hidden columns: stored, never shown
    assert {"__dtables_cnt", "__dtables_key0"} <= set(stored_columns(dt, "by_region"))
    assert dt.table("by_region").columns == ["region", "n", "n_amount", "total", "mean", "units"]
    assert dt.sql("SELECT * FROM by_region").columns == dt.table("by_region").columns

    steps = [
        "INSERT INTO sales VALUES (6, 'eu', 2.00, 5), (7, 'new', 3.00, 1), (8, NULL, NULL, NULL)",
        "DELETE FROM sales WHERE id = 1",                   # one copy of a duplicated value goes
        "UPDATE sales SET amount = NULL WHERE id = 5",      # the group's SUM becomes NULL, its row stays
        "DELETE FROM sales WHERE region = 'new'",           # a group vanishes
        "UPDATE sales SET region = 'us', amount = 7.00 WHERE id = 2",  # a row moves between groups
    ]
    for step in steps:
        dt.sql(step)
        [rec] = dt.refresh("by_region")
        assert (rec.action, rec.state) == ("INCREMENTAL", "SUCCEEDED"), (step, rec.error)
        assert "stored state" in rec.reason
        assert_same_rows(table_rows(dt, "by_region"), oracle_rows(dt, "by_region"))
    # the table's type for AVG of a DECIMAL is Spark's own
    assert dict(dt.table("by_region").dtypes)["mean"] == "decimal(14,6)"


def test_scalar_aggregate_keeps_one_row_when_every_row_goes(dt: Any) -> None:
    dt.sql("CREATE TABLE t (v BIGINT)")
    dt.sql("INSERT INTO t VALUES (1), (2)")
    dt.sql("CREATE DYNAMIC TABLE totals TARGET_LAG = '1 hour' AS SELECT count(*) AS n, sum(v) AS s, avg(v) AS a FROM t")
    dt.sql("DELETE FROM t")
    [rec] = dt.refresh("totals")
    assert rec.action == "INCREMENTAL" and "stored state" in rec.reason
    assert table_rows(dt, "totals") == [(0, None, None)]
    dt.sql("INSERT INTO t VALUES (4)")
    dt.refresh("totals")
    assert table_rows(dt, "totals") == [(1, 4, 4.0)]


def test_change_plan_reads_no_snapshot_of_the_changed_base_table(dt: Any) -> None:
    """The affected-keys rule would read sales at both ends; from the stored state only the changes are read."""
    dt.sql("CREATE TABLE sales (id INT, region STRING, amount DECIMAL(10,2), qty INT)")
    dt.sql("INSERT INTO sales VALUES (1, 'eu', 10.00, 1), (2, 'us', 3.00, 2)")
    dt.sql(f"CREATE DYNAMIC TABLE by_region TARGET_LAG = '1 hour' AS {QUERY}")
    dt.sql("UPDATE sales SET qty = 9 WHERE id = 2")
    d = defs.require(dt.store, "by_region")
    at = dt_.datetime.now(dt_.timezone.utc)
    sources = {s: resolve_source(dt, d.name, s, at) for s in d.sources}
    action = decide(d, sources, {"default.sales": ChangeStats(inserts=True, deletes=True)}, at,
                    stored_columns(dt, "by_region"))
    assert action.action == "INCREMENTAL" and action.write == "MERGE"
    refresh_sources = RefreshSources(dt.spark.newSession(), d.frontier, sources)
    changes_query(action.derivative, refresh_sources)
    assert {kind[0] if isinstance(kind, tuple) else kind for _, kind in refresh_sources._views} == {"changes"}


def test_table_without_stored_state_is_reinitialized(dt: Any) -> None:
    dt.sql("CREATE TABLE t (k INT, v INT)")
    dt.sql("INSERT INTO t VALUES (1, 1)")
    dt.sql("CREATE DYNAMIC TABLE s TARGET_LAG = '1 hour' AS SELECT k, sum(v) AS total FROM t GROUP BY k")
    dt.sql("INSERT INTO t VALUES (1, 2)")
    d = defs.require(dt.store, "s")
    at = dt_.datetime.now(dt_.timezone.utc)
    sources = {s: resolve_source(dt, d.name, s, at) for s in d.sources}
    legacy = ["k", "total", "__dtables_row_id"]  # written before dtables stored aggregate state
    action = decide(d, sources, {"default.t": ChangeStats(inserts=True, deletes=False)}, at, legacy)
    assert action.action == "REINITIALIZE" and "__dtables_cnt" in action.reason
    assert DeltaLog(dt.spark, dt.catalog.lookup("s")["location"]).exists
    assert latest_record(dt, "s").action == "FULL"
