"""Δ of UNION ALL."""

from __future__ import annotations

from differentiation.delta_nodes import Delta
from differentiation.plan import Node, UnionAll
from differentiation.rewrite import DeriveContext


def derive_union_all(node: Delta, *, ctx: DeriveContext) -> Node:
    """Δ(Q + R) = ΔQ + ΔR, each branch's row ids tagged by its branch index as in the state.

    Unchanged branches become ∅ (and keep their position, hence their tag).
    Example: Δ(σa T + σb T) -> UnionAll(Δσa T, Δσb T) with ids 'b0:..' and 'b1:..'.
    """
    union = node.child
    assert isinstance(union, UnionAll)
    return union.copy(inputs=tuple(Delta(i) for i in union.inputs))
