"""Key restrictions pushed below joins (`differentiation/restrict.py`), as plan rewrites (no Spark): where each
restriction lands, and where it must stay. The rows are checked against the oracle by the property tests."""

from __future__ import annotations

from differentiation import build_plan, differentiate
from differentiation.compile import pushed
from differentiation.delta_nodes import Restrict, Snapshot
from differentiation.plan import Join, Node

SCHEMA = {"r": {"k": "INT", "v": "INT"}, "s": {"k": "INT", "w": "INT"}, "t": {"k": "INT", "x": "INT"}}


def _restricts(sql: str) -> list[Restrict]:
    plan: Node = pushed(differentiate(build_plan(sql, SCHEMA)).plan)
    return [n for n in plan.walk() if isinstance(n, Restrict)]


def _over(r: Restrict) -> str:
    return f"{r.child.scan.table}@{r.child.when}" if isinstance(r.child, Snapshot) else type(r.child).__name__


def test_an_outer_joins_keys_restrict_each_side_on_its_own_key() -> None:
    # one alternative per side (an equi semi join), never the OR over both sides' keys a nested loop would run
    restricts = _restricts("SELECT r.v, s.w FROM r LEFT JOIN s ON r.k = s.k")
    assert {_over(r) for r in restricts} == {"r@start", "s@start", "r@end", "s@end"}
    assert all(len(r.alternatives) == 1 for r in restricts)


def test_affected_groups_over_a_join_restrict_both_sides_of_it() -> None:
    # Δγ[r.k](r ⋈ s): the groups' keys reach r by the group key and s by the join's equality
    overs = {_over(r) for r in _restricts("SELECT r.k, max(s.w) AS top FROM r JOIN s ON r.k = s.k GROUP BY r.k")}
    assert {"r@start", "s@start", "r@end", "s@end"} <= overs
    assert "Join" not in overs
    # a SUM's groups are read at I1 only (their values at I0 are those less the change's)
    overs = {_over(r) for r in _restricts("SELECT r.k, sum(s.w) AS total FROM r JOIN s ON r.k = s.k GROUP BY r.k")}
    assert {"r@end", "s@end"} <= overs and not {"r@start", "s@start"} & overs and "Join" not in overs
    # ... and through a LEFT JOIN's preserved side, and a filter, as in TPC-H Q13
    overs = {_over(r) for r in _restricts(
        "SELECT r.k, count(s.w) AS c FROM r LEFT JOIN s ON r.k = s.k AND s.w > 0 WHERE r.v < 10 GROUP BY r.k")}
    assert "Join" not in overs and {"r@end", "s@end"} <= overs


def test_a_key_from_the_null_supplying_side_stays_above_the_outer_join() -> None:
    # grouping by s.k over r LEFT JOIN s: padded rows have s.k NULL whatever r holds, so s.k ∈ K says nothing of r
    overs = [_over(r) for r in _restricts("SELECT s.k, count(*) AS c FROM r LEFT JOIN s ON r.k = s.k GROUP BY s.k")]
    assert "Join" in overs


def test_a_key_with_no_equal_on_the_other_side_restricts_its_own_side_only() -> None:
    plan = pushed(differentiate(build_plan(
        "SELECT r.v, count(*) AS c FROM r JOIN s ON r.k < s.k GROUP BY r.v", SCHEMA)).plan)
    joins = [n for n in plan.walk() if isinstance(n, Join) and not n.is_delta]
    assert any(isinstance(j.left, Restrict) and not isinstance(j.right, Restrict) for j in joins)


def test_join_terms_restrict_their_snapshot_to_the_change_reads_keys() -> None:
    from differentiation.delta_nodes import ChangeRead, KeySet
    from differentiation.prune import restrict_terms

    def restricted(sql: str) -> set[tuple[str, str, frozenset[str]]]:
        plan = restrict_terms(pushed(differentiate(build_plan(sql, SCHEMA)).plan))
        return {(n.child.scan.table, n.child.when, frozenset(i.scan.table for i in n.keys.inputs))
                for n in plan.walk() if isinstance(n, Restrict) and isinstance(n.child, Snapshot)
                and isinstance(n.keys, KeySet) and all(isinstance(i, ChangeRead) for i in n.keys.inputs)}

    # Δr ⋈ s@I1 reads s by Δr's keys, r@I0 ⋈ Δs reads r by Δs's keys; EXISTS reads s@I1 once, by the keys of
    # both changes (its counts judge Δr's rows and r@I0's rows both)
    assert restricted("SELECT r.v, s.w FROM r JOIN s ON r.k = s.k") == {
        ("s", "end", frozenset({"r"})), ("r", "start", frozenset({"s"}))}
    assert ("s", "end", frozenset({"r", "s"})) in restricted(
        "SELECT r.v FROM r WHERE EXISTS (SELECT 1 FROM s WHERE s.k = r.k)")
    # a key computed on the way (r.k + 1) is not a change read's value: nothing to restrict by
    assert restricted("SELECT r.v, s.w FROM r JOIN s ON r.k + 1 = s.k") == set()


def test_a_join_terms_side_read_whole_is_not_restricted() -> None:
    from differentiation.prune import restrict_terms

    plan = pushed(differentiate(build_plan("SELECT r.v, s.w FROM r JOIN s ON r.k = s.k", SCHEMA)).plan)

    def restricted(whole: set[str]) -> set[str]:
        out = restrict_terms(plan, lambda leaf: leaf.scan.table in whole)
        return {_over(n) for n in out.walk() if isinstance(n, Restrict)}

    assert restricted(set()) == {"s@end", "r@start"}
    assert restricted({"s"}) == {"r@start"}  # Δr ⋈ s@I1 reads s whole; r@I0 ⋈ Δs still reads r by Δs's keys
    assert restricted({"r", "s"}) == set()
    # a side joining several tables stays restricted unless every one of them is read whole
    three = pushed(differentiate(build_plan(
        "SELECT r.v, s.w, t.x FROM r JOIN s ON r.k = s.k JOIN t ON s.k = t.k", SCHEMA)).plan)
    kept = restrict_terms(three, lambda leaf: leaf.scan.table == "s")
    assert any(_over(n) == "t@end" for n in kept.walk() if isinstance(n, Restrict))


def test_both_ends_of_a_restricted_table_become_one_read() -> None:
    from differentiation.delta_nodes import BothEnds, EndOf
    from differentiation.ends import share_ends

    plan = pushed(differentiate(build_plan(
        "SELECT r.k, count(s.w) AS c FROM r LEFT JOIN s ON r.k = s.k GROUP BY r.k", SCHEMA)).plan)
    shared = share_ends(plan)
    ends = {n for n in shared.walk() if isinstance(n, EndOf)}
    assert {(e.child.child.scan.table, e.when) for e in ends if isinstance(e.child, Restrict)} == {
        ("r", "start"), ("r", "end"), ("s", "start"), ("s", "end")}
    reads: dict[object, set[str]] = {}
    for e in ends:
        reads.setdefault(e.child, set()).add(e.when)
    assert all(whens == {"start", "end"} for whens in reads.values())  # each read serves both of its ends
    assert all(isinstance(e.child, Restrict) and isinstance(e.child.child, BothEnds) for e in ends)
    left = {n for n in shared.walk() if isinstance(n, Restrict) and isinstance(n.child, Snapshot)}
    pairs = [n for n in left if n.copy(child=n.child.copy(when="end" if n.child.when == "start" else "start")) in left]
    # a pair left behind has keys that come from a shared read (one shared read is never defined over another)
    assert all(any(isinstance(k, EndOf) for k in n.keys.walk()) for n in pairs)
    assert all(e.columns() == e.child.child.scan.columns() for e in ends)


def test_a_snapshot_read_at_one_end_only_is_left_alone() -> None:
    from differentiation.ends import share_ends

    # an inner join's terms read each side at one end each (ΔQ ⋈ R|I1, Q|I0 ⋈ ΔR): nothing to pair
    plan = pushed(differentiate(build_plan("SELECT r.v, s.w FROM r JOIN s ON r.k = s.k", SCHEMA)).plan)
    assert share_ends(plan) == plan


def test_no_shared_read_is_defined_over_another() -> None:
    from differentiation.delta_nodes import BothEnds, EndOf
    from differentiation.ends import share_ends

    # TPC-H Q13's shape: the outer groups' keys come from the inner groups' change, itself read from shared reads;
    # Spark cannot plan a shared read defined over another, so only the inner pairs are shared
    plan = pushed(differentiate(build_plan(
        "SELECT c, count(*) AS n FROM (SELECT r.k, count(s.w) AS c FROM r LEFT JOIN s ON r.k = s.k GROUP BY r.k) g "
        "GROUP BY c", SCHEMA)).plan)
    shared = share_ends(plan)
    reads = {e.child for e in shared.walk() if isinstance(e, EndOf)}
    assert reads and all(isinstance(r, Restrict) and isinstance(r.child, BothEnds) for r in reads)
    for r in reads:
        assert isinstance(r, Restrict)
        assert not [n for n in r.keys.walk() if isinstance(n, EndOf)]
