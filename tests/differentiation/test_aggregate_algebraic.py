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


def test_state_ignored_where_algebra_does_not_apply() -> None:
    schema = {"r": {"k": "INT", "v": "INT"}}
    for sql in ("SELECT k, MAX(v) AS m FROM r GROUP BY k", "SELECT k, SUM(v) AS s FROM r GROUP BY k HAVING SUM(v) > 1",
                "SELECT k, SUM(v + 1) AS s FROM r GROUP BY k"):
        text = differentiate(build_plan(sql, schema), state="(SELECT 1)").to_text()
        assert "algebraic" not in text and "π−" in text
