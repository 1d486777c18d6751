"""A subplan over a table whose interval only updated rows in place, reading none of the columns the updates moved
(`ChangeStats.moved`), is the same at both ends: its change is empty and no term is built over it (TPC-H Q17's
average quantity per part after an update of prices). Checked against the oracle with random in-place updates of
read and unread columns, NULLs and duplicates."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diff_harness import BaseTable, TableSet, check_oracle
from differentiation import ChangeStats, build_plan, differentiate
from differentiation.delta_nodes import ChangeRead

SCHEMA = {"r": {"k": "INT", "v": "INT", "note": "STRING"}, "s": {"k": "INT", "w": "INT"}}
# The outer read of r takes its note; the aggregate (or subquery) over r reads only k and v.
SELF_JOIN = "SELECT r.k, r.note, a.t FROM r JOIN (SELECT k, sum(v) AS t FROM r GROUP BY k) a ON r.k = a.k"
CORRELATED = "SELECT k, note FROM r WHERE v >= (SELECT avg(r2.v) FROM r r2 WHERE r2.k = r.k)"
QUERIES = (SELF_JOIN, CORRELATED,
           "SELECT s.k, s.w, r.note FROM s JOIN r ON s.k = r.k",
           "SELECT k, count(*) AS n, max(note) AS m FROM r GROUP BY k")


def _reads(sql: str, **stats: ChangeStats) -> list[ChangeRead]:
    """The change reads of the plan's terms, once per place they are read."""
    plan = differentiate(build_plan(sql, SCHEMA), stats=stats).plan
    return [n for n in plan.walk() if isinstance(n, ChangeRead)]


def test_a_subplan_reading_no_moved_column_has_no_change() -> None:
    notes = ChangeStats(moved=frozenset({"note"}))
    # the aggregate's term is gone: the one change read left is the outer scan's (it reads the note)
    assert len(_reads(SELF_JOIN, r=notes)) == 1
    assert len(_reads(SELF_JOIN, r=ChangeStats())) > 1
    assert len(_reads(SELF_JOIN, r=ChangeStats(moved=frozenset({"v"})))) > 1
    assert len(_reads(CORRELATED, r=notes)) == 1
    assert len(_reads(CORRELATED, r=ChangeStats())) > 1
    # nothing the plan reads moved: no change at all
    assert differentiate(build_plan("SELECT k, sum(v) AS t FROM r GROUP BY k", SCHEMA),
                         stats={"r": notes}).shape == "NO_DATA"


def _table(columns: dict[str, str], start: dict[str, tuple], end: dict[str, tuple]) -> BaseTable:
    changes = [("DELETE", rid, v) for rid, v in start.items() if end.get(rid) != v]
    changes += [("INSERT", rid, v) for rid, v in end.items() if start.get(rid) != v]
    return BaseTable(columns, start, end, changes)


values = st.one_of(st.none(), st.integers(0, 2))
notes = st.one_of(st.none(), st.sampled_from(["p", "q"]))


@st.composite
def updated_in_place(draw: Any) -> dict[str, BaseTable]:
    """r updated in place (ids kept, no row inserted or deleted): notes, values or both, some back to what they
    were, with duplicate rows and NULLs; s unchanged or changed by inserts."""
    r0 = {f"r{i}": (draw(st.integers(0, 3)), draw(values), draw(notes)) for i in range(draw(st.integers(1, 7)))}
    moves = draw(st.sampled_from(["note", "v", "both"]))
    r1 = dict(r0)
    for rid in draw(st.lists(st.sampled_from(sorted(r0)), unique=True, min_size=1)):
        k, v, note = r0[rid]
        r1[rid] = (k, draw(values) if moves in ("v", "both") else v, draw(notes) if moves != "v" else note)
    s0 = {f"s{i}": (draw(st.integers(0, 3)), draw(values)) for i in range(draw(st.integers(0, 3)))}
    s1 = dict(s0)
    for i in range(draw(st.integers(0, 2))):
        s1[f"n{i}"] = (draw(st.integers(0, 3)), draw(values))
    return {"r": _table(SCHEMA["r"], r0, r1), "s": _table(SCHEMA["s"], s0, s1)}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(interval=updated_in_place())
def test_subplans_left_unchanged_by_in_place_updates_keep_the_oracle(tables: Any,
                                                                      interval: dict[str, BaseTable]) -> None:
    assert interval["r"].stats().moved is not None or not interval["r"].changes
    ts: TableSet = tables(interval)
    for sql in QUERIES:
        check_oracle(ts, sql)
