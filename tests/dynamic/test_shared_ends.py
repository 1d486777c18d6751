"""A table a refresh reads restricted at both ends of its interval (the groups a change touched, recomputed at I0 and
at I1) is scanned once for both when the change is small (`differentiation/ends.py`), and the refresh still equals
the recompute."""

from __future__ import annotations

import re
from typing import Any

import pytest

from differentiation import ChangeStats
from dtables.changes.sources import SHARE_ENDS
from dtables.testing import assert_same_rows
from oracle import change_query_plan, oracle_rows, table_rows

QUERY = "SELECT f.k, max(f.v) AS top, count(*) AS n FROM f JOIN d ON f.k = d.k GROUP BY f.k"  # MAX: recomputed


@pytest.fixture
def tops(dt: Any) -> Any:
    dt.sql("CREATE TABLE f (k INT, v INT)")
    dt.sql("CREATE TABLE d (k INT, w INT)")
    dt.sql("INSERT INTO f SELECT CAST(id % 50 AS INT), CAST(id AS INT) FROM range(400)")
    dt.sql("INSERT INTO f SELECT CAST(id % 50 AS INT), NULL FROM range(20)")
    dt.sql("INSERT INTO d SELECT CAST(id % 50 AS INT), CAST(id AS INT) FROM range(100)")
    dt.sql(f"CREATE DYNAMIC TABLE tops TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS {QUERY}")
    dt.sql("DELETE FROM f WHERE v IN (349, 399, 7)")  # marked in the files' deletion vectors
    dt.sql("UPDATE f SET v = v + 1000 WHERE v = 101")
    dt.sql("INSERT INTO f VALUES (3, 5000), (3, 5000), (NULL, 1)")
    return dt


def _scans_of_f(dt: Any) -> int:
    """Parquet scans of f's files in the physical plan of the next refresh's change query."""
    plan = change_query_plan(dt, "tops", {"default.f": ChangeStats(inserts=True, deletes=True)})
    # f's scans are those reading its column v (d has k and w)
    return sum(1 for line in plan.splitlines() if re.search(r"FileScan parquet \[k#\d+,v#", line))


@pytest.mark.slow
def test_the_groups_are_recomputed_from_one_scan_of_both_ends(tops: Any) -> None:
    dt = tops
    try:
        apart = _scans_of_f(dt)  # off by default
        dt.spark.conf.set(SHARE_ENDS, "true")
        shared = _scans_of_f(dt)
    finally:
        dt.spark.conf.unset(SHARE_ENDS)
    assert shared < apart, (shared, apart)  # both ends of the recompute: one scan where there were two
    dt.spark.conf.set(SHARE_ENDS, "true")
    [rec] = dt.refresh("tops")
    assert (rec.action, rec.state) == ("INCREMENTAL", "SUCCEEDED"), rec.error
    assert_same_rows(table_rows(dt, "tops"), oracle_rows(dt, "tops"))
    dt.sql("DELETE FROM f WHERE k = 3")
    dt.sql("INSERT INTO f VALUES (3, 1)")
    try:
        [rec] = dt.refresh("tops")
    finally:
        dt.spark.conf.unset(SHARE_ENDS)
    assert (rec.action, rec.state) == ("INCREMENTAL", "SUCCEEDED"), rec.error
    assert_same_rows(table_rows(dt, "tops"), oracle_rows(dt, "tops"))


@pytest.mark.slow
def test_groups_of_groups_share_the_inner_reads_and_equal_the_recompute(tops: Any) -> None:
    # Q13's shape: a LEFT JOIN grouped, grouped again; the outer groups' keys come from the inner groups' change
    dt = tops
    dt.sql("CREATE DYNAMIC TABLE counts TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS "
           "SELECT c, count(*) AS n FROM (SELECT d.k, count(f.v) AS c FROM d LEFT JOIN f ON d.k = f.k AND f.v > 10 "
           "GROUP BY d.k) g GROUP BY c")
    dt.spark.conf.set(SHARE_ENDS, "true")
    try:
        for change in ("DELETE FROM f WHERE v % 97 = 3", "INSERT INTO f VALUES (3, 20), (60, 30)",
                       "UPDATE f SET v = 5 WHERE v % 89 = 1"):
            dt.sql(change)
            [rec] = dt.refresh("counts")
            assert (rec.action, rec.state) == ("INCREMENTAL", "SUCCEEDED"), rec.error
            assert_same_rows(table_rows(dt, "counts"), oracle_rows(dt, "counts"))
    finally:
        dt.spark.conf.unset(SHARE_ENDS)
