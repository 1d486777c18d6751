"""The algebraic aggregate rule (new = old + ΣΔ from a stored state with helper columns)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from diff_harness import BaseTable, TableSet, check_oracle
from differentiation import build_plan, differentiate
from dml_strategies import decimal_table, two_tables

_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

STATE_QUERIES = {
    "grouped_int": "SELECT k, COUNT(*) AS c, SUM(v) AS sm, AVG(v) AS av, COUNT(v) AS cv FROM r GROUP BY k",
    "scalar_int": "SELECT COUNT(*) AS c, SUM(v) AS sm, AVG(v) AS av FROM r",
    "over_join": "SELECT r.k, SUM(s.w) AS sw, COUNT(*) AS c FROM r JOIN s ON r.k = s.k GROUP BY r.k",
    "expression_args": "SELECT k, SUM(v * 2 + 1) AS sm, AVG(v - 1) AS av, SUM(-v) AS neg FROM r GROUP BY k",
    "case_args": "SELECT k, SUM(CASE WHEN v > 0 THEN 1 ELSE 0 END) AS pos, AVG(CASE WHEN v < 2 THEN v END) AS lo, "
                 "SUM(IF(v IS NULL, 1, v * 2)) AS nv FROM r GROUP BY k",
    # summed columns a derived table computes (TPC-H Q7-Q9's `shipping.volume`, `profit.amount`)
    "over_derived_table": "SELECT g, SUM(amount) AS sm, AVG(amount) AS av, COUNT(*) AS c FROM "
                          "(SELECT r.k AS g, s.w * 2 - r.v AS amount FROM r JOIN s ON r.k = s.k) x GROUP BY g",
}


@pytest.mark.parametrize("sql", list(STATE_QUERIES.values()), ids=list(STATE_QUERIES))
@settings(max_examples=5, **_SETTINGS)  # type: ignore[arg-type]
@given(data=two_tables())
def test_algebraic_from_state_matches_recompute(spark: Any, sql: str, data: dict[str, BaseTable]) -> None:
    check_oracle(TableSet(spark, data), sql, use_state=True)


@settings(max_examples=5, **_SETTINGS)  # type: ignore[arg-type]
@given(data=decimal_table())
def test_algebraic_decimal_avg_matches_spark(spark: Any, data: dict[str, BaseTable]) -> None:
    res = check_oracle(TableSet(spark, data), "SELECT k, AVG(d) AS a, SUM(d) AS s FROM m GROUP BY k", use_state=True)
    # check_oracle compared values with Spark's own AVG; the type must match too
    assert all(r[1] is None or r[1].as_tuple().exponent == -6 for r in res.rows)


@settings(max_examples=5, **_SETTINGS)  # type: ignore[arg-type]
@given(data=decimal_table())
def test_algebraic_decimal_expressions_match_spark(spark: Any, data: dict[str, BaseTable]) -> None:
    """TPC-H's revenue shapes: SUM/AVG of decimal arithmetic, whose result types follow Spark's precision rules."""
    check_oracle(TableSet(spark, data), "SELECT k, SUM(d * (1 - d)) AS rev, SUM(d * (1 - d) * (1 + d)) AS charge, "
                 "AVG(d * 2) AS a, SUM(d / 3) AS third FROM m GROUP BY k", use_state=True)
    check_oracle(TableSet(spark, data), "SELECT k, SUM(rev) AS rev, SUM(CASE WHEN k > 0 THEN rev ELSE 0 END) AS pos "
                 "FROM (SELECT k, d * (1 - d) AS rev FROM m) t GROUP BY k", use_state=True)


def test_sums_of_a_derived_tables_computed_columns_are_kept_in_state() -> None:
    """The types of a derived table's computed columns are known, so its aggregate is maintained from state
    (before, TPC-H Q7-Q9 recomputed their touched groups, nearly all of them, at both ends)."""
    from differentiation.rules.aggregate_algebraic import state_aggregate

    schema = {"m": {"k": "INT", "d": "DECIMAL(15,2)"}, "n": {"k": "INT", "e": "DECIMAL(15,2)"}}
    sql = ("SELECT k, SUM(CASE WHEN k = 1 THEN amount ELSE 0 END) AS one, SUM(amount) AS total FROM "
           "(SELECT m.k, m.d * (1 - n.e) - n.e * m.d AS amount FROM m JOIN n ON m.k = n.k) profit GROUP BY k")
    assert state_aggregate(build_plan(sql, schema)) is not None


def test_expression_types_are_sparks(spark: Any) -> None:
    """``expression_type`` against Spark's analyzer, for every form it claims to type."""
    import sqlglot

    from differentiation.types import expression_type

    columns = {"i": "INT", "b": "BIGINT", "s": "SMALLINT", "d": "DECIMAL(15,2)", "e": "DECIMAL(38,10)",
               "x": "DOUBLE"}
    view = "expression_types_probe"  # a temp view of the shared session: a name no other test's table has
    spark.sql("SELECT " + ", ".join(f"CAST(NULL AS {t}) AS {c}" for c, t in columns.items())) \
        .createOrReplaceTempView(view)
    expressions = ["i", "i + b", "s * i", "i / 2", "i - 1", "d * (1 - d)", "d * (1 - d) * (1 + d)", "d / 3",
                   "d / i", "d + 0.05", "e * d", "e / d", "e + 1", "-(d * 2)", "d * x", "b * 100000000000",
                   "CAST(i AS DECIMAL(10, 2)) * d", "CAST(d AS DOUBLE) + 1", "d - s", "1.5 * 2.25",
                   "CASE WHEN i > 0 THEN d ELSE 0 END", "CASE WHEN i > 0 THEN 1 ELSE 0 END", "CASE WHEN d > 1 THEN i END",
                   "CASE WHEN i > 0 THEN d * (1 - d) ELSE 0 END", "CASE WHEN i = 1 THEN b WHEN i = 2 THEN s END",
                   "CASE WHEN i > 0 THEN e ELSE d END", "IF(i > 0, x, i)", "IF(i > 0, CAST(i AS DECIMAL(5, 1)), b)",
                   "CASE i WHEN 1 THEN 2.5 ELSE d END"]
    for text in expressions:
        ours = expression_type(sqlglot.parse_one(text, read="spark"), columns)
        theirs = spark.sql(f"SELECT {text} AS v FROM {view}").schema["v"].dataType.simpleString().upper()
        assert ours is not None and ours.replace(" ", "") == theirs.replace(" ", ""), (text, ours, theirs)
    spark.catalog.dropTempView(view)
    for unmodelled in ("CASE WHEN i > 0 THEN 'a' ELSE 0 END", "abs(d)", "i % 2", "'1' + i"):
        assert expression_type(sqlglot.parse_one(unmodelled, read="spark"), columns) is None, unmodelled


def test_state_ignored_where_algebra_does_not_apply() -> None:
    schema = {"r": {"k": "INT", "v": "INT"}}
    for sql in ("SELECT k, MAX(v) AS m FROM r GROUP BY k", "SELECT k, SUM(v) AS s FROM r GROUP BY k HAVING SUM(v) > 1",
                "SELECT k, SUM(abs(v)) AS s FROM r GROUP BY k"):
        text = differentiate(build_plan(sql, schema), state="(SELECT 1)").to_text()
        assert "algebraic" not in text and ("π−" in text or "Δγ at I0 from I1" in text)
