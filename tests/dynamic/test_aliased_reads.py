"""A table a query reads under several aliases (TPC-H Q21: lineitem as l1, l2 and l3) is read restricted once per
end of the interval when the change is small, not once per alias and key set (`differentiation/shared_reads.py`),
and the refresh still equals the recompute."""

from __future__ import annotations

import re
import tempfile
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from differentiation import ChangeStats
from dtables.changes.keys import MAX_FRACTION as KEY_PRUNING_MAX_FRACTION
from dtables.changes.keys import MIN_BYTES as KEY_PRUNING_MIN_BYTES
from dtables.changes.sources import RESTRICT_MIN_BYTES, SHARE_ALIASES
from dtables.testing import assert_same_rows
from oracle import change_query_plan, oracle_rows, table_rows

# Q21's shape: lines of orders in state 'F' late at supplier s, whose order has a line of another supplier and no
# other late line (Q21 then counts them per supplier); lines are read three times, under l1, l2 and l3
QUERY = ("SELECT l1.o, l1.s FROM l l1 JOIN o ON o.k = l1.o "
         "WHERE o.st = 'F' AND l1.late "
         "AND EXISTS (SELECT 1 FROM l l2 WHERE l2.o = l1.o AND l2.s <> l1.s) "
         "AND NOT EXISTS (SELECT 1 FROM l l3 WHERE l3.o = l1.o AND l3.s <> l1.s AND l3.late)")
COUNTS = f"SELECT s, count(*) AS n FROM ({QUERY}) w GROUP BY s"  # as Q21 (its state kept, not recomputed)


def _create(dt: Any, orders: int, query: str = QUERY) -> None:
    dt.sql("CREATE TABLE l (o INT, s INT, late BOOLEAN)")
    dt.sql("CREATE TABLE o (k INT, st STRING)")
    dt.sql(f"INSERT INTO l SELECT CAST(id % {orders} AS INT), CAST(id % 4 AS INT), id % 3 = 0 "
           f"FROM range({orders * 5})")
    dt.sql("INSERT INTO l VALUES (NULL, 1, true), (5, NULL, true), (5, 2, NULL), (6, 3, true), (6, 3, true)")
    dt.sql(f"INSERT INTO o SELECT CAST(id AS INT), CASE WHEN id % 4 = 0 THEN 'O' ELSE 'F' END FROM range({orders})")
    # the tables are tiny: a join term still reads lines by the changed orders' keys, as at TPC-H's sizes
    dt.spark.conf.set(RESTRICT_MIN_BYTES, "0")
    dt.sql(f"CREATE DYNAMIC TABLE waits TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS {query}")


@pytest.fixture
def waits(dt: Any) -> Any:
    _create(dt, 40)
    yield dt
    dt.spark.conf.unset(RESTRICT_MIN_BYTES)


def _scans_of_l(dt: Any) -> int:
    """Parquet scans of l's files in the physical plan of the next refresh's change query."""
    plan = change_query_plan(dt, "waits", {"default.l": ChangeStats(inserts=True, deletes=True),
                                           "default.o": ChangeStats(deletes=True)})
    # l's scans are those reading its column late (o has k and st)
    return sum(1 for line in plan.splitlines() if re.search(r"FileScan parquet \[o#\d+,s#\d+,late#", line))


def _refresh_matches(dt: Any, sources_moved: bool = True) -> None:
    """The refresh ran INCREMENTAL and equals the recompute; NO_DATA where the round's DML committed nothing (it
    matched no row: Delta then writes no version), or where it moved no value the query reads (a line flipped and
    flipped back), which the refresh's reason says."""
    [rec] = dt.refresh("waits")
    assert rec.state == "SUCCEEDED", rec.error
    expected = "INCREMENTAL" if sources_moved else "NO_DATA"
    assert rec.action == expected or (rec.action == "NO_DATA" and "does not read" in (rec.reason or "")), \
        (rec.action, rec.reason)
    assert_same_rows(table_rows(dt, "waits"), oracle_rows(dt, "waits"))


def _versions(dt: Any) -> tuple[int, ...]:
    return tuple(dt.spark.sql(f"DESCRIBE HISTORY {t}").agg({"version": "max"}).collect()[0][0] for t in ("l", "o"))


def test_a_table_read_under_three_aliases_is_scanned_once_per_end(waits: Any) -> None:
    dt = waits
    dt.sql("DELETE FROM o WHERE k IN (3, 17)")  # an order and its lines, as TPC-H's RF2
    dt.sql("DELETE FROM l WHERE o IN (3, 17)")
    dt.sql("UPDATE l SET late = NOT late WHERE o = 9 AND s = 2")
    dt.sql("INSERT INTO l VALUES (11, 6, true), (11, 6, true), (NULL, NULL, NULL)")
    try:
        dt.spark.conf.set(SHARE_ALIASES, "false")
        apart = _scans_of_l(dt)
    finally:
        dt.spark.conf.unset(SHARE_ALIASES)
    shared = _scans_of_l(dt)
    assert shared <= 2 < apart, (shared, apart)  # one restricted read at I0, one at I1
    _refresh_matches(dt)


dml = st.one_of(
    st.tuples(st.just("insert"), st.lists(st.tuples(st.integers(0, 12), st.one_of(st.none(), st.integers(0, 3)),
                                                    st.one_of(st.none(), st.booleans())),
                                          min_size=1, max_size=3)),
    st.tuples(st.just("delete_order"), st.integers(0, 12)),
    st.tuples(st.just("delete_lines"), st.integers(0, 3)),
    st.tuples(st.just("flip"), st.integers(0, 12)),
    st.tuples(st.just("status"), st.integers(0, 12)),
)


def _apply(dt: Any, op: tuple) -> None:
    kind, arg = op
    if kind == "insert":
        rows = ", ".join("(" + ", ".join("NULL" if v is None else str(v).lower() for v in r) + ")" for r in arg)
        dt.sql(f"INSERT INTO l VALUES {rows}")
    elif kind == "delete_order":
        dt.sql(f"DELETE FROM o WHERE k = {arg}")
        dt.sql(f"DELETE FROM l WHERE o = {arg}")
    elif kind == "delete_lines":
        dt.sql(f"DELETE FROM l WHERE s = {arg} AND o % 3 = 1")
    elif kind == "flip":
        dt.sql(f"UPDATE l SET late = NOT late WHERE o = {arg}")
    else:
        dt.sql(f"UPDATE o SET st = CASE WHEN st = 'F' THEN 'O' ELSE 'F' END WHERE k = {arg}")


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(script=st.lists(st.lists(dml, min_size=1, max_size=3), min_size=1, max_size=3), pruned=st.booleans())
def test_random_changes_of_a_self_joined_table_equal_the_recompute(connect: Any, script: list, pruned: bool) -> None:
    # pruned: the reads are narrowed by literal key filters first (which the shared read then leaves alone)
    dt = connect(tempfile.mkdtemp(prefix="dt-aliases-") + "/wh")
    if pruned:
        dt.spark.conf.set(KEY_PRUNING_MIN_BYTES, "0")
        dt.spark.conf.set(KEY_PRUNING_MAX_FRACTION, "1")
    try:
        _create(dt, 13, COUNTS)
        for ops in script:
            before = _versions(dt)
            for op in ops:
                _apply(dt, op)
            _refresh_matches(dt, sources_moved=_versions(dt) != before)
    finally:
        for setting in (KEY_PRUNING_MIN_BYTES, KEY_PRUNING_MAX_FRACTION, RESTRICT_MIN_BYTES):
            dt.spark.conf.unset(setting)
