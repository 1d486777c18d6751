"""A snapshot restricted to the keys of a small change (the other side of a join term) is read once per application
for every dynamic table that reads the same rows at the same frontier, and held by the driver
(``IntervalSources.held``, ``shared_reads.held_once``); each refresh still equals its query from scratch, under
random inserts, updates and deletes with NULLs and duplicates."""

from __future__ import annotations

import re
import tempfile
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from differentiation import ChangeStats
from dtables.changes import shared_reads
from dtables.changes.shared_reads import DRIVER_ROWS_MAX
from dtables.changes.sources import HOLD_RESTRICTED, RESTRICT_MIN_BYTES
from oracle import refreshes_match, change_query_plan

# Every one joins a with b on k: its change plan reads b restricted to the keys of a's changes, and a restricted to
# the keys of b's. "x" reads a.x and not a.v, so an update of a.v only is no change to it, and one of a.x only is
# none to the others: their key sets differ, and so must the reads they hold.
TABLES = {
    "j": "SELECT a.k, a.v, b.w FROM a JOIN b ON a.k = b.k",
    "g": "SELECT b.k, count(*) AS n, sum(a.v) AS s FROM a JOIN b ON a.k = b.k GROUP BY b.k",
    "x": "SELECT a.k, a.x, b.w FROM a JOIN b ON a.k = b.k",
}


def _setup(connect: Any) -> Any:
    session = connect(tempfile.mkdtemp(prefix="dt-held-") + "/wh")
    session.sql("CREATE TABLE a (k INT, v INT, x INT, note STRING)")
    session.sql("CREATE TABLE b (k INT, w INT)")
    session.sql("INSERT INTO a SELECT CAST(id % 9 AS INT), CAST(id % 5 AS INT), CAST(id % 3 AS INT), "
                "CAST(id AS STRING) FROM range(120)")
    session.sql("INSERT INTO a VALUES (NULL, NULL, NULL, NULL), (1, 1, 1, NULL), (1, 1, 1, NULL)")
    session.sql("INSERT INTO b SELECT CAST(id % 8 AS INT), CAST(id AS INT) FROM range(30)")
    session.sql("INSERT INTO b VALUES (NULL, 1), (3, NULL), (3, NULL)")
    for name, query in TABLES.items():
        session.sql(f"CREATE DYNAMIC TABLE {name} TARGET_LAG = '1 minute' REFRESH_MODE = INCREMENTAL AS {query}")
    # the tables are tiny: a join term still reads the other side by the change's keys, as at TPC-H's sizes
    session.spark.conf.set(RESTRICT_MIN_BYTES, "0")
    session.spark.conf.set(HOLD_RESTRICTED, "true")  # off by default
    return session


def _reset(session: Any) -> None:
    """The settings `_setup` and the tests changed back (one Spark session serves every test), nothing kept."""
    for key in (RESTRICT_MIN_BYTES, HOLD_RESTRICTED, DRIVER_ROWS_MAX):
        session.spark.conf.unset(key)
    shared_reads.forget_all(session.spark)


def _held() -> list[tuple[Any, ...]]:
    return [key for key in shared_reads._kept if key[0] == "held"]


def _scans_of_b(session: Any, name: str) -> int:
    """Parquet scans of b's files in the physical plan of `name`'s next change query."""
    plan = change_query_plan(session, name, {"default.a": ChangeStats(inserts=True, deletes=True),
                                             "default.b": ChangeStats(deletes=True)})
    return sum(1 for line in plan.splitlines() if re.search(r"FileScan parquet \[k#\d+,w#\d+", line))


def test_a_restricted_read_is_held_once_for_every_table_at_the_frontier(connect: Any) -> None:
    session = _setup(connect)
    shared_reads.forget_all(session.spark)
    try:
        # deletes only (TPC-H's RF2): every reader of a sees the same change, whichever columns it reads
        session.sql("DELETE FROM a WHERE try_cast(note AS INT) % 10 = 3")  # scattered: rows picked by vector
        session.sql("DELETE FROM b WHERE k = 5")
        # planned before any refresh reads the interval: the join terms scan b (and a) by key
        session.spark.conf.unset(HOLD_RESTRICTED)
        assert _scans_of_b(session, "j") > 0
        assert _scans_of_b(session, "j") > 0  # off by default: asked for twice, and still scanned
        assert _held() == []
        session.spark.conf.set(HOLD_RESTRICTED, "true")
        assert _scans_of_b(session, "j") > 0  # the first plan to read it scans it itself
        assert _held() == []
        assert _scans_of_b(session, "j") == 0  # the second holds it, on the driver: its plan reads no file of b
        held = set(_held())
        assert held
        refreshes_match(session, ["j"])
        assert set(_held()) == held  # the refresh read what the plan above held
        refreshes_match(session, ["g", "x"])
        assert set(_held()) == held  # and so did the others
    finally:
        _reset(session)


def test_tables_whose_changes_differ_hold_reads_of_their_own(connect: Any) -> None:
    """An update of a.x is a change to "x" only: a held read of b restricted to its keys is not "j"'s."""
    session = _setup(connect)
    shared_reads.forget_all(session.spark)
    try:
        session.sql("UPDATE a SET x = x + 10 WHERE k = 4")
        session.sql("UPDATE a SET v = v + 10 WHERE k = 6")
        refreshes_match(session, ["j", "g"])  # the second holds what both read
        held_by_j = set(_held())
        assert held_by_j
        _scans_of_b(session, "x")
        assert _scans_of_b(session, "x") == 0  # "x" asked twice for reads of its own, and holds them
        assert set(_held()) - held_by_j
        refreshes_match(session, ["x"])
    finally:
        _reset(session)


def test_a_read_too_large_to_hold_is_scanned_by_the_plan(connect: Any) -> None:
    session = _setup(connect)
    shared_reads.forget_all(session.spark)
    session.spark.conf.set(DRIVER_ROWS_MAX, "2")
    try:
        session.sql("DELETE FROM b WHERE w % 4 = 1")
        session.sql("UPDATE a SET v = v + 1 WHERE k IN (1, 2, 3)")
        assert _scans_of_b(session, "j") > 0
        assert _scans_of_b(session, "j") > 0  # asked again: too large to hold, so the plan still scans b
        refreshes_match(session, sorted(TABLES))
        # those held have at most two rows ("x" reads none of a's updated columns: its reads by a's keys are
        # empty); the others are larger (so the log says, or the one job that tried found), and their plans scan them
        assert all(shared_reads._held[shared_reads._kept[key]] <= 2 for key in _held())
    finally:
        _reset(session)


keys = st.one_of(st.none(), st.integers(0, 9))
dml = st.one_of(
    st.tuples(st.just("insert_a"), st.lists(st.tuples(keys, st.one_of(st.none(), st.integers(-1, 3))), min_size=1,
                                            max_size=3)),
    st.tuples(st.just("update_v"), st.integers(0, 9)),
    st.tuples(st.just("update_x"), st.integers(0, 9)),
    st.tuples(st.just("back"), st.integers(0, 9)),     # an update back to the old value
    st.tuples(st.just("delete_a"), st.integers(0, 9)),  # scattered over the file
    st.tuples(st.just("insert_b"), keys),
    st.tuples(st.just("delete_b"), st.integers(0, 8)),
)


def _run(session: Any, op: tuple) -> None:
    kind, arg = op

    def lit(value: int | None) -> str:
        return "NULL" if value is None else str(value)

    if kind == "insert_a":
        rows = ", ".join(f"({lit(k)}, {lit(v)}, {lit(v)}, 'n')" for k, v in arg)
        session.sql(f"INSERT INTO a VALUES {rows}")
        return
    session.sql({"update_v": f"UPDATE a SET v = coalesce(v, 0) + 1 WHERE k = {arg}",
                 "update_x": f"UPDATE a SET x = coalesce(x, 0) + 1 WHERE k = {arg}",
                 "back": f"UPDATE a SET v = v WHERE k = {arg}",
                 "delete_a": f"DELETE FROM a WHERE try_cast(note AS INT) % 10 = {arg}",
                 "insert_b": f"INSERT INTO b VALUES ({lit(arg)}, 1), ({lit(arg)}, 1)",
                 "delete_b": f"DELETE FROM b WHERE k = {arg}"}[kind])


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(script=st.lists(st.lists(dml, min_size=1, max_size=3), min_size=1, max_size=2),
       order=st.permutations(sorted(TABLES)))
def test_random_changes_read_through_held_reads_match_recompute(connect: Any, script: list,
                                                                order: list[str]) -> None:
    _random_changes_match(connect, script, order)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(script=st.lists(st.lists(dml, min_size=1, max_size=3), min_size=1, max_size=2),
       order=st.permutations(sorted(TABLES)))
def test_random_changes_through_held_rows_planned_as_rdds_match_recompute(connect: Any, monkeypatch: Any,
                                                                          script: list, order: list[str]) -> None:
    """The same with every held read and every set of row marks given to plans as an RDD leaf
    (``sessions.rows_for_plans``), as those of more than 2,000 rows are."""
    from dtables.spark import sessions

    monkeypatch.setattr(sessions, "PLANNED_ROWS_MAX", 0)
    _random_changes_match(connect, script, order)


def _random_changes_match(connect: Any, script: list, order: list[str]) -> None:
    session = _setup(connect)
    try:
        for ops in script:
            for op in ops:
                _run(session, op)
            for name in order:  # one at a time: each later one reads what the earlier ones held
                refreshes_match(session, [name])
    finally:
        _reset(session)
