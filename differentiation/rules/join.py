"""Δ of inner and cross joins (outer joins are delegated to `outer_join`, semi and anti joins to `semi_join`)."""

from __future__ import annotations

from differentiation.delta_nodes import At, Delta, Sum
from differentiation.plan import Join, Node
from differentiation.rewrite import DeriveContext
from differentiation.rules.outer_join import derive_outer_join
from differentiation.rules.semi_join import derive_semi_join


def derive_join(node: Delta, *, ctx: DeriveContext) -> Node:
    """Δ(Q⋈R) = Q|I0 ⋈ ΔR + ΔQ ⋈ R|I1 (one side pre-change, so ΔQ⋈ΔR is counted once).

    Example: Δ(people ⋈ items) -> people@I0 ⋈ Δitems + Δpeople ⋈ items@I1. A term whose Δ side has
    no changed base table is dropped. Row id = hash(left id, right id), the same in every term and in
    the snapshot, so consolidation can cancel pairs across terms.
    """
    join = node.child
    assert isinstance(join, Join)
    if join.kind in ("left", "right", "full"):
        return derive_outer_join(node, ctx=ctx)
    if join.kind in ("semi", "anti"):
        return derive_semi_join(node, ctx=ctx)
    terms: list[Node] = []
    if ctx.has_changes(join.right):
        terms.append(join.copy(left=At(join.left, "start"), right=Delta(join.right)))
    if ctx.has_changes(join.left):
        terms.append(join.copy(left=Delta(join.left), right=At(join.right, "end")))
    return terms[0] if len(terms) == 1 else Sum(tuple(terms))
