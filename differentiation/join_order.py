"""Inner joins ordered so that no cross product comes before the join that connects its sides.

`FROM part, supplier, lineitem WHERE p_partkey = l_partkey AND s_suppkey = l_suppkey` builds, in the order the
query lists its tables, `(part × supplier) ⋈ lineitem`. Spark reorders such a tree when it plans the query as
written (its `ReorderJoin`), but not once the tree is differentiated: every node of a change plan is a SELECT of
its own (row ids, actions), and the derivative term `(part × supplier)@I0 ⋈ Δlineitem` computes the cross product
of two tables for a few changed lines. `connect_joins` re-associates each tree of inner and cross joins greedily,
as Spark's `ReorderJoin` does: start from the first table and each time take the first table left that a condition
connects to those taken.

A pure plan rewrite applied by `build_plan`. It changes no result. It changes the row ids of the trees it
reorders (a join's id is the hash of its sides' ids), so it leaves every tree alone unless reordering moves a
cross product above joins it fed; the reordered tree is put back into the query's column order under a
projection, and its top join says so (`origin` = `REORDERED`, shown in plans), so that a table whose rows carry
ids of the old order can be told apart (`reordered`) and computed again.
"""

from __future__ import annotations

from sqlglot import exp

from differentiation.plan import Join, Node, Project, Scalar, each_once
from differentiation.rewrite import map_children

_INNER = ("inner", "cross")
REORDERED = "tables reordered to avoid a cross join"


def _leaves(node: Node) -> list[Node]:
    if isinstance(node, Join) and node.kind in _INNER:
        return _leaves(node.left) + _leaves(node.right)
    return [node]


def _conditions(node: Node) -> list[exp.Expr]:
    if not (isinstance(node, Join) and node.kind in _INNER):
        return []
    own: list[exp.Expr] = []
    if node.condition is not None:
        cond = node.condition.expr
        own = [c for c in (cond.flatten() if isinstance(cond, exp.And) else [cond]) if c != exp.true()]
    return _conditions(node.left) + _conditions(node.right) + own


def _products_below(node: Node, above: int = 0) -> int:
    """The joins the tree computes over a cross product, summed over its cross joins (each counts the joins above
    it: a product at the top costs nothing it would not cost anyway)."""
    if not (isinstance(node, Join) and node.kind in _INNER):
        return 0
    return ((above if node.kind == "cross" else 0) + _products_below(node.left, above + 1)
            + _products_below(node.right, above + 1))


def _names(condition: exp.Expr) -> set[str]:
    return {c.name for c in condition.find_all(exp.Column)}


def _greedy(leaves: list[Node], conditions: list[exp.Expr]) -> Node | None:
    """The left-deep tree taking, each time, the first leaf a pending condition connects to the tree so far;
    None when a condition reads a column no leaf has (left as it was)."""
    owner = {c: i for i, leaf in enumerate(leaves) for c in leaf.columns()}
    reads = []
    for cond in conditions:
        names = _names(cond)
        if not names <= owner.keys():
            return None
        reads.append({owner[n] for n in names})
    tree, taken, pending = leaves[0], {0}, list(range(len(conditions)))
    rest = list(range(1, len(leaves)))
    while rest:
        connected = [i for i in rest if any(i in reads[c] and reads[c] <= taken | {i} for c in pending)]
        pick = connected[0] if connected else rest[0]
        rest.remove(pick)
        taken.add(pick)
        on = [c for c in pending if reads[c] <= taken]
        pending = [c for c in pending if c not in on]
        condition = Scalar(exp.and_(*(conditions[c].copy() for c in on))) if on else None
        tree = Join(tree, leaves[pick], "inner" if on else "cross", condition)
    return tree


def connect_joins(node: Node) -> Node:
    """`node` with every tree of inner and cross joins that holds an avoidable cross product re-associated."""
    if not (isinstance(node, Join) and node.kind in _INNER):
        return map_children(node, connect_joins)
    leaves = [connect_joins(leaf) for leaf in _leaves(node)]
    rebuilt = _greedy(leaves, _conditions(node))
    if rebuilt is None or _products_below(rebuilt) >= _products_below(node):
        return map_children(node, connect_joins)
    assert isinstance(rebuilt, Join)
    rebuilt = rebuilt.copy(origin=REORDERED)
    if rebuilt.columns() == node.columns():
        return rebuilt
    return Project(rebuilt, tuple((c, Scalar.column(c)) for c in node.columns()))


def reordered(plan: Node) -> bool:
    """Whether `connect_joins` re-associated some join tree of `plan`."""
    return any(isinstance(n, Join) and n.origin == REORDERED for n in each_once(plan))
