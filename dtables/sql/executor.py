"""Run dtables SQL: split a script, check its syntax, and execute each statement.

Plain Spark SQL passes to Spark as the user wrote it (after the catalog registered the objects it names). dtables
statements, and Spark statements whose meaning dtables extends (CREATE TABLE makes a change-tracked Delta table,
CREATE VIEW and DROP persist in the catalog), are dispatched through ``HANDLERS``, an explicit mapping from
expression type to handler; later features add their statements there.

This module is the top of the engine: ``Session.sql()`` calls it, and it calls down into the handlers of
``dynamic/``, ``streams/``, ``ingest/`` and ``catalog_ddl``, which take a ``Warehouse`` and never call back up.
A statement that turns into other statements (COMMIT's buffered plain statements, REPLACE TABLE) runs them here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlglot
from pyspark.errors import ParseException
from sqlglot import exp
from sqlglot.errors import ParseError

from dtables.catalog import normalize, qualified, quote, set_change_tracking
from dtables.catalog.constraints import KeyConstraint, KeyStore, declares_keys
from dtables.catalog.tables import create_table, kind_clash, target_table
from dtables.catalog.warehouse import Warehouse
from dtables.change_queries import explain_changes_clause, resolve_changes
from dtables.dynamic.history import point_at_virtual_tables
from dtables.dynamic.statements import HANDLERS as DYNAMIC_TABLE_HANDLERS
from dtables.dynamic.statements import explain_create
from dtables.dynamic.visible import describe_visible, hide_state_columns
from dtables.errors import DtablesError, SqlError
from dtables.ingest.statements import HANDLERS as INGEST_HANDLERS
from dtables.spark import fs
from dtables.spark.sessions import rows_frame
from dtables.sql import catalog_ddl
from dtables.sql.dialect import Dtables, parse, parse_one, split_statements, to_spark
from dtables.sql.expressions import CommitTransaction, CreateDynamicTable, SetChangeTracking
from dtables.sql.output_names import has_unnamed, name_outputs
from dtables.sql.references import table_names
from dtables.sql.spark_errors import first_sentences, short_statement, translate
from dtables.streams import statements as streams
from dtables.streams import transactions

Handler = Callable[[Warehouse, exp.Expr, str], Any]


def is_dtables_syntax(tree: exp.Expr | None) -> bool:
    """True when Spark's own parser would reject the statement because it uses dtables' additions."""
    if tree is None:
        return False
    if type(tree).__module__.startswith("dtables"):
        return True
    if tree.find(exp.Changes) is not None:
        return True
    return any("$" in i.name for i in tree.find_all(exp.Identifier))


def check_spark_syntax(spark: Any, statement: str, *, in_script: bool = True) -> None:
    """Raise SqlError if Spark's parser rejects the statement.

    Classic Spark: its parser, called in the JVM. Spark Connect has no parse-only call, but ``EXPLAIN statement``
    parses the statement on the server and runs nothing (the plan's analysis errors come back as text, not raised);
    that costs a round trip, so a lone statement is not checked: running it reports the same error, before any
    change.
    """
    jsession = getattr(spark, "_jsparkSession", None)
    if jsession is None:
        if in_script:
            _check_over_connect(spark, statement)
        return
    try:
        jsession.sessionState().sqlParser().parsePlan(statement)
    except Exception as e:  # noqa: BLE001 - a Py4JJavaError wrapping ParseException
        java = getattr(e, "java_exception", None)
        message = java.getMessage() if java is not None else str(e)
        raise SqlError(f"syntax error: {_parse_message(message)} in statement: {short_statement(statement)}",
                       statement, message) from e


def _check_over_connect(spark: Any, statement: str) -> None:
    explain = statement if statement.lstrip()[:7].upper() == "EXPLAIN" else f"EXPLAIN {statement}"
    try:
        spark.sql(explain).collect()
    except ParseException as e:
        message = str(e)
        raise SqlError(f"syntax error: {_parse_message(message)} in statement: {short_statement(statement)}",
                       statement, message) from e
    except Exception:  # noqa: BLE001 - not a syntax error; running the statement reports it in its turn
        pass


def _parse_message(message: str) -> str:
    return first_sentences(message)


def execute_script(warehouse: Warehouse, text: str) -> Any:
    """Run every statement of ``text``; return the DataFrame of the last one.

    All statements are parsed before any runs, so a syntax error anywhere leaves the warehouse unchanged.
    """
    statements = split_statements(text)
    if not statements:
        raise SqlError("no SQL statement to run", text)
    parsed: list[tuple[str, exp.Expr | None]] = []
    for statement in statements:
        tree = parse(statement)
        explained = _explain_target(statement)
        if is_dtables_syntax(tree) or (explained is not None and is_dtables_syntax(explained[1])) \
                or streams.claims(warehouse, tree) or declares_keys(tree):
            pass  # sqlglot parsed it; Spark's parser would not know it (or, for keys, refuse some of their forms)
        elif tree is None and _dtables_parse_error(statement) is not None:
            raise _dtables_parse_error(statement)  # type: ignore[misc]
        else:
            check_spark_syntax(warehouse.spark, statement, in_script=len(statements) > 1)
        parsed.append((statement, tree))
    result = None
    for statement, tree in parsed:
        result = execute_statement(warehouse, statement, tree)
    return result


def _dtables_parse_error(statement: str) -> SqlError | None:
    """A syntax error in dtables' own syntax (which Spark's parser cannot judge), or None."""
    upper = " ".join(statement.upper().split())
    if "CHANGES" not in upper and "$" not in upper and " STREAM" not in upper and "DYNAMIC TABLE" not in upper \
            and not upper.startswith("VACUUM"):  # a VACUUM dtables cannot read must not bypass stream frontiers
        return None
    try:
        sqlglot.parse_one(statement, read=Dtables)
    except ParseError as e:
        detail = e.errors[0]["description"] if e.errors else str(e)
        line = e.errors[0].get("line") if e.errors else None
        col = e.errors[0].get("col") if e.errors else None
        at = f" at line {line}, column {col}" if line else ""
        return SqlError(f"syntax error{at}: {detail} in statement: {short_statement(statement)}", statement)
    return None


def execute_statement(warehouse: Warehouse, statement: str, tree: exp.Expr | None) -> Any:
    try:
        explained = _explain_target(statement)
        if explained is not None and explained[1] is not None and explained[1].find(exp.Changes) is not None:
            text = explain_changes_clause(warehouse, explained[1], explained[0])
            return warehouse.spark.createDataFrame([(text,)], "plan STRING")
        if explained is not None and isinstance(explained[1], CreateDynamicTable):
            text = explain_create(warehouse, explained[1], explained[0])
            return warehouse.spark.createDataFrame([(text,)], "plan STRING")
        if tree is not None and tree.find(exp.Changes) is not None:
            tree = resolve_changes(warehouse, tree, statement)
            warehouse.catalog.ensure_registered(table_names(tree))
            return warehouse.spark.sql(to_spark(tree))
        ddl = None if is_dtables_syntax(tree) else catalog_ddl.classify(statement)
        if ddl is not None and ddl.action == catalog_ddl.REPLACE_TABLE:
            create = catalog_ddl.replace_as_create(warehouse, ddl, statement)
            return execute_statement(warehouse, create, parse_one(create))
        if ddl is not None:  # ALTER TABLE|VIEW, COMMENT ON, DROP|ALTER DATABASE: kept or refused
            return catalog_ddl.execute(warehouse, ddl, statement)
        if tree is None:
            warehouse.catalog.ensure_all_registered()
            return warehouse.spark.sql(statement)
        if streams.claims(warehouse, tree):  # reads or consumes a stream, or DML inside BEGIN ... COMMIT
            return streams.execute(warehouse, statement, tree)
        handler = _handler_for(tree)
        if handler is not None:
            return handler(warehouse, tree, statement)
        tree, statement = point_at_virtual_tables(warehouse, tree, statement)
        described = describe_visible(warehouse, tree, statement)
        if described is not None:
            return described
        keys = _described_keys(warehouse, tree)
        if keys:
            return _describe_with_keys(warehouse, keys, statement)
        visible = hide_state_columns(warehouse, tree)
        if visible is not None:
            tree, statement = visible, to_spark(visible)
        warehouse.catalog.ensure_registered(table_names(tree))
        return warehouse.spark.sql(statement)
    except DtablesError:
        raise
    except Exception as e:  # noqa: BLE001 - every Spark/Delta failure becomes a readable SqlError
        if type(e).__name__ in ("KeyboardInterrupt", "SystemExit"):
            raise
        raise translate(e, statement) from e


def _explain_target(statement: str) -> tuple[str, exp.Expr | None] | None:
    """For ``EXPLAIN <statement>``, the inner statement and its tree; None for anything else."""
    head, _, rest = statement.lstrip().partition(" ")
    if head.upper() != "EXPLAIN" or not rest.strip():
        return None
    for modifier in ("EXTENDED", "FORMATTED", "CODEGEN", "COST"):
        if rest.lstrip().upper().startswith(modifier + " "):
            rest = rest.lstrip()[len(modifier):]
    return rest.strip(), parse(rest.strip())


def _handler_for(tree: exp.Expr) -> Handler | None:
    for kind, handler in HANDLERS.items():
        if isinstance(tree, kind):
            return handler
    return None


# -- handlers -------------------------------------------------------------------------------------------------------


def _create(warehouse: Warehouse, tree: exp.Expr, statement: str) -> Any:
    assert isinstance(tree, exp.Create)
    kind = (tree.args.get("kind") or "").upper()
    if kind == "TABLE":
        return create_table(warehouse, tree, statement)
    if kind == "VIEW":
        return _create_view(warehouse, tree, statement)
    warehouse.catalog.ensure_registered(table_names(tree))
    return warehouse.spark.sql(statement)


def _create_view(warehouse: Warehouse, tree: exp.Create, statement: str) -> Any:
    props = tree.args.get("properties")
    temporary = props is not None and props.find(exp.TemporaryProperty) is not None
    view = target_table(tree)
    name = normalize(qualified(view.db, view.name))
    existing = None if temporary else warehouse.catalog.lookup(name)
    if existing is not None and existing["kind"] != "VIEW":
        raise kind_clash(name, existing["kind"], "view", statement)
    if existing is not None and tree.args.get("exists"):  # CREATE VIEW IF NOT EXISTS of a view: nothing changes
        warehouse.catalog.ensure_registered([name])
        return warehouse.spark.sql(statement)
    warehouse.catalog.ensure_registered(table_names(tree.expression))
    if has_unnamed(tree.expression):  # Spark refuses a view of sum(i) without an alias: name it as Spark shows it
        tree = tree.copy()
        spark_names = warehouse.spark.sql(to_spark(tree.expression)).columns  # analysis only
        tree.set("expression", name_outputs(tree.expression, spark_names, spark_names, "view"))
        statement = to_spark(tree)
    visible = hide_state_columns(warehouse, tree, by_name=True)  # kept so: later sessions register it as it is
    if isinstance(visible, exp.Create):
        tree, statement = visible, to_spark(visible)
    result = warehouse.spark.sql(statement)
    if not temporary:
        definition = tree.copy()
        definition.set("replace", True)
        definition.set("exists", False)
        warehouse.catalog.record_view(name, to_spark(definition))
    return result


def _drop(warehouse: Warehouse, tree: exp.Expr, statement: str) -> Any:
    assert isinstance(tree, exp.Drop)
    kind = (tree.args.get("kind") or "").upper()
    if kind not in ("TABLE", "VIEW"):
        warehouse.catalog.ensure_registered(table_names(tree))
        return warehouse.spark.sql(statement)
    names = [normalize(qualified(t.db, t.name)) for t in tree.find_all(exp.Table)]
    dropped = [obj for obj in map(warehouse.catalog.lookup, names) if obj is not None]
    try:
        warehouse.catalog.ensure_registered(names)
    except SqlError:
        if not (kind == "VIEW" and dropped and all(o["kind"] == "VIEW" for o in dropped)):
            raise
        for obj in dropped:  # a view whose query fails now (a table it reads was renamed or dropped): Spark never
            warehouse.catalog.forget(obj["name"])  # registered it, so forgetting it is the whole drop
        return warehouse.spark.createDataFrame([], "status STRING")
    for obj in dropped:
        if obj["kind"] == "DYNAMIC_TABLE":
            raise SqlError(f"{obj['name']} is a dynamic table; use DROP DYNAMIC TABLE {obj['name']}", statement)
        if tree.args.get("purge") and obj["kind"] == "TABLE" and not obj["managed"]:
            raise SqlError(f"cannot DROP ... PURGE table {obj['name']}: dtables does not delete data at a location it "
                           f"did not create ({obj['location']}); DROP TABLE without PURGE unregisters it in statement: "
                           f"{short_statement(statement)}", statement)
    result = warehouse.spark.sql(statement)
    for obj in dropped:
        if obj["kind"] == "TABLE" and obj["managed"]:
            fs.delete(warehouse.spark, obj["location"])
        warehouse.catalog.forget(obj["name"])
        KeyStore(warehouse.store).forget_table(obj["name"])
    return result


def _described_keys(warehouse: Warehouse, tree: exp.Expr) -> list[KeyConstraint]:
    """The keys declared on the table a ``DESCRIBE TABLE EXTENDED | FORMATTED t`` names (empty for anything else)."""
    target = tree.this if isinstance(tree, exp.Describe) else None
    if not isinstance(target, exp.Table) or (tree.args.get("style") or "").upper() not in ("EXTENDED", "FORMATTED"):
        return []
    return KeyStore(warehouse.store).of(normalize(qualified(target.db, target.name)))


def _describe_with_keys(warehouse: Warehouse, keys: list[KeyConstraint], statement: str) -> Any:
    """Spark's answer plus a ``# Constraints`` section listing the declared keys, as Databricks shows them."""
    warehouse.catalog.ensure_registered([keys[0].table])
    described = warehouse.spark.sql(statement)
    rows = [("", "", ""), ("# Constraints", "", "")] + [(k.name, k.definition(), "") for k in keys]
    return described.unionByName(rows_frame(warehouse.spark, rows, described.schema))


def _set_change_tracking(warehouse: Warehouse, tree: exp.Expr, statement: str) -> Any:
    table = tree.this
    name = qualified(table.db, table.name)
    path_based = table.db.lower() == "delta" and "/" in table.name
    if not path_based:
        warehouse.catalog.ensure_registered([name])
    target = f"delta.`{table.name}`" if path_based else quote(name)
    return set_change_tracking(warehouse.spark, target, bool(tree.args["enabled"].this))


def _commit(warehouse: Warehouse, tree: exp.Expr, statement: str) -> Any:
    """COMMIT: the buffered statements that read streams run as one consumption; the rest (none read a stream) run
    here, in order, as any statement does."""
    for buffered, buffered_tree in transactions.commit(warehouse):
        execute_statement(warehouse, buffered, buffered_tree)
    return warehouse.spark.createDataFrame([("transaction committed",)], "status STRING")


HANDLERS: dict[type[exp.Expr], Handler] = {
    SetChangeTracking: _set_change_tracking,
    exp.Create: _create,
    exp.Drop: _drop,
    **DYNAMIC_TABLE_HANDLERS,
    **streams.HANDLERS,
    **INGEST_HANDLERS,
    CommitTransaction: _commit,
}
