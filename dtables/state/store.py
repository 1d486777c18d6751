"""SQLite-backed state store.

One file per warehouse (``<warehouse>/_dtables/state.sqlite`` for local warehouses; elsewhere a setting), in WAL
journaling with a busy timeout, so several processes (CLI, daemon, tests) can share it. Each call is one transaction
(``BEGIN IMMEDIATE`` ... ``COMMIT``) on a connection the calling thread keeps between calls: a refresh makes about
fifty calls, and opening a connection and setting its pragmas each time took about a third of their time. Between
calls the connection holds no transaction, so it sees every other process's commits at its next call.
Everything in it that matters for correctness can be rebuilt from the Delta logs (design.md, section 2).

The folder of the store (``_dtables/``), its lock files and the store itself are created owner-only (0700 folders,
0600 files; SQLite gives its -wal and -shm files the database file's mode): what dtables keeps about a warehouse is
not for every user of the machine to read.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dtables.errors import StateStoreError
from dtables.state.migrations import MIGRATIONS


PRIVATE_FOLDER, PRIVATE_FILE = 0o700, 0o600


def private_folder(path: Path) -> Path:
    """``path`` as a folder, created owner-only when missing (its missing parents as usual; an existing folder keeps
    the mode its owner gave it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.mkdir(mode=PRIVATE_FOLDER)
    except FileExistsError:
        pass
    return path


def open_private(path: Path, flags: int = os.O_RDWR) -> int:
    """A file descriptor on ``path``; the file is created owner-only when missing (lock files, the store)."""
    return os.open(path, flags | os.O_CREAT, PRIVATE_FILE)


class StateStore:
    def __init__(self, path: str | Path, migrations: Sequence[str] = MIGRATIONS):
        self.path = Path(path)
        self._migrations = tuple(migrations)
        self._local = threading.local()  # this thread's idle connection (``_take`` / ``_give_back``)
        try:
            private_folder(self.path.parent)
            if not self.path.exists():
                os.close(open_private(self.path))  # an empty file is an empty database, created with our mode
            self._migrate()
        except (sqlite3.Error, OSError) as e:
            raise StateStoreError(f"cannot open state store {self.path}: {e}") from e

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        """A connection in one transaction: committed on success, rolled back on error."""
        conn = self._take()
        try:
            conn.execute("BEGIN IMMEDIATE")
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        finally:
            self._give_back(conn)

    def _take(self) -> sqlite3.Connection:
        """This thread's idle connection, or a new one: when the thread has none yet, when it is in use further up
        this thread's stack, when it was opened before this process forked (a connection is not to be shared
        across processes), or when the store's file was replaced since (a kept connection would go on writing to
        the removed file, where opening the path each call reached the new one)."""
        local = self._local
        conn = getattr(local, "conn", None)
        local.conn = None  # in use (a nested call opens its own); another process's is left to that process
        if conn is not None and local.pid == os.getpid() and local.file == _identity(self.path):
            return conn
        if conn is not None and local.pid == os.getpid():
            conn.close()
        return self._open()

    def _give_back(self, conn: sqlite3.Connection) -> None:
        local = self._local
        if conn.in_transaction or getattr(local, "conn", None) is not None:
            conn.close()  # a rollback that failed, or a nested call's own connection
            return
        local.conn, local.pid, local.file = conn, os.getpid(), _identity(self.path)

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode=WAL")
        # WAL with NORMAL sync survives a process crash (what the crash tests kill) and skips an fsync per
        # transaction, about eight per refresh; a power loss may drop the newest records, which the Delta logs
        # restore (design.md, section 2).
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=30000")
        return conn

    @property
    def schema_version(self) -> int:
        with self.connect() as conn:
            return int(conn.execute("PRAGMA user_version").fetchone()[0])

    def _migrate(self) -> None:
        with self.connect() as conn:
            current = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if current > len(self._migrations):
                raise StateStoreError(
                    f"state store {self.path} has schema version {current}, newer than this dtables "
                    f"({len(self._migrations)}); upgrade dtables")
            for version, script in enumerate(self._migrations[current:], start=current + 1):
                for statement in _statements(script):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {version}")

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self.connect() as conn:
            return conn.execute(sql, params).fetchall()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        with self.connect() as conn:
            conn.execute(sql, params)


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the store's file, None when it is gone."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _statements(script: str) -> list[str]:
    # sqlite3's executescript would commit our transaction; split on complete statements instead.
    out, buf = [], ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out
