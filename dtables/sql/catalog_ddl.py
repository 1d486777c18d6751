"""Catalog statements on tables, views and databases: each is kept by dtables' catalog or refused before it runs.

Spark's catalog lives in one process's memory; dtables' catalog is the state store (``dtables/catalog/``), and
every session re-registers objects from it. A statement that changes only Spark's registration would report success
and be gone in the next session (issue 22: ``ALTER TABLE t RENAME TO t2``). So every catalog statement lands in one
of three places:

- the Delta log, which Delta keeps by itself: table properties, columns, comments, constraints, clustering;
- the state store, updated here after Spark accepted the statement: a table's or view's name (RENAME TO, with the
  streams on it following, as Snowflake's do), an external table's location (SET LOCATION), a view's definition
  (ALTER VIEW ... AS / SET / UNSET TBLPROPERTIES / WITH SCHEMA, re-read with SHOW CREATE TABLE);
- nowhere: then the statement is refused with the reason before anything runs (renaming or reshaping a dynamic
  table, moving a table that streams or dtables' own storage depend on, database properties).

Forms are recognized from the statement's tokens (sqlglot parses many ALTER forms only as an opaque ``Command``), so
the same rules hold with Spark Connect, which has no parser to ask.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from dtables.catalog import DEFAULT_DB, constraints, normalize, quote
from dtables.catalog.constraints import KeyStore
from dtables.catalog.warehouse import Warehouse
from dtables.dynamic import definition as defs
from dtables.dynamic.visible import hide_state_columns
from dtables.errors import ObjectNotFound, SqlError
from dtables.sql.dialect import Dtables, parse, parse_one, to_spark
from dtables.sql.spark_errors import short_statement
from dtables.state import streams as stream_store

RENAME, LOCATION, PROPERTIES, COLUMNS, CONSTRAINT, CLUSTER, COMMENT = (
    "RENAME TO", "SET LOCATION", "SET/UNSET TBLPROPERTIES", "a column change", "a constraint change", "CLUSTER BY",
    "COMMENT ON TABLE")
VIEW_QUERY, VIEW_SCHEMA, OTHER = "ALTER VIEW ... AS", "ALTER VIEW ... WITH SCHEMA", "this ALTER TABLE form"
REPLACE_TABLE, DROP_DATABASE, ALTER_DATABASE = "REPLACE TABLE", "DROP DATABASE", "ALTER DATABASE"
_NAMESPACE = ("DATABASE", "SCHEMA", "NAMESPACE")


@dataclass(frozen=True)
class CatalogStatement:
    """What a catalog statement does: to which object (as written) and which form; ``new_name`` for RENAME TO."""

    target: str  # TABLE | VIEW | DATABASE
    name: str
    action: str
    new_name: str | None = None
    comment: str | None = None  # COMMENT ON TABLE ... IS '<comment>' (None for IS NULL)


_KEY_WORDS = ("PRIMARY KEY", "UNIQUE", "FOREIGN KEY", "PRIMARY", "FOREIGN")  # ADD PRIMARY KEY (...) unnamed
_LEADING_COMMENTS = re.compile(r"\A(?:\s+|--[^\n]*(?:\n|\Z)|/\*.*?\*/)*", re.DOTALL)
_HEADS = ("ALTER", "COMMENT", "REPLACE", "DROP")


def classify(statement: str) -> CatalogStatement | None:
    """The catalog statement ``statement`` is, or None for anything else (queries, DML, CREATE, DROP TABLE...)."""
    if not _LEADING_COMMENTS.sub("", statement, count=1)[:7].upper().startswith(_HEADS):
        return None  # most statements: no tokenizing
    try:
        tokens = [t for t in Dtables().tokenize(statement) if t.token_type != TokenType.SEMICOLON]
    except Exception:  # noqa: BLE001 - not ours to judge: Spark reports the syntax error
        return None
    words = [t.text.upper() for t in tokens]
    if words[:2] in (["ALTER", "TABLE"], ["ALTER", "VIEW"]) and len(tokens) > 2:
        name, j = _name(tokens, 2)
        rest = words[j:]
        action = _alter_action(rest)
        new_name = _name(tokens, j + 2)[0] if action == RENAME and len(tokens) > j + 2 else None
        return CatalogStatement(words[1], name, action, new_name)
    if words[:3] == ["COMMENT", "ON", "TABLE"] and len(tokens) > 3:
        name, j = _name(tokens, 3)
        text = tokens[j + 1] if len(tokens) > j + 1 else None
        comment = text.text if text is not None and text.token_type == TokenType.STRING else None
        return CatalogStatement("TABLE", name, COMMENT, comment=comment)
    if words[:2] == ["REPLACE", "TABLE"] and len(tokens) > 2:
        return CatalogStatement("TABLE", _name(tokens, 2)[0], REPLACE_TABLE)
    if len(words) > 2 and words[0] in ("DROP", "ALTER") and words[1] in _NAMESPACE:
        start = 4 if words[2:4] == ["IF", "EXISTS"] else 2
        if len(tokens) > start:
            return CatalogStatement("DATABASE", _name(tokens, start)[0],
                                    DROP_DATABASE if words[0] == "DROP" else ALTER_DATABASE)
    return None


def _name(tokens: list[Token], i: int) -> tuple[str, int]:
    """The dotted name starting at token ``i`` and the index of the token after it."""
    parts = [tokens[i].text]
    i += 1
    while i + 1 < len(tokens) and tokens[i].token_type == TokenType.DOT:
        parts.append(tokens[i + 1].text)
        i += 2
    return ".".join(parts), i


def _alter_action(rest: list[str]) -> str:
    head, second = (rest + ["", ""])[:2]
    if (head, second) == ("RENAME", "TO"):
        return RENAME
    if (head, second) == ("SET", "LOCATION"):
        return LOCATION
    if head in ("SET", "UNSET") and second == "TBLPROPERTIES":
        return PROPERTIES
    if head == "AS":
        return VIEW_QUERY
    if (head, second) == ("WITH", "SCHEMA"):
        return VIEW_SCHEMA
    if (head in ("ADD", "DROP") and second == "CONSTRAINT") or (head == "ADD" and second in _KEY_WORDS):
        return CONSTRAINT
    if (head, second) == ("CLUSTER", "BY"):
        return CLUSTER
    if head in ("ADD", "DROP") and second in ("COLUMN", "COLUMNS", "IF"):
        return COLUMNS
    if head in ("ALTER", "CHANGE") or (head, second) in (("RENAME", "COLUMN"), ("REPLACE", "COLUMNS")):
        return COLUMNS
    return OTHER  # partitions, SERDE, RECOVER ...: Spark and Delta refuse them for Delta tables before any change


# -- execution ------------------------------------------------------------------------------------------------------


def execute(warehouse: Warehouse, st: CatalogStatement, statement: str) -> Any:
    if st.target == "DATABASE":
        return _database(warehouse, st, statement)
    obj = warehouse.catalog.lookup(st.name)
    if st.action == REPLACE_TABLE:
        raise AssertionError("REPLACE TABLE runs as the CREATE OR REPLACE TABLE of replace_as_create")
    if obj is None:
        if _is_stream(warehouse, st.name):
            raise SqlError(f"{normalize(st.name)} is a stream: ALTER TABLE and COMMENT do not apply to streams, and "
                           "streams cannot be renamed (CREATE STREAM a new one and DROP STREAM this one) in "
                           f"statement: {short_statement(statement)}", statement)
        if st.new_name is not None:
            _check_free(warehouse, st.name, _new_name(st.name, st.new_name), statement)
        # Not a dtables object (a temporary view, a path-based table, or missing): Spark decides.
        warehouse.catalog.ensure_registered([st.name, *([st.new_name] if st.new_name else [])])
        return warehouse.spark.sql(statement)
    if obj["kind"] == "DYNAMIC_TABLE":
        return _dynamic_table(warehouse, obj, st, statement)
    if obj["kind"] == "VIEW":
        return _view(warehouse, obj, st, statement)
    return _table(warehouse, obj, st, statement)


def _refuse(statement: str, message: str) -> SqlError:
    return SqlError(f"{message} in statement: {short_statement(statement)}", statement)


def _table(warehouse: Warehouse, obj: dict[str, Any], st: CatalogStatement, statement: str) -> Any:
    if st.action == RENAME:
        return _rename(warehouse, obj, st, statement)
    if st.action == LOCATION:
        return _set_location(warehouse, obj, statement)
    if st.action == CONSTRAINT:
        done = _alter_keys(warehouse, obj["name"], statement)
        if done is not None:
            return done
    # Properties, columns, comments, constraints, clustering: Delta writes them to the table's log, which every
    # session reads; partition and SERDE forms are refused by Spark for Delta tables before anything changes.
    warehouse.catalog.ensure_registered([obj["name"]])
    return warehouse.spark.sql(statement)


def _alter_keys(warehouse: Warehouse, name: str, statement: str) -> Any:
    """``ADD [CONSTRAINT c] PRIMARY KEY | UNIQUE | FOREIGN KEY ...`` and ``DROP CONSTRAINT`` of a declared key, kept
    in the state store (Spark refuses table constraints on Delta tables); None for CHECK constraints, which Delta
    keeps in the table's log."""
    tree = parse_one(statement)
    if not isinstance(tree, exp.Alter):
        return None
    keys = KeyStore(warehouse.store)
    added = constraints.keys_added(tree, name)
    dropped = constraints.key_dropped(tree)
    if added:
        warehouse.catalog.ensure_registered([name])
        columns = [c.lower() for c in warehouse.spark.table(quote(name)).columns]
        keys.record(keys.check(added, columns, statement))
    elif dropped is None or not keys.drop(name, dropped[0], dropped[1], statement):
        return None
    return warehouse.spark.createDataFrame([], "status STRING")


def _dynamic_table(warehouse: Warehouse, obj: dict[str, Any], st: CatalogStatement, statement: str) -> Any:
    name = obj["name"]
    if st.action in (PROPERTIES, CLUSTER):
        warehouse.catalog.ensure_registered([name])
        return warehouse.spark.sql(statement)
    if st.action == COMMENT:
        warehouse.catalog.ensure_registered([name])
        result = warehouse.spark.sql(statement)
        defs.set_fields(warehouse.store, name, comment=st.comment)  # what SHOW / DESCRIBE DYNAMIC TABLE show
        return result
    if st.action == RENAME:
        raise _refuse(statement, (
            f"cannot rename dynamic table {name}: renaming dynamic tables is not supported (its refresh history, "
            "frontier and the dynamic tables and streams that read it refer to it by name); create it under the new "
            f"name (CREATE DYNAMIC TABLE ... AS its query, see DESCRIBE DYNAMIC TABLE {name}) and drop this one"))
    if st.action == COLUMNS:
        raise _refuse(statement, (
            f"cannot change the columns of dynamic table {name}: its columns are its query's; change the query with "
            "CREATE OR REPLACE DYNAMIC TABLE"))
    raise _refuse(statement, (
        f"{st.action} is not supported on dynamic table {name} (dtables writes its storage; ALTER DYNAMIC TABLE "
        "and CREATE OR REPLACE DYNAMIC TABLE change it)"))


def _view(warehouse: Warehouse, obj: dict[str, Any], st: CatalogStatement, statement: str) -> Any:
    name = obj["name"]
    if st.action == RENAME:
        return _rename(warehouse, obj, st, statement)
    if st.action == VIEW_QUERY:
        readers = [s.name for s in _streams(warehouse) if s.source == name]
        if readers:
            raise _refuse(statement, (
                f"cannot change the query of view {name}: streams {', '.join(readers)} hold frontiers on the tables "
                "it reads now; drop them first (and create them again after)"))
    warehouse.catalog.ensure_registered([name])
    if st.action == VIEW_QUERY:  # the new query reads dynamic tables' visible columns only, as CREATE VIEW's does
        tree = parse(statement)
        visible = hide_state_columns(warehouse, tree, by_name=True) if tree is not None else None
        statement = statement if visible is None else to_spark(visible)
    result = warehouse.spark.sql(statement)  # Spark refuses what does not apply to a view (e.g. COMMENT ON TABLE)
    try:
        warehouse.catalog.record_view(name, _view_definition(warehouse, name))
    except Exception:
        warehouse.spark.sql(obj["definition"])  # put Spark's view back as the catalog has it
        raise
    return result


def _view_definition(warehouse: Warehouse, name: str) -> str:
    """The view's current definition as Spark holds it (columns, comment, properties, schema binding, query), as a
    ``CREATE OR REPLACE VIEW`` the next session runs."""
    text = warehouse.spark.sql(f"SHOW CREATE TABLE {quote(name)}").first()[0]
    tree = parse_one(text)
    tree.set("replace", True)
    return to_spark(tree)


# -- rename ---------------------------------------------------------------------------------------------------------


def _new_name(old: str, new: str) -> str:
    """Spark keeps a renamed table in its database when the new name gives none."""
    return normalize(new) if "." in new else f"{normalize(old).split('.')[0]}.{normalize(new).split('.')[1]}"


def _is_stream(warehouse: Warehouse, name: str) -> bool:
    return normalize(name) in stream_store.names(warehouse.store)


def _streams(warehouse: Warehouse) -> list[Any]:
    return stream_store.all_streams(warehouse.store)


def _check_free(warehouse: Warehouse, old: str, new: str, statement: str) -> None:
    taken = warehouse.catalog.lookup(new)
    if taken is not None:
        kind = taken["kind"].lower().replace("_", " ")
        raise _refuse(statement, f"cannot rename {normalize(old)} to {new}: a {kind} named {new} exists")
    if _is_stream(warehouse, new):
        raise _refuse(statement, f"cannot rename {normalize(old)} to {new}: a stream named {new} exists")


def _rename(warehouse: Warehouse, obj: dict[str, Any], st: CatalogStatement, statement: str) -> Any:
    """RENAME TO: Spark renames its registration, the catalog record follows, and so do the streams on the object
    (their frontiers are positions in its Delta log, which keeps its location): as in Snowflake, renaming a source
    neither breaks a stream nor makes it stale. Dynamic tables and views read their sources by name, as in
    Snowflake: one reading the old name fails until that name exists again (frontier.py names the rename)."""
    old = obj["name"]
    new = _new_name(old, st.new_name or "")
    if new == old:
        raise _refuse(statement, f"cannot rename {old} to itself")
    _check_free(warehouse, old, new, statement)
    busy = [s.name for s in _streams(warehouse) if s.pending and json.dumps(old) in json.dumps(s.pending)]
    if busy:
        raise _refuse(statement, (
            f"cannot rename {old}: a consumption of stream(s) {', '.join(busy)} that reads or writes it is still "
            "being finished; query the stream once (that completes it) and rename again"))
    channels = [r["name"] for r in warehouse.store.query("SELECT name FROM channels WHERE table_name = ?", (old,))]
    if channels:
        raise _refuse(statement, (
            f"cannot rename {old}: ingestion channels {', '.join(channels)} write it and keep their offset tokens "
            "under its name; drop them first (Client.drop_channel) and open them again on the new name"))
    warehouse.catalog.ensure_registered([old])
    result = warehouse.spark.sql(statement)  # Spark refuses (e.g. another database) before anything changed
    try:
        definition = _view_definition(warehouse, new) if obj["kind"] == "VIEW" else None
        with warehouse.store.connect() as conn:
            warehouse.catalog.rename(conn, old, new, definition)
            KeyStore(warehouse.store).rename(conn, old, new)
            stream_store.follow_rename(conn, old, new)
    except Exception:
        kind = "VIEW" if obj["kind"] == "VIEW" else "TABLE"
        warehouse.spark.sql(f"ALTER {kind} {quote(new)} RENAME TO {quote(old)}")  # undo Spark's side
        raise
    return result


# -- location, REPLACE TABLE, databases -----------------------------------------------------------------------------


def _set_location(warehouse: Warehouse, obj: dict[str, Any], statement: str) -> Any:
    name = obj["name"]
    if obj["managed"]:
        raise _refuse(statement, (
            f"cannot move table {name}: dtables created it and keeps its files in the warehouse ({obj['location']}); "
            "SET LOCATION applies to tables registered with CREATE TABLE ... LOCATION"))
    readers = [s.name for s in _streams(warehouse) if name in s.frontier or s.source == name]
    if readers:
        raise _refuse(statement, (
            f"cannot move table {name}: streams {', '.join(readers)} hold frontiers that are versions of the table "
            "at its current location; drop them first"))
    warehouse.catalog.ensure_registered([name])
    result = warehouse.spark.sql(statement)
    location = warehouse.spark.sql(f"DESCRIBE DETAIL {quote(name)}").first()["location"]
    warehouse.catalog.record_table(name, location, managed=False)
    return result


def replace_as_create(warehouse: Warehouse, st: CatalogStatement, statement: str) -> str:
    """``REPLACE TABLE`` is ``CREATE OR REPLACE TABLE`` of a table that must exist (same checks, same catalog): the
    statement to run instead (the executor runs it)."""
    if warehouse.catalog.lookup(st.name) is None:
        raise ObjectNotFound(f"table {normalize(st.name)} does not exist (REPLACE TABLE replaces an existing table; "
                             f"use CREATE OR REPLACE TABLE) in statement: {short_statement(statement)}", statement)
    return "CREATE OR " + statement.lstrip()


def _database(warehouse: Warehouse, st: CatalogStatement, statement: str) -> Any:
    db = normalize(f"{st.name}.x").split(".")[0]
    if st.action == ALTER_DATABASE:
        raise _refuse(statement, (
            f"cannot alter database {db}: dtables keeps no database properties or locations (its catalog records "
            "tables and views, and each session creates their databases by name)"))
    held = [o["name"] for o in warehouse.catalog.objects() if o["name"].split(".")[0] == db]
    held += sorted(n for n in _stream_names(warehouse) if n.split(".")[0] == db)
    if held:
        raise _refuse(statement, (
            f"cannot drop database {db}: it holds {', '.join(held)}; drop them first (DROP TABLE, DROP VIEW, "
            "DROP DYNAMIC TABLE, DROP STREAM)"))
    if db == DEFAULT_DB:
        raise _refuse(statement, f"cannot drop database {DEFAULT_DB}")
    return warehouse.spark.sql(statement)


def _stream_names(warehouse: Warehouse) -> set[str]:
    return stream_store.names(warehouse.store)
