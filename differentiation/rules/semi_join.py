"""Δ of semi and anti joins (EXISTS / IN and NOT EXISTS / NOT IN): changes on the left pass through the filter
against the new right side; changes on the right re-evaluate only the left rows they can reach."""

from __future__ import annotations

from differentiation.delta_nodes import At, Delta, KeySet, Restrict, Signed, Sum
from differentiation.plan import Join, Node
from differentiation.rewrite import DeriveContext
from differentiation.support import equi_keys
from differentiation.vocabulary import DELETE, INSERT


def derive_semi_join(node: Delta, *, ctx: DeriveContext) -> Node:
    """Δ(L ⋉θ R) = ΔL ⋉θ R|I1 + π−(L|I0 ⋉k K ⋉θ R|I0) + π+(L|I0 ⋉k K ⋉θ R|I1), K = πk(ΔR); the same with ▷.

    L1 ⋉ R1 − L0 ⋉ R0 = ΔL ⋉ R1 + (L0 ⋉ R1 − L0 ⋉ R0), and a row of L0 changes its verdict only when it meets
    θ with a changed row of R, inserted or deleted. K holds the keys of θ's equalities over ΔR (no equality: one
    empty tuple, so every row of L0 is re-evaluated when R changed at all), a superset of those rows; the rows of
    it whose verdict did not change cancel in consolidation (same row id, same values). Old rows are checked
    against the old right side, new rows against the new one, as design.md's lessons ask. R is restricted to K
    as well: no other row of R can meet a row of L0 ⋉k K.
    Example: Δ(orders ⋉[o.k = l.k] lineitem) -> Δorders ⋉ lineitem@I1 + π−(orders@I0 ⋉ K ⋉ lineitem@I0 ⋉ K)
    + π+(orders@I0 ⋉ K ⋉ lineitem@I1 ⋉ K), K = Δlineitem.k.
    """
    join = node.child
    assert isinstance(join, Join)
    terms: list[Node] = []
    if ctx.has_changes(join.left):
        terms.append(join.copy(left=Delta(join.left), right=At(join.right, "end")))
    if ctx.has_changes(join.right):
        left_keys, right_keys = equi_keys(join)
        keys = KeySet((Delta(join.right),), (right_keys,))
        old_left = Restrict(At(join.left, "start"), (left_keys,), keys)

        def verdict(when: str, action: str) -> Node:
            right = Restrict(At(join.right, when), (right_keys,), keys) if right_keys else At(join.right, when)
            return Signed(join.copy(left=old_left, right=right), action)

        terms += [verdict("start", DELETE), verdict("end", INSERT)]
    return terms[0] if len(terms) == 1 else Sum(tuple(terms))
