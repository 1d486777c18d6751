"""Property tests: for random data and DML, the minimum delta applied to Q|I0 gives Q|I1.

Each example runs a few Spark queries, so example counts are modest; the heavier combinations are
marked slow (run with `-m slow`).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diff_harness import BaseTable, TableSet, check_oracle
from dml_strategies import one_changed, two_tables

QUICK = {
    "filter_project": "SELECT k, v + 1 AS v1 FROM r WHERE v > 0 OR k IS NULL",
    "inner_join": "SELECT r.k, r.v, s.w FROM r JOIN s ON r.k = s.k",
    "left_join": "SELECT r.k, r.v, s.w FROM r LEFT JOIN s ON r.k = s.k",
    "group_by_all_aggregates": (
        "SELECT k, COUNT(*) AS c, SUM(v) AS sm, AVG(v) AS av, MIN(v) AS mn, MAX(v) AS mx, "
        "COUNT(DISTINCT v) AS cd, COUNT(v) AS cv FROM r GROUP BY k"
    ),
    "scalar_aggregate": "SELECT COUNT(*) AS c, SUM(v) AS sm, AVG(v) AS av FROM r",
    # groups at I0 from their values at I1 less the change (rules.aggregate.AggregateFromEnd), with a HAVING above
    "sums_from_end": "SELECT k, COUNT(*) AS c, SUM(v) AS sm, AVG(v) AS av, COUNT(v) AS cv FROM r GROUP BY k "
                     "HAVING COUNT(*) > 1 OR SUM(v) IS NULL",
    "union_distinct": "SELECT k FROM r UNION SELECT k FROM s",
    "join_under_aggregate": "SELECT r.k, COUNT(*) AS c, SUM(s.w) AS sw FROM r JOIN s ON r.k = s.k GROUP BY r.k",
    # TPC-H Q13's shape: groups recomputed through a LEFT JOIN with a residual condition, then regrouped
    "outer_join_regrouped": (
        "SELECT c, COUNT(*) AS n FROM (SELECT r.k, COUNT(s.w) AS c FROM r LEFT JOIN s ON r.k = s.k AND s.w > 0 "
        "GROUP BY r.k) g GROUP BY c"
    ),
    # semi and anti joins: a NULL in the subquery empties NOT IN; a residual non-equality rides along
    "exists": "SELECT r.k, r.v FROM r WHERE EXISTS (SELECT 1 FROM s WHERE s.k = r.k AND s.w <> r.v)",
    "not_in": "SELECT k, v FROM r WHERE v NOT IN (SELECT w FROM s WHERE k > 0)",
    # key-only conditions: verdicts from s's counts per key at I1 less the change's (rules.semi_join)
    "exists_keys": "SELECT r.k, r.v FROM r WHERE EXISTS (SELECT 1 FROM s WHERE s.k = r.k AND s.w > 0)",
    "not_exists_keys": "SELECT k, v FROM r WHERE NOT EXISTS (SELECT 1 FROM s WHERE s.k = r.k AND s.w = r.v)",
    # keys traced through rows a semi join re-checks (prune._reads_of): the join above, and TPC-H Q21's anti join
    # over an EXISTS, read their other side by those keys
    "exists_under_join": ("SELECT x.k, x.v, s.w FROM (SELECT r.k, r.v FROM r WHERE EXISTS "
                          "(SELECT 1 FROM s WHERE s.k = r.k AND s.w > 0)) x JOIN s ON x.k = s.k"),
    "exists_and_not_exists": ("SELECT r.k, r.v FROM r WHERE EXISTS (SELECT 1 FROM s WHERE s.k = r.k AND s.w > 0) "
                              "AND NOT EXISTS (SELECT 1 FROM s t WHERE t.k = r.k AND t.w < 0)"),
    # TPC-H Q15's shape: the sums at each end computed once for the join and the MAX over them (compile.py)
    "max_of_sums": ("WITH g AS (SELECT k, SUM(v) AS t FROM r GROUP BY k) SELECT s.k, s.w, g.t FROM s JOIN g "
                    "ON s.k = g.k WHERE g.t = (SELECT MAX(t) FROM g)"),
    # the same with counts and an average: every group's values at I0 and I1 from one aggregate at I1 with the
    # helper columns (compile.WholeGroups), the averages and counts computed back from them
    "max_of_counts": ("WITH g AS (SELECT k, COUNT(*) AS c, AVG(v) AS a, COUNT(v) AS cv FROM r GROUP BY k) "
                      "SELECT s.k, g.c, g.a, g.cv FROM s JOIN g ON s.k = g.k WHERE g.c = (SELECT MAX(c) FROM g)"),
}

SLOW = {
    "cross_join_filter": "SELECT r.v, s.w FROM r, s WHERE r.v < s.w",
    "right_join": "SELECT r.v, s.k, s.w FROM r RIGHT JOIN s ON r.k = s.k",
    "full_join_residual": "SELECT r.k AS rk, r.v, s.k AS sk, s.w FROM r FULL JOIN s ON r.k = s.k AND r.v <= s.w",
    "having": "SELECT k, SUM(v) AS sm FROM r GROUP BY k HAVING COUNT(*) > 1",
    "union_all_of_filters": "SELECT k, v FROM r WHERE v > 1 UNION ALL SELECT k, v FROM r WHERE v <= 2",
    "distinct_over_join": "SELECT DISTINCT r.v, s.w FROM r JOIN s ON r.k = s.k",
    "aggregate_under_join": (
        "SELECT a.k, a.c, s.w FROM (SELECT k, COUNT(*) AS c FROM r GROUP BY k) a JOIN s ON a.k = s.k"
    ),
    "outer_join_under_aggregate": "SELECT r.k, COUNT(s.w) AS c, MAX(s.w) AS m FROM r LEFT JOIN s ON r.k = s.k GROUP BY r.k",
    "self_join": "SELECT a.v, b.v AS v2 FROM r a JOIN r b ON a.k = b.k",
    "cte_full_join": "WITH x AS (SELECT k, v FROM r WHERE v IS NOT NULL) SELECT x.k, s.w FROM x FULL JOIN s ON x.k = s.k",
    "not_exists": "SELECT k, v FROM r WHERE NOT EXISTS (SELECT 1 FROM s WHERE s.k = r.k) AND v IS NOT NULL",
    "in_aggregated": "SELECT k FROM r WHERE k IN (SELECT k FROM s GROUP BY k HAVING COUNT(*) > 1)",
    "scalar_subqueries": (
        "SELECT r.k, r.v, (SELECT COUNT(*) FROM s WHERE s.k = r.k) AS n FROM r "
        "WHERE r.v > (SELECT AVG(w) FROM s)"
    ),
    "correlated_scalar_in_where": "SELECT k, v FROM r WHERE v >= (SELECT MAX(w) FROM s WHERE s.k = r.k)",
    "intersect_except": (
        "SELECT k, v FROM r INTERSECT SELECT k, w FROM s UNION ALL "
        "(SELECT v, k FROM r EXCEPT SELECT w, k FROM s WHERE w IS NOT NULL)"
    ),
    "intersect_except_all": (
        "SELECT k, v FROM r INTERSECT ALL SELECT k, w FROM s UNION ALL "
        "(SELECT v, k FROM r EXCEPT ALL SELECT w, k FROM s)"
    ),
    "lateral_view_outer": "SELECT r.k, x FROM r LATERAL VIEW OUTER explode(CASE WHEN v > 0 THEN array(v, k, v) END) e AS x",
    "posexplode": "SELECT k, p, x FROM r LATERAL VIEW posexplode(array(k, v)) e AS p, x WHERE x IS NOT NULL",
    "window": ("SELECT k, v, rank() OVER (PARTITION BY k ORDER BY v DESC) AS rk, "
               "sum(v) OVER (PARTITION BY k ORDER BY v ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS run, "
               "lag(v, 1, -9) OVER (PARTITION BY k ORDER BY v) AS prev FROM r"),
    "named_window": (
        "SELECT k, v, rank() OVER w AS rk, sum(v) OVER f AS run FROM r WINDOW w AS (PARTITION BY k ORDER BY v), "
        "f AS (PARTITION BY k ORDER BY v ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) QUALIFY rank() OVER w <= 2"
    ),
    "qualify_over_join": (
        "SELECT r.k, r.v, s.w FROM r JOIN s ON r.k = s.k "
        "QUALIFY dense_rank() OVER (PARTITION BY r.k ORDER BY s.w) <= 1"
    ),
    "expressions": (
        "SELECT CASE WHEN v > 1 THEN 'big' ELSE 'small' END AS size, COALESCE(k, -1) AS k2, "
        "concat('x', CAST(v AS STRING)) AS label FROM r WHERE v IS NOT NULL"
    ),
}

_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                       HealthCheck.too_slow])


@pytest.mark.parametrize("sql", list(QUICK.values()), ids=list(QUICK))
@settings(max_examples=6, **_SETTINGS)  # type: ignore[arg-type]
@given(data=two_tables())
def test_minimum_delta_oracle(spark: Any, sql: str, data: dict[str, BaseTable]) -> None:
    check_oracle(TableSet(spark, data), sql)


# outer joins of which one side changed are linear in it (rules.outer_join._one_side)
ONE_SIDE = {
    "left_join": QUICK["left_join"],
    "q13_shape": QUICK["outer_join_regrouped"],
    "right_join_residual": "SELECT r.k, r.v, s.w FROM r RIGHT JOIN s ON r.k = s.k AND r.v > 0 AND s.w < 3",
}


@pytest.mark.parametrize("changed", ["r", "s"])
@pytest.mark.parametrize("sql", list(ONE_SIDE.values()), ids=list(ONE_SIDE))
@settings(max_examples=4, **_SETTINGS)  # type: ignore[arg-type]
@given(data=st.data())
def test_outer_joins_with_one_changed_side(spark: Any, sql: str, changed: str, data: st.DataObject) -> None:
    check_oracle(TableSet(spark, data.draw(one_changed(changed))), sql)


@pytest.mark.slow
@pytest.mark.parametrize("sql", list(SLOW.values()), ids=list(SLOW))
@settings(max_examples=20, **_SETTINGS)  # type: ignore[arg-type]
@given(data=two_tables())
def test_minimum_delta_oracle_combinations(spark: Any, sql: str, data: dict[str, BaseTable]) -> None:
    check_oracle(TableSet(spark, data), sql)
