"""Channel rows in the state store (the ``channels`` migration): a cache of what the Delta log says about each channel.

The log is the truth (see :mod:`dtables.ingest.commits`): every commit of a channel carries its app id, epoch,
sequence and offset token. The store adds what makes that fast and shared between processes: the current epoch
(bumped on every open, checked before every commit), and the last commit's version, token and counts, so opening a
channel reads the log only after that version.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
from dataclasses import dataclass, replace
from typing import Any

from dtables.state import StateStore


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class ChannelState:
    """One channel of one table.

    ``app_id``: the ``txnAppId`` of its commits (unique per channel incarnation); ``epoch``: bumped by every open;
    ``seq``: the ``txnVersion`` of its newest commit in the log; ``log_version``: that commit's table version (the
    reconciliation reads the log after it); ``offset_token``, ``committed_at``, ``rows_committed``: of the newest
    commit that carried rows or a token.
    """

    table: str
    name: str
    app_id: str
    epoch: int
    seq: int
    log_version: int
    offset_token: str | None
    committed_at: str | None
    rows_committed: int
    on_error: str
    created_at: str
    opened_at: str

    @staticmethod
    def from_row(row: Any) -> ChannelState:
        return ChannelState(row["table_name"], row["name"], row["app_id"], row["epoch"], row["seq"],
                            row["log_version"], row["offset_token"], row["committed_at"], row["rows_committed"],
                            row["on_error"], row["created_at"], row["opened_at"])

    def with_(self, **changes: Any) -> ChannelState:
        return replace(self, **changes)


_COLUMNS = ("table_name, name, app_id, epoch, seq, log_version, offset_token, committed_at, rows_committed, on_error, "
            "created_at, opened_at")


def get(store: StateStore, table: str, name: str) -> ChannelState | None:
    rows = store.query("SELECT * FROM channels WHERE table_name = ? AND name = ?", (table, name))
    return ChannelState.from_row(rows[0]) if rows else None


def current_epoch(store: StateStore, table: str, name: str) -> int | None:
    rows = store.query("SELECT epoch FROM channels WHERE table_name = ? AND name = ?", (table, name))
    return int(rows[0]["epoch"]) if rows else None


def listing(store: StateStore, table: str | None = None, like: str | None = None) -> list[ChannelState]:
    """Channels ordered by table and name; ``like`` is a SQL LIKE pattern on the name (case-insensitive)."""
    sql, params = "SELECT * FROM channels", ()  # type: tuple[str, tuple[str, ...]]
    if table is not None:
        sql, params = sql + " WHERE table_name = ?", (table,)
    states = [ChannelState.from_row(r) for r in store.query(sql + " ORDER BY table_name, name", params)]
    if like is not None:
        pattern = like.lower().replace("*", "[*]").replace("?", "[?]").replace("%", "*").replace("_", "?")
        states = [s for s in states if fnmatch.fnmatchcase(s.name.lower(), pattern)]
    return states


def claim(store: StateStore, state: ChannelState, expected_epoch: int | None) -> bool:
    """Write ``state`` (a new epoch) if the stored epoch is still ``expected_epoch`` (None: no row yet)."""
    values = (state.table, state.name, state.app_id, state.epoch, state.seq, state.log_version, state.offset_token,
              state.committed_at, state.rows_committed, state.on_error, state.created_at, state.opened_at)
    with store.connect() as conn:
        row = conn.execute("SELECT epoch FROM channels WHERE table_name = ? AND name = ?",
                           (state.table, state.name)).fetchone()
        if (row["epoch"] if row else None) != expected_epoch:
            return False
        conn.execute(f"INSERT OR REPLACE INTO channels({_COLUMNS}) VALUES ({', '.join('?' * len(values))})", values)
        return True


def record_commit(store: StateStore, state: ChannelState) -> bool:
    """Store a commit's outcome if the channel still has ``state.epoch`` (False: it was reopened or dropped)."""
    with store.connect() as conn:
        n = conn.execute(
            "UPDATE channels SET seq = ?, log_version = ?, offset_token = ?, committed_at = ?, rows_committed = ? "
            "WHERE table_name = ? AND name = ? AND epoch = ? AND seq < ?",
            (state.seq, state.log_version, state.offset_token, state.committed_at, state.rows_committed,
             state.table, state.name, state.epoch, state.seq))
        return n.rowcount == 1


def delete(store: StateStore, table: str, name: str) -> bool:
    with store.connect() as conn:
        return conn.execute("DELETE FROM channels WHERE table_name = ? AND name = ?", (table, name)).rowcount > 0
