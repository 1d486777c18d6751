"""What a dynamic table is: its definition and refresh state as stored in the state store.

``Definition`` is the record of one row of ``dynamic_tables``; it is read fresh from the store at the start of every
refresh (the store is shared between processes), and written back only through the small functions here.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp
from sqlglot.optimizer.qualify_tables import qualify_tables
from sqlglot.optimizer.scope import traverse_scope

from dtables.catalog import DEFAULT_DB, normalize, qualified
from dtables.dynamic.errors import DynamicTableError
from scheduler.vocabulary import SchedulingState
from dtables.sql.chains import regrouped
from dtables.sql.dialect import to_spark
from dtables.state import StateStore

# The hidden column holding each result row's identity (differentiation's __row_id / METADATA$ROW_ID). MERGEs
# match on it, so deleting one copy of a duplicated row deletes exactly that copy.
ROW_ID_COLUMN = "__dtables_row_id"


def now_utc() -> dt.datetime:
    """Now, truncated to milliseconds: Delta commit timestamps have millisecond precision."""
    now = dt.datetime.now(dt.timezone.utc)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def to_iso(ts: dt.datetime | None) -> str | None:
    return None if ts is None else ts.astimezone(dt.timezone.utc).isoformat(timespec="milliseconds")


def from_iso(text: str | None) -> dt.datetime | None:
    return None if text is None else dt.datetime.fromisoformat(text)


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    comment: str | None = None


@dataclass(frozen=True)
class Definition:
    """One dynamic table: what it computes, how it was asked to refresh, and where its refreshes got to."""

    name: str
    query: str
    sources: tuple[str, ...]
    columns: tuple[Column, ...]
    target_lag: str
    refresh_mode: str
    refresh_mode_chosen: str
    refresh_mode_reason: str
    initialize: str
    state: str = SchedulingState.ACTIVE
    comment: str | None = None
    initialized_hash: str | None = None
    source_identities: dict[str, str] = field(default_factory=dict, hash=False)
    data_timestamp: dt.datetime | None = None
    data_version: int | None = None
    frontier: dict[str, int] = field(default_factory=dict, hash=False)
    refresh_seq: int = 0
    created_at: str | None = None
    parent: str | None = None  # an intermediate's (dynamic/intermediates.py): the table it is kept for
    written_query: str | None = None  # the query as written, where ``query`` reads intermediates instead

    @property
    def text(self) -> str:
        """The query as the user wrote it (stored form): what SHOW and DESCRIBE print and projects compare."""
        return self.written_query or self.query

    @property
    def definition_hash(self) -> str:
        """Identity of what the contents mean: a change of query or columns needs a REINITIALIZE."""
        text = json.dumps([self.query, [(c.name, c.type) for c in self.columns], self.refresh_mode_chosen])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def initialized(self) -> bool:
        return self.data_timestamp is not None


def qualify_sources(query: exp.Expr) -> tuple[exp.Expr, tuple[str, ...]]:
    """The query with every table reference spelled ``db.name`` (aliases kept), and the tables it reads.

    Stored queries must not depend on the session's current database, and the refresh swaps each reference for a
    time-travelled snapshot, so every reference has to be recognizable by its normalized name. sqlglot's
    ``qualify_tables`` rewrites the tree as a whole, scope by scope: a CTE keeps shadowing a table of its name, and
    a parenthesized join (a table node carrying ``joins``) keeps its joins (rebuilding references one by one once
    dropped every table of ``FROM (r JOIN s ON ...)`` but the first; issue 24).
    """
    with regrouped(query.copy()) as tree:  # long a + b + ... chains: linear, not quadratic (dtables.sql.chains)
        tree = qualify_tables(tree, db=DEFAULT_DB, dialect="spark")
    sources: list[str] = []
    for table in source_tables(tree):
        name = normalize(qualified(table.db, table.name))
        db, short = name.split(".")
        table.set("this", exp.to_identifier(short))
        table.set("db", exp.to_identifier(db))
        if name not in sources:
            sources.append(name)
    return tree, tuple(sources)


def source_tables(tree: exp.Expr) -> list[exp.Table]:
    """The table nodes of ``tree`` that read a table or view (not a CTE), in scope order."""
    return [table for scope in traverse_scope(tree) for table in scope.tables
            if scope.sources.get(table.alias_or_name) is table and table.name]


# -- store access ---------------------------------------------------------------------------------------------------


def _from_row(row: Any) -> Definition:
    r = dict(row)
    return Definition(
        name=r["name"], query=r["query"], sources=tuple(json.loads(r["sources"])),
        columns=tuple(Column(*c) for c in json.loads(r["columns"])), target_lag=r["target_lag"],
        refresh_mode=r["refresh_mode"], refresh_mode_chosen=r["refresh_mode_chosen"],
        refresh_mode_reason=r["refresh_mode_reason"], initialize=r["initialize"], state=r["state"],
        comment=r["comment"], initialized_hash=r["initialized_hash"],
        source_identities=json.loads(r["source_identities"] or "{}"),
        data_timestamp=from_iso(r["data_timestamp"]), data_version=r["data_version"],
        frontier=json.loads(r["frontier"] or "{}"), refresh_seq=r["refresh_seq"], created_at=r["created_at"],
        parent=r["parent"], written_query=r["written_query"])


def load(store: StateStore, name: str) -> Definition | None:
    rows = store.query("SELECT * FROM dynamic_tables WHERE name = ?", (normalize(name),))
    return _from_row(rows[0]) if rows else None


def require(store: StateStore, name: str) -> Definition:
    found = load(store, name)
    if found is None:
        raise DynamicTableError(f"dynamic table {normalize(name)} does not exist")
    return found


def load_all(store: StateStore) -> list[Definition]:
    return [_from_row(r) for r in store.query("SELECT * FROM dynamic_tables ORDER BY name")]


def insert(store: StateStore, d: Definition) -> None:
    store.execute(
        "INSERT INTO dynamic_tables(name, query, sources, columns, target_lag, refresh_mode, refresh_mode_chosen, "
        "refresh_mode_reason, initialize, state, comment, definition_hash, parent, written_query) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (d.name, d.query, json.dumps(list(d.sources)), json.dumps([[c.name, c.type, c.comment] for c in d.columns]),
         d.target_lag, d.refresh_mode, d.refresh_mode_chosen, d.refresh_mode_reason, d.initialize, d.state,
         d.comment, d.definition_hash, d.parent, d.written_query))


def kept_for(store: StateStore, parent: str) -> list[Definition]:
    """The intermediate dynamic tables kept for ``parent``."""
    return [_from_row(r) for r in store.query("SELECT * FROM dynamic_tables WHERE parent = ? ORDER BY name",
                                              (normalize(parent),))]


def delete(store: StateStore, name: str) -> None:
    store.execute("DELETE FROM dynamic_tables WHERE name = ?", (normalize(name),))


def set_fields(store: StateStore, name: str, **values: Any) -> None:
    """Update some columns of one definition (``state``, ``target_lag``)."""
    assignments = ", ".join(f"{k} = ?" for k in values)
    store.execute(f"UPDATE dynamic_tables SET {assignments} WHERE name = ?", (*values.values(), normalize(name)))


def record_refreshed(store: StateStore, name: str, *, data_timestamp: dt.datetime, data_version: int,
                     frontier: dict[str, int], refresh_seq: int, initialized_hash: str | None,
                     source_identities: dict[str, str], only_if_seq_below: int | None = None) -> None:
    """Move a table's refresh state forward (after a successful refresh, or when recovering one from the log)."""
    guard, params = "", ()
    if only_if_seq_below is not None:
        guard, params = " AND refresh_seq < ?", (only_if_seq_below,)  # type: ignore[assignment]
    store.execute(
        "UPDATE dynamic_tables SET data_timestamp = ?, data_version = ?, frontier = ?, refresh_seq = ?, "
        "initialized_hash = ?, source_identities = ? WHERE name = ?" + guard,
        (to_iso(data_timestamp), data_version, json.dumps(frontier, sort_keys=True), refresh_seq, initialized_hash,
         json.dumps(source_identities, sort_keys=True), normalize(name), *params))


def query_sql(tree: exp.Expr) -> str:
    return to_spark(tree)
