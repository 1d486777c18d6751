"""Declared keys: ``PRIMARY KEY``, ``UNIQUE`` and ``FOREIGN KEY ... REFERENCES``, informational as in Snowflake and
Databricks. dtables keeps them in the state store (Spark refuses table constraints on Delta tables), shows them in
``DESCRIBE TABLE EXTENDED``, and never checks the data against them.

``RELY`` (default ``NORELY``) tells dtables it may use a key: incremental refreshes then skip join terms the keys
prove empty (``differentiation.constraints``). A RELY key the data violates may give wrong results.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from sqlglot import exp

from differentiation.constraints import Constraints, ForeignKey
from dtables.catalog import normalize, qualified
from dtables.errors import SqlError
from dtables.sql.spark_errors import short_statement
from dtables.state import StateStore

PRIMARY, UNIQUE, FOREIGN = "PRIMARY KEY", "UNIQUE", "FOREIGN KEY"


@dataclass(frozen=True)
class KeyConstraint:
    """One declared key of ``table`` (normalized name)."""

    table: str
    name: str
    kind: str  # PRIMARY KEY | UNIQUE | FOREIGN KEY
    columns: tuple[str, ...]
    rely: bool
    referenced: str | None = None
    referenced_columns: tuple[str, ...] = ()

    def definition(self) -> str:
        cols = ", ".join(self.columns)
        ref = f" REFERENCES {self.referenced} ({', '.join(self.referenced_columns)})" if self.referenced else ""
        return f"{self.kind} ({cols}){ref} {'RELY' if self.rely else 'NORELY'}"


def _rely(options: Any) -> bool:
    words = {(o.name if isinstance(o, exp.Expression) else str(o)).upper() for o in options or ()}
    return "RELY" in words


def _names(schema: exp.Expression | None) -> tuple[str, ...]:
    return tuple(e.name.lower() for e in (schema.expressions if schema is not None else ()))


def _parse(node: exp.Expression, table: str, name: str | None, column: str | None = None) -> KeyConstraint | None:
    """The key ``node`` declares (table level, or on ``column``); None for other constraints (NOT NULL, CHECK...)."""
    cols = (column,) if column else ()
    if isinstance(node, exp.PrimaryKey):
        return KeyConstraint(table, name or "", PRIMARY, _names(node), _rely(node.args.get("options")))
    if isinstance(node, exp.PrimaryKeyColumnConstraint) and column:
        return KeyConstraint(table, name or "", PRIMARY, cols, _rely(node.args.get("options")))
    if isinstance(node, exp.UniqueColumnConstraint):
        return KeyConstraint(table, name or "", UNIQUE, _names(node.this) if node.this else cols,
                             _rely(node.args.get("options")))
    reference = node.args.get("reference") if isinstance(node, exp.ForeignKey) else node
    if isinstance(reference, exp.Reference):
        target = reference.this
        ref_table = target.this if isinstance(target, exp.Schema) else target
        fk_cols = tuple(e.name.lower() for e in node.expressions) if isinstance(node, exp.ForeignKey) else cols
        return KeyConstraint(table, name or "", FOREIGN, fk_cols, _rely(reference.args.get("options")),
                             normalize(qualified(ref_table.db, ref_table.name)),
                             _names(target) if isinstance(target, exp.Schema) else ())
    return None


def _named(key: KeyConstraint, taken: set[str]) -> KeyConstraint:
    """``key`` with a name: as declared, else ``<table>_pk``, ``<table>_<columns>_fk`` / ``_uk`` (made unique)."""
    if key.name:
        return key
    suffix = {PRIMARY: "pk", FOREIGN: "fk", UNIQUE: "uk"}[key.kind]
    base = "_".join([key.table.split(".")[-1], *(key.columns if key.kind != PRIMARY else ()), suffix])
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    return replace(key, name=name)


_KEY_NODES = (exp.PrimaryKey, exp.PrimaryKeyColumnConstraint, exp.UniqueColumnConstraint, exp.ForeignKey,
              exp.Reference)


def declares_keys(tree: exp.Expr | None) -> bool:
    """Whether a CREATE TABLE or ALTER TABLE declares keys (dtables keeps them; Spark's parser refuses some forms,
    such as a REFERENCES without columns)."""
    return isinstance(tree, (exp.Create, exp.Alter)) and tree.find(*_KEY_NODES) is not None


def split_create(tree: exp.Create, table: str) -> tuple[exp.Create, list[KeyConstraint]]:
    """``tree`` without its key constraints (Spark refuses them on Delta tables), and the keys it declares."""
    schema = tree.this
    if not isinstance(schema, exp.Schema):
        return tree, []
    new = tree.copy()
    keys: list[KeyConstraint] = []
    for item in list(new.this.expressions):
        if isinstance(item, exp.ColumnDef):
            for cc in list(item.args.get("constraints") or []):
                key = _parse(cc.args["kind"], table, cc.name or None, item.name.lower())
                if key is not None:
                    keys.append(key)
                    cc.pop()
            continue
        inner = item.expressions[0] if isinstance(item, exp.Constraint) and len(item.expressions) == 1 else item
        key = _parse(inner, table, item.name if isinstance(item, exp.Constraint) else None)
        if key is not None:
            keys.append(key)
            item.pop()
    return new, keys


def keys_added(tree: exp.Alter, table: str) -> list[KeyConstraint]:
    """The keys ``ALTER TABLE ... ADD [CONSTRAINT name] PRIMARY KEY | UNIQUE | FOREIGN KEY ...`` declares (empty for
    a CHECK constraint, which Delta keeps)."""
    keys = []
    for action in tree.args.get("actions") or []:
        if not isinstance(action, exp.AddConstraint):
            continue
        for item in action.expressions:
            inner = item.expressions[0] if isinstance(item, exp.Constraint) and len(item.expressions) == 1 else item
            key = _parse(inner, table, item.name if isinstance(item, exp.Constraint) else None)
            if key is not None:
                keys.append(key)
    return keys


def key_dropped(tree: exp.Alter) -> tuple[str, bool] | None:
    """(name, IF EXISTS) of ``ALTER TABLE ... DROP CONSTRAINT [IF EXISTS] name``; None for anything else."""
    actions = tree.args.get("actions") or []
    if len(actions) == 1 and isinstance(actions[0], exp.Drop) and (actions[0].args.get("kind") or "") == "CONSTRAINT":
        tables = actions[0].args.get("tables") or []
        return tables[0].name.lower() if tables else "", bool(actions[0].args.get("exists"))
    return None


class KeyStore:
    """The declared keys of a warehouse's tables, in the state store."""

    def __init__(self, store: StateStore):
        self.store = store

    def of(self, table: str) -> list[KeyConstraint]:
        rows = self.store.query("SELECT * FROM table_keys WHERE table_name = ? ORDER BY name", (normalize(table),))
        return [_row(r) for r in rows]

    def referencing(self, table: str) -> list[KeyConstraint]:
        rows = self.store.query("SELECT * FROM table_keys WHERE referenced = ? ORDER BY table_name, name",
                                (normalize(table),))
        return [_row(r) for r in rows]

    def check(self, keys: list[KeyConstraint], columns: list[str], statement: str,
              replacing: bool = False) -> list[KeyConstraint]:
        """``keys`` named and validated against the table's ``columns`` and the keys already declared (all of them
        replaced when ``replacing``); raises SqlError naming what is wrong."""
        if not keys:
            return []
        table = keys[0].table
        existing = [] if replacing else self.of(table)
        taken = {k.name for k in existing}
        named: list[KeyConstraint] = []
        for key in keys:
            key = _named(key, taken)
            if key.name in taken:
                raise _error(f"table {table} already has a constraint named {key.name}", statement)
            taken.add(key.name)
            missing = [c for c in key.columns if c not in columns]
            if missing:
                raise _error(f"{key.kind} {key.name} of {table}: no column {', '.join(missing)}", statement)
            if key.kind == PRIMARY and any(k.kind == PRIMARY for k in existing + named):
                raise _error(f"table {table} already has a primary key", statement)
            if key.kind == FOREIGN:
                key = self._check_reference(key, existing + named, statement)
            named.append(key)
        return named

    def _check_reference(self, key: KeyConstraint, own: list[KeyConstraint], statement: str) -> KeyConstraint:
        """``key`` with its referenced columns (the referenced table's primary key when not named), checked to be a
        declared unique key there."""
        assert key.referenced is not None
        targets = own if key.referenced == key.table else self.of(key.referenced)
        unique = [k for k in targets if k.kind in (PRIMARY, UNIQUE)]
        ref_cols = key.referenced_columns or next((k.columns for k in unique if k.kind == PRIMARY), ())
        if not ref_cols:
            raise _error(f"FOREIGN KEY {key.name} of {key.table} references {key.referenced}, which has no primary key "
                         "(name its columns, and declare them PRIMARY KEY or UNIQUE there first)", statement)
        if len(ref_cols) != len(key.columns):
            raise _error(f"FOREIGN KEY {key.name} of {key.table} has {len(key.columns)} columns but references "
                         f"{len(ref_cols)}", statement)
        if not any(set(k.columns) == set(ref_cols) for k in unique):
            raise _error(f"FOREIGN KEY {key.name} of {key.table} references {key.referenced} ({', '.join(ref_cols)}), "
                         "which is not a declared PRIMARY KEY or UNIQUE key of it", statement)
        return replace(key, referenced_columns=tuple(ref_cols))

    def record(self, keys: list[KeyConstraint], replace_table: str | None = None) -> None:
        with self.store.connect() as conn:
            if replace_table is not None:
                conn.execute("DELETE FROM table_keys WHERE table_name = ?", (normalize(replace_table),))
            for k in keys:
                conn.execute(
                    "INSERT INTO table_keys(table_name, name, kind, columns, rely, referenced, referenced_columns) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (k.table, k.name, k.kind, json.dumps(k.columns), int(k.rely), k.referenced,
                     json.dumps(k.referenced_columns) if k.referenced else None))

    def drop(self, table: str, name: str, if_exists: bool, statement: str) -> bool:
        """Forget key ``name`` of ``table``; False when the table has no such key (then Delta may have a CHECK)."""
        key = next((k for k in self.of(table) if k.name == name), None)
        if key is None:
            return False
        if key.kind in (PRIMARY, UNIQUE):
            users = [k for k in self.referencing(table)
                     if set(k.referenced_columns) == set(key.columns) and (k.table, k.name) != (key.table, key.name)]
            if users:
                raise _error(f"{key.kind} {name} of {table} is referenced by FOREIGN KEY {users[0].name} of "
                             f"{users[0].table}; drop that first", statement)
        self.store.execute("DELETE FROM table_keys WHERE table_name = ? AND name = ?", (normalize(table), name))
        return True

    def forget_table(self, table: str) -> None:
        """A dropped table takes its keys, and the foreign keys that referenced it, with it."""
        t = normalize(table)
        self.store.execute("DELETE FROM table_keys WHERE table_name = ? OR referenced = ?", (t, t))

    def rename(self, conn: Any, old: str, new: str) -> None:
        """Inside the caller's state-store transaction, as ``Catalog.rename``."""
        conn.execute("UPDATE table_keys SET table_name = ? WHERE table_name = ?", (normalize(new), normalize(old)))
        conn.execute("UPDATE table_keys SET referenced = ? WHERE referenced = ?", (normalize(new), normalize(old)))

    def relied_on(self, tables: list[str]) -> Constraints:
        """The RELY keys among ``tables``, in the form differentiation takes (foreign keys between two of them)."""
        wanted = {normalize(t): t for t in tables}
        unique, foreign = [], []
        for key in (k for t in wanted for k in self.of(t)):
            if not key.rely:
                continue
            if key.kind in (PRIMARY, UNIQUE):
                unique.append((wanted[key.table], key.columns))
            elif key.referenced in wanted:
                foreign.append(ForeignKey(wanted[key.table], key.columns, wanted[key.referenced],
                                          key.referenced_columns))
        return Constraints(tuple(unique), tuple(foreign))


def _row(r: Any) -> KeyConstraint:
    return KeyConstraint(r["table_name"], r["name"], r["kind"], tuple(json.loads(r["columns"])), bool(r["rely"]),
                         r["referenced"], tuple(json.loads(r["referenced_columns"])) if r["referenced_columns"] else ())


def _error(message: str, statement: str) -> SqlError:
    return SqlError(f"{message} in statement: {short_statement(statement)}", statement)
