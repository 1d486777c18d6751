"""Δ of LEFT / RIGHT / FULL outer joins by recomputing the join keys the interval touched."""

from __future__ import annotations

from differentiation.delta_nodes import At, Delta, KeySet, Restrict, Signed, Sum
from differentiation.errors import UnsupportedQuery
from differentiation.plan import Join, Node
from differentiation.rewrite import DeriveContext
from differentiation.support import equi_keys
from differentiation.vocabulary import DELETE, INSERT


def derive_outer_join(node: Delta, *, ctx: DeriveContext) -> Node:
    """Δ(Q ⟗k R) = π−((Q|I0 ⋉k K) ⟗k (R|I0 ⋉k K)) + π+((Q|I1 ⋉k K) ⟗k (R|I1 ⋉k K)), K = πk(ΔQ) ∪ πk(ΔR).

    Output rows (matched or NULL-padded) of a key outside K are the same at I0 and I1, because every
    row that changed put its old and new key into K. Each side is restricted on its own key before the
    join: a row's partners all carry its key, so the restricted join holds exactly the rows of the whole
    join whose key (the preserved side's, for a padded row) is in K, and the restriction is an equi-join
    (one alternative per side) rather than an OR over both sides' keys, which Spark can only run as a
    nested loop. Restriction is NULL-safe (<=>) so rows with NULL keys, which never match but do produce
    padded rows, are recomputed when they change.
    Example: Δ(p ⟕[p.id=i.oid] i) -> π−(p@I0 ⋉ K ⟕ i@I0 ⋉ K) + π+(p@I1 ⋉ K ⟕ i@I1 ⋉ K), K = Δp.id ∪ Δi.oid.
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

    def side(when: str, action: str) -> Node:
        return Signed(join.copy(left=Restrict(At(join.left, when), (left_keys,), keys),
                                right=Restrict(At(join.right, when), (right_keys,), keys)), action)

    return Sum((side("start", DELETE), side("end", INSERT)))
