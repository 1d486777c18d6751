"""Δ of DISTINCT (and so of UNION = DISTINCT(UNION ALL))."""

from __future__ import annotations

from differentiation.delta_nodes import At, Delta, KeySet, Restrict, Signed, Sum
from differentiation.plan import Distinct, Node, Scalar
from differentiation.rewrite import DeriveContext
from differentiation.vocabulary import DELETE, INSERT


def derive_distinct(node: Delta, *, ctx: DeriveContext) -> Node:
    """Δδ(Q) = π−(δ(Q|I0 ⋉ ΔQ)) + π+(δ(Q|I1 ⋉ ΔQ)), ⋉ NULL-safe on all columns.

    A value disappears only when its last copy does: it is in δ(Q|I1 ⋉ ΔQ) while any copy remains,
    and the equal DELETE/INSERT (same value-hash id) cancel in consolidation.
    Example: Δδ(π[a] T) -> π−(δ(π[a]T@I0 ⋉ Δ)) + π+(δ(π[a]T@I1 ⋉ Δ)).
    """
    distinct = node.child
    assert isinstance(distinct, Distinct)
    cols = tuple(Scalar.column(c) for c in distinct.child.columns())
    keys = KeySet((Delta(distinct.child),), (cols,))

    def side(when: str, action: str) -> Node:
        return Signed(distinct.copy(child=Restrict(At(distinct.child, when), (cols,), keys)), action)

    return Sum((side("start", DELETE), side("end", INSERT)))
