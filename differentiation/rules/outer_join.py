"""Δ of LEFT / RIGHT / FULL outer joins: linear in the changed side when only one side changed, else by recomputing
the join keys the interval touched."""

from __future__ import annotations

from sqlglot import exp

from differentiation.delta_nodes import At, Delta, KeySet, Restrict, Signed, Sum
from differentiation.errors import UnsupportedQuery
from differentiation.plan import Filter, Join, Node, Scalar
from differentiation.rewrite import DeriveContext
from differentiation.support import equi_keys
from differentiation.vocabulary import DELETE, INSERT


def _conjuncts(condition: Scalar | None) -> list[exp.Expr]:
    if condition is None:
        return []
    return list(condition.expr.flatten()) if isinstance(condition.expr, exp.And) else [condition.expr]


def _anti(preserved: Node, other: Node, condition: Scalar | None) -> Join:
    """preserved ▷θ other, θ's conjuncts over `other` alone moved into a filter on it (P ▷[k ∧ p] O = P ▷k σp O):
    what is left is often only key equalities, which the semi-join rule judges by counts."""
    own = set(other.columns())
    moved = [c for c in _conjuncts(condition) if c.find(exp.Column) and
             {col.name for col in c.find_all(exp.Column)} <= own]
    kept = [c for c in _conjuncts(condition) if all(c is not m for m in moved)]
    if moved:
        other = Filter(other, Scalar(exp.and_(*(c.copy() for c in moved))))
    return Join(preserved, other, "anti", Scalar(exp.and_(*(c.copy() for c in kept))) if kept else None)


def _one_side(join: Join, ctx: DeriveContext) -> Node:
    """Δ of an outer join whose other side did not change (left or right join only).

    The preserved side P changed: Δ(P ⟕θ N) = ΔP ⟕θ N (each P row pairs with the same N rows at both ends).
    The NULL-supplying side N changed: P ⟕θ N = (P ⋈θ N) + pad(P ▷θ N) as multisets, row ids included (a padded
    row's id is its P row's id with no N id either way), so Δ = Δ(P ⋈θ N) + pad(Δ(P ▷θ N)), P unchanged: the
    matched rows of ΔN, and the P rows whose last match went away (INSERT padded) or whose first match came (DELETE
    padded). With key equalities the anti join reads N at I1 only, by counts (`rules.semi_join`), where recomputing
    the touched keys read it at both ends. `pad` is an outer join with N's rows filtered away, which keeps N's
    column types; Spark drops the empty side.
    Example: Δ(c ⟕[c.k = o.k] o), o changed -> Δ(c ⋈ o) + (Δ(c ▷ o) ⟕ σfalse o@I1).
    """
    left = join.kind == "left"
    preserved, supplying = (join.left, join.right) if left else (join.right, join.left)
    if ctx.has_changes(preserved):
        return join.copy(**{"left" if left else "right": Delta(preserved),
                            "right" if left else "left": At(supplying, "end")})
    nothing = At(Filter(supplying, Scalar(exp.false())), "end")
    gone = Delta(_anti(preserved, supplying, join.condition))
    pad = join.copy(left=gone, right=nothing) if left else join.copy(left=nothing, right=gone)
    return Sum((Delta(join.copy(kind="inner")), pad))


def derive_outer_join(node: Delta, *, ctx: DeriveContext) -> Node:
    """Δ(Q ⟗k R) = π−((Q|I0 ⋉k K) ⟗k (R|I0 ⋉k K)) + π+((Q|I1 ⋉k K) ⟗k (R|I1 ⋉k K)), K = πk(ΔQ) ∪ πk(ΔR);
    a LEFT or RIGHT join with one side changed is linear in it instead (`_one_side`).

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
    if join.kind in ("left", "right") and ctx.has_changes(join.left) != ctx.has_changes(join.right):
        return _one_side(join, ctx)
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
