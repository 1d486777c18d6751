"""What we refuse, and where: constructs that cannot be built into the IR or cannot be differentiated.

Build-time refusals (`check_buildable`) run on the parsed SQL before qualification so positions are
the user's. `incremental_reason` inspects a built plan for constructs that can be evaluated but not
maintained incrementally (non-deterministic functions, non-equi outer joins).
"""

from __future__ import annotations

from sqlglot import exp

from differentiation.errors import UnsupportedQuery
from differentiation.plan import Aggregate, Filter, Generate, Join, Node, Project, Scalar, Window

_NON_DETERMINISTIC_CLASSES: tuple[type[exp.Expr], ...] = (
    exp.Rand,
    exp.Randn,
    exp.Uuid,
    exp.CurrentTimestamp,
    exp.CurrentDate,
    exp.CurrentTime,
)
_NON_DETERMINISTIC_NAMES = frozenset(
    {"rand", "random", "randn", "uuid", "now", "shuffle", "monotonically_increasing_id", "spark_partition_id",
     "current_timestamp", "current_date", "localtimestamp", "unix_timestamp"}
)


def position_of(node: exp.Expr) -> str:
    """'line L, column C' of the earliest token under `node` that sqlglot recorded, or ''."""
    best: tuple[int, int] | None = None
    for n in node.walk():
        meta = n.meta
        if "line" in meta and "start" in meta:
            width = meta.get("end", meta["start"]) - meta["start"]
            pos = (meta["line"], meta["col"] - width)
            best = pos if best is None or pos < best else best
    return f"line {best[0]}, column {best[1]}" if best else ""


def _earliest_offset(node: exp.Expr) -> int | None:
    starts = [n.meta["start"] for n in node.walk() if "start" in n.meta]
    return min(starts) if starts else None


def keyword_position(sql: str | None, keyword: str, anchor: exp.Expr, fallback: exp.Expr) -> str:
    """Position of the last `keyword` in `sql` before the first token of `anchor`.

    Keywords such as LIMIT, EXISTS or EXCEPT leave no token position in sqlglot's tree, so we look
    for them in the text just before the expression they introduce.
    """
    offset = _earliest_offset(anchor)
    if sql is None or offset is None:
        return position_of(fallback)
    at = sql.upper().rfind(keyword, 0, offset)
    if at < 0:
        return position_of(fallback)
    line = sql.count("\n", 0, at) + 1
    return f"line {line}, column {at - (sql.rfind(chr(10), 0, at) + 1) + 1}"


def _refuse(message: str, construct: str, node: exp.Expr) -> UnsupportedQuery:
    return UnsupportedQuery(message, construct, position_of(node))


def _is_lateral_view(node: exp.Lateral) -> bool:
    return bool(node.args.get("view")) and type(node.this) in (exp.Explode, exp.Posexplode, exp.ExplodeOuter,
                                                                exp.PosexplodeOuter)


def check_buildable(tree: exp.Expr, sql: str | None = None) -> None:
    """Raise UnsupportedQuery for the first construct the plan IR cannot represent (`sql`: its text)."""
    for node in tree.walk():
        if isinstance(node, (exp.Limit, exp.Offset, exp.Fetch)):
            construct = "LIMIT" if isinstance(node, exp.Limit) else type(node).__name__.upper()
            pos = keyword_position(sql, construct, node, node.parent or node)
            raise UnsupportedQuery(f"{construct} is not supported", construct, pos)
        if isinstance(node, exp.Lateral) and not _is_lateral_view(node):
            raise _refuse("LATERAL is supported only as LATERAL VIEW [OUTER] explode(...) or posexplode(...)",
                          "LATERAL", node)
        if isinstance(node, (exp.Cube, exp.Rollup, exp.GroupingSets)):
            word = {exp.Cube: "CUBE", exp.Rollup: "ROLLUP"}.get(type(node), "GROUPING SETS")
            pos = keyword_position(sql, word, node, node)
            raise UnsupportedQuery(f"{word} is not supported", "grouping sets", pos)
        in_view = isinstance(node.parent, exp.Lateral) and _is_lateral_view(node.parent)
        if isinstance(node, (exp.Explode, exp.ExplodeOuter)) and not in_view:
            word = type(node).__name__.upper()
            raise _refuse(f"{word} outside LATERAL VIEW is not supported; write LATERAL VIEW {word.lower()}(...) t AS "
                          "...", word, node)
        if isinstance(node, (exp.Pivot, exp.Unnest)):
            raise _refuse(f"{type(node).__name__.upper()} is not supported", type(node).__name__.upper(), node)


def _non_deterministic(expr: exp.Expr) -> exp.Expr | None:
    for n in expr.walk():
        if isinstance(n, _NON_DETERMINISTIC_CLASSES):
            return n
        if isinstance(n, exp.Anonymous) and str(n.name).lower() in _NON_DETERMINISTIC_NAMES:
            return n
    return None


def _scalars(node: Node) -> list[tuple[str, Scalar]]:
    if isinstance(node, Filter):
        return [("filter", node.condition)]
    if isinstance(node, Project):
        return [("select list", e) for _, e in node.outputs]
    if isinstance(node, Join) and node.condition is not None:
        return [("join condition", node.condition)]
    if isinstance(node, Generate):
        return [("LATERAL VIEW", node.arg)]
    if isinstance(node, Window):
        return [("window function", e) for _, e in node.outputs] + [("PARTITION BY", k) for k in node.partition]
    if isinstance(node, Aggregate):
        out = [("GROUP BY", k) for _, k in node.keys]
        return out + [("aggregate argument", a.arg) for _, a in node.aggs if a.arg is not None]
    return []


def equi_keys(join: Join) -> tuple[tuple[Scalar, ...], tuple[Scalar, ...]]:
    """The (left, right) key expressions of the equality conjuncts of a join condition."""
    if join.condition is None:
        return (), ()
    left_cols, right_cols = set(join.left.columns()), set(join.right.columns())
    lk: list[Scalar] = []
    rk: list[Scalar] = []
    for conj in join.condition.expr.flatten() if isinstance(join.condition.expr, exp.And) else [join.condition.expr]:
        if not isinstance(conj, (exp.EQ, exp.NullSafeEQ)):  # key restrictions compare NULL-safely either way
            continue
        a, b = Scalar(conj.this.copy()), Scalar(conj.expression.copy())
        if a.columns() and b.columns() and a.columns() <= left_cols and b.columns() <= right_cols:
            lk.append(a)
            rk.append(b)
        elif a.columns() and b.columns() and a.columns() <= right_cols and b.columns() <= left_cols:
            lk.append(b)
            rk.append(a)
    return tuple(lk), tuple(rk)


def incremental_reason(plan: Node) -> str | None:
    """None when `plan` can be differentiated; otherwise why not, naming the operator and position."""
    for node in plan.walk():
        for where, scalar in _scalars(node):
            bad = _non_deterministic(scalar.expr)
            if bad is not None:
                name = bad.sql(dialect="spark")
                pos = position_of(bad)
                at = f" at {pos}" if pos else ""
                return f"non-deterministic function {name} in {where}{at} cannot be maintained incrementally"
        if isinstance(node, Window) and not node.partition:
            pos = position_of(node.outputs[0][1].expr)
            at = f" at {pos}" if pos else ""
            return (f"window function {node.outputs[0][1]}{at} has no PARTITION BY, so it cannot be maintained "
                    "incrementally: every change would recompute all rows, which a FULL refresh does cheaper")
        if isinstance(node, Join) and node.kind in ("left", "right", "full") and not equi_keys(node)[0]:
            return (f"{node.kind.upper()} OUTER JOIN ON {node.condition} has no equality condition between its "
                    "sides; only equi outer joins are maintained incrementally")
    return None
