"""Refused constructs: each names the construct and its position in the SQL."""

from __future__ import annotations

import pytest

from differentiation import ChangeFormat, UnsupportedQuery, build_plan, differentiate, incremental_reason

SCHEMA = {"r": {"k": "INT", "v": "INT"}, "s": {"k": "INT", "w": "INT"}}

BUILD_REFUSALS = [
    ("SELECT k,\n  rank() OVER (ORDER BY count(*)) AS n FROM r GROUP BY k", "window function", "line 2, column 3"),
    ("SELECT k FROM r\nLIMIT 3", "LIMIT", "line 2, column 1"),
    ("SELECT k FROM r WHERE (k, v) IN (SELECT k, w FROM s)", "IN subquery", "line 1, column 24"),
    ("SELECT k FROM r WHERE EXISTS (SELECT s.k FROM s WHERE s.k = r.k GROUP BY s.k)", "EXISTS subquery",
     "line 1, column 38"),
    ("SELECT k, (SELECT w FROM s) AS m FROM r", "scalar subquery", "line 1, column 19"),
    ("SELECT k, (SELECT MAX(w) FROM s WHERE s.k > r.k) AS m FROM r", "scalar subquery", "line 1, column 19"),
    ("SELECT k, v FROM r GROUP BY k", "non-grouped column", "line 1, column 11"),
    ("SELECT k, explode(array(v)) AS x FROM r", "EXPLODE", "line 1, column 11"),
    ("SELECT k, stddev(v) AS d FROM r GROUP BY k", "STDDEV", "line 1, column 11"),
    ("SELECT k FROM r GROUP BY ROLLUP (k)", "grouping sets", "line 1, column 26"),
]


@pytest.mark.parametrize("sql,construct,position", BUILD_REFUSALS, ids=[c for _, c, _ in BUILD_REFUSALS])
def test_build_refusals_name_construct_and_position(sql: str, construct: str, position: str) -> None:
    with pytest.raises(UnsupportedQuery) as info:
        build_plan(sql, SCHEMA)
    assert info.value.construct == construct
    assert info.value.position == position
    assert position in str(info.value)


@pytest.mark.parametrize("sql,fragment", [
    ("SELECT k, rand() AS x FROM r", "non-deterministic function RAND() in select list at line 1, column 11"),
    ("SELECT k, uuid() AS x FROM r", "non-deterministic function UUID() in select list at line 1, column 11"),
    ("SELECT k FROM r WHERE v >\n rand() * 3", "RAND() in filter at line 2, column 2"),
    ("SELECT k, current_timestamp() AS t FROM r", "CURRENT_TIMESTAMP() in select list at line 1, column 11"),
    ("SELECT r.k FROM r LEFT JOIN s ON r.k < s.k", "LEFT OUTER JOIN ON `r.k` < `s.k` has no equality"),
    ("SELECT k, row_number() OVER (ORDER BY v) AS n FROM r", "ROW_NUMBER() OVER (ORDER BY `r.v`) at line 1, column 11 has no PARTITION BY"),
])
def test_buildable_but_not_incremental(sql: str, fragment: str) -> None:
    plan = build_plan(sql, SCHEMA)
    reason = incremental_reason(plan)
    assert reason is not None and fragment in reason
    with pytest.raises(UnsupportedQuery, match="cannot be maintained|equality"):
        differentiate(plan)


def test_incremental_reason_none_for_supported() -> None:
    assert incremental_reason(build_plan("SELECT r.k, COUNT(*) AS c FROM r JOIN s ON r.k = s.k GROUP BY r.k",
                                         SCHEMA)) is None


@pytest.mark.parametrize("sql,operator", [
    ("SELECT k, COUNT(*) AS c FROM r GROUP BY k", "GROUP BY"),
    ("SELECT COUNT(*) AS c FROM r", "aggregate"),
    ("SELECT DISTINCT k FROM r", "DISTINCT / UNION"),
    ("SELECT k FROM r UNION SELECT k FROM s", "DISTINCT / UNION"),
    ("SELECT r.k FROM r FULL JOIN s ON r.k = s.k", "FULL OUTER JOIN"),
])
def test_append_only_refused_on_non_monotonic(sql: str, operator: str) -> None:
    with pytest.raises(UnsupportedQuery) as info:
        differentiate(build_plan(sql, SCHEMA), ChangeFormat.APPEND_ONLY)
    assert info.value.construct == operator and operator in str(info.value)


def test_order_by_is_dropped() -> None:
    with_order = build_plan("SELECT k FROM r ORDER BY k DESC", SCHEMA)
    assert with_order == build_plan("SELECT k FROM r", SCHEMA)


def test_unknown_table_and_syntax_errors() -> None:
    with pytest.raises(UnsupportedQuery, match="cannot resolve"):
        build_plan("SELECT x FROM nowhere", SCHEMA)
    with pytest.raises(UnsupportedQuery, match="cannot parse"):
        build_plan("SELECT FROM WHERE (", SCHEMA)
