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
    with pytest.raises(Exception):
        with store.connect() as conn:
            conn.execute("INSERT INTO objects(name, kind) VALUES ('default.a', 'TABLE')")
            conn.execute("INSERT INTO nowhere VALUES (1)")
    assert store.query("SELECT count(*) FROM objects")[0][0] == 0
