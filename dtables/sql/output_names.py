"""The names of a query's output columns: a column list applied positionally, and names for unnamed expressions.

Spark names an unaliased expression after its text (``sum(i)``); a column list on ``CREATE DYNAMIC TABLE t (a, b)``
or ``CREATE VIEW v (a, b)`` renames the outputs by position. Dynamic tables and inlined views store their query
with these names written into the outermost SELECT (:func:`name_outputs`), so the stored query, its plan and its
table agree on every name, and a SELECT returning two columns called ``i`` works once a column list renames them.

Delta refuses the characters in :data:`DELTA_INVALID` in column names unless the table maps its columns by name
(``delta.columnMapping.mode = 'name'``); :func:`column_mapping_properties` says when a table needs that.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from dtables.errors import SqlError

DELTA_INVALID = frozenset(" ,;{}()\n\t=")
COLUMN_MAPPING = {"delta.columnMapping.mode": "name"}


def needs_column_mapping(names: Sequence[str]) -> bool:
    return any(DELTA_INVALID & set(n) for n in names)


def column_mapping_properties(names: Sequence[str]) -> dict[str, str]:
    """The table properties a Delta table with these column names needs (none when every name is plain)."""
    return dict(COLUMN_MAPPING) if needs_column_mapping(names) else {}


def check_unique(what: str, names: Sequence[str]) -> None:
    """SqlError naming the first duplicated output name and its positions (1-based), with the way out."""
    seen: dict[str, int] = {}
    for position, name in enumerate(names, start=1):
        first = seen.setdefault(name.lower(), position)
        if first != position:
            raise SqlError(f"{what}: the query returns two columns named {name} (columns {first} and {position}); "
                           f"name them apart with AS, or give a column list: {what.split()[-1]} (c1, c2, ...)")


def column_list(create: exp.Expr) -> list[str]:
    """The names of ``CREATE ... name (a, b) AS`` in order (empty without a column list)."""
    schema = create.this if isinstance(create.this, exp.Schema) else None
    return [c.name for c in schema.expressions] if schema is not None else []


def _naming_select(query: exp.Expr) -> exp.Select | None:
    """The SELECT whose outputs name the query's columns: the query's own, or the first branch of a set operation."""
    while isinstance(query, (exp.Subquery, exp.SetOperation)):
        query = query.this
    return query if isinstance(query, exp.Select) else None


def has_unnamed(query: exp.Expr) -> bool:
    """Whether the query returns an expression without a name of its own, which Spark names after its text."""
    select = _naming_select(query)
    return select is not None and any(not isinstance(e, (exp.Alias, exp.Column, exp.Star)) for e in select.expressions)


def name_outputs(query: exp.Expr, spark_names: Sequence[str], names: Sequence[str], what: str
                 ) -> exp.Expr:
    """A copy of ``query`` whose output columns are called ``names``, position by position (``spark_names``: the
    names Spark gives them today, from analysing the query).

    Each projection of the naming SELECT gets its name as an alias; a SELECT with ``*`` is wrapped in an outer
    SELECT instead (``*`` cannot be aliased position by position), which needs the inner names to be unique.
    """
    if len(spark_names) != len(names):
        raise SqlError(f"{what}: the column list names {len(names)} columns but the query returns "
                       f"{len(spark_names)}")
    out = query.copy()
    select = _naming_select(out)
    if select is None or any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
                             for e in select.expressions):
        return out if list(spark_names) == list(names) else _wrap_outputs(out, spark_names, names, what)
    if len(select.expressions) != len(names):
        raise SqlError(f"{what}: {len(names)} column names for a query returning {len(select.expressions)} columns")
    for position, (projection, name) in enumerate(zip(select.expressions, names)):
        if projection.alias_or_name == name and isinstance(projection, (exp.Alias, exp.Column)):
            continue
        renamed = exp.alias_(projection.unalias() if isinstance(projection, exp.Alias) else projection,
                             exp.to_identifier(name, quoted=True))
        select.expressions[position].replace(renamed)
    return out


def _wrap_outputs(query: exp.Expr, inner_names: Sequence[str], names: Sequence[str], what: str
                  ) -> exp.Expr:
    """``SELECT `inner1` AS `name1`, ... FROM (query) AS __dtables_named``: names for a query whose outputs cannot
    be aliased in place (a ``SELECT *``); the inner names must be unique to be referenced."""
    check_unique(what, inner_names)
    body = query.this if isinstance(query, exp.Subquery) else query
    columns = (exp.alias_(exp.column(exp.to_identifier(i, quoted=True)), exp.to_identifier(n, quoted=True))
               for i, n in zip(inner_names, names))
    return exp.select(*columns).from_(exp.Subquery(this=body, alias=exp.TableAlias(
        this=exp.to_identifier("__dtables_named"))))
