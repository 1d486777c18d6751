"""The compiler: each plan node compiled once, shared subplans emitted once, SQL small and flat (no Spark needed)."""

from __future__ import annotations

import re

import pytest
import sqlglot
from sqlglot import exp

from differentiation import ChangeStats, build_plan, changes_query, differentiate, snapshot_query
from differentiation.compile import push_at, shared_nodes
from differentiation.delta_nodes import At, Snapshot
from differentiation.plan import Scan
from differentiation.rules.aggregate_algebraic import with_state_columns

SCHEMA = {"r": {"k": "INT", "v": "INT"}, "s": {"k": "INT", "w": "DECIMAL(10,2)"}, "t": {"k": "INT", "x": "INT"}}


class Names:
    """Sources that name relations after what they hold, so tests can count reads."""

    def snapshot(self, table: str, when: str, keys: tuple = ()) -> str:
        return f"`snap_{table}_{when}`"

    def changes(self, table: str) -> str:
        return f"`changes_{table}`"

    def ends(self, table: str, keys: tuple = ()) -> str:
        return f"`ends_{table}`"

    def state(self) -> str:
        return "`stored_state`"


def _reads(sql: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for name in re.findall(r"`((?:snap|changes|ends)_[a-z]+(?:_start|_end)?|stored_state)`", sql):
        found[name] = found.get(name, 0) + 1
    return found


QUERIES = [
    "SELECT r.k, count(*) AS n, max(s.w) AS m FROM r JOIN s ON r.k = s.k GROUP BY r.k",
    "SELECT r.k, s.w, t.x FROM r JOIN s ON r.k = s.k LEFT JOIN t ON s.k = t.k",
    "SELECT DISTINCT r.k FROM r FULL JOIN s ON r.k = s.k",
    "SELECT k FROM r UNION ALL SELECT k FROM s UNION ALL SELECT k FROM t",
]


@pytest.mark.parametrize("sql", QUERIES)
def test_every_relation_is_read_once_and_every_node_compiled_once(sql: str) -> None:
    d = differentiate(build_plan(sql, SCHEMA))
    text = changes_query(d, Names()).sql("spark")
    assert all(n == 1 for n in _reads(text).values()), _reads(text)
    tree = sqlglot.parse_one(text, read="spark")
    bodies = [cte.this.sql("spark") for cte in tree.find_all(exp.CTE)]
    assert len(bodies) == len(set(bodies)), "a subplan was emitted twice"
    # a CTE is referenced more than once, or it is the plan's result read by the final SELECT
    for name in (cte.alias for cte in tree.find_all(exp.CTE)):
        assert text.count(f"`{name}` AS") + text.count(f"FROM `{name}`") >= 1


def test_a_three_way_join_derivative_shares_its_snapshots() -> None:
    """Δ(r ⋈ s ⋈ t) has a term per changed table; the snapshots they join with are each compiled once."""
    plan = build_plan("SELECT r.v, s.w, t.x FROM r JOIN s ON r.k = s.k JOIN t ON s.k = t.k", SCHEMA)
    text = changes_query(differentiate(plan), Names()).sql("spark")
    reads = _reads(text)
    assert set(reads) == {"snap_r_start", "snap_s_start", "snap_s_end", "snap_t_end", "changes_r", "changes_s",
                          "changes_t"}, reads
    # the old renderer wrote every input out again at each use; the compiled text stays well under that
    assert len(text) < 9000, len(text)


def test_nodes_read_once_are_inline_and_shared_ones_are_ctes() -> None:
    plan = build_plan("SELECT r.v, s.w FROM r JOIN s ON r.k = s.k", SCHEMA)
    d = differentiate(plan)
    shared = shared_nodes(push_at(d.plan))
    assert shared == set(), "each snapshot and change read of a two-way join is read by one term"
    text = changes_query(d, Names()).sql("spark")
    assert text.count(" AS (") == 1  # one CTE: the plan's result, which the final SELECT reads
    d3 = differentiate(build_plan("SELECT r.k, max(s.w) AS m FROM r JOIN s ON r.k = s.k GROUP BY r.k", SCHEMA))
    assert any(isinstance(n, Snapshot) for n in shared_nodes(push_at(d3.plan)))  # r@I0 in a term and in Q|I0


def test_push_at_turns_scans_into_snapshots_and_removes_at() -> None:
    plan = build_plan("SELECT r.k FROM r JOIN s ON r.k = s.k", SCHEMA)
    pushed = push_at(At(plan, "start"))
    assert not any(isinstance(n, (At, Scan)) for n in pushed.walk())
    assert {n.when for n in pushed.walk() if isinstance(n, Snapshot)} == {"start"}
    with pytest.raises(ValueError, match="outside a snapshot"):
        push_at(plan)


def test_stored_state_is_read_through_the_sources_and_the_plan_holds_no_sql() -> None:
    plan = with_state_columns(build_plan("SELECT r.k, sum(s.w) AS t, avg(s.w) AS a FROM r JOIN s ON r.k = s.k "
                                         "GROUP BY r.k", SCHEMA))
    d = differentiate(plan, stats={"r": ChangeStats(True, False), "s": ChangeStats(False, False)}, state=True)
    assert "Stored state" in d.to_text()
    text = changes_query(d, Names()).sql("spark")
    assert _reads(text) == {"stored_state": 1, "changes_r": 1, "snap_s_end": 1}

    class NoState:
        snapshot, changes = Names.snapshot, Names.changes

    with pytest.raises(ValueError, match="stored aggregate state"):
        changes_query(d, NoState())  # type: ignore[arg-type]


def test_the_summed_change_of_a_stored_aggregate_is_computed_once() -> None:
    # ΣΔ per group is read by the new rows (joined with the stored state) and by the stored rows it touches; a
    # plain CTE Spark would inline into both, joining and aggregating the change twice (TPC-H Q3 scanned orders
    # twice). It is computed once: a non-deterministic condition, one CTE read twice.
    plan = with_state_columns(build_plan("SELECT r.k, sum(s.w) AS t FROM r JOIN s ON r.k = s.k GROUP BY r.k", SCHEMA))
    d = differentiate(plan, stats={"r": ChangeStats(True, True), "s": ChangeStats(False, False)}, state=True)
    query = changes_query(d, Names())
    ctes = {c.alias: c.this for c in query.find(exp.With).expressions}
    summed = [name for name, body in ctes.items() if "__dcnt" in body.sql(dialect="spark")
              and body.find(exp.Rand) is not None]
    assert len(summed) == 1, {n: b.sql(dialect="spark") for n, b in ctes.items()}
    assert len(re.findall(rf"`{summed[0]}`", query.sql(dialect="spark"))) == 3  # defined once, read twice

def test_a_small_changes_sums_are_broadcast_into_a_large_stored_state_and_not_into_a_few_groups() -> None:
    # TPC-H Q10's 381,814 stored customers are probed with the change's sums broadcast (state read once, never
    # shuffled); a state of 50 groups is shuffled with them instead, so that a tiny REWRITE stays one Spark job
    plan = with_state_columns(build_plan("SELECT r.k, sum(s.w) AS t FROM r JOIN s ON r.k = s.k GROUP BY r.k", SCHEMA))
    d = differentiate(plan, stats={"r": ChangeStats(True, True), "s": ChangeStats(False, False)}, state=True)

    def semi_join_of_state(text: str) -> str:
        [found] = re.findall(r"SELECT (?:/\*\+ [^*]* \*/ )?\* FROM `__p\d+` AS `o` LEFT SEMI JOIN `__p\d+` AS `d`", text)
        return found

    large = changes_query(d, Names(), broadcast_keys=True).sql("spark")
    small = changes_query(d, Names(), broadcast_keys=True, broadcast_state=False).sql("spark")
    assert semi_join_of_state(large).startswith("SELECT /*+ BROADCAST(`d`) */ *")
    assert semi_join_of_state(small).startswith("SELECT * FROM") and "BROADCAST(`d`)" not in small
    assert "BROADCAST(`k`)" in small  # the key sets restricting s are still broadcast
    # a large change broadcasts nothing, whatever the state
    assert "BROADCAST" not in changes_query(d, Names()).sql("spark")
    for text in (large, small):
        assert _reads(text)["stored_state"] == 1 and sqlglot.parse_one(text, read="spark") is not None



def test_touched_groups_at_the_end_are_read_from_the_whole_aggregate_the_plan_computes_there() -> None:
    # Q15's shape: the MAX over the sums per key needs every group's sum at I1, and the sums' change recomputes the
    # touched groups at I1 too (r|I1 restricted to the changed keys, a scan that skips nothing when keys scatter).
    # Both read one aggregate of r|I1 with the helper columns (count, sum, non-null count): r is read once at I1.
    sql = ("WITH g AS (SELECT k, sum(v) AS total FROM r GROUP BY k) SELECT s.k, g.total FROM s JOIN g ON s.k = g.k "
           "WHERE g.total = (SELECT max(total) FROM g)")
    d = differentiate(build_plan(sql, SCHEMA), stats={"r": ChangeStats(True, True), "s": ChangeStats(False, False)})
    assert "Δγ at I0 from I1" in d.to_text()
    query = changes_query(d, Names())
    text = query.sql(dialect="spark")
    helpers = [c.alias for c in query.find(exp.With).expressions
               if "COUNT(*) AS `__cnt`" in c.this.sql(dialect="spark") and c.this.find(exp.Rand) is not None]
    assert len(helpers) == 1, text
    # defined once, read by the sums at I1 and at I0 (it less the change) and by the change's touched groups
    assert len(re.findall(rf"`{helpers[0]}`", text)) == 4
    # r grouped twice, at I1 (the helper columns) and in the change; never read at I0. Before: four times, at I0,
    # at I1 and restricted at I1 for the MAX and the change
    assert text.count("GROUP BY `r.k`") == 2, text
    assert "snap_r_start" not in _reads(text) and _reads(text)["snap_r_end"] == 1
    # a plan with no whole aggregate at I1 keeps the restricted read
    alone = changes_query(differentiate(build_plan("SELECT k, sum(v) AS total FROM r GROUP BY k", SCHEMA),
                                        stats={"r": ChangeStats(True, True)}), Names()).sql(dialect="spark")
    assert "COUNT(*) AS `__cnt`" in alone and "LEFT SEMI JOIN" in alone


def test_snapshot_query_is_valid_spark_sql_with_quoted_names() -> None:
    plan = build_plan("SELECT r.k AS `odd name`, count(*) AS `count(1)` FROM r GROUP BY r.k", SCHEMA)
    text = snapshot_query(plan, Names(), "end").sql("spark")
    assert "`odd name`" in text and "`count(1)`" in text
    assert sqlglot.parse_one(text, read="spark").find(exp.With) is not None


def test_key_sets_are_broadcast_only_when_the_caller_says_the_change_is_small() -> None:
    d = differentiate(build_plan("SELECT r.k, max(s.w) AS m FROM r JOIN s ON r.k = s.k GROUP BY r.k", SCHEMA))
    plain = changes_query(d, Names()).sql(dialect="spark")
    hinted = changes_query(d, Names(), broadcast_keys=True).sql(dialect="spark")
    restrictions = hinted.count("LEFT SEMI JOIN")
    assert restrictions >= 4  # the groups restricted on both sides of the join, at both ends
    assert "BROADCAST" not in plain
    assert hinted.count("/*+ BROADCAST(`k`) */") == restrictions
    assert sqlglot.parse_one(hinted, read="spark") is not None


def test_a_table_restricted_at_both_ends_is_read_once_for_both() -> None:
    # Δγ[r.k](r ⋈ s) recomputes the touched groups at I0 and at I1: r and s are each read once, in one CTE that a
    # non-deterministic condition keeps Spark from inlining into both ends (where it would be read twice again)
    d = differentiate(build_plan("SELECT r.k, max(s.w) AS m FROM r JOIN s ON r.k = s.k GROUP BY r.k", SCHEMA))
    apart = _reads(changes_query(d, Names(), broadcast_keys=True).sql(dialect="spark"))
    shared = changes_query(d, Names(), broadcast_keys=True, share_ends=True)
    reads = _reads(shared.sql(dialect="spark"))
    assert reads.get("ends_r") == 1 and reads.get("ends_s") == 1
    # what is left are the reads the affected keys come from (Δr ⋈ s|I1, r|I0 ⋈ Δs)
    assert sum(n for name, n in reads.items() if name.startswith("snap_")) < \
        sum(n for name, n in apart.items() if name.startswith("snap_"))
    ctes = {c.alias: c.this for c in shared.find(exp.With).expressions}
    once = [name for name, body in ctes.items() if body.find(exp.Rand) is not None]
    assert len(once) == 2  # one per table, each read by its two ends
    text = shared.sql(dialect="spark")
    for name in once:
        assert len(re.findall(rf"`{name}`", text)) == 3  # defined once, read at I0 and at I1


def test_an_aggregate_of_snapshots_read_twice_is_computed_once() -> None:
    # TPC-H Q15's shape: the sums per key are joined with s and their MAX is taken. The derivative reads the sums
    # at each end twice (the join's term and the MAX's π-/π+); each is one CTE that Spark computes once (a
    # non-deterministic condition), and the MAX's all-or-nothing restriction stays above it rather than making the
    # MAX's copy a different subtree.
    # (A DOUBLE sum: exact sums are read from one aggregate at I1 instead, see the test below.)
    sql = ("WITH g AS (SELECT k, sum(CAST(v AS DOUBLE)) AS total FROM r GROUP BY k) SELECT s.k, g.total FROM s "
           "JOIN g ON s.k = g.k WHERE g.total = (SELECT max(total) FROM g)")
    d = differentiate(build_plan(sql, SCHEMA), stats={"r": ChangeStats(True, True), "s": ChangeStats(False, False)})
    query = changes_query(d, Names())
    ctes = {c.alias: c.this for c in query.find(exp.With).expressions}
    once = [name for name, body in ctes.items()
            if body.find(exp.Rand) is not None and body.find(exp.Group) is not None]
    grouped = {name: body.sql(dialect="spark") for name, body in ctes.items() if "SUM(" in body.sql(dialect="spark")}
    assert len(once) == 2, grouped  # the sums at I0 and at I1
    text = query.sql(dialect="spark")
    for name in once:
        assert len(re.findall(rf"`{name}`", text)) >= 3, name  # defined once, read by the join and the MAX
    reads = _reads(text)
    assert reads["snap_r_start"] == 1, reads  # the sums at I0 are computed from one read of r at I0
