"""Plans (relational and derivative) -> one sqlglot query over the caller's `Sources`.

Each node is compiled once, in dependency order, into a SELECT exposing its columns (quoted plan names), then
`__row_id`, then `__action` for change sets. A node several parents read (the same snapshot in two derivative
terms, the affected keys a restriction reads twice) is emitted once as a CTE and referenced by name; a node read
once is written inline as a subquery. On TPC-H change plans Spark analyses that form faster than text with every
input written out again and faster than every node as a CTE, whose substitution and inlining cost more than the
text they save (figures: bench/README.md, "Spark analysis of compiled change plans").
`At` is pushed into the leaves first (`push_at`), so a node's SQL never depends on where it sits in the plan.
Quoting and precedence are sqlglot's; callers print the tree with `dtables.sql.dialect.to_spark` or `.sql("spark")`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from sqlglot import exp

from differentiation.delta_nodes import (
    AT_END, AT_START, At, BothEnds, ChangeRead, Consolidate, Delta, EndOf, Empty, KeyFilter, KeySet, Restrict, Signed,
    Snapshot, StoredState, Sum,
)
from differentiation.plan import (
    FILTERING_JOINS, AggCall, Aggregate, Distinct, Filter, Generate, Join, Node, Project, Scan, UnionAll, Window,
    each_once,
)
from differentiation.restrict import push_restrictions
from differentiation.rewrite import map_bottom_up, map_children
from differentiation.rules.aggregate import AggregateFromEnd
from differentiation.rules.aggregate_algebraic import AlgebraicAggregateDelta, arg_type, helper_args
from differentiation.rules.semi_join import CountedSemiJoinDelta
from differentiation.shared_reads import SHARED_ALIAS, canonical_read, held_read, shared_reads
from differentiation.sources import Sources
from differentiation.sql import (
    alias, call, cast, col, hash_ids, hash_values, ident, is_insert, number, sign, string,
)
from differentiation.types import avg_expression, sum_type
from differentiation.vocabulary import ACTION, DELETE, INSERT, ROW_ID


def push_at(node: Node, when: str | None = None) -> Node:
    """`node` with every `At` removed and every base scan under it turned into a `Snapshot` at that end."""
    if isinstance(node, Delta):
        raise ValueError("a Δ is left in the plan: differentiate it before compiling")
    if isinstance(node, At):
        return push_at(node.child, node.when)
    if isinstance(node, Scan):
        if when is None:
            raise ValueError(f"scan of {node.table} outside a snapshot")
        return Snapshot(node, when)
    if isinstance(node, Empty):  # the empty change set keeps the columns (and types) of the query at I1
        return node.copy(like=push_at(node.like, "end"))
    return map_children(node, lambda c: push_at(c, when))


def pushed(plan: Node) -> Node:
    """`plan` as it is compiled: `At` pushed into the leaves, then key restrictions pushed below joins."""
    return push_restrictions(push_at(plan))


def _relation(text: str) -> exp.Expr:
    """A relation named by a `Sources` method (a quoted view name) as a table expression."""
    return exp.maybe_parse(text, into=exp.Table, dialect="spark")


def _read(scan: Scan, view: str, keys: tuple[KeyFilter, ...], *extra: exp.Expr) -> exp.Select:
    """The scan's columns (under their plan names), `__row_id` and `extra` from a view of the table, with the rows
    the key filters allow."""
    items = [alias(col(c, "s"), f"{scan.alias}.{c}") for c, _ in scan.schema]
    select = exp.select(*items, col(ROW_ID, "s"), *extra).from_(_relation(view).as_("s", quoted=True))
    for k in keys:
        select = select.where(k.condition(col(k.column, "s")), copy=False)
    return select


def _from(name: str, as_: str = "t") -> exp.Table:
    return exp.Table(this=ident(name), alias=exp.TableAlias(this=ident(as_)))


def _from_query(query: exp.Select | str, as_: str) -> exp.Expr:
    """A FROM item: a CTE by name, or a subquery."""
    return _from(query, as_) if isinstance(query, str) else query.subquery(ident(as_), copy=False)


def _meta(node: Node, table: str | None = None) -> list[exp.Expr]:
    return [col(ROW_ID, table), *([col(ACTION, table)] if node.is_delta else [])]


def _cols(node: Node, table: str | None = None) -> list[exp.Expr]:
    return [col(c, table) for c in node.columns()]


def _agg_call(c: AggCall) -> exp.Expr:
    if c.arg is None:
        return exp.Count(this=exp.Star())
    arg = c.arg.expr.copy()
    return exp.Anonymous(this=c.func, expressions=[exp.Distinct(expressions=[arg]) if c.distinct else arg])


_JOIN_SIDES = {"inner": ("", ""), "cross": ("", "CROSS"), "left": ("LEFT", "OUTER"), "right": ("RIGHT", "OUTER"),
               "full": ("FULL", "OUTER")}


def _scans_once(node: Node) -> bool:
    """Whether `node`, read twice, is worth computing once (`Compiler.source`)."""
    if isinstance(node, Restrict):
        return isinstance(node.child, Snapshot)
    return isinstance(node, Aggregate) and not node.is_delta


def _join(side: str, kind: str, table: exp.Expr, on: exp.Expr | None) -> exp.Join:
    return exp.Join(this=table, side=side or None, kind=kind or None, on=on)


def _union_all(selects: list[exp.Query]) -> exp.Query:
    out = selects[0]
    for s in selects[1:]:
        out = exp.Union(this=out, expression=s, distinct=False)
    return out


class Compiler:
    """Compiles plans against `sources` into CTEs; `query` wraps a final SELECT with every CTE it needs.

    Every SELECT here is built fresh and placed once, so sqlglot's builders get `copy=False`: by default each
    `.where`, `.join` or `.subquery` deep-copies the query built so far, every subquery nested in it included, which
    cost twice what the rest of compiling a change plan did (TPC-H Q8, Q21: ~0.2 s each)."""

    def __init__(self, sources: Sources, shared: frozenset[Node] | None = None, *, broadcast_keys: bool = False,
                 broadcast_state: bool = True, whole_groups: WholeGroups | None = None,
                 aliased: Mapping[Node, Restrict] | None = None, hold_reads: bool = True) -> None:
        self.sources = sources
        self.aliased = aliased or {}  # restricted snapshots read once for every alias (`shared_reads`)
        self.shared = shared  # nodes read more than once (emitted as CTEs); None: every node a CTE
        self.whole_groups = whole_groups or WholeGroups()
        self._helpers: dict[Node, str] = {}
        self._summed: dict[Node, str] = {}
        # Spark cannot size a key set (a DISTINCT over change reads) before running it, so without adaptive
        # execution it shuffles the whole snapshot a restriction filters; a caller that knows the change is small
        # asks for the key set to be broadcast instead, and the snapshot is filtered as it is scanned.
        self.broadcast_keys = broadcast_keys
        # A stored aggregate state of a few groups costs less to shuffle with the change than to probe with the
        # change's sums broadcast: every broadcast is a Spark job of its own, and a plan whose inputs are all tiny
        # otherwise runs as one job (dtables' `tiny_plans`). The caller, who knows the state's size, says which.
        self.broadcast_state = broadcast_state
        # With small changes, a restricted read whose keys are a change's may be computed once by the caller for
        # every plan that reads the same rows (`Sources.held`; `shared_reads.held_read`).
        self.hold_reads = hold_reads and broadcast_keys and callable(getattr(sources, "held", None))
        self._held: dict[Node, exp.Select | None] = {}
        self._names: dict[Node, str] = {}
        self._ctes: list[exp.CTE] = []
        self._dispatch: dict[type[Node], Callable[[Node], exp.Query]] = {
            Snapshot: self._snapshot, ChangeRead: self._change_read, StoredState: self._stored_state,
            Filter: self._filter, Project: self._project, Join: self._join, Aggregate: self._aggregate,
            UnionAll: self._union, Distinct: self._distinct, Empty: self._empty, Signed: self._signed,
            Sum: self._sum, KeySet: self._keyset, Restrict: self._restrict, Consolidate: self._consolidate,
            AlgebraicAggregateDelta: self._algebraic, Window: self._window, Generate: self._generate,
            BothEnds: self._both_ends, EndOf: self._end_of, CountedSemiJoinDelta: self._counted_semi,
            AggregateFromEnd: self._from_end,
        }

    def name(self, node: Node) -> str:
        """The CTE holding `node`'s rows, compiling it (and its inputs, first) on first use."""
        if node not in self._names:
            body = self._dispatch[type(node)](node)
            self._names[node] = self._emit(body)
        return self._names[node]

    def _emit(self, body: exp.Query) -> str:
        name = f"__p{len(self._ctes)}"
        self._ctes.append(exp.CTE(this=body, alias=exp.TableAlias(this=ident(name))))
        return name

    def source(self, node: Node, as_: str = "t") -> exp.Expr:
        """`node` as a FROM item: its CTE when it is shared, else its SELECT inline. A shared aggregate of
        snapshots (Q15's sums per supplier, which both the MAX over them and the join with supplier read at one
        end of the interval) and a shared restricted snapshot (`prune.unify_key_sets`) are computed once: Spark
        would scan their input once per reader; so is a restricted snapshot the plan reads under several aliases
        (`shared_reads`), each reader renaming its columns."""
        if self.held(node) is not None:
            return _from(self.name(node), as_)
        if node in self.aliased:
            return self._renamed(node).subquery(exp.to_identifier(as_, quoted=True), copy=False)
        if self.shared is not None and node in self.shared and _scans_once(node):
            return _from(self._computed_once(node), as_)
        if self.shared is None or node in self.shared or node in self._names:
            return _from(self.name(node), as_)
        return self._dispatch[type(node)](node).subquery(exp.to_identifier(as_, quoted=True), copy=False)

    def query(self, select: exp.Select) -> exp.Select:
        """`select` with every CTE compiled so far (in dependency order) as its WITH clause."""
        if self._ctes:
            select.set("with_", exp.With(expressions=list(self._ctes)))
        return select

    # -- leaves ----------------------------------------------------------------------------------------------------

    def _snapshot(self, node: Node) -> exp.Query:
        assert isinstance(node, Snapshot)
        if node.keys:  # the caller may skip files by them; the WHERE keeps exactly the rows they allow
            view = self.sources.snapshot(node.scan.table, node.when, node.keys)  # type: ignore[arg-type]
        else:
            view = self.sources.snapshot(node.scan.table, node.when)  # type: ignore[arg-type]
        return _read(node.scan, view, node.keys)

    def _both_ends(self, node: Node) -> exp.Query:
        assert isinstance(node, BothEnds)
        view = self.sources.ends(node.scan.table, node.keys)
        return _read(node.scan, view, node.keys, col(AT_START, "s"), col(AT_END, "s"))

    def _end_of(self, node: Node) -> exp.Query:
        assert isinstance(node, EndOf)
        flag = AT_START if node.when == "start" else AT_END
        return (exp.select(*_cols(node), col(ROW_ID)).from_(_from(self._computed_once(node.child)))
                .where(col(flag), copy=False))

    def _computed_once(self, node: Node) -> str:
        """`node`'s CTE, computed once for all its readers. Spark inlines a deterministic CTE into every reader
        (each computes it again); a non-deterministic one it plans as one shuffle its readers reuse. The condition
        `rand() >= 0` keeps every row and makes the CTE non-deterministic (Spark 4.2 then drops the condition
        itself, having already decided)."""
        if node not in self._names:
            self._names[node] = self.emit_once(self._dispatch[type(node)](node))
        return self._names[node]

    def _groups_at_start(self, node: Aggregate, change: AggregateFromEnd) -> exp.Query:
        """`node` (whole, at I0) from the groups at I1 less the change: every group at I1 or in the change, its
        helper columns less the change's, those with rows left."""
        groups = HelperColumns(self, change.agg)  # typed by the original aggregate, whose input holds the scans
        at_end = self.helper_columns(node.copy(child=at_end_of(node.child)))
        d = self.summed_change(change)
        keys = [alias(call("coalesce", col(f"__key{j}", "h"), col(f"__key{j}", "d")), f"__key{j}")
                for j in range(len(groups.keys))]
        helpers = [alias(groups.less_change(name, "h", "d"), name) for name, _ in groups.helpers()]
        on = exp.and_(*(exp.NullSafeEQ(this=col(f"__key{j}", "h"), expression=col(f"__key{j}", "d"))
                        for j in range(len(groups.keys))))
        before = exp.select(*keys, *helpers).from_(_from(at_end, "h")).join(_from(d, "d"), on=on,
                                                                           join_type="FULL OUTER", copy=False)
        return (exp.select(*groups.outputs("o", INSERT)[:-1]).from_(before.subquery(ident("o"), copy=False))
                .where(exp.GT(this=col("__cnt", "o"), expression=number(0)), copy=False))

    def summed_change(self, node: AggregateFromEnd) -> str:
        """The CTE of `node`'s summed change (ΣΔ per key), computed once where the groups at I0 read it too."""
        if node not in self._summed:
            body = AlgebraicCompiler(self, node)._summed_change()
            read_twice = node in self.whole_groups.at_start.values()
            self._summed[node] = self.emit_once(body) if read_twice else self._emit(body)
        return self._summed[node]

    def helper_columns(self, agg: Aggregate) -> str:
        """The CTE (computed once) of `agg`'s groups over its whole input with the helper columns a stored state
        holds (`__key<j>`, `__cnt`, `__sum_<i>`, `__nn_<i>`)."""
        if agg not in self._helpers:
            self._helpers[agg] = self.emit_once(HelperColumns(self, agg).grouped(agg.child))
        return self._helpers[agg]

    def emit_once(self, body: exp.Query) -> str:
        """`body` as a CTE computed once for all its readers (`_computed_once`)."""
        once = exp.GTE(this=exp.Rand(), expression=number(0))
        return self._emit(exp.select(exp.Star()).from_(body.subquery("o", copy=False)).where(once, copy=False))

    def _change_read(self, node: Node) -> exp.Query:
        assert isinstance(node, ChangeRead)
        scan = node.scan
        changes = self.sources.changes(scan.table)
        items = [alias(col(c, "s"), f"{scan.alias}.{c}") for c, _ in scan.schema]
        select = exp.select(*items, col(ROW_ID, "s"), col(ACTION, "s")).from_(_relation(changes).as_("s", quoted=True))
        if node.append_only:  # fresh inserts: ids with no DELETE in the interval
            deleted = (exp.select(col(ROW_ID)).from_(_relation(changes))
                       .where(exp.EQ(this=col(ACTION), expression=string(DELETE)), copy=False))
            select = select.join(deleted.subquery("d", copy=False),
                                 on=exp.EQ(this=col(ROW_ID, "s"), expression=col(ROW_ID, "d")),
                                 join_type="LEFT ANTI", copy=False).where(is_insert(col(ACTION, "s")), copy=False)
        return select

    def _stored_state(self, node: Node) -> exp.Query:
        assert isinstance(node, StoredState)
        state = getattr(self.sources, "state", None)
        if state is None:
            raise ValueError("the plan reads a stored aggregate state, and these sources have none")
        return exp.select(*_cols(node)).from_(_relation(state()))

    # -- relational operators ----------------------------------------------------------------------------------------

    def _filter(self, node: Node) -> exp.Query:
        assert isinstance(node, Filter)
        return exp.select(exp.Star()).from_(self.source(node.child)).where(node.condition.expr.copy(), copy=False)

    def _project(self, node: Node) -> exp.Query:
        assert isinstance(node, Project)
        items = [alias(e.expr.copy(), n) for n, e in node.outputs]
        return exp.select(*items, *_meta(node)).from_(self.source(node.child))

    def _join(self, node: Node) -> exp.Query:
        assert isinstance(node, Join)
        if node.kind in FILTERING_JOINS:  # the left rows as they are: their ids, their actions
            cond = node.condition.expr.copy() if node.condition is not None else exp.true()
            return (exp.select(*_cols(node.left, "l"), *_meta(node, "l")).from_(self.source(node.left, "l"))
                    .join(self.source(node.right, "r"), on=cond, join_type=f"LEFT {node.kind.upper()}", copy=False))
        delta_side = "l" if node.left.is_delta else "r"
        items = _cols(node.left, "l") + _cols(node.right, "r")
        items.append(alias(hash_ids([col(ROW_ID, "l"), col(ROW_ID, "r")]), ROW_ID))
        if node.is_delta:
            items.append(col(ACTION, delta_side))
        side, kind = _JOIN_SIDES[node.kind]
        on: exp.Expr | None = node.condition.expr.copy() if node.condition is not None else None
        return exp.select(*items).from_(self.source(node.left, "l")).join(
            _join(side, kind, self.source(node.right, "r"), on), copy=False)

    def _aggregate(self, node: Node) -> exp.Query:
        assert isinstance(node, Aggregate)
        if node in self.whole_groups.at_end:  # typed by the original aggregate, whose input holds the scans
            groups = HelperColumns(self, self.whole_groups.at_end[node].agg)
            return exp.select(*groups.outputs("h", INSERT)[:-1]).from_(_from(self.helper_columns(node), "h"))
        if node in self.whole_groups.at_start:
            return self._groups_at_start(node, self.whole_groups.at_start[node])
        keys = [k.expr for _, k in node.keys]
        items = [alias(k.expr.copy(), n) for n, k in node.keys] + [alias(_agg_call(a), n) for n, a in node.aggs]
        select = exp.select(*items, alias(hash_values([k.copy() for k in keys]), ROW_ID)).from_(self.source(node.child))
        return select.group_by(*(k.copy() for k in keys), copy=False) if keys else select

    def _window(self, node: Node) -> exp.Query:
        assert isinstance(node, Window)
        items = [alias(e.expr.copy(), n) for n, e in node.outputs]
        return exp.select(*_cols(node.child), *items, *_meta(node)).from_(self.source(node.child))

    def _generate(self, node: Node) -> exp.Query:
        """Always posexplode: the position makes each element's row id (and is the first column of posexplode)."""
        assert isinstance(node, Generate)
        values = node.names[1:] if node.function == "posexplode" else node.names
        inner = ["__pos"] + [f"__g{i}" for i in range(len(values))]
        generated = ([alias(col("__pos", "g"), node.names[0])] if node.function == "posexplode" else [])
        generated += [alias(col(f"__g{i}", "g"), n) for i, n in enumerate(values)]
        row_id = alias(hash_ids([col(ROW_ID, "t"), cast(col("__pos", "g"), "STRING")]), ROW_ID)
        meta = [col(ACTION, "t")] if node.is_delta else []
        select = exp.select(*_cols(node.child, "t"), *generated, row_id, *meta).from_(self.source(node.child))
        select.append("laterals", exp.Lateral(this=exp.Posexplode(this=node.arg.expr.copy()), view=True,
                                              outer=node.outer or None,
                                              alias=exp.TableAlias(this=ident("g"), columns=[ident(c) for c in inner])))
        return select

    def _union(self, node: Node) -> exp.Query:
        assert isinstance(node, UnionAll)
        names = node.columns()
        branches: list[exp.Query] = []
        for i, child in enumerate(node.inputs):
            items: list[exp.Expr] = [alias(col(c), n) for c, n in zip(child.columns(), names)]
            items.append(alias(call("concat", string(f"b{i}:"), col(ROW_ID)), ROW_ID))
            if node.is_delta:
                items.append(col(ACTION))
            branches.append(exp.select(*items).from_(self.source(child)))
        return _union_all(branches)

    def _distinct(self, node: Node) -> exp.Query:
        assert isinstance(node, Distinct)
        return (exp.select(*_cols(node), alias(hash_values(_cols(node)), ROW_ID)).from_(self.source(node.child))
                .group_by(*_cols(node), copy=False))

    # -- derivative operators ----------------------------------------------------------------------------------------

    def _empty(self, node: Node) -> exp.Query:
        assert isinstance(node, Empty)
        return (exp.select(exp.Star(), alias(string(INSERT), ACTION)).from_(self.source(node.like))
                .where(exp.false(), copy=False))

    def _signed(self, node: Node) -> exp.Query:
        assert isinstance(node, Signed)
        return exp.select(exp.Star(), alias(string(node.action), ACTION)).from_(self.source(node.child))

    def _sum(self, node: Node) -> exp.Query:
        assert isinstance(node, Sum)
        return _union_all([exp.select(*_cols(node), col(ROW_ID), col(ACTION)).from_(self.source(t))
                           for t in node.terms])

    def _keyset(self, node: Node) -> exp.Query:
        assert isinstance(node, KeySet)
        parts: list[exp.Query] = []
        for child, exprs in zip(node.inputs, node.exprs):
            items = [alias(e.expr.copy(), f"__k{i}") for i, e in enumerate(exprs)] or [alias(number(1), "__any")]
            parts.append(exp.select(*items).distinct().from_(self.source(child)))
        out = parts[0]
        for p in parts[1:]:
            out = exp.Union(this=out, expression=p, distinct=True)
        return out

    def _renamed(self, node: Node) -> exp.Select:
        """`node`'s rows from the read of its table computed once for every alias (`shared_reads`)."""
        assert isinstance(node, Restrict) and isinstance(node.child, Snapshot)
        scan = node.child.scan
        items = [alias(col(f"{SHARED_ALIAS}.{c}", "r"), f"{scan.alias}.{c}") for c, _ in scan.schema]
        return exp.select(*items, col(ROW_ID, "r")).from_(_from(self._computed_once(self.aliased[node]), "r"))

    def held(self, node: Node) -> exp.Select | None:
        """`node`'s rows as the caller holds them (`Sources.held`), columns renamed for this reader; None where
        `node` is no restricted read of change keys or the caller computes none."""
        if not self.hold_reads:
            return None
        if node not in self._held:
            self._held[node] = self._held_read(node)
        found = self._held[node]
        return found.copy() if found is not None else None

    def _held_read(self, node: Node) -> exp.Select | None:
        read = held_read(node)
        canonical = canonical_read(node)
        if read is None or canonical is None:
            return None

        def query() -> exp.Select:
            alone = Compiler(self.sources, broadcast_keys=self.broadcast_keys, hold_reads=False)
            return alone.query(exp.select(exp.Star()).from_(_from(alone.name(canonical))))

        view = self.sources.held(read, query)  # type: ignore[attr-defined]
        if view is None:
            return None
        assert isinstance(node, Restrict) and isinstance(node.child, Snapshot)
        scan = node.child.scan
        items = [alias(col(f"{SHARED_ALIAS}.{c}", "r"), f"{scan.alias}.{c}") for c, _ in scan.schema]
        return exp.select(*items, col(ROW_ID, "r")).from_(_relation(view).as_("r", quoted=True))

    def _restrict(self, node: Node) -> exp.Query:
        assert isinstance(node, Restrict)
        held = self.held(node)
        if held is not None:
            return held
        if node in self.aliased:
            return self._renamed(node)
        if node.keys.width == 0:
            on: exp.Expr = exp.true()
        else:
            on = exp.or_(*(exp.and_(*(exp.NullSafeEQ(this=e.expr.copy(), expression=col(f"__k{i}", "k"))
                                      for i, e in enumerate(alt)))
                           for alt in node.alternatives))
        select = (exp.select(exp.Star()).from_(self.source(node.child))
                  .join(self.source(node.keys, "k"), on=on, join_type="LEFT SEMI", copy=False))
        if self.broadcast_keys:
            select.set("hint", exp.Hint(expressions=[exp.JoinHint(this="BROADCAST", expressions=[
                exp.Table(this=ident("k"))])]))
        return select

    def _consolidate(self, node: Node) -> exp.Query:
        assert isinstance(node, Consolidate)
        # GROUP BY treats NULLs as equal, which is the NULL-safe comparison consolidation needs.
        net = (exp.select(*_cols(node), col(ROW_ID), alias(exp.Sum(this=sign()), "__n"))
               .from_(self.source(node.child)).group_by(*_cols(node), col(ROW_ID), copy=False)
               .having(exp.NEQ(this=col("__n"), expression=number(0)), copy=False))
        action = exp.Case(ifs=[exp.If(this=exp.GT(this=col("__n", "c"), expression=number(0)), true=string(INSERT))],
                          default=string(DELETE))
        copies = exp.Lateral(this=exp.Explode(this=call("sequence", number(1), exp.Abs(this=col("__n", "c")))),
                             view=True, alias=exp.TableAlias(columns=[ident("__copy")]))
        select = exp.select(*_cols(node, "c"), col(ROW_ID, "c"), alias(action, ACTION)).from_(
            net.subquery(ident("c"), copy=False))
        select.append("laterals", copies)
        return select

    def _algebraic(self, node: Node) -> exp.Query:
        assert isinstance(node, AlgebraicAggregateDelta)
        return AlgebraicCompiler(self, node).compile()

    def _from_end(self, node: Node) -> exp.Query:
        assert isinstance(node, AggregateFromEnd)
        return FromEndCompiler(self, node).compile()

    def _counted_semi(self, node: Node) -> exp.Query:
        assert isinstance(node, CountedSemiJoinDelta)
        return CountedSemiCompiler(self, node).compile()


class HelperColumns:
    """An algebraic aggregate's groups as the helper columns a stored state holds (`__key<j>`, `__cnt`,
    `__sum_<i>`, `__nn_<i>`), and its output columns computed back from them."""

    def __init__(self, compiler: Compiler, agg: Aggregate) -> None:
        self.c, self.agg = compiler, agg
        self.keys = [k.expr for _, k in agg.keys]
        self.args = helper_args(agg)
        self.summed = {a.arg for _, a in agg.aggs if a.func in ("SUM", "AVG")}

    def helpers(self) -> list[tuple[str, exp.Expr]]:
        """(helper column, its aggregate over the input's rows) in the order `outputs` reads them."""
        out: list[tuple[str, exp.Expr]] = [("__cnt", exp.Count(this=exp.Star()))]
        for i, a in enumerate(self.args):
            if a in self.summed:
                out.append((f"__sum_{i}", exp.Sum(this=a.expr.copy())))
            out.append((f"__nn_{i}", exp.Count(this=a.expr.copy())))
        return out

    def grouped(self, source: Node) -> exp.Select:
        """The helper columns of `source`'s groups."""
        items = [alias(k.copy(), f"__key{j}") for j, k in enumerate(self.keys)]
        items += [alias(agg, name) for name, agg in self.helpers()]
        return exp.select(*items).from_(self.c.source(source)).group_by(*(k.copy() for k in self.keys), copy=False)

    @staticmethod
    def change_of(name: str) -> str:
        """The summed change's column (`AlgebraicCompiler._summed_change`) of helper column `name`."""
        return {"__cnt": "__dcnt"}.get(name, name.replace("__sum_", "__dsum_").replace("__nn_", "__dnn_"))

    def less_change(self, name: str, at_end: str, change: str) -> exp.Expr:
        """Helper column `name` at I0: its value at I1 (in `at_end`) less the change's (in `change`); Q|I0 = Q|I1 −
        ΔQ, exact for the integers and decimals `AggregateFromEnd` takes."""
        return self._with_change(exp.Sub, name, at_end, change)

    def plus_change(self, name: str, old: str, change: str) -> exp.Expr:
        """Helper column `name` after the change: its stored value (in `old`) plus the change's (in `change`), a
        missing side counting 0."""
        return self._with_change(exp.Add, name, old, change)

    def _with_change(self, op: type[exp.Binary], name: str, rel: str, change: str) -> exp.Expr:
        value: exp.Expr = op(this=call("coalesce", col(name, rel), number(0)),
                             expression=call("coalesce", col(self.change_of(name), change), number(0)))
        if name.startswith("__sum_"):  # typed as the aggregate's SUM
            total = sum_type(arg_type(self.agg, self.args[int(name.removeprefix("__sum_"))]))
            assert total is not None
            value = cast(value, total)
        return value

    def outputs(self, rel: str, action: str) -> list[exp.Expr]:
        items: list[exp.Expr] = [alias(col(f"__key{j}", rel), n) for j, (n, _) in enumerate(self.agg.keys)]
        for name, c in self.agg.aggs:
            if c.arg is None:
                items.append(alias(col("__cnt", rel), name))
                continue
            i = self.args.index(c.arg)
            nn = col(f"__nn_{i}", rel)
            if c.func == "COUNT":
                items.append(alias(nn, name))
                continue
            value = (col(f"__sum_{i}", rel) if c.func == "SUM" else
                     avg_expression(arg_type(self.agg, c.arg), col(f"__sum_{i}", rel), nn.copy()))
            assert value is not None
            empty = exp.EQ(this=nn.copy(), expression=number(0))
            items.append(alias(exp.Case(ifs=[exp.If(this=empty, true=exp.Null())], default=value), name))
        items.append(alias(hash_values([col(f"__key{j}", rel) for j in range(len(self.keys))]), ROW_ID))
        items.append(alias(string(action), ACTION))
        return items


def keys_struct(keys: list[exp.Expr]) -> exp.Expr:
    """A group's keys as one struct (fields ``k0``, ``k1``...): never NULL, and equal (``=``) exactly where every key
    is equal or NULL on both sides, as ``<=>`` per key. A join on it has the struct as its one key, which the change's
    aggregate grouped by it is partitioned by already; Spark plans ``<=>`` as ``coalesce(k, default), isnull(k)``,
    which the aggregate's partitioning by ``k`` is not, so the aggregate's rows were shuffled again."""
    return call("named_struct", *[e for j, k in enumerate(keys) for e in (string(f"k{j}"), k)])


class AlgebraicCompiler(HelperColumns):
    """`AlgebraicAggregateDelta`: DELETE the stored row of every key the change set touches, INSERT old + ΣΔ (when
    rows remain). A scalar aggregate has exactly one stored row and always re-emits it (COUNT 0, SUM NULL when
    empty); unchanged pairs cancel in consolidation."""

    def __init__(self, compiler: Compiler, node: AlgebraicAggregateDelta | AggregateFromEnd) -> None:
        super().__init__(compiler, node.agg)
        self.delta = node.delta
        self.node = node

    def _on(self) -> exp.Expr:
        pairs = [exp.NullSafeEQ(this=col(f"__key{j}", "o"), expression=col(f"__key{j}", "d"))
                 for j in range(len(self.keys))]
        return exp.and_(*pairs) if pairs else exp.true()

    def _summed_change(self, packed: str | None = None) -> exp.Select:
        """ΣΔ per key: the change in row count, in each summed argument and in its non-null count. ``packed``: the
        keys as one struct column of that name (``keys_struct``), grouped by it, instead of a column each."""
        items = [alias(k.copy(), f"__key{j}") for j, k in enumerate(self.keys)] if packed is None else \
            [alias(keys_struct([k.copy() for k in self.keys]), packed)]
        items.append(alias(exp.Sum(this=sign()), "__dcnt"))
        for i, a in enumerate(self.args):
            if a in self.summed:
                signed = exp.Case(ifs=[exp.If(this=is_insert(), true=a.expr.copy())],
                                  default=exp.Neg(this=exp.Paren(this=a.expr.copy())))
                items.append(alias(exp.Sum(this=signed), f"__dsum_{i}"))
            not_null = exp.Case(ifs=[exp.If(this=exp.Is(this=a.expr.copy(), expression=exp.Null()), true=number(0))],
                                default=sign())
            items.append(alias(exp.Sum(this=not_null), f"__dnn_{i}"))
        select = exp.select(*items).from_(self.c.source(self.delta))
        if packed is not None and self.keys:
            return select.group_by(keys_struct([k.copy() for k in self.keys]), copy=False)
        return select.group_by(*(k.copy() for k in self.keys), copy=False) if self.keys else select

    def _merged(self, d: str, state: str) -> exp.Select:
        items: list[exp.Expr] = [alias(col(f"__key{j}", "d"), f"__key{j}") for j in range(len(self.keys))]
        items += [alias(self.plus_change(name, "o", "d"), name) for name, _ in self.helpers()]
        return exp.select(*items).from_(_from(d, "d")).join(_from(state, "o"), on=self._on(), join_type="LEFT OUTER",
                                                            copy=False)

    def compile(self) -> exp.Query:
        assert isinstance(self.node, AlgebraicAggregateDelta)
        state = self.c.name(self.node.state)
        # ΣΔ is read twice (the new rows and the stored rows it touches): computed once, or Spark would join and
        # aggregate the change again for the second (TPC-H Q3: the restricted orders scanned twice)
        d = self.c.emit_once(self._summed_change())
        touched = exp.select(exp.Star()).from_(_from(state, "o")).join(_from(d, "d"), on=self._on(),
                                                                       join_type="LEFT SEMI", copy=False)
        if self.c.broadcast_keys and self.c.broadcast_state and self.keys:
            # A small change touches few of many groups (TPC-H Q10 at SF 10: 482 of 381,814 customers): the stored
            # rows it touches are found by broadcasting ΣΔ into one scan of the state, computed once, and the new
            # rows join ΣΔ with those. Joining ΣΔ with the whole state (a LEFT OUTER join cannot broadcast its
            # preserved side) shuffled every stored row twice, and read the state twice.
            touched.set("hint", exp.Hint(expressions=[exp.JoinHint(this="BROADCAST", expressions=[
                exp.Table(this=ident("d"))])]))
            old = self.c.emit_once(touched)
            new = self.c._emit(self._merged(d, old))
        else:
            new = self.c._emit(self._merged(d, state))
            old = self.c._emit(touched)
        removed = exp.select(*self.outputs("o", DELETE)).from_(_from(old, "o"))
        added = exp.select(*self.outputs("n", INSERT)).from_(_from(new, "n"))
        if self.keys:
            added = added.where(exp.GT(this=col("__cnt", "n"), expression=number(0)), copy=False)
        return _union_all([removed, added])


class FromEndCompiler(AlgebraicCompiler):
    """`AggregateFromEnd`: the touched groups' helper columns at I1 (`__cnt`, `__sum_<i>`, `__nn_<i>`, as a stored
    state holds them) computed from Q|I1 ⋉ K, those at I0 as they less ΣΔ, both rows of a group from one row
    (`stack`), so Q|I1 is read once (Spark would compute a CTE read twice twice)."""

    def __init__(self, compiler: Compiler, node: AggregateFromEnd) -> None:
        super().__init__(compiler, node)
        self.end = node.end

    def _at_end(self) -> exp.Select | str:
        """The touched groups' helper columns at I1: from the groups of the whole relation at I1 where the plan
        aggregates it anyway (`WholeGroups`: the other groups find no change to join), else from Q|I1 ⋉ K."""
        if self.node in self.c.whole_groups.recomputed:
            return self.c.helper_columns(self.agg.copy(child=unrestricted(self.end)))
        return self.grouped(self.end)

    def compile(self) -> exp.Query:
        assert isinstance(self.node, AggregateFromEnd)
        d = self.c.summed_change(self.node)
        helpers = [name for name, _ in self.helpers()]
        keys = [col(f"__key{j}", "d") for j in range(len(self.keys))]
        # at I0: at I1 less the change (a group without rows at I1 has no row there)
        old = [self.less_change(name, "n", "d") for name in helpers]
        new = [col(name, "n") for name in helpers]
        both = call("stack", number(2), string(DELETE), *keys, *old, string(INSERT), *(k.copy() for k in keys), *new)
        names = ["__act"] + [f"__key{j}" for j in range(len(self.keys))] + helpers
        on = exp.and_(*(exp.NullSafeEQ(this=col(f"__key{j}", "d"), expression=col(f"__key{j}", "n"))
                        for j in range(len(self.keys))))
        select = (exp.select(*self.outputs("s", INSERT)[:-1], alias(col("__act", "s"), ACTION))
                  .from_(_from(d, "d"))
                  .join(_from_query(self._at_end(), "n"), on=on, join_type="LEFT OUTER", copy=False)
                  .where(exp.GT(this=col("__cnt", "s"), expression=number(0)), copy=False))
        select.append("laterals", exp.Lateral(this=both, view=True, alias=exp.TableAlias(
            this=ident("s"), columns=[ident(c) for c in names])))
        return select


class CountedSemiCompiler:
    """`CountedSemiJoinDelta`: R's rows per key at I1 (`__n1`) and at I0 (`__n0` = `__n1` less ΔR's signed count),
    one row per key (`__v<i>`), joined to the rows of L to judge; see the node for why."""

    def __init__(self, compiler: Compiler, node: CountedSemiJoinDelta) -> None:
        self.c, self.node = compiler, node
        self.values = [f"__v{i}" for i in range(len(node.keys.right))]

    def _per_key(self, source: Node, total: exp.Expr, name: str) -> exp.Select:
        keys = [k.expr for k in self.node.keys.right]
        items = [alias(k.copy(), v) for k, v in zip(keys, self.values)] + [alias(total, name)]
        return exp.select(*items).from_(self.c.source(source)).group_by(*(k.copy() for k in keys), copy=False)

    def _counts(self) -> exp.Select:
        """Per key of R|I1 ⋉ K or ΔR: `__n1`, `__n0`. GROUP BY and `<=>` keep NULL keys as one key, which only
        a NULL-safe condition matches."""
        at_end = self._per_key(self.node.ends, exp.Count(this=exp.Star()), "__n")
        change = self._per_key(self.node.right_delta, exp.Sum(this=sign()), "__d")
        on = exp.and_(*(exp.NullSafeEQ(this=col(v, "c"), expression=col(v, "d")) for v in self.values))
        n1 = call("coalesce", col("__n", "c"), number(0))
        items = [alias(call("coalesce", col(v, "c"), col(v, "d")), v) for v in self.values]
        items += [alias(n1, "__n1"),
                  alias(exp.Sub(this=n1.copy(), expression=call("coalesce", col("__d", "d"), number(0))), "__n0")]
        return exp.select(*items).from_(at_end.subquery(ident("c"), copy=False)).join(
            change.subquery(ident("d"), copy=False), on=on, join_type="FULL OUTER", copy=False)

    def _judged(self) -> exp.Query:
        """The rows to judge, `__old` telling L|I0's rows (their action is decided here) from ΔL's."""
        node = self.node
        old = exp.select(*_cols(node.old), col(ROW_ID), alias(string(DELETE), ACTION), alias(exp.true(), "__old"))
        parts: list[exp.Query] = [old.from_(self.c.source(node.old))]
        if node.changed is not None:
            parts.insert(0, exp.select(*_cols(node.changed), col(ROW_ID), col(ACTION), alias(exp.false(), "__old"))
                         .from_(self.c.source(node.changed)))
        return _union_all(parts)

    def compile(self) -> exp.Query:
        node = self.node

        def present(count: str) -> exp.Expr:
            matched = exp.Paren(this=exp.GT(this=call("coalesce", col(count, "e"), number(0)), expression=number(0)))
            return exp.Paren(this=exp.Not(this=matched)) if node.anti else matched

        eq = {False: exp.EQ, True: exp.NullSafeEQ}
        on = exp.and_(*(eq[n](this=k.expr.copy(), expression=col(v, "e"))
                        for k, v, n in zip(node.keys.left, self.values, node.keys.null_safe)))
        old = col("__old", "x")
        action = exp.Case(ifs=[exp.If(this=old, true=exp.Case(ifs=[exp.If(this=present("__n1"), true=string(INSERT))],
                                                                default=string(DELETE)))],
                          default=col(ACTION, "x"))
        keep = exp.Case(ifs=[exp.If(this=old.copy(), true=exp.NEQ(this=present("__n0"), expression=present("__n1")))],
                        default=present("__n1"))
        select = (exp.select(*_cols(node, "x"), col(ROW_ID, "x"), alias(action, ACTION))
                  .from_(self._judged().subquery(ident("x"), copy=False))
                  .join(self._counts().subquery(ident("e"), copy=False), on=on, join_type="LEFT OUTER", copy=False)
                  .where(keep, copy=False))
        if self.c.broadcast_keys:  # one row per key of the change: as small as the key sets
            select.set("hint", exp.Hint(expressions=[exp.JoinHint(this="BROADCAST", expressions=[
                exp.Table(this=ident("e"))])]))
        return select


def _inputs(node: Node) -> tuple[Node, ...]:
    return node.children() + ((node.like,) if isinstance(node, Empty) else ())


def shared_nodes(plan: Node) -> frozenset[Node]:
    """Nodes that more than one parent reads (the same snapshot in two derivative terms, a key set read twice)."""
    uses: dict[Node, int] = {}
    for node in each_once(plan, _inputs):
        for child in _inputs(node):
            uses[child] = uses.get(child, 0) + 1
    return frozenset(n for n, k in uses.items() if k > 1)


def compile_plan(plan: Node, sources: Sources, *, broadcast_keys: bool = False, broadcast_state: bool = True,
                 share_aliases: bool = False) -> tuple[Compiler, str]:
    """A compiler holding `plan`'s CTEs (At pushed into the leaves) and the name of the CTE with its rows;
    `broadcast_keys`: the key sets of restrictions are small (see `Compiler`); `broadcast_state`: with them, the
    stored state is large enough to be probed with the change's groups broadcast rather than shuffled;
    `share_aliases`: a restricted snapshot read under several aliases is computed once (`shared_reads`)."""
    plan = pushed(plan)
    compiler = plan_compiler(plan, sources, broadcast_keys=broadcast_keys, broadcast_state=broadcast_state,
                             share_aliases=share_aliases)
    return compiler, compiler.name(plan)


def plan_compiler(plan: Node, sources: Sources, *, broadcast_keys: bool = False, broadcast_state: bool = True,
                  share_aliases: bool = False) -> Compiler:
    """An empty compiler for `plan` (pushed), knowing which of its nodes are shared (`compile_plan`'s options)."""
    return Compiler(sources, shared_nodes(plan), broadcast_keys=broadcast_keys, broadcast_state=broadcast_state,
                    whole_groups=whole_groups_read_twice(plan), aliased=shared_reads(plan) if share_aliases else None)


def unrestricted(node: Node) -> Node:
    """`node` without its restrictions and key-pruned reads: the whole relation they narrow."""
    def strip(n: Node) -> Node:
        if isinstance(n, Restrict):
            return n.child
        return n.copy(keys=()) if isinstance(n, Snapshot) and n.keys else n
    return map_bottom_up(node, strip)


def at_end_of(node: Node) -> Node:
    """`node` with its snapshots at I0 taken at I1."""
    return map_bottom_up(node, lambda n: n.copy(when="end") if isinstance(n, Snapshot) and n.when == "start" else n)


@dataclass(frozen=True)
class WholeGroups:
    """Aggregates of whole snapshots whose groups an `AggregateFromEnd` also recomputes at I1 (from the same
    relation, restricted to the changed keys). TPC-H Q15 takes the MAX of its sums per supplier at I0 and at I1, so
    it aggregates all of lineitem at both ends anyway, and again the touched suppliers at I1 (a scan that skips no
    file: their rows are everywhere). One aggregate of lineitem at I1 with the helper columns (counts and sums)
    serves all three: the sums at I1 are computed from it, the touched groups' values at I1 read from it, and the
    sums at I0 are it less the change (exact: integers and decimals only, as `AggregateFromEnd` takes)."""

    at_end: Mapping[Aggregate, AggregateFromEnd] = field(default_factory=dict)
    at_start: Mapping[Aggregate, AggregateFromEnd] = field(default_factory=dict)
    recomputed: frozenset[AggregateFromEnd] = frozenset()  # those that read the whole groups at I1


def whole_groups_read_twice(plan: Node) -> WholeGroups:
    nodes = list(each_once(plan))
    recomputing = {(unrestricted(n.end), n.agg.keys, n.agg.aggs): n for n in nodes if isinstance(n, AggregateFromEnd)}
    wholes = [n for n in nodes if isinstance(n, Aggregate) and not n.is_delta]
    at_end = {n: recomputing[(n.child, n.keys, n.aggs)] for n in wholes if (n.child, n.keys, n.aggs) in recomputing}
    at_start = {n: recomputing[(at_end_of(n.child), n.keys, n.aggs)] for n in wholes
                if n not in at_end and (at_end_of(n.child), n.keys, n.aggs) in recomputing}
    recomputed = frozenset([*at_end.values(), *at_start.values()])
    return WholeGroups(at_end, at_start, recomputed)
