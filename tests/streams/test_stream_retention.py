"""Retention extension and frontier-aware VACUUM: SQL VACUUM keeps what stream and dynamic table frontiers need (up
to the maximum for streams), plain Delta VACUUM makes a stream stale, retention follows the live streams, and
STALE_AFTER agrees with it."""

from __future__ import annotations

import datetime as dt_
from collections.abc import Iterator
from typing import Any

import pytest

from dtables.errors import DtablesError
from dtables.testing import assert_same_rows

NO_SAFETY_CHECK = {"spark.databricks.delta.retentionDurationCheck.enabled": "false"}


def _rows(dt: Any, sql: str) -> list[tuple]:
    return [tuple(r) for r in dt.sql(sql).collect()]


@pytest.fixture
def conf(dt: Any) -> Iterator[Any]:
    """``conf(key=value, ...)`` sets Spark settings of the run's shared session for this test only."""
    saved: dict[str, Any] = {}

    def set_(settings: dict[str, str]) -> None:
        for key, value in settings.items():
            saved.setdefault(key, dt.spark.conf.get(key, None))
            dt.spark.conf.set(key, value)

    yield set_
    for key, value in saved.items():
        if value is None:
            dt.spark.conf.unset(key)
        else:
            dt.spark.conf.set(key, value)


def _data_files(dry_run: Any) -> list[str]:
    """The data files a VACUUM DRY RUN lists (it also lists empty folders such as _change_data)."""
    return [r["path"] for r in dry_run.collect() if r["path"].endswith(".parquet")]


def _properties(dt: Any, table: str) -> dict[str, str]:
    return {r["key"]: r["value"] for r in dt.sql(f"SHOW TBLPROPERTIES {table}").collect()
            if "etention" in r["key"]}


@pytest.mark.slow  # 63 s; the other retention tests of this file stay in the default suite
def test_sql_vacuum_keeps_stream_frontier_plain_delta_vacuum_makes_it_stale(dt: Any, conf: Any) -> None:
    conf({**NO_SAFETY_CHECK, "dtables.stream.max_retention": "2 hours"})
    dt.sql("CREATE TABLE src (id INT, v STRING)")
    dt.sql("INSERT INTO src VALUES (1, 'a')")
    dt.sql("CREATE STREAM s ON TABLE src")
    dt.sql("UPDATE src SET v = 'b' WHERE id = 1")  # removes the file the stream's next read needs
    dt.sql("VACUUM src RETAIN 0 HOURS")
    assert_same_rows(_rows(dt, "SELECT id, v, METADATA$ACTION FROM s"), [(1, "a", "DELETE"), (1, "b", "INSERT")])
    assert dt.sql("DESCRIBE STREAM s").collect()[0]["stale"] is False

    clone = dt.spark.newSession()  # Delta's own VACUUM, which knows nothing of streams
    clone.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    clone.sql("VACUUM src RETAIN 0 HOURS")
    described = dt.sql("DESCRIBE STREAM s").collect()[0]
    assert described["stale"] is True and "gone" in described["stale_reason"]
    assert dt.sql("SHOW STREAMS").collect()[0]["stale"] is True
    with pytest.raises(DtablesError, match="stream default.s is stale.*Recover: CREATE OR REPLACE STREAM"):
        dt.sql("SELECT * FROM s")
    dt.sql("CREATE OR REPLACE STREAM s ON TABLE src")  # the recovery the message names
    assert _rows(dt, "SELECT * FROM s") == []


@pytest.mark.slow  # two more Delta VACUUMs (each several Spark jobs)
def test_vacuum_gives_up_on_a_stream_older_than_the_maximum(dt: Any, conf: Any) -> None:
    conf({**NO_SAFETY_CHECK, "dtables.stream.max_retention": "0.0001 hours"})  # under a second
    dt.sql("CREATE TABLE src (id INT, v STRING)")
    dt.sql("INSERT INTO src VALUES (1, 'a')")
    dt.sql("CREATE STREAM s ON TABLE src")
    dt.sql("UPDATE src SET v = 'b' WHERE id = 1")
    assert _data_files(dt.vacuum("src", retain_hours=0, dry_run=True)) != []  # not kept for the stream
    dt.sql("VACUUM src RETAIN 0 HOURS")
    with pytest.raises(DtablesError, match="stream default.s is stale"):
        dt.sql("SELECT * FROM s")


@pytest.mark.slow  # a Delta VACUUM and two refreshes (about a minute on 2 cores)
def test_vacuum_keeps_what_the_next_incremental_refresh_of_a_dynamic_table_reads(dt: Any, conf: Any) -> None:
    conf(NO_SAFETY_CHECK)
    dt.sql("CREATE TABLE orders (id INT, amount INT)")
    dt.sql("INSERT INTO orders VALUES (1, 5), (2, 7)")
    dt.sql("CREATE DYNAMIC TABLE big TARGET_LAG = '1 minute' AS SELECT id, amount FROM orders WHERE amount > 4")
    dt.sql("UPDATE orders SET amount = 9 WHERE id = 1")
    dt.sql("DELETE FROM orders WHERE id = 2")
    dt.sql("VACUUM orders RETAIN 0 HOURS")
    [record] = dt.refresh("big")
    assert (record.action, record.state) == ("INCREMENTAL", "SUCCEEDED"), record.error
    assert _rows(dt, "SELECT id, amount FROM big") == [(1, 9)]


def test_retention_follows_the_live_streams_and_stale_after_agrees(dt: Any, conf: Any) -> None:
    conf({"dtables.stream.max_retention": "20 days"})
    dt.sql("CREATE TABLE src (id INT)")
    dt.sql("CREATE TABLE kept_long (id INT) TBLPROPERTIES ('delta.deletedFileRetentionDuration' = 'interval 25 days')")
    assert _properties(dt, "src") == {}
    dt.sql("CREATE STREAM s1 ON TABLE src")
    dt.sql("CREATE STREAM s2 ON TABLE src")
    dt.sql("CREATE STREAM s3 ON TABLE kept_long")
    extended = {"delta.deletedFileRetentionDuration": "interval 480 hours",
                "dtables.stream.baseDeletedFileRetentionDuration": "unset"}
    assert _properties(dt, "src") == extended  # 30-day log retention already covers 20 days: left alone
    assert "dtables.stream.baseDeletedFileRetentionDuration" not in _properties(dt, "kept_long")

    now = dt_.datetime.now(dt_.timezone.utc)
    nothing_yet = dt.sql("DESCRIBE STREAM s1").collect()[0]["stale_after"]  # no change after the frontier yet
    assert abs((nothing_yet.astimezone(dt_.timezone.utc) - now) - dt_.timedelta(days=20)) < dt_.timedelta(minutes=5)
    dt.sql("INSERT INTO src VALUES (1)")
    changed_at = dt.sql("DESCRIBE HISTORY src").collect()[0]["timestamp"]
    stale_after = dt.sql("DESCRIBE STREAM s1").collect()[0]["stale_after"]
    assert stale_after == changed_at + dt_.timedelta(days=20)  # first unconsumed change + extended retention

    dt.sql("CREATE TABLE tgt (id INT)")
    dt.sql("INSERT INTO tgt SELECT id FROM s1")  # a consumption keeps the extension while streams live
    assert _properties(dt, "src") == extended
    dt.sql("DROP STREAM s1")
    assert _properties(dt, "src") == extended  # s2 still needs it
    dt.sql("DROP STREAM s2")
    assert _properties(dt, "src") == {}  # no stream left: back to the table's own retention, no further
    dt.sql("DROP STREAM s3")
    assert _properties(dt, "kept_long") == {"delta.deletedFileRetentionDuration": "interval 25 days"}


def test_vacuum_statement_errors(dt: Any) -> None:
    dt.sql("CREATE TABLE src (id INT)")
    dt.sql("CREATE VIEW v AS SELECT id FROM src")
    with pytest.raises(DtablesError, match="cannot vacuum default.nope: there is no such table"):
        dt.sql("VACUUM nope")
    with pytest.raises(DtablesError, match="cannot vacuum default.v: it is a view"):
        dt.sql("VACUUM v")
    with pytest.raises(DtablesError, match="cannot read VACUUM 'src LITE': dtables runs VACUUM t .RETAIN n HOURS"):
        dt.sql("VACUUM src LITE")
    with pytest.raises(DtablesError, match="retentionDurationCheck|retention"):  # Delta's own safety check stays
        dt.sql("VACUUM src RETAIN 0 HOURS")
