"""The base-table columns a plan reads, by table: what a change read compares to tell a row's change from an update
that left every column the plan reads as it was.

An UPDATE of TPC-H's ``o_totalprice`` is a DELETE and an INSERT of each order in Delta's change data; to a query that
reads only ``o_orderkey`` and ``o_orderdate`` the pair cancels, and a change read that drops it (`Sources.changes`)
gives the query an empty change where it would otherwise join 1,500 orders with ``lineitem``.
"""

from __future__ import annotations

from differentiation.plan import (
    AggCall, Aggregate, Filter, Generate, Join, Node, Project, Scalar, Scan, Window,
)


def _refs(*values: object) -> set[str]:
    out: set[str] = set()
    for value in values:
        if isinstance(value, Scalar):
            out |= value.columns()
        elif isinstance(value, AggCall) and value.arg is not None:
            out |= value.arg.columns()
        elif isinstance(value, tuple):
            out |= _refs(*value)
    return out


def _inputs(node: Node, needed: frozenset[str]) -> list[tuple[Node, set[str]]]:
    """Each input of ``node`` with the columns of it ``node`` reads when its parent reads ``needed``."""
    if isinstance(node, Project):
        return [(node.child, _refs(*(e for n, e in node.outputs if n in needed)))]
    if isinstance(node, Aggregate):
        return [(node.child, _refs(node.keys, node.aggs))]
    if isinstance(node, Filter):
        return [(node.child, set(needed) | _refs(node.condition))]
    if isinstance(node, Join):
        wanted = set(needed) | _refs(node.condition)
        return [(side, wanted & set(side.columns())) for side in (node.left, node.right)]
    if isinstance(node, Window):
        return [(node.child, (set(needed) - {n for n, _ in node.outputs}) | _refs(node.partition, node.outputs))]
    if isinstance(node, Generate):
        return [(node.child, (set(needed) - set(node.names)) | _refs(node.arg))]
    # DISTINCT and UNION compare or place whole rows; any other operator: every column, to be safe
    return [(child, set(child.columns())) for child in node.children()]


def columns_read(plan: Node) -> dict[str, frozenset[str]]:
    """{base table: the columns of it that any of its scans in ``plan`` contributes to the plan's output}: read by
    an expression on the way up (a condition, a key, an aggregate's argument), output, or compared as part of a
    whole row (DISTINCT, a UNION's inputs)."""
    out: dict[str, frozenset[str]] = {}
    seen: set[tuple[Node, frozenset[str]]] = set()
    stack = [(plan, frozenset(plan.columns()))]
    while stack:
        node, needed = stack.pop()
        if (node, needed) in seen:
            continue
        seen.add((node, needed))
        if isinstance(node, Scan):
            read = frozenset(c for c, _ in node.schema if f"{node.alias}.{c}" in needed)
            out[node.table] = out.get(node.table, frozenset()) | read
            continue
        stack.extend((child, frozenset(cols)) for child, cols in _inputs(node, needed))
    return out
