"""An aggregate kept from its stored state, as its new groups: the state merged with the change's sums in one join.

A caller that stores an algebraic aggregate's groups (`rules.aggregate_algebraic`) and replaces them whole (dtables'
REWRITE of a small table) needs the groups after the change, not the change set. Built from the change set (DELETE
each touched stored row, INSERT it plus ΣΔ, consolidate, then join that with the stored rows) the state is read
three times and the write's plan carries a union, a window per column and three joins: 9 stages in the one Spark
job of a one-row change of a 50-group table. Merged directly, the state is read once: every stored group FULL OUTER
joined with ΣΔ per key, the sums added, the outputs computed back from them.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from differentiation.compile import AlgebraicCompiler, _relation, keys_struct, plan_compiler
from differentiation.delta_nodes import Consolidate
from differentiation.plan import Node, Project
from differentiation.rules.aggregate_algebraic import AlgebraicAggregateDelta
from differentiation.sources import StateSources
from differentiation.sql import alias, call, col, ident, number
from differentiation.vocabulary import INSERT, ROW_ID

TOUCHED = "__dt_touched"  # ΣΔ holds the group: its stored row, if any, may change
KEPT = "__dt_kept"  # the group has rows after the change
KEYS = "__dt_keys"  # ΣΔ's keys as one struct (`keys_struct`)


def merged_aggregate(plan: Node) -> AlgebraicAggregateDelta | None:
    """The grouped algebraic aggregate delta whose merged state gives `plan`'s new rows: `plan` (compiled form) is
    a projection of it, consolidated or not; None for any other plan, and for a scalar aggregate (one row, always
    touched: nothing to merge by key)."""
    top = plan.child if isinstance(plan, Consolidate) else plan
    if isinstance(top, Project) and isinstance(top.child, AlgebraicAggregateDelta) and top.child.agg.keys:
        return top.child
    return None


class MergeCompiler(AlgebraicCompiler):
    """The stored groups FULL OUTER joined with ΣΔ; the helper columns of a group only the state or only ΣΔ holds
    are its side's (a COALESCE with 0), so an untouched group keeps its values exactly."""

    def merged(self, state: str, carry: Sequence[tuple[str, str]]) -> exp.Select:
        # joined on the keys as one struct, which ΣΔ is grouped by: its aggregate's shuffle serves the join too
        summed = self._summed_change(packed=KEYS).select(alias(exp.true(), TOUCHED), copy=False)
        keys = [alias(call("coalesce", col(f"__key{j}", "o"), exp.Dot(this=col(KEYS, "d"), expression=ident(f"k{j}"))),
                      f"__key{j}") for j in range(len(self.keys))]

        helpers = [alias(self.plus_change(name, "o", "d"), name) for name, _ in self.helpers()]
        flags = [alias(call("coalesce", col(TOUCHED, "d"), exp.false()), TOUCHED)]
        carried = [alias(col(c, "o"), a) for c, a in carry]
        return (exp.select(*keys, *helpers, *flags, *carried).from_(_relation(state).as_("o", quoted=True))
                .join(summed.subquery(ident("d"), copy=False), join_type="FULL OUTER", on=exp.EQ(
                    this=keys_struct([col(f"__key{j}", "o") for j in range(len(self.keys))]),
                    expression=col(KEYS, "d")), copy=False))


def compile_merge(plan: Node, sources: StateSources, carry: Sequence[tuple[str, str]], *,
                  broadcast_keys: bool = False, share_aliases: bool = False) -> exp.Select:
    """`plan`'s rows after the change (`merged_aggregate` must hold): every group of the stored state or of ΣΔ
    with the plan's columns computed from the merged sums, `__row_id`, `__dt_touched`, `__dt_kept`, and each
    state column `c` of `carry`'s pairs `(c, name)` as it is stored, under `name` (NULL for a new group).
    `plan` is pushed and pruned as `output.changes_query` prepares it; options as `compile_plan`'s."""
    node = merged_aggregate(plan)
    assert node is not None, "not a projection of a grouped algebraic aggregate delta"
    top = plan.child if isinstance(plan, Consolidate) else plan
    assert isinstance(top, Project)
    compiler = plan_compiler(plan, sources, broadcast_keys=broadcast_keys, broadcast_state=False,
                             share_aliases=share_aliases)
    groups = MergeCompiler(compiler, node)
    merged = groups.merged(sources.state(), carry)
    carried = [a for _, a in carry]
    kept = alias(exp.GT(this=col("__cnt", "m"), expression=number(0)), KEPT)
    outputs = exp.select(*groups.outputs("m", INSERT)[:-1], kept, *(col(c, "m") for c in [TOUCHED, *carried])).from_(
        merged.subquery(ident("m"), copy=False))
    items = [alias(e.expr.copy(), n) for n, e in top.outputs]
    passed = [col(c, "a") for c in [ROW_ID, TOUCHED, KEPT, *carried]]
    return compiler.query(exp.select(*items, *passed).from_(outputs.subquery(ident("a"), copy=False)))

__all__ = ["KEPT", "TOUCHED", "compile_merge", "merged_aggregate"]
