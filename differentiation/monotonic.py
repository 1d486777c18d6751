"""Monotonicity: inserts into the inputs can only insert into the output."""

from __future__ import annotations

from differentiation.plan import Aggregate, Distinct, Join, Node, Window


def non_monotonic_operator(plan: Node) -> str | None:
    """The first operator that makes `plan` non-monotonic, described in words, or None.

    Monotonic operators: scan, filter, project, inner/cross/semi join, union all (design.md).
    """
    for node in plan.walk():
        if isinstance(node, Aggregate):
            return "GROUP BY" if node.keys else "aggregate"
        if isinstance(node, Window):  # a new row moves its neighbours' ranks and running sums
            return "window function"
        if isinstance(node, Distinct):
            return "DISTINCT / UNION"
        if isinstance(node, Join) and node.kind in ("left", "right", "full"):
            return f"{node.kind.upper()} OUTER JOIN"
        if isinstance(node, Join) and node.kind == "anti":  # a row inserted on the right removes output rows
            return node.origin or "anti join"
    return None
