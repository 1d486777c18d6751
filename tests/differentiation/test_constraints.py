"""Declared RELY keys drop the join term over the referenced side's change when that side had only inserts or only
deletes (`differentiation.constraints`): which terms go, which stay, and the oracle with keys that hold."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diff_harness import BaseTable, TableSet, check_oracle
from differentiation import ChangeStats, build_plan, differentiate
from differentiation.constraints import Constraints, ForeignKey
from differentiation.delta_nodes import At, ChangeRead, Empty

SCHEMA = {"orders": {"ok": "INT", "cust": "INT"}, "lines": {"lk": "INT", "ok": "INT", "qty": "INT"},
          "cust": {"ck": "INT", "name": "STRING"}, "pairs": {"a": "INT", "b": "INT"},
          "refs": {"ra": "INT", "rb": "INT"}}
KEYS = Constraints(unique=(("orders", ("ok",)), ("cust", ("ck",)), ("pairs", ("a", "b"))),
                   foreign=(ForeignKey("lines", ("ok",), "orders", ("ok",)),
                            ForeignKey("orders", ("cust",), "cust", ("ck",)),
                            ForeignKey("refs", ("ra", "rb"), "pairs", ("a", "b"))))
INSERTS, DELETES, BOTH, NONE = (ChangeStats(True, False), ChangeStats(False, True), ChangeStats(True, True),
                                ChangeStats(False, False))
JOIN = "SELECT o.ok, o.cust, l.qty FROM orders o JOIN lines l ON o.ok = l.ok"


def _plan(sql: str, constraints: Constraints = KEYS, **stats: ChangeStats) -> Any:
    return differentiate(build_plan(sql, SCHEMA), stats=stats, constraints=constraints).plan


def _reads(plan: Any) -> set[str]:
    return {n.scan.table for n in plan.walk() if isinstance(n, ChangeRead)}


def _states(plan: Any) -> set[tuple[str, str]]:
    return {(t, n.when) for n in plan.walk() if isinstance(n, At) for t in n.child.base_tables()}


def test_inserts_into_the_referenced_table_meet_only_the_new_referencing_rows() -> None:
    plan = _plan(JOIN, orders=INSERTS, lines=INSERTS)
    assert _reads(plan) == {"lines"}  # Δorders ⋈ lines|I0 is empty: new orders have no old lines
    assert _states(plan) == {("orders", "end")}


def test_deletes_from_the_referenced_table_meet_only_the_deleted_referencing_rows() -> None:
    plan = _plan(JOIN, orders=DELETES, lines=DELETES)
    assert _reads(plan) == {"lines"}  # Δorders ⋈ lines|I1 is empty: no remaining line refers to a gone order
    assert _states(plan) == {("orders", "start")}


def test_a_change_of_the_referenced_table_alone_is_no_change_of_the_join() -> None:
    for plan in (_plan(JOIN, orders=INSERTS, lines=NONE), _plan(JOIN, orders=DELETES, lines=NONE)):
        assert _reads(plan) == set() and _states(plan) == set()
        assert any(isinstance(n, Empty) for n in plan.walk())


def test_the_referenced_side_may_be_on_either_side_and_behind_filters_projections_and_unchanged_joins() -> None:
    mirrored = "SELECT l.qty, o.ok FROM lines l JOIN orders o ON l.ok = o.ok"
    assert _reads(_plan(mirrored, orders=INSERTS, lines=INSERTS)) == {"lines"}
    nested = ("SELECT x.k, l.qty FROM (SELECT o.ok AS k, c.name FROM orders o JOIN cust c ON o.cust = c.ck "
              "WHERE o.ok > 3) x JOIN lines l ON x.k = l.ok AND l.qty > 1")
    assert _reads(_plan(nested, orders=INSERTS, lines=INSERTS, cust=NONE)) == {"lines"}


def test_terms_stay_without_a_rely_key_or_when_the_referenced_side_had_both_kinds_of_change() -> None:
    assert _reads(_plan(JOIN, Constraints(), orders=INSERTS, lines=INSERTS)) == {"orders", "lines"}
    assert _reads(_plan(JOIN, orders=BOTH, lines=INSERTS)) == {"orders", "lines"}  # an UPDATE: old keys come back
    no_unique = Constraints(foreign=KEYS.foreign)  # a foreign key to columns not declared unique proves nothing
    assert _reads(_plan(JOIN, no_unique, orders=INSERTS, lines=INSERTS)) == {"orders", "lines"}


def test_terms_stay_when_the_join_is_not_on_the_key_or_the_key_side_is_not_one_table() -> None:
    other_column = "SELECT o.ok, l.qty FROM orders o JOIN lines l ON o.ok = l.qty"
    assert _reads(_plan(other_column, orders=INSERTS, lines=INSERTS)) == {"orders", "lines"}
    outer = "SELECT o.ok, l.qty FROM orders o LEFT JOIN lines l ON o.ok = l.ok"
    assert "orders" in _reads(_plan(outer, orders=INSERTS, lines=INSERTS))
    grouped = "SELECT g.ok, l.qty FROM (SELECT ok, count(*) AS n FROM orders GROUP BY ok) g JOIN lines l ON g.ok = l.ok"
    assert _reads(_plan(grouped, orders=INSERTS, lines=INSERTS)) == {"orders", "lines"}
    changed_partner = ("SELECT x.k, l.qty FROM (SELECT o.ok AS k FROM orders o JOIN cust c ON o.cust = c.ck) x "
                       "JOIN lines l ON x.k = l.ok")  # Δx holds old orders joined with new customers
    assert "orders" in _reads(_plan(changed_partner, orders=INSERTS, lines=INSERTS, cust=INSERTS))


def test_a_composite_key_needs_all_its_columns_from_one_row_on_each_side() -> None:
    both = "SELECT p.a, r.rb FROM pairs p JOIN refs r ON p.a = r.ra AND p.b = r.rb"
    assert _reads(_plan(both, pairs=INSERTS, refs=INSERTS)) == {"refs"}
    half = "SELECT p.a, r.rb FROM pairs p JOIN refs r ON p.a = r.ra"
    assert _reads(_plan(half, pairs=INSERTS, refs=INSERTS)) == {"pairs", "refs"}
    two_rows = ("SELECT p.a, r.rb FROM pairs p JOIN (SELECT x.ra, y.rb FROM refs x JOIN refs y ON x.rb = y.ra) r "
                "ON p.a = r.ra AND p.b = r.rb")
    assert "pairs" in _reads(_plan(two_rows, pairs=INSERTS, refs=INSERTS))


# -- the oracle, with keys that hold at both ends of the interval --------------------------------------------------

KINDS = st.sampled_from(["inserts", "deletes", "both", "none"])


@st.composite
def keyed_interval(draw: Any) -> dict[str, BaseTable]:
    """orders (unique ok) and lines (ok references orders, or NULL) at start and end, with each table's change of one
    drawn kind; duplicates among lines, NULL keys, and lines of gone orders removed with them."""
    kinds = {"orders": draw(KINDS), "lines": draw(KINDS)}
    keys = draw(st.lists(st.integers(0, 12), unique=True, max_size=7))
    orders0 = {f"o{k}": (k, draw(st.integers(0, 2))) for k in keys}
    lines0 = {f"l{i}": (i, draw(st.sampled_from([*keys, None]) if keys else st.none()), draw(st.integers(0, 3)))
              for i in range(draw(st.integers(0, 8)))}
    orders1 = dict(orders0)
    if kinds["orders"] in ("deletes", "both"):
        for rid in draw(st.lists(st.sampled_from(sorted(orders0)), unique=True)) if orders0 else []:
            del orders1[rid]
    if kinds["orders"] in ("inserts", "both"):
        taken = {v[0] for v in orders1.values()} | {v[0] for v in orders0.values() if kinds["orders"] == "inserts"}
        for k in draw(st.lists(st.integers(0, 12).filter(lambda k: k not in taken), unique=True, max_size=3)):
            orders1[f"o{k}n"] = (k, draw(st.integers(0, 2)))
    live = {v[0] for v in orders1.values()}
    lines1 = {rid: v for rid, v in lines0.items() if v[1] is None or v[1] in live}
    if kinds["lines"] in ("deletes", "both"):
        for rid in draw(st.lists(st.sampled_from(sorted(lines1)), unique=True)) if lines1 else []:
            del lines1[rid]
    if kinds["lines"] in ("inserts", "both"):
        for i in range(draw(st.integers(0, 4))):
            lines1[f"n{i}"] = (100 + i, draw(st.sampled_from([*sorted(live), None])), draw(st.integers(0, 3)))
    # a line of a deleted order goes with it: lines change too (deletes) even when their drawn kind was "none"
    return {"orders": _table(SCHEMA["orders"], orders0, orders1), "lines": _table(SCHEMA["lines"], lines0, lines1)}


def _table(columns: dict[str, str], start: dict[str, tuple], end: dict[str, tuple]) -> BaseTable:
    changes = [("DELETE", rid, v) for rid, v in start.items() if end.get(rid) != v]
    changes += [("INSERT", rid, v) for rid, v in end.items() if start.get(rid) != v]
    return BaseTable(columns, start, end, changes)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(interval=keyed_interval())
def test_dropped_terms_keep_the_oracle_when_the_keys_hold(tables: Any, interval: dict[str, BaseTable]) -> None:
    ts: TableSet = tables(interval)
    check_oracle(ts, JOIN, constraints=KEYS)
    check_oracle(ts, "SELECT l.qty, o.cust FROM lines l JOIN orders o ON l.ok = o.ok WHERE l.qty > 0",
                 constraints=KEYS)
