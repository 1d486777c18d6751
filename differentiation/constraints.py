"""Declared keys (``PRIMARY KEY`` / ``UNIQUE`` / ``FOREIGN KEY ... REFERENCES`` with ``RELY``) and the join terms
they prove empty.

In Δ(P ⋈ F) where F's foreign key references P's unique key on the join columns:

- P had only inserts: ΔP ⋈ F|I0 = ∅. A new P row's key is not the key of any old P row (keys are unique in P|I1,
  and P|I0 ⊆ P|I1), and every key F|I0 refers to is the key of an old P row. So Δ = P|I1 ⋈ ΔF.
- P had only deletes: ΔP ⋈ F|I1 = ∅ by the same argument at the end of the interval. So Δ = P|I0 ⋈ ΔF.

Both are the usual two-term rule (Δ(L⋈R) = L|I0 ⋈ ΔR + ΔL ⋈ R|I1, or its mirror L|I1 ⋈ ΔR + ΔL ⋈ R|I0) with the
term over ΔP dropped. The proof needs the constraints to hold at both ends of the interval: that is the RELY
contract users sign (as in Snowflake and Databricks, a key the data violates may give wrong results).

The P side must be P's rows filtered, projected or joined with tables that did not change, so that every row of
its change carries a new (or a gone) key of P; the F side may be any state whose join column takes its values from
F's foreign key column through operators that only keep, repeat or null out values (filters, projections of the
bare column, joins, group keys, DISTINCT). Pure functions over plan trees; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from differentiation.plan import Aggregate, Distinct, Filter, Join, Node, Project, Scan, Window


@dataclass(frozen=True)
class Origin:
    """The base column a plan column takes its values from: ``column`` of ``table``, read by the scan ``alias``."""

    alias: str
    table: str
    column: str


@dataclass(frozen=True)
class ForeignKey:
    """``table (columns) REFERENCES referenced (referenced_columns)``, table names as the plan's scans name them."""

    table: str
    columns: tuple[str, ...]
    referenced: str
    referenced_columns: tuple[str, ...]


@dataclass(frozen=True)
class Constraints:
    """The RELY keys of the base tables a plan reads: `unique` holds (table, columns) of each unique key (a primary
    key is one), `foreign` the foreign keys. Only constraints users declared with RELY belong here."""

    unique: tuple[tuple[str, tuple[str, ...]], ...] = ()
    foreign: tuple[ForeignKey, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.foreign)

    def referenced_keys(self, table: str, column: str) -> tuple[tuple[str, str], ...]:
        """(P, key) for each single-column foreign key of ``table (column)`` that references a unique key of P."""
        return tuple((fk.referenced, fk.referenced_columns[0]) for fk in self.foreign
                     if fk.table == table and fk.columns == (column,)
                     and (fk.referenced, fk.referenced_columns) in {(t, k) for t, k in self.unique})

    def foreign_key_within(self, pairs: set[tuple[Origin, Origin]]) -> bool:
        """Whether some foreign key to a unique key is among ``pairs`` of (F column, P column) origins. Extra
        equalities of a join only narrow it, so one key among them is enough; the columns of one key must come from
        one scan on each side (two scans of a table are two different rows)."""
        groups: dict[tuple[str, str], set[tuple[tuple[str, str], tuple[str, str]]]] = {}
        for f, p in pairs:
            groups.setdefault((f.alias, p.alias), set()).add(((f.table, f.column), (p.table, p.column)))
        for fk in self.foreign:
            wanted = {((fk.table, c), (fk.referenced, r)) for c, r in zip(fk.columns, fk.referenced_columns)}
            if frozenset(fk.referenced_columns) not in {frozenset(k) for t, k in self.unique if t == fk.referenced}:
                continue
            if any(wanted <= group for group in groups.values()):
                return True
        return False


def equalities(condition: exp.Expr | None) -> list[tuple[str, str]]:
    """``a = b`` conjuncts of a join condition between two bare columns (``<=>`` is left out: NULLs match there)."""
    if condition is None:
        return []
    conjuncts = condition.flatten() if isinstance(condition, exp.And) else [condition]
    return [(c.this.name, c.expression.name) for c in conjuncts
            if isinstance(c, exp.EQ) and isinstance(c.this, exp.Column) and isinstance(c.expression, exp.Column)]


def passed_through(project: Project, column: str) -> str | None:
    """The input column an output of ``project`` passes through unchanged (None when it is computed)."""
    expr = dict(project.outputs)[column].expr
    return expr.name if isinstance(expr, exp.Column) else None


def value_origin(node: Node, column: str) -> Origin | None:
    """The base column whose values (or NULL) are every value of ``column`` in state ``node``;
    None when some operator on the way computes or merges values."""
    if isinstance(node, Scan):
        return Origin(node.alias, node.table, column[len(node.alias) + 1:])
    if isinstance(node, (Filter, Distinct)):
        return value_origin(node.child, column)
    if isinstance(node, Project):
        source = passed_through(node, column)
        return None if source is None else value_origin(node.child, source)
    if isinstance(node, Aggregate):
        key = dict(node.keys).get(column)
        return value_origin(node.child, key.expr.name) if key is not None and isinstance(key.expr, exp.Column) else None
    if isinstance(node, Window):
        return value_origin(node.child, column) if column in node.child.columns() else None
    if isinstance(node, Join):  # any kind: a column of one side holds that side's values, or NULL
        return value_origin(node.left if column in node.left.columns() else node.right, column)
    return None


def keyed_origin(node: Node, column: str, changed: frozenset[str]) -> Origin | None:
    """The base column of ``column`` when every row of Δnode is a row of one base table's change carrying its value
    of that column: ``node`` is the table filtered, projected, or inner-joined with subplans of unchanged tables."""
    if isinstance(node, Scan):
        return Origin(node.alias, node.table, column[len(node.alias) + 1:])
    if isinstance(node, Filter):
        return keyed_origin(node.child, column, changed)
    if isinstance(node, Project):
        source = passed_through(node, column)
        return None if source is None else keyed_origin(node.child, source, changed)
    if isinstance(node, Join) and node.kind in ("inner", "cross", "semi", "anti"):
        mine, other = (node.left, node.right) if column in node.left.columns() else (node.right, node.left)
        if mine is node.right and node.kind in ("semi", "anti"):
            return None
        if any(t in changed for t in other.base_tables()):
            return None
        return keyed_origin(mine, column, changed)
    return None


def referenced_side(join: Join, constraints: Constraints, changed: frozenset[str]) -> str | None:
    """``"left"`` or ``"right"``: the side of inner ``join`` that is the referenced (unique-key) side P of a declared
    foreign key from the other side F on the join's equalities; None when there is none."""
    if join.kind != "inner" or not constraints:
        return None
    pairs_on = equalities(join.condition.expr if join.condition is not None else None)
    for p_side, f_side, name in ((join.left, join.right, "left"), (join.right, join.left, "right")):
        pairs = set()
        for a, b in pairs_on:
            if a in f_side.columns():
                a, b = b, a
            if a not in p_side.columns() or b not in f_side.columns():
                continue
            p_origin, f_origin = keyed_origin(p_side, a, changed), value_origin(f_side, b)
            if p_origin is not None and f_origin is not None:
                pairs.add((f_origin, p_origin))
        if constraints.foreign_key_within(pairs):
            return name
    return None
