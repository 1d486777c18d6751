"""Spark types of plan columns where they follow from base schemas, and aggregate result types."""

from __future__ import annotations

import decimal
import re

from sqlglot import exp

from differentiation.plan import Distinct, Filter, Generate, Join, Node, Project, Scan, UnionAll, Window

_INTEGRAL = ("TINYINT", "SMALLINT", "INT", "INTEGER", "BIGINT", "BYTE", "SHORT", "LONG")
_DECIMAL = re.compile(r"^DECIMAL\((\d+),\s*(\d+)\)$")


def column_types(node: Node) -> dict[str, str]:
    """Known types of `node`'s columns: base columns carried through filters, joins and renames."""
    if isinstance(node, Scan):
        return {f"{node.alias}.{c}": t.upper().strip() for c, t in node.schema}
    if isinstance(node, (Filter, Distinct, Window, Generate)):
        return {n: t for n, t in column_types(node.child).items() if n in node.child.columns()}
    if isinstance(node, Join):
        return {n: t for n, t in {**column_types(node.left), **column_types(node.right)}.items() if n in node.columns()}
    if isinstance(node, Project):
        inner = column_types(node.child)
        out = {}
        for name, e in node.outputs:
            if isinstance(e.expr, exp.Column) and e.expr.name in inner:
                out[name] = inner[e.expr.name]
            else:  # a computed column (a derived table's `l_extendedprice * (1 - l_discount) AS volume`)
                typed = expression_type(e.expr, inner)
                if typed is not None:
                    out[name] = typed
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


def avg_expression(arg: str, total: exp.Expr, count: exp.Expr) -> exp.Expr | None:
    """Spark's AVG from a SUM-typed `total` and a non-null `count`, same value and type.

    Mirrors Spark's Average: DOUBLE for integral and floating input; for DECIMAL(p,s) the sum as
    DECIMAL(p+10,s) divided by the count as DECIMAL(20,0), cast to DECIMAL(p+4,s+4).
    """
    def cast(e: exp.Expr, to: str) -> exp.Expr:
        return exp.Cast(this=e, to=exp.DataType.build(to, dialect="spark"))

    if arg in _INTEGRAL or arg in ("DOUBLE", "FLOAT", "REAL"):
        return exp.Div(this=cast(total, "DOUBLE"), expression=cast(count, "DOUBLE"))
    dec = _decimal(arg)
    if dec is None:
        return None
    p, s = dec
    quotient = exp.Div(this=cast(total, f"DECIMAL({min(38, p + 10)},{s})"), expression=cast(count, "DECIMAL(20,0)"))
    return cast(quotient, f"DECIMAL({min(38, p + 4)},{min(38, s + 4)})")


# Integral types as the decimals Spark widens them to when they meet a decimal (DecimalType.forType).
_INTEGRAL_AS_DECIMAL = {"TINYINT": (3, 0), "BYTE": (3, 0), "SMALLINT": (5, 0), "SHORT": (5, 0), "INT": (10, 0),
                        "INTEGER": (10, 0), "BIGINT": (20, 0), "LONG": (20, 0)}
_INTEGRAL_RANK = ("TINYINT", "SMALLINT", "INT", "BIGINT")
_MAX_PRECISION, _MIN_ADJUSTED_SCALE = 38, 6


def _bounded(p: int, s: int) -> tuple[int, int]:
    """DecimalType.adjustPrecisionScale with spark.sql.decimalOperations.allowPrecisionLoss (the default)."""
    if p <= _MAX_PRECISION:
        return p, s
    int_digits = p - s
    scale = max(_MAX_PRECISION - int_digits, min(s, _MIN_ADJUSTED_SCALE))
    return _MAX_PRECISION, scale


def _decimal_arithmetic(op: type, a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    """Result precision and scale of a decimal operation (Spark's DecimalPrecision rules)."""
    (p1, s1), (p2, s2) = a, b
    if op in (exp.Add, exp.Sub):
        s = max(s1, s2)
        return _bounded(max(p1 - s1, p2 - s2) + s + 1, s)
    if op is exp.Mul:
        return _bounded(p1 + p2 + 1, s1 + s2)
    s = max(_MIN_ADJUSTED_SCALE, s1 + p2 + 1)  # exp.Div
    return _bounded(p1 - s1 + s2 + s, s)


def _normal(t: str) -> str:
    t = t.upper().replace(" ", "")
    return {"INTEGER": "INT", "LONG": "BIGINT", "SHORT": "SMALLINT", "BYTE": "TINYINT"}.get(t, t)


def _literal(e: exp.Literal) -> tuple[str, tuple[int, int] | None]:
    """A numeric literal's type, and the decimal it counts as next to a decimal (Spark picks the minimum precision
    for integral literals: spark.sql.legacy.literal.pickMinimumPrecision, on by default)."""
    value = decimal.Decimal(e.this)
    digits, exponent = len(value.as_tuple().digits), int(value.as_tuple().exponent)
    if "." not in e.this and "e" not in e.this.lower():
        kind = "INT" if -(2**31) <= value < 2**31 else "BIGINT" if -(2**63) <= value < 2**63 else None
        return (kind or "?"), (digits, 0)
    if "e" in e.this.lower():
        return "DOUBLE", None
    scale = max(0, -exponent)
    return f"DECIMAL({max(digits, scale)},{scale})", (max(digits, scale), scale)


def expression_type(e: exp.Expr, types: dict[str, str]) -> str | None:
    """Spark's result type of a numeric expression over columns of known ``types``: columns, numeric literals,
    parentheses, unary minus, + - * / and CAST to a numeric type. None for anything else (the caller then does
    not model the expression), so a wrong guess is never made silently."""
    typed = _typed(e, types)
    return typed[0] if typed else None


def _typed(e: exp.Expr, types: dict[str, str]) -> tuple[str, tuple[int, int] | None] | None:
    """(type, decimal it counts as next to a decimal) of ``e``, or None when not modelled."""
    if isinstance(e, exp.Paren):
        return _typed(e.this, types)
    if isinstance(e, exp.Column):
        t = types.get(e.name)
        return _with_decimal(_normal(t)) if t else None
    if isinstance(e, exp.Literal) and not e.is_string:
        t, dec = _literal(e)
        return (t, dec) if t != "?" else None
    if isinstance(e, exp.Neg):
        return _typed(e.this, types)
    if isinstance(e, exp.Cast):
        return _with_decimal(_normal(e.to.sql(dialect="spark")))
    if isinstance(e, (exp.Case, exp.If)):
        return _branches_type([_typed(b, types) for b in _branches(e) if not isinstance(b, exp.Null)])
    if isinstance(e, (exp.Add, exp.Sub, exp.Mul, exp.Div)):
        left, right = _typed(e.left, types), _typed(e.right, types)
        if left is None or right is None:
            return None
        return _arithmetic(type(e), left, right)
    return None


def _branches(e: exp.Expr) -> list[exp.Expr]:
    """The values a CASE (or IF) can return; a missing ELSE is NULL."""
    if isinstance(e, exp.If):
        return [e.args["true"], e.args.get("false") or exp.Null()]
    return [i.args["true"] for i in e.args.get("ifs") or []] + [e.args.get("default") or exp.Null()]


def _branches_type(typed: list[tuple[str, tuple[int, int] | None] | None]) -> tuple[str, tuple[int, int] | None] | None:
    """Spark's common type of CASE branches (TypeCoercion.findWiderCommonType), numeric branches only. Unlike
    arithmetic, a branch counts as its type, not as its literal's minimum precision."""
    if not typed or any(t is None for t in typed):
        return None
    out: tuple[str, tuple[int, int] | None] | None = None
    for t, _ in typed:  # type: ignore[misc]
        this = _with_decimal(t)
        if this is None:
            return None
        out = this if out is None else _wider(out, this)
    return out


TypeAndPrecision = tuple[str, tuple[int, int] | None]


def _wider(a: TypeAndPrecision, b: TypeAndPrecision) -> TypeAndPrecision:
    (at, ad), (bt, bd) = a, b
    if at == bt:
        return a
    if "DOUBLE" in (at, bt):
        return "DOUBLE", None
    if at in _INTEGRAL_RANK and bt in _INTEGRAL_RANK:
        wider = max(at, bt, key=_INTEGRAL_RANK.index)
        return wider, _INTEGRAL_AS_DECIMAL[wider]
    assert ad is not None and bd is not None
    # integral with decimal: the decimal when it holds every value of the integral type, else both widened
    (p1, s1), (p2, s2) = ad, bd
    scale = max(s1, s2)
    p, s = _bounded(max(p1 - s1, p2 - s2) + scale, scale)
    return f"DECIMAL({p},{s})", (p, s)


def _with_decimal(t: str) -> tuple[str, tuple[int, int] | None] | None:
    if t in _INTEGRAL_RANK:
        return t, _INTEGRAL_AS_DECIMAL[t]
    dec = _decimal(t)
    if dec is not None:
        return f"DECIMAL({dec[0]},{dec[1]})", dec
    return (t, None) if t == "DOUBLE" else None


def _arithmetic(op: type, left: tuple[str, tuple[int, int] | None],
                right: tuple[str, tuple[int, int] | None]) -> tuple[str, tuple[int, int] | None] | None:
    (lt, ld), (rt, rd) = left, right
    if "DOUBLE" in (lt, rt):
        return "DOUBLE", None
    l_dec, r_dec = lt.startswith("DECIMAL"), rt.startswith("DECIMAL")
    if not l_dec and not r_dec:  # integral with integral
        if op is exp.Div:
            return "DOUBLE", None
        wider = max(lt, rt, key=_INTEGRAL_RANK.index)
        return wider, _INTEGRAL_AS_DECIMAL[wider]
    if ld is None or rd is None:
        return None
    p, s = _decimal_arithmetic(op, ld, rd)
    return f"DECIMAL({p},{s})", (p, s)
