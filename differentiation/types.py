"""Spark types of plan columns where they follow from base schemas, and aggregate result types."""

from __future__ import annotations

import re

from sqlglot import exp

from differentiation.plan import Distinct, Filter, Join, Node, Project, Scan, UnionAll

_INTEGRAL = ("TINYINT", "SMALLINT", "INT", "INTEGER", "BIGINT", "BYTE", "SHORT", "LONG")
_DECIMAL = re.compile(r"^DECIMAL\((\d+),\s*(\d+)\)$")


def column_types(node: Node) -> dict[str, str]:
    """Known types of `node`'s columns: base columns carried through filters, joins and renames."""
    if isinstance(node, Scan):
        return {f"{node.alias}.{c}": t.upper().strip() for c, t in node.schema}
    if isinstance(node, (Filter, Distinct)):
        return column_types(node.child)
    if isinstance(node, Join):
        return {**column_types(node.left), **column_types(node.right)}
    if isinstance(node, Project):
        inner = column_types(node.child)
        out = {}
        for name, e in node.outputs:
            if isinstance(e.expr, exp.Column) and e.expr.name in inner:
                out[name] = inner[e.expr.name]
        return out
    if isinstance(node, UnionAll):
        first = column_types(node.inputs[0])
        return {n: t for n, t in first.items()}
    return {}


def _decimal(t: str) -> tuple[int, int] | None:
    m = _DECIMAL.match(t.replace(" ", ""))
    return (int(m.group(1)), int(m.group(2))) if m else None


def sum_type(arg: str) -> str | None:
    """Spark's SUM result type for an argument type, or None when we do not model it."""
    if arg in _INTEGRAL:
        return "BIGINT"
    if arg in ("DOUBLE", "FLOAT", "REAL"):
        return "DOUBLE"
    dec = _decimal(arg)
    return f"DECIMAL({min(38, dec[0] + 10)},{dec[1]})" if dec else None


def avg_expression(arg: str, total: str, count: str) -> str | None:
    """SQL for Spark's AVG from a SUM-typed `total` and a non-null `count`, same value and type.

    Mirrors Spark's Average: DOUBLE for integral and floating input; for DECIMAL(p,s) the sum as
    DECIMAL(p+10,s) divided by the count as DECIMAL(20,0), cast to DECIMAL(p+4,s+4).
    """
    if arg in _INTEGRAL or arg in ("DOUBLE", "FLOAT", "REAL"):
        return f"CAST({total} AS DOUBLE) / CAST({count} AS DOUBLE)"
    dec = _decimal(arg)
    if dec is None:
        return None
    p, s = dec
    return (f"CAST(CAST({total} AS DECIMAL({min(38, p + 10)},{s})) / CAST({count} AS DECIMAL(20,0)) "
            f"AS DECIMAL({min(38, p + 4)},{min(38, s + 4)}))")
