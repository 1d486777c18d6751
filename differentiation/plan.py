"""The relational plan IR: immutable nodes with checked invariants and a deterministic text form.

Column names inside a plan are unique strings: a scan with alias `p` produces `p.id`, `p.name`; a
projection produces the names it declares. Scalar expressions are sqlglot expressions whose column
references are bare (unqualified) quoted identifiers naming those columns, so they can be rendered
against any relation exposing the names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlglot import exp

from differentiation.errors import UnsupportedQuery

N = TypeVar("N", bound="Node")

JOIN_KINDS = ("inner", "cross", "left", "right", "full", "semi", "anti")
FILTERING_JOINS = ("semi", "anti")  # output the left side's rows (and columns) that do / do not match
AGG_FUNCS = ("COUNT", "SUM", "AVG", "MIN", "MAX")


@dataclass(frozen=True)
class Scalar:
    """A scalar sqlglot expression over named columns; equality and hash go by its Spark SQL text."""

    expr: exp.Expr = field(compare=False, repr=False)
    sql: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sql", self.expr.sql(dialect="spark"))

    @staticmethod
    def column(name: str) -> Scalar:
        return Scalar(exp.column(exp.to_identifier(name, quoted=True)))

    def columns(self) -> frozenset[str]:
        return frozenset(c.name for c in self.expr.find_all(exp.Column))

    def __str__(self) -> str:
        return self.sql


@dataclass(frozen=True)
class AggCall:
    """One aggregate call: COUNT(*) has arg None; COUNT(DISTINCT x) has distinct True."""

    func: str
    arg: Scalar | None
    distinct: bool = False

    def __post_init__(self) -> None:
        if self.func not in AGG_FUNCS:
            raise ValueError(f"unknown aggregate {self.func}")
        if self.arg is None and (self.func != "COUNT" or self.distinct):
            raise ValueError("only COUNT(*) may omit its argument")

    def __str__(self) -> str:
        inner = "*" if self.arg is None else ("DISTINCT " if self.distinct else "") + self.arg.sql
        return f"{self.func}({inner})"


class Node:
    """Base of all plan nodes (relational and derivative). Subclasses are frozen dataclasses."""

    def children(self) -> tuple[Node, ...]:
        return tuple(v for v in self._child_fields().values() if isinstance(v, Node)) + tuple(
            n for v in self._child_fields().values() if isinstance(v, tuple) for n in v if isinstance(n, Node)
        )

    def _child_fields(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]

    def columns(self) -> tuple[str, ...]:
        """Visible output column names in order (hidden __row_id / __action are not listed)."""
        raise NotImplementedError

    @property
    def is_delta(self) -> bool:
        """True when the relation is a change set (carries `__action`), false for a state."""
        return any(c.is_delta for c in self.children())

    def copy(self: N, **changes: Any) -> N:
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]

    def walk(self) -> Iterator[Node]:
        yield self
        for c in self.children():
            yield from c.walk()

    def base_tables(self) -> tuple[str, ...]:
        """Base table names, first-appearance order, without duplicates."""
        seen: dict[str, None] = {}
        for n in self.walk():
            if isinstance(n, Scan):
                seen.setdefault(n.table, None)
        return tuple(seen)

    def label(self) -> str:
        """One-line description of this node without its children."""
        raise NotImplementedError

    def to_text(self, indent: int = 0) -> str:
        """Deterministic indented tree text, one node a line."""
        lines = ["  " * indent + self.label()]
        lines += [c.to_text(indent + 1) for c in self.children()]
        return "\n".join(lines)


def each_once(plan: Node, inputs: Callable[[Node], tuple[Node, ...]] = Node.children) -> Iterator[Node]:
    """Every node of `plan` once, though a plan reads shared subplans from several parents (`walk` visits them once
    per parent). `inputs`: a node's inputs (its children by default)."""
    seen: set[Node] = set()
    stack = [plan]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        yield node
        stack.extend(inputs(node))


def _unique(names: tuple[str, ...], what: str) -> None:
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise UnsupportedQuery(f"duplicate output column names {dups} in {what}", "duplicate column")


def _check_refs(refs: frozenset[str], available: tuple[str, ...], what: str) -> None:
    missing = sorted(refs - set(available))
    if missing:
        raise ValueError(f"{what} references unknown columns {missing}; available {list(available)}")


@dataclass(frozen=True)
class Scan(Node):
    """A base table read under an alias; output columns are `alias.column`."""

    table: str
    alias: str
    schema: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        if not self.schema:
            raise ValueError(f"table {self.table} has no columns")

    def columns(self) -> tuple[str, ...]:
        return tuple(f"{self.alias}.{c}" for c, _ in self.schema)

    @property
    def is_delta(self) -> bool:
        return False

    def label(self) -> str:
        return f"Scan {self.table} AS {self.alias} ({', '.join(c for c, _ in self.schema)})"


@dataclass(frozen=True)
class Filter(Node):
    child: Node
    condition: Scalar

    def __post_init__(self) -> None:
        _check_refs(self.condition.columns(), self.child.columns(), "filter")

    def columns(self) -> tuple[str, ...]:
        return self.child.columns()

    def label(self) -> str:
        return f"Filter {self.condition}"


@dataclass(frozen=True)
class Project(Node):
    child: Node
    outputs: tuple[tuple[str, Scalar], ...]

    def __post_init__(self) -> None:
        _unique(tuple(n for n, _ in self.outputs), "projection")
        for _, e in self.outputs:
            _check_refs(e.columns(), self.child.columns(), "projection")

    def columns(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.outputs)

    def label(self) -> str:
        return "Project " + ", ".join(f"{e} AS {n}" for n, e in self.outputs)


@dataclass(frozen=True)
class Join(Node):
    """A join; `semi` / `anti` keep the left rows that match / match no right row (EXISTS, IN, NOT EXISTS, NOT IN).

    `origin` names the SQL the join was rewritten from (``EXISTS subquery``), shown in plans; it takes no part in
    equality, so the same join written two ways is one node.
    """

    left: Node
    right: Node
    kind: str
    condition: Scalar | None
    origin: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.kind not in JOIN_KINDS:
            raise ValueError(f"unknown join kind {self.kind}")
        overlap = set(self.left.columns()) & set(self.right.columns())
        if overlap:
            raise ValueError(f"join sides share column names {sorted(overlap)}")
        if (self.kind == "cross") != (self.condition is None):
            raise ValueError("a cross join has no condition and every other join has one")
        if self.condition is not None:
            _check_refs(self.condition.columns(), self.left.columns() + self.right.columns(), "join condition")
        if self.kind in FILTERING_JOINS and self.right.is_delta:
            raise ValueError("the right side of a semi or anti join is a state")

    def columns(self) -> tuple[str, ...]:
        if self.kind in FILTERING_JOINS:
            return self.left.columns()
        return self.left.columns() + self.right.columns()

    def label(self) -> str:
        on = f" ON {self.condition}" if self.condition is not None else ""
        origin = f" (from {self.origin})" if self.origin else ""
        return f"Join {self.kind}{on}{origin}"


@dataclass(frozen=True)
class Aggregate(Node):
    """GROUP BY `keys` computing `aggs`; no keys means a scalar aggregate (always exactly one row)."""

    child: Node
    keys: tuple[tuple[str, Scalar], ...]
    aggs: tuple[tuple[str, AggCall], ...]

    def __post_init__(self) -> None:
        _unique(self.columns(), "aggregate")
        for _, k in self.keys:
            _check_refs(k.columns(), self.child.columns(), "group key")
        for _, a in self.aggs:
            if a.arg is not None:
                _check_refs(a.arg.columns(), self.child.columns(), "aggregate argument")

    def columns(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.keys) + tuple(n for n, _ in self.aggs)

    def label(self) -> str:
        keys = ", ".join(f"{k} AS {n}" for n, k in self.keys) or "()"
        aggs = ", ".join(f"{a} AS {n}" for n, a in self.aggs)
        return f"Aggregate keys=[{keys}] aggs=[{aggs}]"


@dataclass(frozen=True)
class UnionAll(Node):
    """Bag union by position; output names are the first input's; row ids are tagged by branch."""

    inputs: tuple[Node, ...]

    def __post_init__(self) -> None:
        if len(self.inputs) < 2:
            raise ValueError("a union needs at least two inputs")
        widths = {len(i.columns()) for i in self.inputs}
        if len(widths) != 1:
            raise UnsupportedQuery("UNION branches have different numbers of columns", "UNION")
        if len({i.is_delta for i in self.inputs}) != 1:
            raise ValueError("a union mixes states and change sets")

    def columns(self) -> tuple[str, ...]:
        return self.inputs[0].columns()

    def label(self) -> str:
        return f"UnionAll ({len(self.inputs)} branches)"


@dataclass(frozen=True)
class Distinct(Node):
    child: Node

    def __post_init__(self) -> None:
        if self.child.is_delta:
            raise ValueError("DISTINCT over a change set is meaningless")

    def columns(self) -> tuple[str, ...]:
        return self.child.columns()

    def label(self) -> str:
        return "Distinct"


@dataclass(frozen=True)
class Window(Node):
    """Window functions with one PARTITION BY: `outputs` are (name, ``f(...) OVER (PARTITION BY partition ...)``)
    appended to the child's columns; each row keeps its child row's id."""

    child: Node
    partition: tuple[Scalar, ...]
    outputs: tuple[tuple[str, Scalar], ...]

    def __post_init__(self) -> None:
        _unique(self.columns(), "window")
        for e in self.partition + tuple(e for _, e in self.outputs):
            _check_refs(e.columns(), self.child.columns(), "window function")

    def columns(self) -> tuple[str, ...]:
        return self.child.columns() + tuple(n for n, _ in self.outputs)

    def label(self) -> str:
        keys = ", ".join(str(k) for k in self.partition) or "()"
        return f"Window partition=[{keys}] " + ", ".join(f"{e} AS {n}" for n, e in self.outputs)


@dataclass(frozen=True)
class Generate(Node):
    """LATERAL VIEW [OUTER] explode / posexplode: each child row once per element of `arg` (an array or a map); a NULL
    or empty one drops the row, or keeps it with NULLs when `outer`. `names` are the generated columns, the position
    first for posexplode; a row's id is its child row's id with the element's position."""

    child: Node
    function: str  # "explode" or "posexplode"
    arg: Scalar
    outer: bool
    names: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.function not in ("explode", "posexplode"):
            raise ValueError(f"unknown generator {self.function}")
        _unique(self.columns(), "LATERAL VIEW")
        _check_refs(self.arg.columns(), self.child.columns(), "LATERAL VIEW")

    def columns(self) -> tuple[str, ...]:
        return self.child.columns() + self.names

    def label(self) -> str:
        outer = " OUTER" if self.outer else ""
        return f"Generate{outer} {self.function}({self.arg}) AS {', '.join(self.names)}"


RELATIONAL_NODES: tuple[type[Node], ...] = (
    Scan, Filter, Project, Join, Aggregate, UnionAll, Distinct, Window, Generate,
)
