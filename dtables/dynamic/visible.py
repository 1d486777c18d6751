"""What users see of a dynamic table: its query's columns, never the hidden ones dtables stores beside them.

A dynamic table's Delta table also holds ``__dtables_*`` columns (the row id, and for aggregates maintained as
old + ΣΔ the group state). Delta has no hidden columns, so every read that goes through dtables (``session.sql``,
``session.table``, the analysis of a dynamic table's query) swaps a reference to a dynamic table for a
sub-query selecting its visible columns from the same Delta table, time travel included. Statements that write
to a table keep their target as written.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from dtables.catalog import STATE_PREFIX, normalize, qualified
from dtables.catalog.warehouse import Warehouse
from dtables.dynamic import definition as defs
from dtables.sql.references import replace_table

_WRITES = (exp.Insert, exp.Merge, exp.Update, exp.Delete, exp.Create, exp.Drop, exp.Alter)


def _written(tree: exp.Expr) -> set[int]:
    """ids of the Table nodes a statement writes to (or creates, drops, alters)."""
    out: set[int] = set()
    for node in tree.walk():
        if isinstance(node, _WRITES):
            target = node.this.this if isinstance(node.this, exp.Schema) else node.this
            if isinstance(target, exp.Table):
                out.add(id(target))
    return out


def _name(table: exp.Table) -> str | None:
    if not table.name or table.catalog:
        return None
    return normalize(qualified(table.db, table.name))


def describe_visible(session: Warehouse, tree: exp.Expr, statement: str) -> Any:
    """``DESCRIBE [TABLE] [EXTENDED] <dynamic table>`` as Spark answers it, without the rows of the hidden columns;
    None when ``tree`` describes anything else (a query, a column, another table)."""
    target = tree.this if isinstance(tree, exp.Describe) else None
    name = _name(target) if isinstance(target, exp.Table) else None
    if name is None or tree.args.get("expressions") or defs.load(session.store, name) is None:
        return None
    session.catalog.ensure_registered([name])
    described = session.spark.sql(statement)
    return described.where(~described["col_name"].startswith(STATE_PREFIX))


def hide_state_columns(session: Warehouse, tree: exp.Expr, by_name: bool = False) -> exp.Expr | None:
    """A copy of ``tree`` whose reads of dynamic tables see their visible columns only; None when it reads none.
    ``by_name`` reads them by their names rather than their locations: for a view's query, which Spark keeps and
    expands itself (a view of ``SELECT *`` over a dynamic table would otherwise show the hidden columns)."""
    tree = tree.copy()
    written = _written(tree)
    changed = False
    for table in list(tree.find_all(exp.Table)):
        name = _name(table)
        if name is None or id(table) in written:
            continue
        obj = session.catalog.lookup(name)
        d = defs.load(session.store, name) if obj is not None and obj["kind"] == "DYNAMIC_TABLE" else None
        if d is None or obj is None:
            continue
        db, short = name.split(".")
        inner = exp.Table(this=exp.to_identifier(short), db=exp.to_identifier(db)) if by_name else \
            exp.Table(this=exp.to_identifier(obj["location"], quoted=True), db=exp.to_identifier("delta"))
        if table.args.get("version") is not None:
            inner.set("version", table.args["version"].copy())
        select = exp.select(*(exp.column(c.name, quoted=True) for c in d.columns)).from_(inner)
        alias = table.alias or table.name
        replace_table(table, exp.Subquery(this=select, alias=exp.TableAlias(this=exp.to_identifier(alias))))
        changed = True
    return tree if changed else None
