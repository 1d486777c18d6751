"""Every DML form consumes a stream exactly once (UPDATE, DELETE, CREATE TABLE AS besides INSERT and MERGE), and
the error messages of stream statements not covered elsewhere."""

from __future__ import annotations

from typing import Any

import pytest

from dtables.errors import DtablesError
from dtables.testing import assert_same_rows


def _rows(dt: Any, sql: str) -> list[tuple]:
    return [tuple(r) for r in dt.sql(sql).collect()]


def _state(dt: Any, stream: str) -> tuple[int, dict[str, int]]:
    row = dt.sql(f"DESCRIBE STREAM {stream}").collect()[0]
    import json

    return row["consume_sequence"], json.loads(row["frontier"])


def _latest(dt: Any, table: str) -> int:
    return dt.sql(f"DESCRIBE HISTORY {table}").collect()[0]["version"]


def _written_once_by(dt: Any, table: str, seq: int) -> bool:
    """The table's last commit carries the consumption's idempotent-write id (what crash recovery looks for)."""
    from dtables.state import streams as st
    from dtables.streams.consume import app_id, committed

    location = dt.catalog.lookup(table)["location"]
    stream = st.require(dt.store, "default.s")
    return committed(dt.spark, location, _latest(dt, table) - 1, app_id({"default.s": stream}, 0), seq)


@pytest.fixture
def src(dt: Any) -> Any:
    dt.sql("CREATE TABLE src (id INT, v STRING)")
    dt.sql("CREATE TABLE tgt (id INT, v STRING)")
    dt.sql("INSERT INTO tgt VALUES (1, 'old'), (2, 'old'), (3, 'old')")
    dt.sql("CREATE STREAM s ON TABLE src")
    return dt


def test_update_delete_and_ctas_each_consume_once(src: Any) -> None:
    dt = src
    dt.sql("INSERT INTO src VALUES (1, 'x')")
    dt.sql("UPDATE tgt SET v = 'seen' WHERE id IN (SELECT id FROM s)")
    assert _rows(dt, "SELECT id, v FROM tgt ORDER BY id") == [(1, "seen"), (2, "old"), (3, "old")]
    assert _state(dt, "s") == (1, {"default.src": _latest(dt, "src")})
    assert _written_once_by(dt, "tgt", 1)
    assert _rows(dt, "SELECT * FROM s") == []

    dt.sql("INSERT INTO src VALUES (2, 'y')")
    dt.sql("DELETE FROM tgt WHERE id IN (SELECT id FROM s)")
    assert _rows(dt, "SELECT id, v FROM tgt ORDER BY id") == [(1, "seen"), (3, "old")]
    assert _state(dt, "s") == (2, {"default.src": _latest(dt, "src")})
    assert _written_once_by(dt, "tgt", 2)

    dt.sql("UPDATE src SET v = 'z' WHERE id = 2")
    dt.sql("CREATE TABLE snap AS SELECT id, v, METADATA$ACTION AS action FROM s")
    assert_same_rows(_rows(dt, "SELECT * FROM snap"), [(2, "y", "DELETE"), (2, "z", "INSERT")])
    assert _state(dt, "s") == (3, {"default.src": _latest(dt, "src")})
    assert _rows(dt, "SELECT * FROM s") == []
    assert "TABLE" == dt.catalog.lookup("snap")["kind"]  # a dtables table: change tracking on, in the catalog

    # Nothing new: a consuming statement applies nothing (and the delete finds no row).
    dt.sql("DELETE FROM tgt WHERE id IN (SELECT id FROM s)")
    assert _rows(dt, "SELECT id FROM tgt ORDER BY id") == [(1,), (3,)]
    with pytest.raises(DtablesError, match="DELETE with this subquery cannot run on Delta tables.*MERGE INTO"):
        dt.sql("DELETE FROM tgt WHERE id NOT IN (SELECT id FROM s)")
    assert _state(dt, "s")[0] == 4  # the refused statement did not consume


def test_compactions_around_a_stream_s_changes_are_read_past_and_its_offset_still_moves(src: Any) -> None:
    """OPTIMIZE before and after the stream's changes (commits that change no row): the stream returns exactly the
    changes, read from the files the UPDATE touched only, and its consumption moves its offset to the latest
    version, past the trailing compaction."""
    dt = src
    for i in range(3):
        dt.sql(f"INSERT INTO src VALUES ({i}, 'a'), ({i + 10}, 'b')")
    dt.sql("CREATE TABLE sink AS SELECT id, v FROM s")  # consumes the inserts
    dt.sql("OPTIMIZE src")
    dt.sql("UPDATE src SET v = 'c' WHERE id = 11")
    dt.sql("OPTIMIZE src")
    from dtables.state import streams as st
    from dtables.streams.read import intervals

    [span] = intervals(dt.spark, st.require(dt.store, "default.s"), {"default.src": _latest(dt, "src")}).values()
    assert (span.start_version, span.end_version) == (_latest(dt, "src") - 2, _latest(dt, "src") - 1)
    assert_same_rows(_rows(dt, "SELECT id, v, METADATA$ACTION FROM s"), [(11, "b", "DELETE"), (11, "c", "INSERT")])
    dt.sql("INSERT INTO sink SELECT id, v FROM s WHERE METADATA$ACTION = 'INSERT'")
    assert _state(dt, "s")[1] == {"default.src": _latest(dt, "src")}
    assert _rows(dt, "SELECT * FROM s") == []
    assert_same_rows(_rows(dt, "SELECT id, v FROM sink"), [*((i, "a") for i in range(3)),
                                                           *((i + 10, "b") for i in range(3)), (11, "c")])


def test_error_messages_of_stream_statements(src: Any) -> None:
    dt = src
    dt.sql("CREATE VIEW ranked AS SELECT id, row_number() OVER (ORDER BY id) AS r FROM src")
    with pytest.raises(DtablesError, match="cannot create stream default.sr on view default.ranked: its query "
                                           "cannot be differentiated"):
        dt.sql("CREATE STREAM sr ON VIEW ranked")
    with pytest.raises(DtablesError, match="cannot create stream default.tgt: a table or view of that name exists"):
        dt.sql("CREATE STREAM tgt ON TABLE src")
    with pytest.raises(DtablesError, match="INSERT_ONLY streams .external tables. are not supported"):
        dt.sql("CREATE STREAM s5 ON TABLE src INSERT_ONLY = TRUE")
    with pytest.raises(DtablesError, match="unknown stream setting 'FAST'"):
        dt.sql("CREATE STREAM s5 ON TABLE src FAST = TRUE")
    with pytest.raises(DtablesError, match="AT.STREAM => 'nope'. names no stream"):
        dt.sql("CREATE STREAM s5 ON TABLE src AT(STREAM => 'nope')")
    with pytest.raises(DtablesError, match="cannot create stream default.s5 at stream default.s: it tracks other"):
        dt.sql("CREATE STREAM s5 ON TABLE tgt AT(STREAM => 's')")
    with pytest.raises(DtablesError, match="VERSION => 99. names version 99"):
        dt.sql("CREATE STREAM s5 ON TABLE src AT(VERSION => 99)")
    with pytest.raises(DtablesError, match="stream default.nope does not exist"):
        dt.sql("DESCRIBE STREAM nope")
    assert {r["name"] for r in dt.sql("SHOW STREAMS").collect()} == {"s"}  # the failures created nothing
