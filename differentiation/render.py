"""Plans (relational and derivative) -> Spark SQL text over the caller's `Sources`.

Each node renders as one parenthesisable SELECT exposing its columns (quoted plan names), then
`__row_id`, then `__action` for change sets. Base scans are rendered only inside an `At`, which
fixes the snapshot they read.
"""

from __future__ import annotations

from collections.abc import Callable

from differentiation.delta_nodes import At, ChangeRead, Consolidate, Delta, Empty, KeySet, Restrict, Signed, Sum
from differentiation.rules.aggregate_algebraic import AlgebraicAggregateDelta
from differentiation.plan import AggCall, Aggregate, Distinct, Filter, Join, Node, Project, Scan, UnionAll
from differentiation.sources import Sources


def q(name: str) -> str:
    """Quote a column name as a Spark identifier."""
    return "`" + name.replace("`", "``") + "`"


def hash_ids(parts: list[str]) -> str:
    """An opaque id from several nullable strings: unambiguous (length-prefixed), NULL-safe ('~')."""
    coded = [f"coalesce(concat(CAST(length({p}) AS STRING), ':', {p}), '~')" for p in parts]
    return f"sha1(concat({', '.join(coded)}))"


def hash_values(exprs: list[str]) -> str:
    """Row id of a group or a distinct row: a hash of its values cast to strings (NULL-safe)."""
    if not exprs:
        return "sha1('scalar aggregate')"
    return hash_ids([f"CAST({e} AS STRING)" for e in exprs])


_JOIN_SQL = {"inner": "JOIN", "cross": "CROSS JOIN", "left": "LEFT OUTER JOIN", "right": "RIGHT OUTER JOIN",
             "full": "FULL OUTER JOIN"}


def agg_sql(call: AggCall) -> str:
    if call.arg is None:
        return "COUNT(*)"
    return f"{call.func}({'DISTINCT ' if call.distinct else ''}{call.arg.sql})"


class Renderer:
    """Renders one plan against `sources`; `when` is the snapshot base scans read (set by `At`)."""

    def __init__(self, sources: Sources) -> None:
        self.sources = sources
        self._dispatch: dict[type[Node], Callable[[Node, str | None], str]] = {
            Scan: self._scan, Filter: self._filter, Project: self._project, Join: self._join,
            Aggregate: self._aggregate, UnionAll: self._union, Distinct: self._distinct,
            At: self._at, ChangeRead: self._change_read, Empty: self._empty, Signed: self._signed,
            Sum: self._sum, KeySet: self._keyset, Restrict: self._restrict, Consolidate: self._consolidate,
            AlgebraicAggregateDelta: self._algebraic,
        }

    def render(self, node: Node, when: str | None = None) -> str:
        if isinstance(node, Delta):
            raise ValueError("a Δ is left in the plan: differentiate it before rendering")
        return self._dispatch[type(node)](node, when)

    @staticmethod
    def _meta(node: Node, prefix: str = "") -> str:
        return f"{prefix}__row_id" + (f", {prefix}__action" if node.is_delta else "")

    @staticmethod
    def _cols(node: Node, prefix: str = "") -> str:
        return ", ".join(prefix + q(c) for c in node.columns())

    def _scan(self, node: Node, when: str | None) -> str:
        assert isinstance(node, Scan)
        if when is None:
            raise ValueError(f"scan of {node.table} outside a snapshot")
        cols = ", ".join(f"{q(c)} AS {q(f'{node.alias}.{c}')}" for c, _ in node.schema)
        return f"SELECT {cols}, __row_id FROM {self.sources.snapshot(node.table, when)} AS s"  # type: ignore[arg-type]

    def _change_read(self, node: Node, when: str | None) -> str:
        assert isinstance(node, ChangeRead)
        scan = node.scan
        cols = ", ".join(f"s.{q(c)} AS {q(f'{scan.alias}.{c}')}" for c, _ in scan.schema)
        src = self.sources.changes(scan.table)
        sql = f"SELECT {cols}, s.__row_id, s.__action FROM {src} AS s"
        if node.append_only:
            sql += (f" LEFT ANTI JOIN (SELECT __row_id FROM {src} AS d0 WHERE __action = 'DELETE') AS d"
                    " ON s.__row_id = d.__row_id WHERE s.__action = 'INSERT'")
        return sql

    def _at(self, node: Node, when: str | None) -> str:
        assert isinstance(node, At)
        return self.render(node.child, node.when)

    def _filter(self, node: Node, when: str | None) -> str:
        assert isinstance(node, Filter)
        return f"SELECT * FROM ({self.render(node.child, when)}) AS t WHERE {node.condition.sql}"

    def _project(self, node: Node, when: str | None) -> str:
        assert isinstance(node, Project)
        cols = ", ".join(f"{e.sql} AS {q(n)}" for n, e in node.outputs)
        return f"SELECT {cols}, {self._meta(node)} FROM ({self.render(node.child, when)}) AS t"

    def _join(self, node: Node, when: str | None) -> str:
        assert isinstance(node, Join)
        delta_side = "l" if node.left.is_delta else "r"
        action = f", {delta_side}.__action" if node.is_delta else ""
        on = f" ON {node.condition.sql}" if node.condition is not None else ""
        return (f"SELECT {self._cols(node.left, 'l.')}, {self._cols(node.right, 'r.')}, "
                f"{hash_ids(['l.__row_id', 'r.__row_id'])} AS __row_id{action} "
                f"FROM ({self.render(node.left, when)}) AS l {_JOIN_SQL[node.kind]} "
                f"({self.render(node.right, when)}) AS r{on}")

    def _aggregate(self, node: Node, when: str | None) -> str:
        assert isinstance(node, Aggregate)
        keys = [k.sql for _, k in node.keys]
        items = [f"{k.sql} AS {q(n)}" for n, k in node.keys] + [f"{agg_sql(a)} AS {q(n)}" for n, a in node.aggs]
        group = f" GROUP BY {', '.join(keys)}" if keys else ""
        return (f"SELECT {', '.join(items)}, {hash_values(keys)} AS __row_id "
                f"FROM ({self.render(node.child, when)}) AS t{group}")

    def _union(self, node: Node, when: str | None) -> str:
        assert isinstance(node, UnionAll)
        names = node.columns()
        branches = []
        for i, child in enumerate(node.inputs):
            cols = ", ".join(f"{q(c)} AS {q(n)}" for c, n in zip(child.columns(), names))
            action = ", __action" if node.is_delta else ""
            branches.append(f"SELECT {cols}, concat('b{i}:', __row_id) AS __row_id{action} "
                            f"FROM ({self.render(child, when)}) AS t")
        return " UNION ALL ".join(f"({b})" for b in branches)

    def _distinct(self, node: Node, when: str | None) -> str:
        assert isinstance(node, Distinct)
        cols = [q(c) for c in node.columns()]
        return (f"SELECT {', '.join(cols)}, {hash_values(cols)} AS __row_id "
                f"FROM ({self.render(node.child, when)}) AS t GROUP BY {', '.join(cols)}")

    def _empty(self, node: Node, when: str | None) -> str:
        assert isinstance(node, Empty)
        return f"SELECT *, 'INSERT' AS __action FROM ({self.render(node.like, 'end')}) AS t WHERE false"

    def _signed(self, node: Node, when: str | None) -> str:
        assert isinstance(node, Signed)
        return f"SELECT *, '{node.action}' AS __action FROM ({self.render(node.child, when)}) AS t"

    def _sum(self, node: Node, when: str | None) -> str:
        assert isinstance(node, Sum)
        cols = self._cols(node)
        return " UNION ALL ".join(
            f"(SELECT {cols}, __row_id, __action FROM ({self.render(t, when)}) AS t)" for t in node.terms
        )

    def _keyset(self, node: Node, when: str | None) -> str:
        assert isinstance(node, KeySet)
        parts = []
        for child, exprs in zip(node.inputs, node.exprs):
            items = ", ".join(f"{e.sql} AS __k{i}" for i, e in enumerate(exprs)) or "1 AS __any"
            parts.append(f"(SELECT DISTINCT {items} FROM ({self.render(child, when)}) AS t)")
        return " UNION ".join(parts)

    def _restrict(self, node: Node, when: str | None) -> str:
        assert isinstance(node, Restrict)
        if node.keys.width == 0:
            on = "true"
        else:
            on = " OR ".join(
                "(" + " AND ".join(f"{e.sql} <=> k.__k{i}" for i, e in enumerate(alt)) + ")"
                for alt in node.alternatives
            )
        return (f"SELECT * FROM ({self.render(node.child, when)}) AS t "
                f"LEFT SEMI JOIN ({self.render(node.keys, when)}) AS k ON {on}")

    def _algebraic(self, node: Node, when: str | None) -> str:
        from differentiation.render_algebraic import render_algebraic

        assert isinstance(node, AlgebraicAggregateDelta)
        return render_algebraic(node, lambda n: self.render(n, when))

    def _consolidate(self, node: Node, when: str | None) -> str:
        assert isinstance(node, Consolidate)
        cols = self._cols(node)
        # GROUP BY treats NULLs as equal, which is the NULL-safe comparison consolidation needs.
        net = (f"SELECT {cols}, __row_id, SUM(CASE WHEN __action = 'INSERT' THEN 1 ELSE -1 END) AS __n "
               f"FROM ({self.render(node.child, when)}) AS t GROUP BY {cols}, __row_id HAVING __n <> 0")
        return (f"SELECT {self._cols(node, 'c.')}, c.__row_id, "
                f"CASE WHEN c.__n > 0 THEN 'INSERT' ELSE 'DELETE' END AS __action "
                f"FROM ({net}) AS c LATERAL VIEW explode(sequence(1, abs(c.__n))) AS __copy")


def render_plan(plan: Node, sources: Sources, when: str | None = None) -> str:
    """SQL text of `plan` (columns, __row_id, and __action for change sets)."""
    return Renderer(sources).render(plan, when)
