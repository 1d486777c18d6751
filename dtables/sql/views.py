"""View expansion: a query's references to catalog views replaced by the views' own SELECTs, inline.

Views are kept by dtables' catalog as their definitions (``CREATE VIEW ...`` text). Reading changes of a view,
defining a dynamic table or explaining a query over views needs the base tables underneath, so each view is parsed
and expanded in place, recursively (views over views), as a subquery aliased like the reference it replaces.
"""

from __future__ import annotations

from sqlglot import exp

from dtables.catalog import qualified
from dtables.catalog.warehouse import Warehouse
from dtables.errors import SqlError
from dtables.sql.dialect import parse_one, to_spark
from dtables.sql.output_names import column_list, name_outputs
from dtables.sql.references import replace_table, table_names


def view_query(warehouse: Warehouse, name: str) -> exp.Expr:
    """The SELECT of a view, with views it reads expanded inline (views over views)."""
    obj = warehouse.catalog.lookup(name)
    if obj is None or obj["kind"] != "VIEW":
        raise SqlError(f"{name} is not a view")
    create = parse_one(obj["definition"])
    query = expand_views(warehouse, create.expression)
    # Inlined, the view's SELECT must give its columns the names the view gives them: its column list, and Spark's
    # names for unnamed expressions (sum(i)), which the query text alone does not carry.
    warehouse.catalog.ensure_registered(table_names(query))
    spark_names = warehouse.spark.sql(to_spark(query)).columns  # analysis only, no Spark job
    return name_outputs(query, spark_names, column_list(create) or spark_names, f"view {name}")


def expand_views(warehouse: Warehouse, query: exp.Expr, depth: int = 0) -> exp.Expr:
    if depth > 32:
        raise SqlError("views nest more than 32 levels deep (a cycle?)")
    for table in list(query.find_all(exp.Table)):
        obj = warehouse.catalog.lookup(qualified(table.db, table.name))
        if obj is None or obj["kind"] != "VIEW":
            continue
        inner = view_query(warehouse, obj["name"])
        inner = expand_views(warehouse, inner, depth + 1)
        replace_table(table, exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(
            table.alias_or_name))))
    return query
