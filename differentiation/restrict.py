"""Key restrictions pushed to the leaves: `(Q ⋈k R) ⋉k K` becomes `(Q ⋉k K) ⋈k (R ⋉k K)`, and `γk(Q) ⋉k K`
becomes `γk(Q ⋉k K)` (a group is kept or dropped whole).

The rules restrict a state to the keys a change touched (`state ⋉k K`: the groups of an aggregate, the keys of an
outer join, the partitions of a window). Left on top of a join, the restriction runs after the whole join has been
computed at both ends of the interval; pushed to both sides, each side is cut down before the join, and the
restriction of a base table's snapshot is one that key pruning (`prune.py`) turns into literal predicates Delta's
data skipping uses.

A pure rewrite of a pushed plan (`compile.push_at`: snapshots are leaves). Why it changes no row: every row of a
join whose key (a column of the side the join preserves) is in K came from a row of that side with its key in K
and, when matched, from rows of the other side whose equal key is in K too; so keeping only those rows on both
sides keeps exactly the join's rows with their key in K, padded rows included (a row's partners all share its key,
so it is padded in the restricted join exactly when it was padded before). Row ids are built from the sides' ids
and do not change.
"""

from __future__ import annotations

from sqlglot import exp

from differentiation.constraints import passed_through
from differentiation.delta_nodes import Restrict
from differentiation.plan import Aggregate, Filter, Join, Node, Project, Scalar
from differentiation.rewrite import map_children
from differentiation.sql import col
from differentiation.support import equi_keys

# The join kinds whose rows keep a side unchanged, by the side a restriction's key may come from.
_PRESERVES = {"inner": ("left", "right"), "left": ("left",), "right": ("right",), "semi": ("left",),
              "anti": ("left",)}


def _column(key: Scalar) -> str | None:
    return key.expr.name if isinstance(key.expr, exp.Column) else None


def _partners(join: Join, keys: tuple[Scalar, ...], side: str) -> tuple[Scalar, ...] | None:
    """For key columns of `side`, the other side's expressions each is equal to in the join condition; None unless
    every key has one."""
    left, right = equi_keys(join)
    mine, theirs = (left, right) if side == "left" else (right, left)
    by_column = {_column(k): other for k, other in zip(mine, theirs) if _column(k) is not None}
    found = [by_column.get(_column(k)) for k in keys]
    return None if any(p is None for p in found) else tuple(p for p in found if p is not None)


def _into_join(node: Restrict, join: Join) -> Node:
    """The restriction on the side of `join` holding its key columns, and on the other side's equal keys."""
    keys = node.alternatives[0]
    names = {c for k in keys for c in k.columns()}
    for side in _PRESERVES.get(join.kind, ()):
        child = join.left if side == "left" else join.right
        if not names <= set(child.columns()):
            continue
        restricted = {side: _push(Restrict(child, (keys,), node.keys))}
        other = "right" if side == "left" else "left"
        partners = _partners(join, keys, side)
        if partners is not None:
            restricted[other] = _push(Restrict(getattr(join, other), (partners,), node.keys))
        return join.copy(**restricted)
    return node


def _push(node: Restrict) -> Node:
    """`node` moved down as far as it commutes (its child's subtree is already pushed)."""
    child = node.child
    if len(node.alternatives) != 1 or child.is_delta:
        return node
    keys = node.alternatives[0]
    if isinstance(child, Filter):
        return child.copy(child=_push(node.copy(child=child.child)))
    if isinstance(child, Project):
        sources = [passed_through(child, name) if name is not None else None for name in map(_column, keys)]
        if any(s is None for s in sources):
            return node
        mapped = tuple(Scalar(col(s)) for s in sources if s is not None)
        return child.copy(child=_push(Restrict(child.child, (mapped,), node.keys)))
    if isinstance(child, Join):
        return _into_join(node, child)
    if isinstance(child, Aggregate):  # keys that are group keys keep or drop whole groups: restrict the input
        if not keys:  # all or nothing: below the aggregate it filters no row, above it the aggregate is the
            return node  # same subtree as the query's own (Q15's MAX over SUMs), which Spark then computes once
        groups = dict(child.keys)
        inputs: list[str] = []
        for name in map(_column, keys):
            group = groups.get(name) if name is not None else None
            source = _column(group) if group is not None else None
            if source is None:
                return node
            inputs.append(source)
        return child.copy(child=_push(Restrict(child.child, (tuple(Scalar(col(c)) for c in inputs),), node.keys)))
    return node


def push_restrictions(plan: Node) -> Node:
    """`plan` with every single-key restriction moved below the filters, projections and joins it commutes with."""
    node = map_children(plan, push_restrictions)
    return _push(node) if isinstance(node, Restrict) else node
