"""Δ of LEFT / RIGHT / FULL outer joins by recomputing the join keys the interval touched."""

from __future__ import annotations

from differentiation.delta_nodes import At, Delta, KeySet, Restrict, Signed, Sum
from differentiation.errors import UnsupportedQuery
from differentiation.plan import Join, Node
from differentiation.rewrite import DeriveContext
from differentiation.support import equi_keys
from differentiation.vocabulary import DELETE, INSERT


def derive_outer_join(node: Delta, *, ctx: DeriveContext) -> Node:
    """Δ(Q ⟗k R) = π−((Q ⟗k R)|I0 ⋉ K) + π+((Q ⟗k R)|I1 ⋉ K), K = πk(ΔQ) ∪ πk(ΔR).

    Output rows (matched or NULL-padded) of a key outside K are the same at I0 and I1, because every
    row that changed put its old and new key into K. Restriction is NULL-safe (<=>) so rows with NULL
    keys, which never match but do produce padded rows, are recomputed when they change.
    Example: Δ(p ⟕[p.id=i.oid] i) -> π−(...@I0 ⋉ K) + π+(...@I1 ⋉ K), K = Δp.id ∪ Δi.oid.
    """
    join = node.child
    assert isinstance(join, Join)
    left_keys, right_keys = equi_keys(join)
    if not left_keys:
        raise UnsupportedQuery(f"{join.kind.upper()} OUTER JOIN without an equality condition", "outer join")
    inputs = []
    exprs = []
    if ctx.has_changes(join.left):
        inputs.append(Delta(join.left))
        exprs.append(left_keys)
    if ctx.has_changes(join.right):
        inputs.append(Delta(join.right))
        exprs.append(right_keys)
    keys = KeySet(tuple(inputs), tuple(exprs))
    alternatives = (left_keys, right_keys)
    before = Signed(Restrict(At(join, "start"), alternatives, keys), DELETE)
    after = Signed(Restrict(At(join, "end"), alternatives, keys), INSERT)
    return Sum((before, after))
