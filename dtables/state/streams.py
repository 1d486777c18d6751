"""Stream rows in the state store (migration 3): definition, frontier, consume sequence, pending consumption.

The frontier advances only through :func:`advance`, a compare-and-set on the consume sequence, so two consumers
that both got past their locks (e.g. a lock on a file system without ``flock``) can never both advance a stream.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dtables.state.store import StateStore
from dtables.errors import StreamConflict, StreamNotFound


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Stream:
    """One stream: ``frontier`` maps each base table of the source to the Delta version consumed up to."""

    name: str
    source: str
    source_kind: str  # TABLE | VIEW | DYNAMIC TABLE
    mode: str  # DEFAULT | APPEND_ONLY
    flavor: str  # SNOWFLAKE | SINGDATA
    show_initial_rows: bool  # still to return the source's rows as INSERTs on the next consumption
    frontier: Mapping[str, int]
    consumed_at: str
    seq: int
    pending: Mapping[str, Any] | None
    comment: str | None
    created_at: str

    @staticmethod
    def from_row(row: Any) -> Stream:
        return Stream(row["name"], row["source"], row["source_kind"], row["mode"], row["flavor"],
                      bool(row["show_initial_rows"]), json.loads(row["frontier"]), row["consumed_at"], row["seq"],
                      json.loads(row["pending"]) if row["pending"] else None, row["comment"], row["created_at"])


def get(store: StateStore, name: str) -> Stream | None:
    rows = store.query("SELECT * FROM streams WHERE name = ?", (name,))
    return Stream.from_row(rows[0]) if rows else None


def require(store: StateStore, name: str) -> Stream:
    stream = get(store, name)
    if stream is None:
        raise StreamNotFound(f"stream {name} does not exist")
    return stream


def all_streams(store: StateStore) -> list[Stream]:
    return [Stream.from_row(r) for r in store.query("SELECT * FROM streams ORDER BY name")]


def names(store: StateStore) -> set[str]:
    return {r["name"] for r in store.query("SELECT name FROM streams")}


def create(store: StateStore, stream: Stream, replace: bool) -> None:
    with store.connect() as conn:
        if replace:
            conn.execute("DELETE FROM streams WHERE name = ?", (stream.name,))
        conn.execute(
            "INSERT INTO streams(name, source, source_kind, mode, flavor, show_initial_rows, frontier, consumed_at,"
            " seq, comment) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?)",
            (stream.name, stream.source, stream.source_kind, stream.mode, stream.flavor,
             int(stream.show_initial_rows), json.dumps(dict(stream.frontier), sort_keys=True), stream.consumed_at,
             stream.comment))


def drop(store: StateStore, name: str) -> bool:
    with store.connect() as conn:
        return conn.execute("DELETE FROM streams WHERE name = ?", (name,)).rowcount > 0


def set_pending(store: StateStore, streams: Iterable[Stream], pending: Mapping[str, Any]) -> None:
    """Record a consumption about to write, on every stream it consumes (checked against each one's seq)."""
    text = json.dumps(dict(pending), sort_keys=True)
    with store.connect() as conn:
        for s in streams:
            n = conn.execute("UPDATE streams SET pending = ? WHERE name = ? AND seq = ?", (text, s.name, s.seq))
            if n.rowcount != 1:
                raise StreamConflict(f"stream {s.name} was consumed by another statement meanwhile; nothing "
                                     "was written, run the statement again to consume the next changes")


def clear_pending(store: StateStore, names_: Iterable[str]) -> None:
    with store.connect() as conn:
        for name in names_:
            conn.execute("UPDATE streams SET pending = NULL WHERE name = ?", (name,))


def advance(store: StateStore, expected_seq: Mapping[str, int], seq: int, frontiers: Mapping[str, Mapping[str, int]],
            consumed_initial: Iterable[str] = ()) -> None:
    """Move every stream in ``frontiers`` to its new frontier and ``seq`` in one SQLite transaction, only if each
    still has its ``expected_seq``; otherwise nothing moves and StreamConflict names the stream."""
    now = utc_now()
    initial = set(consumed_initial)
    with store.connect() as conn:
        for name, frontier in frontiers.items():
            n = conn.execute(
                "UPDATE streams SET frontier = ?, consumed_at = ?, seq = ?, pending = NULL,"
                " show_initial_rows = CASE WHEN ? THEN 0 ELSE show_initial_rows END WHERE name = ? AND seq = ?",
                (json.dumps(dict(frontier), sort_keys=True), now, seq, int(name in initial), name,
                 expected_seq[name]))
            if n.rowcount != 1:
                raise StreamConflict(f"stream {name} was consumed by another transaction after this one read it; "
                                     "this transaction's writes were not applied: run it again")


def follow_rename(conn: Any, old: str, new: str) -> None:
    """Streams follow a renamed table or view (Snowflake: renaming a source neither breaks a stream nor makes it
    stale): their source and frontier keys take the new name, inside the rename's store transaction ``conn``."""
    for row in conn.execute("SELECT name, source, frontier FROM streams").fetchall():
        frontier = json.loads(row["frontier"])
        if row["source"] != old and old not in frontier:
            continue
        moved = {new if table == old else table: version for table, version in frontier.items()}
        conn.execute("UPDATE streams SET source = ?, frontier = ? WHERE name = ?",
                     (new if row["source"] == old else row["source"], json.dumps(moved, sort_keys=True), row["name"]))
