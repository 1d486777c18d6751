from __future__ import annotations

import pytest

from dtables.errors import StateStoreError
from dtables.state import StateStore
from dtables.state.migrations import MIGRATIONS


def test_migrations_apply_once_and_in_order(tmp_path):
    path = tmp_path / "s.sqlite"
    store = StateStore(path)
    assert store.schema_version == len(MIGRATIONS)
    store.execute("INSERT INTO objects(name, kind) VALUES ('default.t', 'TABLE')")
    upgraded = StateStore(path, [*MIGRATIONS, "CREATE TABLE extra (x INTEGER);"])
    assert upgraded.schema_version == len(MIGRATIONS) + 1
    assert [r["name"] for r in upgraded.query("SELECT name FROM objects")] == ["default.t"]


def test_a_newer_store_is_refused_by_older_code(tmp_path):
    path = tmp_path / "s.sqlite"
    StateStore(path, [*MIGRATIONS, "CREATE TABLE extra (x INTEGER);"])
    with pytest.raises(StateStoreError, match="newer than this dtables"):
        StateStore(path)


def test_a_failed_write_rolls_back(tmp_path):
    store = StateStore(tmp_path / "s.sqlite")
    with pytest.raises(Exception):  # noqa: B017 - any failure inside the block must roll back
        with store.connect() as conn:
            conn.execute("INSERT INTO objects(name, kind) VALUES ('default.a', 'TABLE')")
            conn.execute("INSERT INTO nowhere VALUES (1)")
    assert store.query("SELECT count(*) FROM objects")[0][0] == 0


def test_a_thread_keeps_its_connection_and_sees_other_writers(tmp_path):
    import threading

    path = tmp_path / "s.sqlite"
    store, other = StateStore(path), StateStore(path)  # another process's store, as far as SQLite can tell
    with store.connect() as first:
        first.execute("INSERT INTO objects(name, kind) VALUES ('default.a', 'TABLE')")
    other.execute("INSERT INTO objects(name, kind) VALUES ('default.b', 'TABLE')")
    with store.connect() as again:  # kept between calls, yet no stale snapshot: b is seen
        assert again is first
        assert [r["name"] for r in again.execute("SELECT name FROM objects ORDER BY name")] == ["default.a",
                                                                                              "default.b"]
    with pytest.raises(Exception):  # noqa: B017 - a failed call rolls back and leaves the connection usable
        with store.connect() as conn:
            conn.execute("INSERT INTO objects(name, kind) VALUES ('default.c', 'TABLE')")
            conn.execute("INSERT INTO nowhere VALUES (1)")
    seen: dict[str, object] = {}

    def in_thread() -> None:
        with store.connect() as conn:
            seen["conn"] = conn
            seen["names"] = [r["name"] for r in conn.execute("SELECT name FROM objects ORDER BY name")]

    worker = threading.Thread(target=in_thread)
    worker.start()
    worker.join()
    assert seen["names"] == ["default.a", "default.b"] and seen["conn"] is not first  # a connection per thread
    assert store.query("SELECT count(*) FROM objects")[0][0] == 2


def test_a_replaced_store_file_is_reopened_not_written_behind(tmp_path):
    path = tmp_path / "s.sqlite"
    store = StateStore(path)
    store.execute("INSERT INTO objects(name, kind) VALUES ('default.a', 'TABLE')")
    for suffix in ("", "-wal", "-shm"):
        (tmp_path / f"s.sqlite{suffix}").unlink(missing_ok=True)
    StateStore(path)  # a new, empty store at the same path (its schema only)
    store.execute("INSERT INTO objects(name, kind) VALUES ('default.b', 'TABLE')")
    assert [r["name"] for r in StateStore(path).query("SELECT name FROM objects")] == ["default.b"]


# -- issue 22, item 4: what dtables keeps about a warehouse is owner-only --------------------------------------------


@pytest.fixture
def usual_umask():
    """The umask most machines run with (0022: new files world-readable unless made otherwise)."""
    import os

    old = os.umask(0o022)
    yield
    os.umask(old)


def _mode(path) -> int:
    return path.stat().st_mode & 0o777


def test_state_store_and_its_folder_are_owner_only(tmp_path, usual_umask):
    import sqlite3

    folder = tmp_path / "warehouse" / "_dtables"
    store = StateStore(folder / "state.sqlite")
    with store.connect() as conn:  # while a connection is open, the WAL files exist
        conn.execute("CREATE TABLE IF NOT EXISTS probe (i INT)")
        inner = sqlite3.connect(store.path)
        inner.execute("SELECT count(*) FROM sqlite_master").fetchall()
        wal = [p for p in folder.iterdir() if p.name.endswith(("-wal", "-shm"))]
        assert wal and all(_mode(p) == 0o600 for p in wal), {p.name: oct(_mode(p)) for p in wal}
        inner.close()
    assert (_mode(folder), _mode(store.path)) == (0o700, 0o600)


def test_daemon_lock_and_its_folder_are_owner_only(tmp_path, usual_umask):
    from scheduler.daemon import DaemonLock

    with DaemonLock(tmp_path / "_dtables") as lock:
        assert (_mode(lock.path.parent), _mode(lock.path)) == (0o700, 0o600)
        assert lock.path.read_text().strip().isdigit()  # still holds the owner's pid


def test_refresh_and_stream_lock_files_are_owner_only(dt, usual_umask):
    from pathlib import Path

    from dtables.dynamic.executor import table_lock
    from dtables.streams.consume import stream_locks

    locks = Path(dt.store.path).parent / "locks"
    with table_lock(dt, "t"), stream_locks(dt, ["s"]):
        pass
    assert _mode(locks) == 0o700
    assert {p.name: _mode(p) for p in locks.iterdir()} == {"default.t.lock": 0o600, "stream-s.lock": 0o600}
