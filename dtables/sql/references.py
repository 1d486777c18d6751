"""Which tables a statement names, from its sqlglot tree (used to register catalog objects lazily)."""

from __future__ import annotations

from sqlglot import exp

from dtables.sql.dialect import parse_one


def table_names(expression: exp.Expression) -> list[str]:
    """``db.name`` or ``name`` of every table reference, excluding CTE names and path-based ``delta.`/p``` refs."""
    ctes = {c.alias_or_name.lower() for c in expression.find_all(exp.CTE)}
    out: list[str] = []
    for table in expression.find_all(exp.Table):
        if not table.name or (not table.db and table.name.lower() in ctes):
            continue
        if table.db.lower() in ("delta", "parquet") and "/" in table.name:
            continue
        out.append(f"{table.db}.{table.name}" if table.db else table.name)
    return out


def referenced_tables(sql: str) -> list[str]:
    return table_names(parse_one(sql))
