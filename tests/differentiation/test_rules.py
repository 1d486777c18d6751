"""Hand-written cases per rule family, run on Spark, plus the oracle's self-check."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from diff_harness import BaseTable, apply_changes, assert_same_rows, check_minimum_delta, check_oracle
from differentiation import RULES, ChangeFormat
from differentiation.plan import RELATIONAL_NODES

R = {"k": "INT", "v": "INT"}
S = {"k": "INT", "w": "INT"}


def _update(start: dict[str, tuple], end: dict[str, tuple]) -> list[tuple[str, str, tuple]]:
    """The delta between two states by row id (DELETE old + INSERT new for every differing id)."""
    out: list[tuple[str, str, tuple]] = []
    for rid in sorted(set(start) | set(end)):
        if start.get(rid) != end.get(rid):
            if rid in start:
                out.append(("DELETE", rid, start[rid]))
            if rid in end:
                out.append(("INSERT", rid, end[rid]))
    return out


def _table(cols: dict[str, str], start: dict[str, tuple], end: dict[str, tuple]) -> BaseTable:
    return BaseTable(cols, start, end, _update(start, end))


def test_every_relational_node_has_a_rule() -> None:
    assert {t for t, _ in RULES} == set(RELATIONAL_NODES)


def test_filter_update_coercion(tables: Any) -> None:
    r = _table(R, {"a": (1, 5), "b": (2, 0)}, {"a": (1, 0), "b": (2, 7)})
    res = check_oracle(tables({"r": r}), "SELECT k, v FROM r WHERE v > 1")
    assert sorted(x[:4] for x in res.rows) == [(1, 5, "DELETE", False), (2, 7, "INSERT", False)]


def test_join_both_sides_change_counted_once(tables: Any) -> None:
    r = _table(R, {}, {"r1": (1, 10)})
    s = _table(S, {}, {"s1": (1, 20)})
    res = check_oracle(tables({"r": r, "s": s}), "SELECT r.v, s.w FROM r JOIN s ON r.k = s.k")
    assert [x[:3] for x in res.rows] == [(10, 20, "INSERT")]
    assert res.shape == "ADDED_ONLY"


def test_left_join_padding_appears_and_disappears(tables: Any) -> None:
    r = _table(R, {"r1": (1, 10), "r2": (None, 11)}, {"r1": (1, 10), "r2": (None, 11)})
    s = _table(S, {"s1": (1, 20), "s2": (None, 21)}, {"s2": (None, 22)})
    res = check_oracle(tables({"r": r, "s": s}), "SELECT r.v, s.w FROM r LEFT JOIN s ON r.k = s.k")
    # r1 loses its partner and becomes padded; the NULL-key row of r never matched anything.
    assert sorted((x[:3] for x in res.rows), key=repr) == [(10, 20, "DELETE"), (10, None, "INSERT")]
    assert sorted((x[:2] for x in res.end), key=repr) == [(10, None), (11, None)]


def test_full_join_null_keys_never_match(tables: Any) -> None:
    r = _table(R, {"r1": (None, 1)}, {"r1": (None, 1), "r2": (None, 2)})
    s = _table(S, {"s1": (None, 3)}, {"s1": (None, 3)})
    res = check_oracle(tables({"r": r, "s": s}), "SELECT r.v, s.w FROM r FULL JOIN s ON r.k = s.k")
    assert [x[:3] for x in res.rows] == [(2, None, "INSERT")]


def test_scalar_aggregate_keeps_one_row_when_empty(tables: Any) -> None:
    r = _table(R, {"a": (1, 5)}, {})
    res = check_oracle(tables({"r": r}), "SELECT COUNT(*) AS c, SUM(v) AS s FROM r")
    assert res.end == [(0, None, res.start[0][-1])]
    assert sorted(x[:4] for x in res.rows) == [(0, None, "INSERT", True), (1, 5, "DELETE", True)]


def test_group_disappears_when_count_reaches_zero(tables: Any) -> None:
    r = _table(R, {"a": (1, 5), "b": (2, 1)}, {"b": (2, 1)})
    res = check_oracle(tables({"r": r}), "SELECT k, COUNT(*) AS c FROM r GROUP BY k")
    assert [x[:4] for x in res.rows] == [(1, 1, "DELETE", False)]


def test_avg_of_decimal_has_sparks_type_and_value(tables: Any, spark: Any) -> None:
    cols = {"k": "INT", "d": "DECIMAL(10,2)"}
    r = _table(cols, {"a": (1, Decimal("1.00")), "b": (1, Decimal("2.00"))},
               {"a": (1, Decimal("1.00")), "b": (1, Decimal("2.01")), "c": (1, Decimal("0.01"))})
    res = check_oracle(tables({"r": r}), "SELECT k, AVG(d) AS a FROM r GROUP BY k")
    inserted = [x for x in res.rows if x[2] == "INSERT"]
    assert inserted[0][1] == Decimal("1.006667")  # DECIMAL(10,2) -> DECIMAL(14,6)


def test_distinct_row_disappears_with_its_last_copy(tables: Any) -> None:
    r = _table(R, {"a": (1, 5), "b": (1, 5)}, {"a": (1, 5)})
    res = check_oracle(tables({"r": r}), "SELECT DISTINCT k, v FROM r")
    assert res.rows == []
    r = _table(R, {"a": (1, 5)}, {})
    res = check_oracle(tables({"r": r}), "SELECT DISTINCT k, v FROM r")
    assert [x[:3] for x in res.rows] == [(1, 5, "DELETE")]


def test_union_all_ids_tagged_by_branch(tables: Any) -> None:
    r = _table(R, {}, {"a": (1, 5)})
    res = check_oracle(tables({"r": r}), "SELECT k FROM r WHERE v > 1 UNION ALL SELECT k FROM r WHERE v < 9")
    assert len(res.rows) == 2 and len({x[-1] for x in res.rows}) == 2
    assert res.shape == "ADDED_ONLY"


def test_append_only_on_monotonic_query(tables: Any) -> None:
    r = _table(R, {"a": (1, 5)}, {"a": (1, 6), "b": (2, 7)})
    s = _table(S, {"s": (1, 0)}, {"s": (1, 0)})
    res = check_oracle(tables({"r": r, "s": s}), "SELECT r.k, r.v FROM r WHERE v > 0", ChangeFormat.APPEND_ONLY)
    # the update of row a is ignored; only the fresh row b appears
    assert [x[:4] for x in res.rows] == [(2, 7, "INSERT", False)]


def test_unchanged_table_gives_no_data(tables: Any) -> None:
    r = _table(R, {"a": (1, 5)}, {"a": (1, 5)})
    res = check_oracle(tables({"r": r}), "SELECT k, COUNT(*) AS c FROM r GROUP BY k")
    assert res.shape == "NO_DATA" and res.rows == []


def test_oracle_self_check_detects_a_corrupted_row(tables: Any) -> None:
    r = _table(R, {"a": (1, 5), "b": (2, 6)}, {"a": (1, 7), "c": (3, 1)})
    res = check_oracle(tables({"r": r}), "SELECT k, v FROM r")
    assert res.rows
    assert_same_rows(apply_changes(res.start, res.rows), res.end)
    corrupted = list(res.rows)
    first = corrupted[0]
    corrupted[0] = (first[0], (first[1] or 0) + 100) + tuple(first[2:])
    with pytest.raises(AssertionError):
        assert_same_rows(apply_changes(res.start, corrupted), res.end)
    with pytest.raises(AssertionError):
        assert_same_rows(apply_changes(res.start, corrupted[1:]), res.end)
    with pytest.raises(AssertionError):
        check_minimum_delta(corrupted + [corrupted[0][:2] + ("DELETE" if corrupted[0][2] == "INSERT" else "INSERT",)
                                         + corrupted[0][3:]])
