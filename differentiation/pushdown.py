"""Filters pushed into joins: `FROM a, b WHERE a.k = b.k AND a.x > 0` becomes `a WHERE a.x > 0` joined with `b`
ON `a.k = b.k`; a filter over a semi or anti join goes to its left side, and the conditions of a semi or anti
join that read one side only go to that side; a WHERE that rejects the NULLs an outer join pads with makes it an
inner join (the shape decorrelated scalar subqueries take: `LEFT JOIN (... GROUP BY k) u ... WHERE x < u.v`).

A pure plan rewrite applied by `build_plan`. It changes no result and no row id (a join's row id is built from
its sides' ids whatever its condition and kind; a semi or anti join keeps its left rows' ids); it gives the rules
a join's key where the query wrote it in WHERE, so key pruning (`prune.py`) finds the equality, each derivative
term filters its sides before joining them, and an inner join is differentiated term by term instead of by
recomputing the keys an outer join touched.
"""

from __future__ import annotations

from sqlglot import exp

from differentiation.plan import FILTERING_JOINS, Filter, Join, Node, Scalar
from differentiation.rewrite import map_children

_INNER = ("inner", "cross")
# Operators that give NULL when an input is NULL, so a comparison over them rejects a NULL-padded row.
_STRICT = (exp.Column, exp.Identifier, exp.Literal, exp.Paren, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Neg, exp.Cast,
           exp.DataType)
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like)


def _conjuncts(condition: exp.Expr) -> list[exp.Expr]:
    """The AND-ed parts of `condition`, without literal TRUEs (decorrelation leaves them where predicates were)."""
    parts = condition.flatten() if isinstance(condition, exp.And) else [condition]
    return [c for c in parts if c != exp.true()] or [exp.true()]


def _scalar(conditions: list[exp.Expr]) -> Scalar:
    return Scalar(exp.and_(*(c.copy() for c in conditions)))


def _names(condition: exp.Expr) -> set[str]:
    return {col.name for col in condition.find_all(exp.Column)}


def _into(side: Node, conditions: list[exp.Expr]) -> Node:
    if not conditions:
        return side
    if isinstance(side, Join):
        side = _outer_to_inner(side, conditions)
    if isinstance(side, Join) and side.kind in _INNER:
        return _place(side, conditions)
    if isinstance(side, Join) and side.kind in FILTERING_JOINS:
        return side.copy(left=_into(side.left, conditions))
    if isinstance(side, Filter):
        return Filter(side.child, _scalar(_conjuncts(side.condition.expr) + conditions))
    return Filter(side, _scalar(conditions))


def _place(join: Join, conditions: list[exp.Expr]) -> Node:
    """`join` with each condition on the lowest side holding all its columns, else in the join's own condition."""
    left, right = set(join.left.columns()), set(join.right.columns())
    to_left: list[exp.Expr] = []
    to_right: list[exp.Expr] = []
    here: list[exp.Expr] = []
    for c in conditions:
        names = _names(c)
        (to_left if names and names <= left else to_right if names and names <= right else here).append(c)
    if join.condition is not None:
        here = _conjuncts(join.condition.expr) + here
    return join.copy(left=_into(join.left, to_left), right=_into(join.right, to_right),
                     kind="inner" if here else join.kind, condition=_scalar(here) if here else None)


def _filtering(join: Join) -> Join:
    """A semi or anti join with the conditions on its right side alone moved there (and, for a semi join, those on
    its left side alone moved left: an anti join keeps the left rows that fail them)."""
    if join.condition is None:
        return join
    left, right = set(join.left.columns()), set(join.right.columns())
    to_left: list[exp.Expr] = []
    to_right: list[exp.Expr] = []
    here: list[exp.Expr] = []
    for c in _conjuncts(join.condition.expr):
        names = _names(c)
        if names and names <= right:
            to_right.append(c)
        elif names and names <= left and join.kind == "semi":
            to_left.append(c)
        else:
            here.append(c)
    if not to_left and not to_right:
        return join
    return join.copy(left=_into(join.left, to_left), right=_into(join.right, to_right),
                     condition=_scalar(here) if here else Scalar(exp.true()))


def _strict_over(e: exp.Expr, columns: set[str]) -> bool:
    return all(isinstance(n, _STRICT) for n in e.walk()) and bool(_names(e) & columns)


def _rejects_nulls(condition: exp.Expr, columns: set[str]) -> bool:
    """True when `condition` is NULL or false on every row whose `columns` are all NULL."""
    if isinstance(condition, _COMPARISONS):
        return _strict_over(condition.this, columns) or _strict_over(condition.expression, columns)
    if isinstance(condition, exp.Not) and isinstance(condition.this, exp.Is):
        return isinstance(condition.this.expression, exp.Null) and _strict_over(condition.this.this, columns)
    return False


def _outer_to_inner(join: Join, conditions: list[exp.Expr]) -> Join:
    """A LEFT (RIGHT) join whose padded side some condition above it rejects when NULL, as an inner join."""
    padded = {"left": join.right, "right": join.left}.get(join.kind)
    if padded is None or not any(_rejects_nulls(c, set(padded.columns())) for c in conditions):
        return join
    return join.copy(kind="inner")


def push_filters_into_joins(node: Node) -> Node:
    """`node` with every filter directly over an inner, cross, semi or anti join distributed into that join tree,
    and the one-sided conditions of semi and anti joins moved to their side."""
    node = map_children(node, push_filters_into_joins)
    if isinstance(node, Join) and node.kind in FILTERING_JOINS:
        return _filtering(node)
    if isinstance(node, Filter) and isinstance(node.child, Join):
        conditions = _conjuncts(node.condition.expr)
        join = _outer_to_inner(node.child, conditions)
        if join.kind in _INNER:
            return _place(join, conditions)
        if join.kind in FILTERING_JOINS:
            return _into(join, conditions)
    return node
