"""Channels (issue 9): ON_ERROR modes, conversions written to Delta, ordering, concurrent channels, reopen and drop,
the max-lag flush, idempotent commits, the store rebuilt from the log, SHOW CHANNELS, and change consumers.

Commits are few on purpose (each is a Spark job): channels get a long lag and are flushed explicitly, except where
the lag itself is under test.
"""

from __future__ import annotations

import datetime
import threading
import time
from decimal import Decimal
from typing import Any

import pytest

from dtables.ingest import commits
from dtables.ingest import store as cs
from dtables.client import Client, parse_lag
from dtables.ingest.errors import ChannelInvalidatedError, IngestError, InsertRowsError
from dtables.errors import SqlError
from dtables.testing import assert_same_rows

LONG = 600  # seconds: the flusher never commits on its own in these tests


@pytest.fixture
def events(dt: Any) -> Any:
    dt.sql("CREATE TABLE events (id INT NOT NULL, name STRING, amount DECIMAL(10,2))")
    return dt


@pytest.fixture
def client(events: Any) -> Any:
    c = Client(events, max_client_lag=LONG)
    yield c
    try:
        c.close()
    except Exception:  # noqa: BLE001 - tests that invalidate handles on purpose
        pass


def rows(session: Any, table: str = "events") -> list[tuple]:
    return [tuple(r) for r in session.sql(f"SELECT * FROM {table}").collect()]


def test_on_error_continue_loads_good_rows_and_reports_bad(events: Any, client: Any) -> None:
    ch = client.open_channel("c", "events", on_error="CONTINUE")
    assert ch.get_latest_committed_offset_token() is None
    response = ch.insert_rows([{"id": 1, "name": "a", "amount": "1.5"}, {"id": "x", "amount": "y"},
                               {"id": 3}, {"name": "no id"}], offset_token="4")
    assert response.has_errors and response.rows_buffered == 2
    assert [(e.row_index, e.column) for e in response.errors] == [(1, "id"), (1, "amount"), (3, "id")]
    assert "'x' is not a number" in str(response.errors[0])
    ch.close()
    assert_same_rows(rows(events), [(1, "a", Decimal("1.50")), (3, None, None)])
    assert client.open_channel("c", "events").get_latest_committed_offset_token() == "4"


def test_on_error_skip_batch_drops_the_whole_batch(events: Any, client: Any) -> None:
    ch = client.open_channel("c", "events", on_error="SKIP_BATCH")
    bad = ch.insert_rows([{"id": 1}, {"id": 2, "amount": "1e20"}, {"id": None}], offset_token="1")
    assert bad.rows_buffered == 0 and bad.bad_row_indexes == [1, 2]
    good = ch.insert_rows([{"id": 4}, {"id": 5}], offset_token="2")
    assert not good.has_errors and good.rows_buffered == 2
    ch.flush()
    assert_same_rows(rows(events), [(4, None, None), (5, None, None)])
    assert ch.get_latest_committed_offset_token() == "2"


def test_on_error_abort_raises_on_first_bad_row_and_buffers_nothing_of_the_batch(events: Any, client: Any) -> None:
    ch = client.open_channel("c", "events")  # ABORT is the default, as in Snowpipe Streaming
    ch.insert_rows([{"id": 1}], offset_token="1")
    with pytest.raises(InsertRowsError) as raised:
        ch.insert_rows([{"id": 2}, {"id": "two"}, {"id": "three"}], offset_token="2")
    assert [(e.row_index, e.column) for e in raised.value.errors] == [(1, "id")]
    assert "ON_ERROR = ABORT" in str(raised.value)
    ch.close()
    assert rows(events) == [(1, None, None)]
    assert client.open_channel("c", "events").get_latest_committed_offset_token() == "1"


def test_every_type_converts_and_reads_back(dt: Any) -> None:
    dt.sql("CREATE TABLE typed (s STRING, vc VARCHAR(4), b BINARY, i BIGINT, d DECIMAL(6,2), f DOUBLE, "
           "ok BOOLEAN, day DATE, ts TIMESTAMP, ntz TIMESTAMP_NTZ, arr ARRAY<INT>, m MAP<STRING, INT>, "
           "st STRUCT<x: INT, y: STRING>)")
    with Client(dt, max_client_lag=LONG) as client:
        ch = client.open_channel("c", "typed", on_error="CONTINUE")
        response = ch.insert_rows([
            {"s": 12, "vc": "abcd", "b": "cafe", "i": "9007199254740993", "d": "12.345", "f": "1e-3", "ok": "yes",
             "day": "2013-04-28T20:57:01-07:00", "ts": "2013-04-28T20:57:01.123456789+07:00",
             "ntz": "2013-04-28T20:57", "arr": "[1, 2]", "m": '{"k": "3"}', "st": '{"x": 1, "y": "z"}'},
            {"vc": "toolong"}, {"b": "zz"}, {"i": 1.5}, {"d": "x"}, {"f": "x"}, {"ok": "maybe"},
            {"day": "28.04.2013"}, {"ts": "noon"}, {"ntz": "2013-13-01"}, {"arr": "[1"}, {"m": "[]"},
            {"st": '{"q": 1}'},
        ], offset_token="t")
        assert response.bad_row_indexes == list(range(1, 13))
        assert [e.column for e in response.errors] == ["vc", "b", "i", "d", "f", "ok", "day", "ts", "ntz", "arr",
                                                       "m", "st"]
    (row,) = dt.sql("SELECT * FROM typed").collect()
    assert row.s == "12" and row.vc == "abcd" and bytes(row.b) == b"\xca\xfe" and row.i == 9007199254740993
    assert row.d == Decimal("12.35") and row.f == 0.001 and row.ok is True and row.day == dt_date(2013, 4, 28)
    ts = dt.sql("SELECT CAST(ts AS STRING) AS t FROM typed").first().t  # session time zone is UTC
    assert ts == "2013-04-28 13:57:01.123456"
    assert row.ntz == dt_datetime(2013, 4, 28, 20, 57)
    assert row.arr == [1, 2] and row.m == {"k": 3} and (row.st.x, row.st.y) == (1, "z")


dt_date, dt_datetime = datetime.date, datetime.datetime


def test_rows_of_a_channel_commit_in_insertion_order(events: Any, client: Any) -> None:
    ch = client.open_channel("c", "events")
    expected = []
    for batch in range(3):
        for i in range(batch * 50, batch * 50 + 50, 10):  # several inserts per commit
            ch.insert_rows([{"id": n} for n in range(i, i + 10)], offset_token=str(i + 9))
            expected += list(range(i, i + 10))
        ch.flush()
        assert ch.get_latest_committed_offset_token() == str(batch * 50 + 49)
    # Row tracking numbers rows in commit order, and within a commit in file order.
    ordered = events.sql("SELECT id FROM events ORDER BY _metadata.row_id").collect()
    assert [r.id for r in ordered] == expected


def test_two_channels_write_one_table_concurrently(events: Any) -> None:
    with Client(events, max_client_lag=0.3) as client:
        channels = [client.open_channel(f"p{k}", "events") for k in range(2)]

        def produce(k: int) -> None:
            for start in range(0, 200, 20):
                channels[k].insert_rows([{"id": k * 1000 + n, "name": f"p{k}"} for n in range(start, start + 20)],
                                        offset_token=str(start + 19))
                time.sleep(0.05)

        threads = [threading.Thread(target=produce, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for ch in channels:
            ch.close()
        assert [cs.get(events.store, "default.events", f"p{k}").offset_token for k in range(2)] == ["199", "199"]
    got = events.sql("SELECT id, name FROM events ORDER BY _metadata.row_id").collect()
    assert_same_rows(got, [(k * 1000 + n, f"p{k}") for k in range(2) for n in range(200)])
    for k in range(2):  # each channel's rows in its own order
        mine = [r.id for r in got if r.name == f"p{k}"]
        assert mine == sorted(mine)


def test_reopen_invalidates_the_old_handle_and_discards_its_buffer(events: Any, client: Any) -> None:
    old = client.open_channel("c", "events")
    old.insert_rows([{"id": 1}], offset_token="1")
    old.flush()
    old.insert_rows([{"id": 2}], offset_token="2")  # buffered, never committed
    new = client.open_channel("c", "events")
    assert new.epoch == old.epoch + 1
    assert new.get_latest_committed_offset_token() == "1"
    for call in (lambda: old.insert_row({"id": 3}), old.flush, old.get_latest_committed_offset_token):
        with pytest.raises(ChannelInvalidatedError, match="reopened"):
            call()
    with pytest.raises(ChannelInvalidatedError, match="1 buffered row"):
        old.close()
    new.insert_rows([{"id": 4}], offset_token="4")
    new.close()
    assert_same_rows(rows(events), [(1, None, None), (4, None, None)])


def test_reopen_by_another_process_fences_the_old_handle(events: Any, connect: Any) -> None:
    """Two clients on two sessions know nothing of each other's handles: only the store and the log tell."""
    first, second = Client(events, max_client_lag=LONG), Client(connect(), max_client_lag=LONG)
    try:
        old = first.open_channel("c", "events")
        old.insert_rows([{"id": 1}], offset_token="1")
        old.flush()
        old.insert_rows([{"id": 2}], offset_token="2")
        new = second.open_channel("c", "events")
        assert new.get_latest_committed_offset_token() == "1"
        with pytest.raises(ChannelInvalidatedError):
            old.flush()  # the pre-commit epoch check
        with pytest.raises(ChannelInvalidatedError):
            old.insert_row({"id": 3})
        # Had the old handle passed its epoch check just before the reopen, its commit would still be refused:
        # the reopen's fence gave the app a higher txnVersion than any of an older epoch.
        target_location = events.catalog.lookup("events")["location"]
        schema = events.spark.table("events").schema
        stale = commits.ChannelCommit("default.events", "c", new._app, commits.txn_version(old.epoch, 2), "ROWS",
                                      "2", 1, 2)
        commits.write(events.spark, target_location, schema, [(2, None, None)], stale)
        assert rows(events) == [(1, None, None)]
    finally:
        second.close()
        try:
            first.close()
        except ChannelInvalidatedError:
            pass


def test_a_retried_commit_with_the_same_sequence_applies_nothing(events: Any) -> None:
    location = events.catalog.lookup("events")["location"]
    schema = events.spark.table("events").schema
    meta = commits.ChannelCommit("default.events", "c", "dtables-ingest:c:test", commits.txn_version(1, 1), "ROWS",
                                 "9", 2, 2)
    commits.write(events.spark, location, schema, [(1, "a", None), (2, "b", None)], meta)
    version = events.sql("DESCRIBE HISTORY events").first().version
    commits.write(events.spark, location, schema, [(1, "a", None), (2, "b", None)], meta)  # the retry
    assert events.sql("DESCRIBE HISTORY events").first().version == version  # no new commit
    assert_same_rows(rows(events), [(1, "a", None), (2, "b", None)])


def test_committed_token_is_rebuilt_from_the_log(events: Any, client: Any) -> None:
    ch = client.open_channel("c", "events")
    ch.insert_rows([{"id": 1}], offset_token="1")
    ch.flush()
    # A process killed between its Delta commit and its store update: the commit is in the log only.
    location = events.catalog.lookup("events")["location"]
    state = cs.get(events.store, "default.events", "c")
    lost = commits.ChannelCommit("default.events", "c", state.app_id, commits.txn_version(state.epoch, 2), "ROWS",
                                 "2", 1, 2)
    commits.write(events.spark, location, ch._target.schema, [(2, None, None)], lost)
    assert client.open_channel("c", "events").get_latest_committed_offset_token() == "2"
    # A lost state store: the row is gone, the log still knows the channel.
    cs.delete(events.store, "default.events", "c")
    reopened = client.open_channel("c", "events")
    assert reopened.get_latest_committed_offset_token() == "2" and reopened._app == state.app_id
    assert cs.get(events.store, "default.events", "c").rows_committed == 2


def test_drop_forgets_the_token_and_invalidates_handles(events: Any, client: Any) -> None:
    ch = client.open_channel("c", "events")
    ch.insert_rows([{"id": 1}], offset_token="1")
    ch.flush()
    client.drop_channel("c", "events")
    with pytest.raises(ChannelInvalidatedError, match="dropped"):
        ch.insert_row({"id": 2})
    with pytest.raises(IngestError, match="does not exist"):
        client.drop_channel("c", "events")
    cs.delete(events.store, "default.events", "never")  # no-op
    again = client.open_channel("c", "events")
    assert again.get_latest_committed_offset_token() is None and again.epoch == 1
    cs.delete(events.store, "default.events", "c")  # even a lost store does not bring the dropped token back
    assert client.open_channel("c", "events").get_latest_committed_offset_token() is None


def test_max_client_lag_commits_without_further_inserts(events: Any) -> None:
    with Client(events, max_client_lag="1 second") as client:
        ch = client.open_channel("lag", "events")
        ch.insert_row({"id": 7}, offset_token="7")
        deadline = time.monotonic() + 120  # generous: a loaded machine, the first commit warms Spark up
        while time.monotonic() < deadline and cs.get(events.store, "default.events", "lag").offset_token != "7":
            time.sleep(0.1)
        assert ch.get_latest_committed_offset_token() == "7"
        assert rows(events) == [(7, None, None)]


def test_max_client_lag_limits() -> None:
    assert parse_lag("500 ms") == 0.5 and parse_lag("10 minutes") == 600 and parse_lag(datetime.timedelta(seconds=2)) == 2
    for bad in (0, 601, "11 minutes", "soon", -1):
        with pytest.raises(IngestError, match="max_client_lag"):
            parse_lag(bad)


def test_show_channels(events: Any, client: Any) -> None:
    events.sql("CREATE TABLE other (id INT)")
    a = client.open_channel("kafka_p1", "events")
    a.insert_rows([{"id": 1}, {"id": 2}], offset_token="41")
    a.flush()
    client.open_channel("kafka_p2", "events")
    client.open_channel("feed", "other")
    listing = events.sql("SHOW CHANNELS").collect()
    assert [(r.table_name, r.name) for r in listing] == [("events", "kafka_p1"), ("events", "kafka_p2"),
                                                         ("other", "feed")]
    p1 = listing[0]
    assert (p1.offset_token, p1.rows_committed, p1.client_sequencer, p1.database_name) == ("41", 2, 1, "default")
    assert p1.committed_at is not None and listing[1].committed_at is None
    assert [r.name for r in events.sql("SHOW CHANNELS IN TABLE other").collect()] == ["feed"]
    assert [r.name for r in events.sql("SHOW CHANNELS LIKE 'KAFKA%' IN events").collect()] == ["kafka_p1",
                                                                                             "kafka_p2"]
    assert len(events.sql("SHOW CHANNELS IN SCHEMA default").collect()) == 3
    assert events.sql("SHOW CHANNELS IN DATABASE elsewhere").collect() == []
    with pytest.raises(SqlError):
        events.sql("SHOW CHANNELS FOR events")


def test_refusals(events: Any, client: Any) -> None:
    with pytest.raises(IngestError, match="on_error"):
        client.open_channel("c", "events", on_error="IGNORE")
    with pytest.raises(IngestError, match="nope"):
        client.open_channel("c", "nope")
    with pytest.raises(IngestError, match="max_client_lag"):
        client.open_channel("c", "events", max_client_lag="1 hour")


def test_ingested_rows_reach_changes_streams_and_dynamic_tables(events: Any, client: Any) -> None:
    events.sql("CREATE STREAM fresh ON TABLE events APPEND_ONLY = TRUE")
    events.sql("CREATE DYNAMIC TABLE big TARGET_LAG = '1 hour' AS SELECT id, amount FROM events WHERE amount > 10")
    before = events.sql("DESCRIBE HISTORY events").first().version
    ch = client.open_channel("c", "events")
    ch.insert_rows([{"id": 1, "amount": 5}, {"id": 2, "amount": "20.5"}], offset_token="2")
    ch.flush()
    assert_same_rows(events.sql("SELECT id, METADATA$ACTION FROM fresh").collect(), [(1, "INSERT"), (2, "INSERT")])
    changed = events.changes("events", start=before, information="APPEND_ONLY").select("id").collect()
    assert_same_rows(changed, [(1,), (2,)])
    (record,) = events.refresh("big")
    assert record.action == "INCREMENTAL"
    assert_same_rows(events.sql("SELECT * FROM big").collect(), [(2, Decimal("20.50"))])
    with pytest.raises(IngestError, match="dynamic table"):
        client.open_channel("c", "big")
