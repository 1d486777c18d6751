"""Key sets broadcast to the snapshots they restrict when the change is small (`IntervalSources.small_change`), and
the refresh's Spark plan then filters the snapshot by a broadcast semi join instead of shuffling it."""

from __future__ import annotations

import datetime as dt_
from typing import Any

import pytest

from differentiation import ChangeStats, changes_query
from dtables.changes.sources import BROADCAST_KEYS_MAX_ROWS, RESTRICT_MIN_BYTES
from dtables.dynamic import definition as defs
from dtables.dynamic.frontier import resolve_source
from dtables.dynamic.plan import decide
from dtables.dynamic.sources import RefreshSources
from dtables.sql.dialect import to_spark
from dtables.testing import assert_same_rows
from oracle import oracle_rows, table_rows

QUERY = "SELECT f.k, max(d.w) AS top FROM f JOIN d ON f.k = d.k GROUP BY f.k"  # MAX: groups recomputed


def _refresh_sources(dt: Any) -> tuple[Any, Any]:
    d = defs.require(dt.store, "tops")
    at = dt_.datetime.now(dt_.timezone.utc)
    sources = {s: resolve_source(dt, d.name, s, at) for s in d.sources}
    stats = {"default.f": ChangeStats(inserts=False, deletes=True)}
    action = decide(d, sources, stats, at, ())
    assert action.action == "INCREMENTAL"
    return action.derivative, RefreshSources(dt.spark.newSession(), d.frontier, sources, settings=dt.spark)


@pytest.fixture
def tops(dt: Any) -> Any:
    dt.sql("CREATE TABLE f (k INT, v INT)")
    dt.sql("CREATE TABLE d (k INT, w INT)")
    dt.sql("INSERT INTO f SELECT CAST(id % 50 AS INT), CAST(id AS INT) FROM range(200)")
    dt.sql("INSERT INTO d SELECT CAST(id % 50 AS INT), CAST(id AS INT) FROM range(100)")
    dt.sql(f"CREATE DYNAMIC TABLE tops TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS {QUERY}")
    dt.sql("DELETE FROM f WHERE v < 3")  # three rows
    return dt


def _plan(derivative: Any, sources: Any) -> str:
    query = to_spark(changes_query(derivative, sources))
    return str(sources.spark.sql(query)._jdf.queryExecution().executedPlan().toString())


def test_a_small_change_broadcasts_its_key_sets_and_a_large_one_does_not(tops: Any) -> None:
    dt = tops
    try:
        derivative, sources = _refresh_sources(dt)
        assert sources.small_change()
        assert "BroadcastHashJoin" in _plan(derivative, sources) and "LeftSemi" in _plan(derivative, sources)
        for most in ("2", "0"):  # fewer rows than the three deleted; never
            dt.spark.conf.set(BROADCAST_KEYS_MAX_ROWS, most)
            derivative, sources = _refresh_sources(dt)
            assert not sources.small_change()
            assert "BROADCAST" not in to_spark(changes_query(derivative, sources)).upper()
        dt.spark.conf.set(BROADCAST_KEYS_MAX_ROWS, "lots")
        with pytest.raises(ValueError, match="broadcastKeysMaxRows"):
            _refresh_sources(dt)[1].small_change()
    finally:
        dt.spark.conf.unset(BROADCAST_KEYS_MAX_ROWS)
    [rec] = dt.refresh("tops")
    assert (rec.action, rec.state) == ("INCREMENTAL", "SUCCEEDED"), rec.error
    assert_same_rows(table_rows(dt, "tops"), oracle_rows(dt, "tops"))



def test_a_small_table_of_a_join_term_is_read_whole_and_a_larger_one_by_the_changes_keys(dt: Any) -> None:
    # Δf ⋈ d@I1: d (a few KB) is broadcast as it is; restricted to Δf's keys first, it cost a job of its own
    dt.sql("CREATE TABLE f (k INT, v INT)")
    dt.sql("CREATE TABLE d (k INT, g STRING)")
    dt.sql("INSERT INTO f SELECT CAST(id % 50 AS INT), CAST(id AS INT) FROM range(200)")
    dt.sql("INSERT INTO d SELECT CAST(id AS INT), concat('g', CAST(id % 7 AS STRING)) FROM range(50)")
    query = "SELECT d.g, count(*) AS n, sum(f.v) AS s FROM f JOIN d ON f.k = d.k GROUP BY d.g"
    dt.sql(f"CREATE DYNAMIC TABLE sums TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS {query}")
    dt.sql("INSERT INTO f VALUES (3, 1000), (4, NULL), (60, 5)")

    def compiled() -> str:
        d = defs.require(dt.store, "sums")
        at = dt_.datetime.now(dt_.timezone.utc)
        sources = {s: resolve_source(dt, d.name, s, at) for s in d.sources}
        action = decide(d, sources, {"default.f": ChangeStats(inserts=True, deletes=False)}, at, ())
        assert action.action == "INCREMENTAL"
        refresh = RefreshSources(dt.spark.newSession(), d.frontier, sources, settings=dt.spark)
        assert refresh.small_change()
        return to_spark(refresh.changes_query(action.derivative))

    try:
        whole = compiled()
        dt.spark.conf.set(RESTRICT_MIN_BYTES, "0")  # no table is small enough: each term's side restricted
        restricted = compiled()
    finally:
        dt.spark.conf.unset(RESTRICT_MIN_BYTES)
    # the stored groups are restricted to the changed ones either way; d only when no table is small enough
    assert whole.upper().count("LEFT SEMI") + 1 == restricted.upper().count("LEFT SEMI")
    for least in (None, "0"):  # each way a refresh equals the query
        if least is not None:
            dt.sql("INSERT INTO f VALUES (3, 7), (61, 1)")
            dt.spark.conf.set(RESTRICT_MIN_BYTES, least)
        try:
            [rec] = dt.refresh("sums")
        finally:
            dt.spark.conf.unset(RESTRICT_MIN_BYTES)
        assert (rec.action, rec.state) == ("INCREMENTAL", "SUCCEEDED"), rec.error
        assert_same_rows(table_rows(dt, "sums"), oracle_rows(dt, "sums"))
