"""Which tables a statement names, from its sqlglot tree (used to register catalog objects lazily)."""

from __future__ import annotations

from sqlglot import exp

from dtables.sql.dialect import parse_one
from dtables.sql.names import qualified


def table_names(expression: exp.Expr) -> list[str]:
    """``db.name`` or ``name`` of every table reference, excluding CTE names and path-based ``delta.`/p``` refs."""
    ctes = {c.alias_or_name.lower() for c in expression.find_all(exp.CTE)}
    out: list[str] = []
    for table in expression.find_all(exp.Table):
        if not table.name or (not table.db and table.name.lower() in ctes):
            continue
        if table.db.lower() in ("delta", "parquet") and "/" in table.name:
            continue
        out.append(qualified(table.db, table.name))
    return out


def referenced_tables(sql: str) -> list[str]:
    return table_names(parse_one(sql))


# What a table node carries besides its own name: in ``FROM (r JOIN s ON ...)`` sqlglot hangs the joins of the
# parenthesized join on its first table, so a rewrite that swaps that table for another node must carry them over.
_CARRIED = ("joins", "laterals", "pivots")


def replace_table(table: exp.Table, new: exp.Expr) -> exp.Expr:
    """Put ``new`` (a table or a subquery) where ``table`` stands, keeping the joins, laterals and pivots attached
    to ``table``; every rewrite that swaps a table reference for something else goes through here (issue 24)."""
    for key in _CARRIED:
        attached = table.args.get(key)
        if attached:
            new.set(key, [a.pop() for a in list(attached)])
    table.replace(new)
    return new


def aliased_table(name: str, alias: str) -> exp.Table:
    """``name AS alias`` as a table node (a temp view standing in for a table, a stream or a change set)."""
    return exp.Table(this=exp.to_identifier(name), alias=exp.TableAlias(this=exp.to_identifier(alias)))
