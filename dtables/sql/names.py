"""Names of tables and columns as dtables compares and writes them: normalized (``db.table``, lower case) and quoted
for Spark SQL. Pure text functions, below everything that names a table (the catalog re-exports them)."""

from __future__ import annotations

DEFAULT_DB = "default"


def normalize(name: str) -> str:
    """``People`` -> ``default.people``; ``Db.T`` -> ``db.t``; backticks removed."""
    parts = [p.strip("`").lower() for p in name.split(".")]
    parts = parts[-2:]
    return ".".join(parts) if len(parts) == 2 else f"{DEFAULT_DB}.{parts[0]}"


def quote(name: str) -> str:
    """``People`` -> ```default`.`people```: a table name normalized and quoted for Spark SQL."""
    return ".".join(quote_column(p) for p in normalize(name).split("."))


def quote_column(name: str) -> str:
    """A column (or one name part) quoted for Spark, as is: ``F.col(quote_column(c))``, SQL text."""
    return f"`{name}`"


def qualified(db: str | None, name: str) -> str:
    """``db.name`` as written, or ``name`` alone when there is no database (e.g. a sqlglot table's ``db`` and
    ``name``); ``normalize`` it to compare it with stored names."""
    return f"{db}.{name}" if db else name
