"""Key pruning as plan rewrites (no Spark): which join terms a probe of change reads can prune, and where the
literal filter lands (only where a filter on the key commutes with every operator on the way)."""

from __future__ import annotations

from differentiation import KeyFilter, build_plan, changes_query, differentiate, key_probes
from differentiation.compile import pushed
from differentiation.delta_nodes import ChangeRead, KeySet, Snapshot
from differentiation.output import absence
from differentiation.prune import prune_keys

SCHEMA = {"r": {"k": "INT", "v": "INT"}, "s": {"k": "INT", "w": "INT"}, "t": {"k": "INT", "x": "INT"},
          "b": {"k": "BIGINT", "y": "INT"}}


class Names:
    def snapshot(self, table: str, when: str, keys: tuple = ()) -> str:
        return f"`snap_{table}_{when}{'_pruned' if keys else ''}`"

    def changes(self, table: str) -> str:
        return f"`changes_{table}`"


def _sites(sql: str) -> set[tuple[tuple[tuple[str, str], ...], str, str]]:
    return {(s.probe.reads, s.table, s.when) for s in key_probes(differentiate(build_plan(sql, SCHEMA)))}


def _pruned_leaves(sql: str) -> set[tuple[str, str, str, str]]:
    """(table, when, column, the table whose changes gave the keys) of every filtered snapshot leaf."""
    d = differentiate(build_plan(sql, SCHEMA))
    filters = {s.probe: KeyFilter("", s.probe.type, values=tuple(t for t, _ in s.probe.reads)) for s in key_probes(d)}
    plan = prune_keys(pushed(d.plan), filters)
    return {(n.scan.table, n.when, k.column, v) for n in plan.walk() if isinstance(n, Snapshot) for k in n.keys
            for v in k.values or ()}


def test_each_side_of_an_equi_join_is_pruned_by_the_other_sides_change_keys() -> None:
    sql = "SELECT r.v, s.w FROM r JOIN s ON r.k = s.k"
    assert _sites(sql) == {(((("r", "k"),), "s", "end")), ((("s", "k"),), "r", "start")}
    assert _pruned_leaves(sql) == {("s", "end", "k", "r"), ("r", "start", "k", "s")}


def test_keys_pass_through_inner_joins_and_group_keys_but_not_computed_or_cast_keys() -> None:
    # Δt ⋈ (r ⋈ s)@I0: the filter on s.k reaches s's snapshot through the inner join below it
    assert ("s", "start", "k", "t") in _pruned_leaves(
        "SELECT r.v, t.x FROM r JOIN s ON r.k = s.k JOIN t ON s.k = t.k")
    # Δr ⋈ (GROUP BY k over s)@I1: a filter on a group key commutes with the aggregate
    assert ("s", "end", "k", "r") in _pruned_leaves(
        "SELECT r.v, g.c FROM r JOIN (SELECT k, count(*) AS c FROM s GROUP BY k) g ON r.k = g.k")
    assert _sites("SELECT r.v, s.w FROM r JOIN s ON r.k + 1 = s.k") == set()
    assert _sites("SELECT r.v, b.y FROM r JOIN b ON r.k = b.k") == set()  # INT against BIGINT: no literal cast


def test_the_null_supplying_side_of_an_outer_join_is_never_filtered() -> None:
    # (r LEFT JOIN s)@I0 ⋈ Δt on s.k: a filter below an outer join changes which rows it pads with NULLs, so the
    # rewrite does not push one into the null-supplying side (nor, by s.k, into r)
    leaves = _pruned_leaves("SELECT r.v, t.x FROM r LEFT JOIN s ON r.k = s.k JOIN t ON s.k = t.k")
    assert not any(table in ("r", "s") and source == "t" for table, _, _, source in leaves), leaves
    # on the preserved side the filter commutes: Δt ⋈ (r LEFT JOIN s)@I0 on r.k prunes r
    leaves = _pruned_leaves("SELECT r.v, t.x FROM r LEFT JOIN s ON r.k = s.k JOIN t ON r.k = t.k")
    assert ("r", "start", "k", "t") in leaves


def test_pruned_snapshots_compile_to_a_literal_filter_and_a_separate_read() -> None:
    d = differentiate(build_plan("SELECT r.v, s.w FROM r JOIN s ON r.k = s.k", SCHEMA))
    filters = {s.probe: KeyFilter("", s.probe.type, ranges=(("1", "4"), ("9", "9"))) for s in key_probes(d)}
    text = changes_query(d, Names(), filters).sql("spark")
    assert "snap_s_end_pruned" in text and "snap_r_start_pruned" in text
    assert "BETWEEN 1 AND 4" in text and "= 9" in text  # integers as numbers, not casts of strings
    empty = {s.probe: KeyFilter("", s.probe.type, values=()) for s in key_probes(d)}
    assert "WHERE FALSE" in changes_query(d, Names(), empty).sql("spark")


def test_where_keys_of_comma_joins_become_join_conditions_and_filters_move_to_their_sides() -> None:
    plan = build_plan("SELECT r.v, t.x FROM r, s, t WHERE r.k = s.k AND s.k = t.k AND r.v > 1 AND s.w + t.x > 0 "
                      "AND 1 = 1", SCHEMA)
    text = plan.to_text()
    assert "Join cross" not in text and "Join inner ON `s.k` = `t.k` AND `s.w` + `t.x` > 0" in text, text
    assert "Join inner ON `r.k` = `s.k`" in text and "  Filter `r.v` > 1" in text
    assert _sites("SELECT r.v, s.w FROM r, s WHERE r.k = s.k") == _sites("SELECT r.v, s.w FROM r JOIN s ON r.k = s.k")
    # an outer join keeps its WHERE above it (a filter there removes the NULL-padded rows it made)
    assert build_plan("SELECT r.v FROM r LEFT JOIN s ON r.k = s.k WHERE s.w IS NULL", SCHEMA).to_text().count(
        "Filter") == 1


def test_a_foreign_key_makes_the_keys_its_referenced_table_lost_absent_at_the_end() -> None:
    from differentiation.constraints import Constraints, ForeignKey

    sql = "SELECT r.v FROM r WHERE EXISTS (SELECT 1 FROM s WHERE s.k = r.k)"
    fk = Constraints(unique=(("r", ("k",)),), foreign=(ForeignKey("s", ("k",), "r", ("k",)),))
    d = differentiate(build_plan(sql, SCHEMA), constraints=fk)
    [site] = [s for s in key_probes(d) if s.table == "s"]
    assert (site.when, site.probe.absent, site.probe.at) == ("end", (("r", "k"),), "end")
    unkeyed = differentiate(build_plan(sql, SCHEMA))
    assert {s.probe.absent for s in key_probes(unkeyed)} == {()}
    # a filter read through the keyed probe lands on s's snapshot as before
    plan = prune_keys(pushed(d.plan), {site.probe: KeyFilter("", "INT", values=())}, absence(d, pushed(d.plan)))
    assert {(n.scan.table, n.when) for n in plan.walk() if isinstance(n, Snapshot) and n.keys} == {("s", "end")}


def test_keys_stay_provably_absent_when_the_referenced_tables_own_terms_were_dropped() -> None:
    """Deletes from both sides (TPC-H RF2): the keys drop Δr ⋈ s|I1 (no line left refers to a gone r), so the plan
    reads no change of r; its change still proves those keys gone from s at I1, where the EXISTS reads s."""
    from differentiation import ChangeStats
    from differentiation.constraints import Constraints, ForeignKey

    sql = "SELECT r.v, s.w FROM r JOIN s ON r.k = s.k WHERE EXISTS (SELECT 1 FROM s s2 WHERE s2.k = r.k)"
    fk = Constraints(unique=(("r", ("k",)),), foreign=(ForeignKey("s", ("k",), "r", ("k",)),))
    deletes = ChangeStats(False, True)
    d = differentiate(build_plan(sql, SCHEMA), stats={"r": deletes, "s": deletes}, constraints=fk)
    assert {n.scan.table for n in pushed(d.plan).walk() if isinstance(n, ChangeRead)} == {"s"}
    ended = [s for s in key_probes(d) if (s.table, s.when) == ("s", "end")]
    assert ended and all(s.probe.absent == (("r", "k"),) for s in ended), ended
    # an empty filter read through the probe (every key gone from r) lands on s's snapshot at I1
    probed = changes_query(d, Names(), {s.probe: KeyFilter("", "INT", values=()) for s in ended}).sql("spark")
    assert "snap_s_end_pruned" in probed and "snap_s_end`" not in probed, probed


def test_keys_pass_through_the_rows_a_semi_join_re_evaluates() -> None:
    """Rows of a semi join's change that its right side's change re-evaluates are L|I0 restricted to ΔR's keys:
    their key column holds only keys ΔR's reads hold, so a join above reads its state side by them too."""
    exists = ("SELECT x.v, s.w FROM (SELECT r.k, r.v FROM r WHERE EXISTS (SELECT 1 FROM t WHERE t.k = r.k)) x "
              "JOIN s ON x.k = s.k")
    sites = _sites(exists)
    assert any(table == "s" and ("t", "k") in reads for reads, table, _ in sites), sites
    # NOT EXISTS over an EXISTS (TPC-H Q21's shape): the anti join's right side is read by the keys of the
    # changes under its left side, the terms that re-evaluate r's rows included
    both = ("SELECT r.v FROM r WHERE EXISTS (SELECT 1 FROM s WHERE s.k = r.k) "
            "AND NOT EXISTS (SELECT 1 FROM t WHERE t.k = r.k)")
    assert any(table == "t" and ("s", "k") in reads for reads, table, _ in _sites(both)), _sites(both)


def test_keys_do_not_pass_through_the_padded_side_of_an_outer_join() -> None:
    # (Δr ⟕ s) pads s.k with NULLs where r has no match: its values are not the change reads' values
    sites = _sites("SELECT x.v, t.x FROM (SELECT r.v, s.k FROM r LEFT JOIN s ON r.k = s.k) x JOIN t ON x.k = t.k")
    assert not any(table == "t" and ("r", "k") in reads for reads, table, _ in sites), sites


def _key_sets(plan: object) -> list[KeySet]:
    from differentiation.plan import each_once
    return [n for n in each_once(plan) if isinstance(n, KeySet)]  # type: ignore[arg-type]


def test_key_sets_computed_from_snapshots_become_the_change_reads_keys() -> None:
    """The groups an aggregate over an outer join re-evaluates are keyed by a set computed from the join's change,
    itself joined with snapshots (TPC-H Q13's shape); the keys of the change reads it comes from serve instead
    (a superset), read from the changes alone. Key sets of change reads alone keep their filters."""
    from differentiation.prune import widen_key_sets

    sql = ("SELECT c, count(*) AS n FROM (SELECT r.k, count(s.w) AS c FROM r LEFT JOIN s ON r.k = s.k GROUP BY r.k) "
           "GROUP BY c")
    plan = pushed(differentiate(build_plan(sql, SCHEMA)).plan)
    widened = widen_key_sets(plan)
    def from_snapshots(p: object) -> list[str]:
        return [k.exprs[0][0].sql for k in _key_sets(p)
                if any(isinstance(n, Snapshot) for i in k.inputs for n in i.walk())]

    # the groups of r.k (keys the change reads hold) now come from the reads; the groups of the count c, a
    # computed value no change read holds, still from the inner aggregate's change
    assert sorted(from_snapshots(plan)) == ["`_0.c`", "`r.k`"]
    assert from_snapshots(widened) == ["`_0.c`"]
    assert all(all(isinstance(i, ChangeRead) for i in k.inputs) for k in _key_sets(widened)
               if k.exprs[0][0].sql != "`_0.c`")
    filtered = pushed(differentiate(build_plan("SELECT k, count(*) AS n FROM r WHERE v > 3 GROUP BY k",
                                               SCHEMA)).plan)
    assert widen_key_sets(filtered) == filtered


def test_widened_key_sets_keep_the_filter_their_change_read_passes() -> None:
    """A change read that every path to the key set reads through one filter gives only keys that passed it
    (TPC-H Q20's shape: lineitem's change in 1994 only): the widened set keeps the filter, a superset still."""
    from differentiation.plan import Filter
    from differentiation.prune import widen_key_sets

    sql = ("SELECT r.k FROM r WHERE r.k IN (SELECT s.k FROM s WHERE s.w > "
           "(SELECT sum(t.x) FROM t WHERE t.k = s.k AND t.x < 5))")
    plan = pushed(differentiate(build_plan(sql, SCHEMA)).plan)
    widened = [k for k in _key_sets(widen_key_sets(plan)) if k not in _key_sets(plan)]
    assert widened
    for keys in widened:
        inputs = {(i.child if isinstance(i, Filter) else i).scan.table: i for i in keys.inputs}  # type: ignore
        assert isinstance(inputs["t"], Filter) and isinstance(inputs["t"].child, ChangeRead), inputs
        assert "< 5" in inputs["t"].condition.expr.sql() and isinstance(inputs["s"], ChangeRead)


def test_restrictions_of_one_snapshot_by_filtered_change_keys_become_one_read() -> None:
    """TPC-H Q13's shape, one side only inserted: s at I1 is restricted by the keys of its change (the groups the
    aggregate re-evaluates) and by those of its change passing the join's residual condition (the counts of the
    semi-join verdicts); both become the unfiltered keys, a superset, so s is read once, computed once."""
    from differentiation import ChangeStats
    from differentiation.delta_nodes import Restrict
    from differentiation.prune import unify_key_sets, widen_key_sets

    sql = ("SELECT c, count(*) AS n FROM (SELECT r.k, count(s.w) AS c FROM r LEFT JOIN s ON r.k = s.k AND s.w > 3 "
           "GROUP BY r.k) GROUP BY c")
    d = differentiate(build_plan(sql, SCHEMA), stats={"r": ChangeStats(False, False), "s": ChangeStats(True, False)})
    plan = widen_key_sets(pushed(d.plan))

    def key_sets_of_s_at_end(p: object) -> set[KeySet]:
        return {n.keys for n in p.walk()  # type: ignore[attr-defined]
                if isinstance(n, Restrict) and isinstance(n.child, Snapshot) and n.child.scan.table == "s"
                and n.child.when == "end"}

    assert len(key_sets_of_s_at_end(plan)) == 2
    (unified,) = key_sets_of_s_at_end(unify_key_sets(plan))
    assert all(isinstance(i, ChangeRead) for i in unified.inputs)
    text = changes_query(d, Names()).sql(dialect="spark")
    assert text.count("`snap_s_end`") == 1 and "RAND()" in text


def test_a_change_read_that_is_also_an_input_of_its_own_keeps_no_filter() -> None:
    from sqlglot import exp

    from differentiation.plan import Filter, Scalar, Scan
    from differentiation.prune import _as_filtered
    from differentiation.sql import col

    read = ChangeRead(Scan("t", "t", (("k", "INT"), ("x", "INT"))))
    filtered = Filter(read, Scalar(exp.LT(this=col("t.x"), expression=exp.Literal.number(5))))
    assert _as_filtered(read, (filtered,)) == filtered
    assert _as_filtered(read, (filtered, read)) == read  # its keys reach the set unfiltered too
