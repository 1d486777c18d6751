"""Inner join trees re-associated so that no cross product comes before the join connecting its sides."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings

from diff_harness import BaseTable, TableSet, check_oracle
from differentiation import build_plan
from differentiation.join_order import REORDERED, reordered
from differentiation.plan import Join, Node, each_once
from dml_strategies import two_tables

SCHEMA = {"r": {"k": "INT", "v": "INT"}, "s": {"k": "INT", "w": "INT"}, "t": {"k": "INT", "x": "INT"}}
# r and t share no condition; each meets s: as written, r × t comes first (TPC-H Q9's part × supplier)
LISTED = "SELECT r.v, t.x, s.w FROM r, t, s WHERE r.k = s.k AND t.k = s.w AND r.v > 0"


def _cross_joins(plan: Node) -> int:
    return sum(1 for n in each_once(plan) if isinstance(n, Join) and n.kind == "cross")


def test_cross_product_before_its_connecting_join_is_reordered() -> None:
    plan = build_plan(LISTED, SCHEMA)
    assert _cross_joins(plan) == 0 and reordered(plan)
    assert plan.columns() == ("v", "x", "w")
    assert f"(from {REORDERED})" in plan.to_text()
    # the filter on r stays on r's side, under the join that first meets s
    assert "Filter `r.v` > 0" in plan.to_text()


def test_trees_without_an_avoidable_cross_join_are_left_as_written() -> None:
    """Their row ids are those of the order the query lists its tables in (a reorder would change them)."""
    for sql in ("SELECT r.v, s.w, t.x FROM r, s, t WHERE r.k = s.k AND t.k = s.w",
                "SELECT r.v, s.w FROM r, s WHERE r.v < s.w",  # nothing connects them: the product is the query
                "SELECT r.v, s.w FROM r CROSS JOIN s",
                "SELECT r.v, t.x FROM r JOIN s ON r.k = s.k JOIN t ON t.k = s.w"):
        plan = build_plan(sql, SCHEMA)
        assert not reordered(plan), sql
    written = build_plan("SELECT r.v, s.w, t.x FROM r, s, t WHERE r.k = s.k AND t.k = s.w", SCHEMA)
    assert _cross_joins(written) == 0


def test_a_product_no_condition_connects_stays_one_cross_join() -> None:
    plan = build_plan("SELECT r.v, t.x, s.w FROM r, t, s WHERE r.k = s.k", SCHEMA)
    assert _cross_joins(plan) == 1 and reordered(plan)  # (r ⋈ s) × t: the product comes last


@settings(max_examples=5, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=two_tables())
def test_reordered_joins_match_recompute(spark: Any, data: dict[str, BaseTable]) -> None:
    """Both orders give the same rows; the derivative of the reordered tree is checked against recompute (the
    harness also writes its unconsolidated change set by row id, as a dynamic table's refresh does)."""
    sql = "SELECT a.v, s.w, b.v AS v2 FROM r a, r b, s WHERE a.k = s.k AND b.k = s.w"
    assert reordered(build_plan(sql, {"r": {"k": "INT", "v": "INT"}, "s": {"k": "INT", "w": "INT"}}))
    check_oracle(TableSet(spark, data), sql)
