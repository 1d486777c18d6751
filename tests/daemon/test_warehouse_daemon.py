"""Issue 8, the daemon's wiring on a real warehouse: one tick at a time (``run(once=True)``, what ``dtables daemon
--once`` does), with trigger SCHEDULED, DOWNSTREAM tables refreshed only for a reader, NO_DATA without a Spark job,
failure isolation and suspension after N failures, RESUME, and the CLI verbs that need no Spark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dtables.cli.daemon_cmds import dag_node_notes
from dtables.daemon import DaemonOptions, WarehouseDaemon, is_transient
from dtables.daemon.failures import FailureStore
from dtables.daemon.schedule import choose_base_period_s, refresh_running
from dtables.dynamic import definition as defs
from scheduler.vocabulary import SchedulingState
from dtables.dynamic import history
from dtables.dynamic.executor import table_lock
from dtables.testing import assert_same_rows
from scheduler.daemon import DaemonLock
from scheduler.periods import parse_target_lag

BASE = 0.25  # seconds: a fast grid so that consecutive ticks are due without long sleeps
FAST = DaemonOptions(base_period_s=BASE, max_parallel=2, suspend_after=2)


def tick(dt: Any, options: DaemonOptions = FAST) -> WarehouseDaemon:
    """One tick of a freshly started daemon (each call is a restart: everything comes from the store)."""
    # A '1 second' table's period is at most its lag (shorter by its refreshes' expected duration: 0.5 s for a quick
    # one, not the base period), so only a full lag past the last data timestamp makes every such table due again.
    time.sleep(1.0 + BASE)
    daemon = WarehouseDaemon(dt, options)
    daemon.run(once=True)
    return daemon


def scheduled(dt: Any, name: str) -> list[history.RefreshRecord]:
    return [r for r in history.records(dt.store, name) if r.trigger == "SCHEDULED"]


def columns(dt: Any, name: str) -> list[str]:
    return [c.name for c in defs.require(dt.store, name).columns]


@pytest.fixture
def shop(dt: Any) -> Any:
    dt.sql("CREATE TABLE orders (id INT, cust INT, amount DOUBLE)")
    dt.sql("INSERT INTO orders VALUES (1, 1, 10.0), (2, 2, 20.0), (3, 1, 5.0)")
    dt.sql("CREATE DYNAMIC TABLE enriched TARGET_LAG = DOWNSTREAM INITIALIZE = ON_SCHEDULE AS "
           "SELECT id, cust, amount FROM orders WHERE amount > 1")
    dt.sql("CREATE DYNAMIC TABLE totals TARGET_LAG = '1 second' INITIALIZE = ON_SCHEDULE AS "
           "SELECT cust, count(*) AS n, sum(amount) AS total FROM enriched GROUP BY cust")
    dt.sql("CREATE DYNAMIC TABLE unread TARGET_LAG = DOWNSTREAM INITIALIZE = ON_SCHEDULE AS "
           "SELECT id FROM orders")
    return dt


def test_one_tick_refreshes_due_tables_and_downstream_only_for_a_reader(shop: Any, warehouse: Path,
                                                                       tmp_path: Path) -> None:
    daemon = tick(shop)
    [result] = daemon.results
    assert result.trigger == "SCHEDULED" and result.succeeded == ("default.enriched", "default.totals")
    enriched, totals = scheduled(shop, "enriched"), scheduled(shop, "totals")
    assert [r.state for r in enriched + totals] == ["SUCCEEDED", "SUCCEEDED"]
    assert enriched[0].data_timestamp == totals[0].data_timestamp == result.data_timestamp  # one snapshot
    assert history.records(shop.store, "unread") == []  # DOWNSTREAM and nobody reads it: never on its own
    assert_same_rows(shop.table("totals").select(*columns(shop, "totals")).collect(),
                     shop.sql("SELECT cust, count(*), sum(amount) FROM orders WHERE amount > 1 GROUP BY cust")
                     .collect())
    check_status_json_and_second_daemon_refused(shop, warehouse, tmp_path)

    # Nothing changed: the next tick is NO_DATA for both, without a Spark job.
    sc = shop.spark.sparkContext
    sc.setJobGroup("daemon-test", "jobs of the NO_DATA tick")
    groups = (None, "daemon-test")
    before = {j for g in groups for j in sc.statusTracker().getJobIdsForGroup(g)}
    tick(shop)
    after = {j for g in groups for j in sc.statusTracker().getJobIdsForGroup(g)}
    assert [scheduled(shop, n)[-1].action for n in ("enriched", "totals")] == ["NO_DATA", "NO_DATA"]
    assert after == before

    # A change: the restarted daemon refreshes incrementally from where the last one stopped.
    shop.sql("INSERT INTO orders VALUES (4, 2, 7.5)")
    tick(shop)
    assert [r.action for r in (scheduled(shop, "enriched")[-1], scheduled(shop, "totals")[-1])] == \
        ["INCREMENTAL", "INCREMENTAL"]
    assert_same_rows(shop.table("totals").select(*columns(shop, "totals")).collect(),
                     shop.sql("SELECT cust, count(*), sum(amount) FROM orders WHERE amount > 1 GROUP BY cust")
                     .collect())


def test_failing_table_is_suspended_with_its_downstream_while_others_keep_refreshing(dt: Any, warehouse: Path,
                                                                                    tmp_path: Path) -> None:
    dt.sql("CREATE TABLE orders (id INT, amount DOUBLE)")
    dt.sql("INSERT INTO orders VALUES (1, 10.0)")
    dt.sql("CREATE TABLE doomed (id INT)")
    dt.sql("CREATE DYNAMIC TABLE good TARGET_LAG = '1 second' INITIALIZE = ON_SCHEDULE AS SELECT id FROM orders")
    dt.sql("CREATE DYNAMIC TABLE bad TARGET_LAG = '1 second' INITIALIZE = ON_SCHEDULE AS SELECT id FROM doomed")
    dt.sql("CREATE DYNAMIC TABLE bad_reader TARGET_LAG = '1 second' INITIALIZE = ON_SCHEDULE AS "
           "SELECT count(*) AS n FROM bad")
    dt.sql("DROP TABLE doomed")

    first = tick(dt).results[0]
    assert (first.state_of("default.good"), first.state_of("default.bad"), first.state_of("default.bad_reader")) \
        == ("SUCCEEDED", "FAILED", "UPSTREAM_FAILED")
    assert [r.state for r in scheduled(dt, "bad_reader")] == ["UPSTREAM_FAILED"]  # written by the daemon
    assert FailureStore(dt.store).load().consecutive_failures == {"default.bad": 1}
    assert defs.require(dt.store, "bad").state == SchedulingState.ACTIVE

    second = tick(dt).results[0]  # second consecutive failure: suspended, with its downstream
    assert second.newly_suspended == ("default.bad", "default.bad_reader")
    assert [defs.require(dt.store, n).state for n in ("good", "bad", "bad_reader")] == \
        [SchedulingState.ACTIVE, SchedulingState.SUSPENDED, SchedulingState.SUSPENDED]
    reasons = FailureStore(dt.store).load().suspended
    assert "2 consecutive failed refreshes" in reasons["default.bad"] and "doomed" in reasons["default.bad"]
    assert "upstream default.bad suspended" in reasons["default.bad_reader"]
    assert "suspended by the scheduler" in (scheduled(dt, "bad")[-1].reason or "")
    assert "suspended by the scheduler" in (scheduled(dt, "bad_reader")[-1].reason or "")
    (tmp_path / "dtables.yml").write_text(f"name: t\nwarehouse: {warehouse}\n")
    notes = dag_node_notes(tmp_path, None)  # what `dtables dag` prints on each node
    assert notes["default.bad"][0] == "last FAILED" and notes["default.bad"][1].startswith("SUSPENDED: FAILED: 2")
    assert notes["default.bad_reader"][1].startswith("SUSPENDED: UPSTREAM_FAILED: upstream default.bad")
    assert notes["default.good"] == ["last SUCCEEDED NO_DATA"]

    bad_records = len(scheduled(dt, "bad"))
    third = tick(dt).results[0]  # suspended tables are left alone, the independent one keeps refreshing
    assert third.succeeded == ("default.good",)
    assert len(scheduled(dt, "bad")) == bad_records
    assert [r.state for r in scheduled(dt, "good")] == ["SUCCEEDED"] * 3

    # Fix the cause and RESUME the failing table: the daemon resumes its downstream too, and both refresh.
    dt.sql("CREATE TABLE doomed (id INT)")
    dt.sql("ALTER DYNAMIC TABLE bad RESUME")
    fourth = tick(dt).results[0]
    assert fourth.state_of("default.bad") == "SUCCEEDED" and fourth.state_of("default.bad_reader") == "SUCCEEDED"
    assert defs.require(dt.store, "bad_reader").state == SchedulingState.ACTIVE
    assert FailureStore(dt.store).load().suspended == {}


def test_a_refresh_running_elsewhere_makes_the_tick_skip_the_table(shop: Any) -> None:
    """The executor's per-table lock is an fcntl file lock: the daemon sees a refresh of another thread or process
    holding it and records SKIPPED (with the reader that needed it) instead of waiting."""
    with table_lock(shop, "enriched"):
        assert refresh_running(shop.store, "default.enriched")
        result = tick(shop).results[0]
    assert result.state_of("default.enriched") == "SKIPPED" and result.state_of("default.totals") == "SKIPPED"
    assert [r.state for r in scheduled(shop, "enriched")] == ["SKIPPED"]
    assert "still running" in (scheduled(shop, "enriched")[0].error or "")
    assert not refresh_running(shop.store, "default.enriched")


def test_base_period_and_failure_classification() -> None:
    lags = {"a": parse_target_lag("5 seconds"), "b": parse_target_lag("DOWNSTREAM")}
    assert choose_base_period_s(lags) == 1.5
    assert choose_base_period_s({"a": parse_target_lag("1 minute")}) == 24.0
    assert choose_base_period_s({"a": parse_target_lag("10 minutes")}) == 48.0
    assert choose_base_period_s({}) == 48.0
    assert is_transient("Transaction conflict detected. a concurrent WRITE added data to table t")
    assert is_transient("ConcurrentWriteException: A concurrent transaction has written new data")
    assert is_transient("Job aborted: ExecutorLostFailure (executor 3 exited)")
    assert not is_transient("dynamic table default.bad: its source default.doomed does not exist (was it dropped?)")
    assert not is_transient("[DIVIDE_BY_ZERO] Division by zero.")


DTABLES = [sys.executable, "-m", "dtables.cli"]


def _cli(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([*DTABLES, *args, "--project", str(project)], capture_output=True, text=True,
                          timeout=300, env=env)


def check_status_json_and_second_daemon_refused(shop: Any, warehouse: Path, tmp_path: Path) -> None:
    """After one tick: `dtables status --json`, and `dtables daemon` refused while a daemon holds the lock
    (neither starts Spark)."""
    project = shop_project(tmp_path, warehouse)

    done = _cli(project, "status", "--json", "--base-period", str(BASE))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["daemon"] == {"running": False, "pid": None}
    rows = {t["name"]: t for t in report["tables"]}
    assert set(rows) == {"default.enriched", "default.totals", "default.unread"}
    totals = rows["default.totals"]
    assert totals["target_lag"] == "1 second" and totals["period_s"] is not None
    assert totals["last_refresh_state"] == "SUCCEEDED" and totals["refreshes_in_window"] == 1
    assert totals["current_lag_s"] > 0 and totals["max_lag_s"] >= totals["current_lag_s"]
    assert 0 <= totals["within_target_share"] < 1  # before the first refresh the table had no data
    assert rows["default.unread"]["period_s"] is None and rows["default.unread"]["last_refresh_state"] is None
    assert "no scheduled dynamic table reads it" in rows["default.unread"]["period_reason"]

    with DaemonLock(shop.store.path.parent):  # a daemon of this warehouse is running (this process)
        refused = _cli(project, "daemon", "--once")
        running = json.loads(_cli(project, "status", "--json").stdout)["daemon"]
    assert refused.returncode != 0
    assert f"pid {os.getpid()}" in refused.stderr and "already running" in refused.stderr
    assert running == {"running": True, "pid": os.getpid()}

    graph = _cli(project, "dag")
    assert graph.returncode == 0, graph.stderr
    assert "default.totals  [lag 1 second; last SUCCEEDED FULL]  <- default.enriched" in graph.stdout
    assert "default.unread  [lag DOWNSTREAM; never refreshed]" in graph.stdout
    png = _cli(project, "dag", "--format", "png", "--output", str(tmp_path / "dag.png"))
    assert png.returncode == 0, png.stderr
    assert (tmp_path / "dag.png").read_bytes()[:4] == b"\x89PNG"


def shop_project(tmp_path: Path, warehouse: Path) -> Path:
    """A project folder describing the `shop` fixture's tables, on the test's warehouse."""
    project = tmp_path / "project"
    (project / "sources").mkdir(parents=True)
    (project / "models").mkdir()
    (project / "dtables.yml").write_text(f"name: shop\nwarehouse: {warehouse}\n")
    (project / "sources" / "orders.sql").write_text("CREATE TABLE orders (id INT, cust INT, amount DOUBLE);\n")
    models = {"enriched": ("DOWNSTREAM", "SELECT id, cust, amount FROM {{ ref('orders') }} WHERE amount > 1"),
              "totals": ("1 second", "SELECT cust, count(*) AS n, sum(amount) AS total FROM {{ ref('enriched') }} "
                                     "GROUP BY cust"),
              "unread": ("DOWNSTREAM", "SELECT id FROM {{ ref('orders') }}")}
    for name, (lag, query) in models.items():
        (project / "models" / f"{name}.sql").write_text(f"-- target_lag: {lag}\n{query}\n")
    return project
