"""Stream semantics: reads never consume, ROLLBACK, conflicts and races, independent streams, AT/BEFORE, views,
and the error messages (staleness and VACUUM: test_stream_retention.py)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from dtables.testing import assert_same_rows
from dtables.errors import DtablesError


def _rows(dt: Any, sql: str) -> list[tuple]:
    return [tuple(r) for r in dt.sql(sql).collect()]


@pytest.fixture
def src(dt: Any) -> Any:
    dt.sql("CREATE TABLE src (id INT, v STRING)")
    dt.sql("CREATE TABLE tgt (id INT, v STRING)")
    return dt


def test_reading_does_not_consume_and_zero_row_insert_advances(src: Any) -> None:
    dt = src
    dt.sql("CREATE STREAM s ON TABLE src")
    dt.sql("INSERT INTO src VALUES (1, 'a')")
    assert _rows(dt, "SELECT id, v FROM s") == [(1, "a")]
    assert _rows(dt, "SELECT id, v FROM s") == [(1, "a")]
    dt.sql("INSERT INTO tgt SELECT id, v FROM s WHERE 0 = 1")
    assert _rows(dt, "SELECT * FROM s") == []
    assert _rows(dt, "SELECT * FROM tgt") == []


def test_rollback_discards_writes_and_keeps_frontier(src: Any) -> None:
    dt = src
    dt.sql("CREATE STREAM s ON TABLE src")
    dt.sql("INSERT INTO src VALUES (1, 'a')")
    dt.sql("BEGIN; INSERT INTO tgt SELECT id, v FROM s; ROLLBACK")
    assert _rows(dt, "SELECT * FROM tgt") == []
    assert _rows(dt, "SELECT id, v FROM s") == [(1, "a")]


def test_transaction_feeds_several_targets_from_one_interval(src: Any) -> None:
    dt = src
    dt.sql("CREATE TABLE tgt2 (id INT, v STRING)")
    dt.sql("CREATE STREAM s ON TABLE src")
    dt.sql("INSERT INTO src VALUES (1, 'a')")
    dt.sql("BEGIN")
    dt.sql("INSERT INTO tgt SELECT id, v FROM s")
    dt.sql("INSERT INTO src VALUES (2, 'b')")  # after the transaction began: not part of it
    dt.sql("INSERT INTO tgt2 SELECT id, v FROM s")
    dt.sql("COMMIT")
    assert _rows(dt, "SELECT * FROM tgt") == [(1, "a")]
    assert _rows(dt, "SELECT * FROM tgt2") == [(1, "a")]
    assert _rows(dt, "SELECT id, v FROM s") == [(2, "b")]


def test_transaction_conflicts_with_a_consumer_that_advanced_the_stream(src: Any, connect: Any) -> None:
    dt = src
    other = connect()
    dt.sql("CREATE STREAM s ON TABLE src")
    dt.sql("INSERT INTO src VALUES (1, 'a')")
    dt.sql("BEGIN")
    dt.sql("INSERT INTO tgt SELECT id, v FROM s")
    other.sql("CREATE TABLE other_tgt (id INT, v STRING)")
    other.sql("INSERT INTO other_tgt SELECT id, v FROM s")
    with pytest.raises(DtablesError, match="consumed by another statement.*nothing of this transaction"):
        dt.sql("COMMIT")
    assert _rows(dt, "SELECT * FROM tgt") == []
    assert _rows(dt, "SELECT * FROM other_tgt") == [(1, "a")]


@pytest.mark.slow  # long-running; `make test-all` runs it
def test_racing_consumers_never_process_the_same_changes(src: Any, connect: Any) -> None:
    dt = src
    dt.sql("CREATE STREAM s ON TABLE src")
    dt.sql("INSERT INTO src VALUES (1, 'a'), (2, 'b')")
    sessions = [connect(), connect()]
    errors: list[BaseException] = []

    def consume(session: Any) -> None:
        try:
            session.sql("INSERT INTO tgt SELECT id, v FROM s")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=consume, args=(s,)) for s in sessions]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert_same_rows(_rows(dt, "SELECT * FROM tgt"), [(1, "a"), (2, "b")])  # once, not twice
    assert dt.store.query("SELECT seq FROM streams")[0]["seq"] == 2  # the loser consumed the (empty) next interval


def test_independent_streams_and_at_before_creation(src: Any) -> None:
    dt = src
    dt.sql("INSERT INTO src VALUES (1, 'a')")
    first = _rows(dt, "DESCRIBE HISTORY src")[0][0]  # version of that insert
    dt.sql("INSERT INTO src VALUES (2, 'b')")
    dt.sql(f"CREATE STREAM s_at ON TABLE src AT(VERSION => {first})")
    dt.sql(f"CREATE STREAM s_before ON TABLE src BEFORE(VERSION => {first})")
    dt.sql("CREATE STREAM s_now ON TABLE src")
    dt.sql("CREATE STREAM s_copy ON TABLE src AT(STREAM => 's_at')")
    assert _rows(dt, "SELECT id FROM s_at") == [(2,)]
    assert_same_rows(_rows(dt, "SELECT id FROM s_before"), [(1,), (2,)])
    assert _rows(dt, "SELECT id FROM s_now") == []
    dt.sql("INSERT INTO tgt SELECT id, v FROM s_at")
    assert _rows(dt, "SELECT id FROM s_at") == []
    assert _rows(dt, "SELECT id FROM s_copy") == [(2,)]  # consuming one stream leaves the others where they were
    assert_same_rows(_rows(dt, "SELECT id FROM s_before"), [(1,), (2,)])
    names = {r["name"] for r in dt.sql("SHOW STREAMS").collect()}
    assert names == {"s_at", "s_before", "s_now", "s_copy"}
    dt.sql("DROP STREAM s_copy")
    dt.sql("DROP STREAM IF EXISTS s_copy")
    assert len(dt.sql("SHOW STREAMS").collect()) == 3


def test_show_initial_rows_then_changes(src: Any) -> None:
    dt = src
    dt.sql("INSERT INTO src VALUES (1, 'a'), (2, 'b')")
    dt.sql("CREATE STREAM s ON TABLE src SHOW_INITIAL_ROWS = TRUE")
    dt.sql("UPDATE src SET v = 'B' WHERE id = 2")
    assert_same_rows(_rows(dt, "SELECT id, v, METADATA$ACTION FROM s"), [(1, "a", "INSERT"), (2, "B", "INSERT")])
    dt.sql("INSERT INTO tgt SELECT id, v FROM s")
    dt.sql("DELETE FROM src WHERE id = 1")
    assert _rows(dt, "SELECT id, METADATA$ACTION FROM s") == [(1, "DELETE")]


def test_streams_on_views(src: Any) -> None:
    dt = src
    dt.sql("CREATE VIEW big AS SELECT id, v FROM src WHERE id > 1")
    dt.sql("CREATE VIEW counts AS SELECT v, count(*) AS n FROM src GROUP BY v")
    dt.sql("CREATE STREAM sv ON VIEW big APPEND_ONLY = TRUE")
    with pytest.raises(DtablesError, match="APPEND_ONLY stream default.sc_bad on view default.counts: the view is not monotonic .GROUP BY."):
        dt.sql("CREATE STREAM sc_bad ON VIEW counts APPEND_ONLY = TRUE")
    dt.sql("CREATE STREAM sc ON VIEW counts")
    dt.sql("INSERT INTO src VALUES (1, 'a'), (2, 'a')")
    assert _rows(dt, "SELECT id, v FROM sv") == [(2, "a")]
    assert _rows(dt, "SELECT v, n, METADATA$ACTION FROM sc") == [("a", 2, "INSERT")]


def test_error_messages(src: Any) -> None:
    dt = src
    dt.sql("CREATE STREAM s ON TABLE src")
    with pytest.raises(DtablesError, match="stream default.s already exists; use CREATE OR REPLACE STREAM"):
        dt.sql("CREATE STREAM s ON TABLE src")
    dt.sql("CREATE STREAM IF NOT EXISTS s ON TABLE src")
    dt.sql("CREATE OR REPLACE STREAM s ON TABLE src")
    with pytest.raises(DtablesError, match="stream default.nope does not exist"):
        dt.sql("DROP STREAM nope")
    with pytest.raises(DtablesError, match="default.src is a table, not a view"):
        dt.sql("CREATE STREAM s2 ON VIEW src")
    dt.spark.sql(f"CREATE TABLE plain (id INT) USING delta LOCATION '{dt.warehouse}/plain'")
    with pytest.raises(DtablesError, match="change tracking is off on table default.plain; turn it on with ALTER"):
        dt.sql("CREATE STREAM s3 ON TABLE plain")
    dt.spark.sql("DROP TABLE plain")
    with pytest.raises(DtablesError, match="TABLE_STREAM_MODE must be 'STANDARD' or 'APPEND_ONLY'"):
        dt.sql("CREATE TABLE STREAM s4 ON TABLE src WITH PROPERTIES ('TABLE_STREAM_MODE' = 'FAST')")
    dt.sql("BEGIN")
    with pytest.raises(DtablesError, match="a transaction is already open"):
        dt.sql("BEGIN")
    dt.sql("ROLLBACK")
