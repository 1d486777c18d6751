"""Filters over inner and cross joins pushed into them: `FROM a, b WHERE a.k = b.k AND a.x > 0` becomes
`a WHERE a.x > 0` joined with `b` ON `a.k = b.k`.

A pure plan rewrite applied by `build_plan`. It changes no result and no row id (a join's row id is built from
its sides' ids whatever its condition); it gives the rules a join's key where the query wrote it in WHERE, so
key pruning (`prune.py`) finds the equality, and each derivative term filters its sides before joining them.
"""

from __future__ import annotations

from sqlglot import exp

from differentiation.plan import Filter, Join, Node, Scalar
from differentiation.rewrite import map_children

_INNER = ("inner", "cross")


def _conjuncts(condition: exp.Expression) -> list[exp.Expression]:
    return list(condition.flatten()) if isinstance(condition, exp.And) else [condition]


def _scalar(conditions: list[exp.Expression]) -> Scalar:
    return Scalar(exp.and_(*(c.copy() for c in conditions)))


def _into(side: Node, conditions: list[exp.Expression]) -> Node:
    if not conditions:
        return side
    if isinstance(side, Join) and side.kind in _INNER:
        return _place(side, conditions)
    if isinstance(side, Filter):
        return Filter(side.child, _scalar(_conjuncts(side.condition.expr) + conditions))
    return Filter(side, _scalar(conditions))


def _place(join: Join, conditions: list[exp.Expression]) -> Node:
    """`join` with each condition on the lowest side holding all its columns, else in the join's own condition."""
    left, right = set(join.left.columns()), set(join.right.columns())
    to_left, to_right, here = [], [], []
    for c in conditions:
        names = {col.name for col in c.find_all(exp.Column)}
        (to_left if names and names <= left else to_right if names and names <= right else here).append(c)
    if join.condition is not None:
        here = _conjuncts(join.condition.expr) + here
    return join.copy(left=_into(join.left, to_left), right=_into(join.right, to_right),
                     kind="inner" if here else join.kind, condition=_scalar(here) if here else None)


def push_filters_into_joins(node: Node) -> Node:
    """`node` with every filter directly over an inner or cross join distributed into that join tree."""
    node = map_children(node, push_filters_into_joins)
    if isinstance(node, Filter) and isinstance(node.child, Join) and node.child.kind in _INNER:
        return _place(node.child, _conjuncts(node.condition.expr))
    return node
