"""Spark SQL (text or sqlglot tree) -> relational plan IR.

The query is qualified with sqlglot's `qualify` against the caller's schema, then translated
select by select. FROM subqueries and CTEs are inlined. A top-level ORDER BY is dropped: plans are
bags, and change sets have no order (LIMIT, which would make ORDER BY meaningful, is refused).
"""

from __future__ import annotations

from collections.abc import Mapping

import sqlglot
from sqlglot import exp, transforms
from sqlglot.errors import ParseError, SqlglotError
from sqlglot.optimizer.qualify import qualify

from differentiation.errors import UnsupportedQuery
from differentiation.join_order import connect_joins
from differentiation.pushdown import push_filters_into_joins
from differentiation.subqueries import ORIGIN, unnest
from differentiation.plan import (
    AggCall, Aggregate, Distinct, Filter, Generate, Join, Node, Project, Scalar, Scan, UnionAll, Window,
)
from differentiation.support import check_buildable, position_of

Schema = Mapping[str, Mapping[str, str]]


def build_plan(query: str | exp.Expr, schema: Schema) -> Node:
    """Build the plan of a SELECT over tables of `schema` ({"db.table" or "table": {column: type}})."""
    tree = prepare(query, schema)
    schema = _lower(schema)
    return connect_joins(push_filters_into_joins(_Builder(schema).query(tree, {})))


def _lower(schema: Schema) -> Schema:
    # Spark resolves column names without regard to case, and qualify writes every name in lower case: the plan's
    # columns are the schema's in lower case too, or a table's `Amount` would be unknown to a query of `amount`.
    return {table: {column.lower(): kind for column, kind in columns.items()} for table, columns in schema.items()}


def prepare(query: str | exp.Expr, schema: Schema) -> exp.Expr:
    """The query as plans are built from it: named windows inlined, QUALIFY a WHERE, every name qualified against
    `schema`, subquery predicates and scalar subqueries turned into joins (a tree Spark can also run)."""
    if isinstance(query, str):
        try:
            tree = sqlglot.parse_one(query, read="spark")
        except ParseError as e:
            raise UnsupportedQuery(f"cannot parse query: {e}", "syntax") from e
    else:
        tree = query.copy()
    if not isinstance(tree, exp.Query):
        raise UnsupportedQuery(f"expected a query, got {type(tree).__name__}", type(tree).__name__, position_of(tree))
    # WINDOW w AS (...): each OVER w gets the named window's PARTITION BY / ORDER BY / frame inlined, so a
    # partitioned window is maintained by partition whatever way it was written.
    tree = tree.transform(transforms.eliminate_window_clause, copy=False)
    tree = transforms.eliminate_qualify(tree)  # QUALIFY: a WHERE over the select with its window functions
    check_buildable(tree, query if isinstance(query, str) else None)
    try:
        tree = qualify(tree, schema=_nested_schema(_lower(schema)), dialect="spark", validate_qualify_columns=True)
    except SqlglotError as e:
        raise UnsupportedQuery(f"cannot resolve query against the schema: {e}", "name resolution") from e
    return unnest(tree)


def _nested_schema(schema: Schema) -> dict[str, object]:
    out: dict[str, object] = {}
    for name, cols in schema.items():
        parts = name.split(".")
        target = out
        for p in parts[:-1]:
            target = target.setdefault(p, {})  # type: ignore[assignment]
        target[parts[-1]] = dict(cols)  # type: ignore[index]
    return out


def _rename(plan: Node, alias: str) -> Node:
    """Expose a subplan's columns as `alias.column`, the names qualified references use."""
    return Project(plan, tuple((f"{alias}.{c}", Scalar.column(c)) for c in plan.columns()))


class _Builder:
    def __init__(self, schema: Schema) -> None:
        self.schema = schema

    def query(self, q: exp.Expr, ctes: dict[str, Node]) -> Node:
        if isinstance(q, exp.Subquery):
            return self.query(q.this, ctes)
        ctes = dict(ctes)
        with_ = q.args.get("with_") or q.args.get("with")
        if with_ is not None:
            for cte in with_.expressions:
                ctes[cte.alias_or_name] = self.query(cte.this, ctes)
        if isinstance(q, exp.Union):
            branches = [self.query(b, ctes) for b in _union_branches(q)]
            union: Node = UnionAll(tuple(branches))
            return Distinct(union) if q.args.get("distinct") else union
        if isinstance(q, (exp.Intersect, exp.Except)):
            return _set_difference(q, self.query(q.this, ctes), self.query(q.expression, ctes))
        if isinstance(q, exp.Select):
            return self.select(q, ctes)
        raise UnsupportedQuery(f"{type(q).__name__} is not supported", type(q).__name__, position_of(q))

    def source(self, src: exp.Expr, ctes: dict[str, Node]) -> Node:
        """A FROM item with the joins hanging on it: sqlglot parses ``(r JOIN s ON ...)`` as a subquery around
        table ``r`` that carries the join to ``s``, so every item's own joins belong to it, not to the SELECT."""
        plan = self.relation(src, ctes)
        for j in src.args.get("joins") or []:
            plan = self.join(plan, j, ctes)
        return plan

    def relation(self, src: exp.Expr, ctes: dict[str, Node]) -> Node:
        alias = src.alias_or_name
        if isinstance(src, exp.Table):
            if not src.args.get("db") and src.name in ctes:
                return _rename(ctes[src.name], alias)
            key = ".".join(p.name for p in src.parts)
            if key not in self.schema:
                raise UnsupportedQuery(f"unknown table {key}", "table", position_of(src))
            return Scan(key, alias, tuple(self.schema[key].items()))
        if isinstance(src, exp.Subquery) and isinstance(src.this, (exp.Table, exp.Subquery)):
            if src.alias:  # columns would be named by the alias and the tables inside at once
                raise UnsupportedQuery("an alias on a parenthesized join is not supported; drop the alias and name "
                                       "the tables inside", "parenthesized join alias", position_of(src))
            return self.source(src.this, ctes)
        if isinstance(src, exp.Subquery):
            return _rename(self.query(src.this, ctes), alias)
        raise UnsupportedQuery(f"{type(src).__name__} in FROM is not supported", type(src).__name__, position_of(src))

    def select(self, sel: exp.Select, ctes: dict[str, Node]) -> Node:
        from_ = sel.args.get("from_") or sel.args.get("from")
        if from_ is None:
            raise UnsupportedQuery("SELECT without FROM is not supported", "SELECT without FROM", position_of(sel))
        plan = self.source(from_.this, ctes)
        for j in sel.args.get("joins") or []:
            plan = self.join(plan, j, ctes)
        for lateral in sel.args.get("laterals") or []:
            plan = _generate(plan, lateral)
        where = sel.args.get("where")
        parts = ([] if where is None else where.this.flatten() if isinstance(where.this, exp.And) else [where.this])
        conditions = [c for c in parts if c != exp.true()]
        if conditions:  # decorrelation leaves TRUE where it took a predicate out
            plan = Filter(plan, _scalar(exp.and_(*conditions)))
        outputs = [(e.alias_or_name, e.unalias() if isinstance(e, exp.Alias) else e) for e in sel.expressions]
        having = sel.args.get("having")
        group = sel.args.get("group")
        aggregated = group is not None or having is not None or any(_aggregates(o) for _, o in outputs)
        windows = [w for _, o in outputs for w in o.find_all(exp.Window)]
        if windows and aggregated:
            raise UnsupportedQuery("a window function over GROUP BY or aggregates in one SELECT is not supported; "
                                   "aggregate in a subquery and rank over it", "window function",
                                   position_of(windows[0]))
        if windows:
            plan, outputs = _windows(plan, outputs)
        if aggregated:
            plan, rewrite = _aggregate(plan, group, [o for _, o in outputs] + ([having.this] if having else []))
            if having is not None:
                plan = Filter(plan, rewrite(having.this))
            project: Node = Project(plan, tuple((n, rewrite(e)) for n, e in outputs))
        else:
            project = Project(plan, tuple((n, _scalar(e)) for n, e in outputs))
        return Distinct(project) if sel.args.get("distinct") else project

    def join(self, left: Node, j: exp.Join, ctes: dict[str, Node]) -> Node:
        right = self.source(j.this, ctes)
        side, kind = (j.side or "").lower(), (j.kind or "").lower()
        on = j.args.get("on")
        if j.args.get("using"):
            raise UnsupportedQuery("JOIN ... USING is not supported; write ON", "JOIN USING", position_of(j))
        origin = j.meta.get(ORIGIN, "")
        if kind in ("semi", "anti") and side in ("", "left"):
            return Join(left, right, kind, _scalar(on) if on is not None else Scalar(exp.true()), origin)
        if side in ("left", "right", "full"):
            if on is None:
                raise UnsupportedQuery(f"{side.upper()} JOIN without ON", f"{side.upper()} JOIN", position_of(j))
            return Join(left, right, side, _scalar(on), origin)
        if kind not in ("", "inner", "cross"):
            raise UnsupportedQuery(f"{kind.upper()} JOIN is not supported", f"{kind.upper()} JOIN", position_of(j))
        if on is not None:
            return Join(left, right, "inner", _scalar(on), origin)
        return Join(left, right, "cross", None, origin)


def _generate(plan: Node, lateral: exp.Lateral) -> Node:
    """LATERAL VIEW [OUTER] explode / posexplode (the only laterals `check_buildable` lets through)."""
    f = lateral.this
    positional = isinstance(f, exp.Posexplode)
    outer = bool(lateral.args.get("outer")) or isinstance(f, (exp.ExplodeOuter, exp.PosexplodeOuter))
    table = lateral.alias
    columns = [c.name for c in lateral.args["alias"].columns]
    if not columns:
        raise UnsupportedQuery("name the columns of a LATERAL VIEW: LATERAL VIEW explode(...) t AS x",
                               "LATERAL VIEW", position_of(lateral))
    return Generate(plan, "posexplode" if positional else "explode", _scalar(f.this), outer,
                    tuple(f"{table}.{c}" for c in columns))


def _set_difference(q: exp.Intersect | exp.Except, left: Node, right: Node) -> Node:
    """INTERSECT / EXCEPT (DISTINCT): the distinct rows of `left` that do / do not equal a row of `right`, as a semi /
    anti join comparing every column NULL-safely (set operations take NULLs as equal)."""
    word = "INTERSECT" if isinstance(q, exp.Intersect) else "EXCEPT"
    if len(left.columns()) != len(right.columns()):
        raise UnsupportedQuery(f"{word} branches have different numbers of columns", word, position_of(q))
    if not q.args.get("distinct"):
        return _set_difference_all(word, left, right)
    names = tuple(f"__set{i}" for i in range(len(right.columns())))
    right = Project(right, tuple((n, Scalar.column(c)) for n, c in zip(names, right.columns())))
    same = exp.and_(*(exp.NullSafeEQ(this=Scalar.column(a).expr, expression=Scalar.column(b).expr)
                      for a, b in zip(left.columns(), names)))
    return Join(Distinct(left), right, "semi" if word == "INTERSECT" else "anti", Scalar(same), word)


def _set_difference_all(word: str, left: Node, right: Node) -> Node:
    """INTERSECT ALL / EXCEPT ALL: each distinct row min(m, n) / max(m - n, 0) times, m and n its copies on the left
    and the right: both sides counted per row (NULL-safe groups), joined on every column NULL-safely (EXCEPT: a left
    join, a missing right count is 0), and each row repeated by exploding 1..count."""
    def counted(side: Node, prefix: str) -> Aggregate:
        keys = tuple((f"{prefix}{i}", Scalar.column(c)) for i, c in enumerate(side.columns()))
        return Aggregate(side, keys, ((f"{prefix}n", AggCall("COUNT", None)),))

    a, b = counted(left, "__a"), counted(right, "__b")
    width = len(left.columns())
    same = exp.and_(*(exp.NullSafeEQ(this=Scalar.column(f"__a{i}").expr, expression=Scalar.column(f"__b{i}").expr)
                      for i in range(width)))
    m, n = Scalar.column("__an").expr, Scalar.column("__bn").expr
    if word == "INTERSECT":
        joined: Node = Join(a, b, "inner", Scalar(same), "INTERSECT ALL")
        copies: exp.Expr = exp.Least(this=m, expressions=[n])
    else:
        joined = Join(a, b, "left", Scalar(same), "EXCEPT ALL")
        copies = exp.Sub(this=m, expression=exp.func("coalesce", n, exp.Literal.number(0)))
    count = Scalar(copies)
    repeated = Generate(Filter(joined, Scalar(exp.GT(this=count.expr.copy(), expression=exp.Literal.number(0)))),
                        "explode", Scalar(exp.func("sequence", exp.Literal.number(1), count.expr.copy())), False,
                        ("__copy",))
    return Project(repeated, tuple((c, Scalar.column(f"__a{i}")) for i, c in enumerate(left.columns())))


def _aggregates(e: exp.Expr) -> bool:
    """True when `e` calls an aggregate outside any window (``SUM(x) OVER (...)`` is a window function)."""
    return any(f.find_ancestor(exp.Window) is None for f in e.find_all(exp.AggFunc))


def _windows(plan: Node, outputs: list[tuple[str, exp.Expr]]) -> tuple[Node, list[tuple[str, exp.Expr]]]:
    """`plan` under one Window node per PARTITION BY, and the outputs reading their results as columns."""
    names: dict[str, str] = {}
    by_partition: dict[tuple[str, ...], list[tuple[str, Scalar]]] = {}
    partitions: dict[tuple[str, ...], tuple[Scalar, ...]] = {}
    for _, o in outputs:
        for w in o.find_all(exp.Window):
            if w.args.get("over") and not isinstance(w.args.get("over"), str):
                raise UnsupportedQuery("named windows are not supported", "window function", position_of(w))
            call = _scalar(w)
            if call.sql in names:
                continue
            keys = tuple(_scalar(p) for p in w.args.get("partition_by") or [])
            names[call.sql] = f"__win{len(names)}"
            by_partition.setdefault(tuple(k.sql for k in keys), []).append((names[call.sql], call))
            partitions[tuple(k.sql for k in keys)] = keys
    for key, calls in by_partition.items():
        plan = Window(plan, partitions[key], tuple(calls))

    def read(e: exp.Expr) -> exp.Expr:
        def sub(node: exp.Expr) -> exp.Expr:
            if isinstance(node, exp.Window):
                return exp.column(exp.to_identifier(names[_scalar(node).sql], quoted=True))
            return node
        return e.copy().transform(sub)

    return plan, [(n, read(o)) for n, o in outputs]


def _union_branches(u: exp.Expr) -> list[exp.Expr]:
    """Flatten a left-deep chain of unions of the same kind (ALL vs DISTINCT) into its branches."""
    out: list[exp.Expr] = []
    for side in (u.this, u.expression):
        same = isinstance(side, exp.Union) and side.args.get("distinct") == u.args.get("distinct")
        out += _union_branches(side) if same and not side.args.get("with_") else [side]
    return out


def _scalar(e: exp.Expr) -> Scalar:
    """Rewrite qualified column references `t`.`c` into bare plan column names `t.c`."""

    def rename(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column):
            name = f"{node.table}.{node.name}" if node.table else node.name
            return exp.column(exp.to_identifier(name, quoted=True))
        if isinstance(node, (exp.Subquery, exp.Select)):
            raise UnsupportedQuery("subquery in an expression is not supported", "scalar subquery", position_of(node))
        return node

    return Scalar(e.copy().transform(rename))


_AGG_CLASSES: dict[type[exp.Expr], str] = {
    exp.Count: "COUNT", exp.Sum: "SUM", exp.Avg: "AVG", exp.Min: "MIN", exp.Max: "MAX",
}


def _agg_call(f: exp.AggFunc) -> AggCall:
    func = next((name for cls, name in _AGG_CLASSES.items() if type(f) is cls), None)
    if func is None:
        name = f.sql_name() if hasattr(f, "sql_name") else type(f).__name__
        raise UnsupportedQuery(f"aggregate function {name} is not supported", name, position_of(f))
    arg = f.this
    if isinstance(arg, exp.Star):
        return AggCall(func, None)
    if isinstance(arg, exp.Distinct):
        if len(arg.expressions) != 1:
            raise UnsupportedQuery(f"{func}(DISTINCT ...) over several columns", f"{func}(DISTINCT)", position_of(f))
        return AggCall(func, _scalar(arg.expressions[0]), distinct=True)
    if f.args.get("expressions"):
        raise UnsupportedQuery(f"{func} with several arguments", func, position_of(f))
    return AggCall(func, _scalar(arg))


def _aggregate(child: Node, group: exp.Group | None, uses: list[exp.Expr]):  # type: ignore[no-untyped-def]
    """Build Aggregate(child) and a function rewriting select/HAVING expressions over its output."""
    key_exprs = [_scalar(g) for g in (group.expressions if group is not None else [])]
    keys = {k.sql: f"__key{i}" for i, k in enumerate(dict.fromkeys(key_exprs))}
    aggs: dict[AggCall, str] = {}
    pending = [e for u in uses for e in u.find_all(exp.AggFunc)]
    for f in pending:
        if f.find_ancestor(exp.AggFunc) is None:
            aggs.setdefault(_agg_call(f), f"__agg{len(aggs)}")
    agg_plan = Aggregate(
        child,
        tuple((name, Scalar(next(k.expr for k in key_exprs if k.sql == sql))) for sql, name in keys.items()),
        tuple((name, call) for call, name in aggs.items()),
    )

    def rewrite(e: exp.Expr) -> Scalar:
        def sub(node: exp.Expr) -> exp.Expr:
            if isinstance(node, exp.AggFunc):
                return exp.column(exp.to_identifier(aggs[_agg_call(node)], quoted=True))
            if not isinstance(node, exp.Literal):
                as_scalar = _scalar(node)
                if as_scalar.sql in keys:
                    return exp.column(exp.to_identifier(keys[as_scalar.sql], quoted=True))
            return node

        out = e.copy().transform(sub)
        stray = [c for c in out.find_all(exp.Column) if not c.name.startswith(("__key", "__agg")) or c.table]
        if stray:
            raise UnsupportedQuery(f"column {stray[0].sql(dialect='spark')} is neither grouped nor aggregated",
                                   "non-grouped column", position_of(stray[0]))
        return Scalar(out)

    return agg_plan, rewrite
