"""Δ of GROUP BY and scalar aggregates by recomputing the affected groups (paper 3.2.1)."""

from __future__ import annotations

from differentiation.delta_nodes import At, Delta, KeySet, Restrict, Signed, Sum
from differentiation.plan import Aggregate, Node
from differentiation.rewrite import DeriveContext
from differentiation.rules.aggregate_algebraic import derive_aggregate_algebraic
from differentiation.vocabulary import DELETE, INSERT


def derive_aggregate(node: Delta, *, ctx: DeriveContext) -> Node:
    """Δγk(Q) = π−(γk(Q|I0 ⋉k ΔQ)) + π+(γk(Q|I1 ⋉k ΔQ)).

    Valid for every aggregate (MIN/MAX/COUNT DISTINCT included). Unchanged groups produce equal
    DELETE/INSERT rows with equal ids that consolidation cancels; a group whose rows all left has
    no π+ row, so it disappears. A scalar aggregate (no keys) restricts on "ΔQ is not empty" and
    always has one row per side, so its DELETE/INSERT pair shares the constant id.
    Example: Δγ[oid](items) -> π−(γ[oid](items@I0 ⋉ Δitems.oid)) + π+(γ[oid](items@I1 ⋉ Δitems.oid)).
    """
    agg = node.child
    assert isinstance(agg, Aggregate)
    key_exprs = tuple(k for _, k in agg.keys)
    keys = KeySet((Delta(agg.child),), (key_exprs,))

    def side(when: str, action: str) -> Node:
        return Signed(agg.copy(child=Restrict(At(agg.child, when), (key_exprs,), keys)), action)

    return Sum((side("start", DELETE), side("end", INSERT)))


def derive_aggregate_any(node: Delta, *, ctx: DeriveContext) -> Node:
    """The aggregate rule: algebraic from a stored state when possible, else affected keys."""
    return derive_aggregate_algebraic(node, ctx=ctx) or derive_aggregate(node, ctx=ctx)
