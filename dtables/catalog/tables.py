"""Table creation, owned by the catalog: ``CREATE [OR REPLACE] TABLE [IF NOT EXISTS] ...`` (with or without a query)
makes a change-tracked Delta table, at its managed location unless the statement gives one, and records it.

Used by the statement executor and by stream consumptions, whose CTAS reads a stream's changes.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from dtables.catalog import new_table_properties, normalize, qualified
from dtables.catalog.constraints import KeyStore, split_create
from dtables.catalog.warehouse import Warehouse
from dtables.errors import SqlError
from dtables.spark import fs
from dtables.sql.dialect import to_spark
from dtables.sql.output_names import column_mapping_properties, has_unnamed
from dtables.sql.references import table_names
from dtables.sql.spark_errors import short_statement


def target_table(tree: exp.Expr) -> exp.Table:
    """The table a CREATE names (without the column list it may give)."""
    target = tree.this
    return target.this if isinstance(target, exp.Schema) else target


def kind_clash(name: str, kind: str, wanted: str, statement: str) -> SqlError:
    """A CREATE [OR REPLACE | IF NOT EXISTS] of a `wanted` over an object of another kind: refused, saying how."""
    kind = kind.lower().replace("_", " ")
    return SqlError(f"{name} is a {kind}, not a {wanted}; drop it first (DROP {kind.upper()} {name}) in statement: "
                    f"{short_statement(statement)}", statement)


def create_table(warehouse: Warehouse, tree: exp.Create, statement: str) -> Any:
    """Run a CREATE TABLE (``tree``, parsed from ``statement``) as a Delta table with dtables' properties, recorded
    in the catalog; Spark's result."""
    table = target_table(tree)
    name = normalize(qualified(table.db, table.name))
    props = tree.args.get("properties") or exp.Properties(expressions=[])
    fmt = props.find(exp.FileFormatProperty)
    if fmt is not None and fmt.name.lower() != "delta":
        raise SqlError(f"table {name}: dtables tables are Delta tables; remove USING {fmt.name} "
                       f"in statement: {short_statement(statement)}", statement)
    location_prop = props.find(exp.LocationProperty)
    existing = warehouse.catalog.lookup(name)
    if existing is not None and existing["kind"] != "TABLE" and (tree.args.get("replace") or tree.args.get("exists")):
        raise kind_clash(name, existing["kind"], "table", statement)
    if existing is not None and tree.args.get("exists"):  # CREATE TABLE IF NOT EXISTS of a table: nothing changes
        warehouse.catalog.ensure_registered([name])
        return warehouse.spark.sql(statement)
    managed = location_prop is None
    if existing is not None and tree.args.get("replace") and managed:
        # CREATE OR REPLACE keeps the table where it is (as Delta does), so a registered external table stays external
        location, managed = existing["location"], bool(existing["managed"])
    else:
        location = warehouse.catalog.managed_location(name) if location_prop is None else location_prop.name
    has_schema = isinstance(tree.this, exp.Schema) or tree.expression is not None
    new, declared = split_create(tree, name)
    keys = KeyStore(warehouse.store)
    if declared:
        columns = [c.name.lower() for c in new.this.expressions if isinstance(c, exp.ColumnDef)]
        declared = keys.check(declared, columns, statement, replacing=existing is not None)
    new_props = new.args.get("properties") or exp.Properties(expressions=[])
    if fmt is None:  # first: Spark's grammar wants USING before the other clauses (CLUSTER BY, LOCATION...)
        new_props.set("expressions", [exp.FileFormatProperty(this=exp.var("DELTA")), *new_props.expressions])
    if location_prop is None:
        new_props.append("expressions", exp.LocationProperty(this=exp.Literal.string(location)))
    warehouse.catalog.ensure_registered([name, *(table_names(tree.expression) if tree.expression else [])])
    if has_schema:  # registering an existing Delta location keeps its properties; ALTER ... CHANGE_TRACKING turns it on
        given = {p.name for p in new_props.find_all(exp.Property) if isinstance(p.this, exp.Literal)}
        mapping = _ctas_column_mapping(warehouse, new)
        for key, value in {**new_table_properties(warehouse.spark), **mapping}.items():
            if key not in given:
                new_props.append("expressions", exp.Property(this=exp.Literal.string(key),
                                                             value=exp.Literal.string(value)))
    new.set("properties", new_props)
    existed = fs.exists(warehouse.spark, location)
    try:
        if new.expression is not None and mapping:
            # Delta refuses CTAS into a table with change data feed and column mapping (DELTA_BLOCK_COLUMN_MAPPING_
            # AND_CDC_OPERATION): create the table from the query's schema, then insert its rows.
            query = new.expression
            new.set("expression", None)
            warehouse.spark.sql(to_spark(new))
            result = warehouse.spark.sql(to_spark(exp.insert(query, target_table(new).copy())))
        else:
            result = warehouse.spark.sql(to_spark(new))
    except Exception:
        if managed and not existed:
            fs.delete(warehouse.spark, location)  # a failed CTAS may leave uncommitted files behind
        raise
    warehouse.catalog.record_table(name, location, managed)
    if declared or existing is not None:
        keys.record(declared, replace_table=name)
    return result


def _ctas_column_mapping(warehouse: Warehouse, create: exp.Create) -> dict[str, str]:
    """For CTAS of unnamed expressions (``sum(i)``): Delta's column mapping, which Spark's names need, with the
    query's columns written into ``create`` as its schema (empty when every name is plain)."""
    query = create.expression
    if query is None or not has_unnamed(query):
        return {}
    schema = warehouse.spark.sql(to_spark(query)).schema  # analysis only
    mapping = column_mapping_properties([f.name for f in schema.fields])
    if mapping:
        create.set("this", exp.Schema(this=target_table(create).copy(), expressions=[
            exp.ColumnDef(this=exp.to_identifier(f.name, quoted=True),
                          kind=exp.DataType.build(f.dataType.simpleString(), dialect="spark"))
            for f in schema.fields]))
    return mapping
