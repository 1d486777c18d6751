"""Plan shapes (paper 4.2) and every error a change read can raise, with the words its message must contain."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from changes_helpers import assert_same_rows
from dtables.changes import (
    Bound,
    HistoryNotRetained,
    Interval,
    InvalidInterval,
    NotADeltaTable,
    TrackingDisabled,
    VersionNotFound,
    change_stats,
    read_changes,
    resolve_interval,
)
from dtables.errors import ChangeTrackingError


@pytest.fixture(scope="module")
def shaped(make_table: Any, run: Any) -> str:
    """v1 insert, v2 insert, v3 delete of v2's whole file, v4 update, v5 property change (no data)."""
    table = make_table("k INT, v STRING")
    run(
        table,
        "INSERT INTO {t} VALUES (1, 'a'), (2, 'b')",
        "INSERT INTO {t} VALUES (3, 'c')",
        "DELETE FROM {t} WHERE k = 3",
        "UPDATE {t} SET v = 'B' WHERE k = 2",
        "ALTER TABLE {t} SET TBLPROPERTIES ('comment_key' = 'x')",
    )
    return table


def _jobs_while(spark: Any, action: Any) -> int:
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("changes-job-count", "count jobs")
    try:
        action()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    return len(tracker.getJobIdsForGroup("changes-job-count"))


@pytest.mark.parametrize(
    "start, end, shape, stats",
    [
        (0, 2, "ADDED_ONLY", (True, False)),
        (2, 3, "REMOVED_ONLY", (False, True)),
        (3, 4, "MINIMIZE", (True, True)),
        (0, 3, "ADDED_ONLY", (True, False)),  # v2's file added and removed inside: never read
        (4, 5, "NO_DATA", (False, False)),  # a metadata-only commit
        (2, 2, "NO_DATA", (False, False)),  # an empty interval
    ],
)
def test_shapes(spark: Any, shaped: str, start: int, end: int, shape: str, stats: tuple[bool, bool]) -> None:
    interval = resolve_interval(spark, shaped, at=Bound.version(start), end=Bound.version(end))
    assert _jobs_while(spark, lambda: change_stats(spark, interval)) == 0
    got = change_stats(spark, interval)
    assert (got.inserts, got.deletes) == stats
    read = read_changes(spark, interval)
    assert read.shape == shape
    assert f"shape: {shape}" in read.plan.to_text()


def test_no_data_runs_no_spark_job(spark: Any, shaped: str) -> None:
    interval = resolve_interval(spark, shaped, at=Bound.version(4))
    assert _jobs_while(spark, lambda: read_changes(spark, interval).df.schema) == 0
    assert read_changes(spark, interval).df.collect() == []


def test_shape_results(spark: Any, shaped: str) -> None:
    rows = lambda s, e: read_changes(  # noqa: E731
        spark, resolve_interval(spark, shaped, at=Bound.version(s), end=Bound.version(e))
    ).df.select("k", "v", "METADATA$ACTION", "METADATA$ISUPDATE").collect()
    assert_same_rows(rows(0, 3), [(1, "a", "INSERT", False), (2, "b", "INSERT", False)])
    assert_same_rows(rows(2, 3), [(3, "c", "DELETE", False)])
    assert_same_rows(rows(3, 4), [(2, "b", "DELETE", True), (2, "B", "INSERT", True)])
    assert_same_rows(rows(1, 5), [(2, "b", "DELETE", True), (2, "B", "INSERT", True)])


def _raises(exc: type[ChangeTrackingError], *words: str) -> Any:
    class Check:
        def __enter__(self) -> None:
            self.ctx = pytest.raises(exc)
            self.info = self.ctx.__enter__()

        def __exit__(self, *args: Any) -> bool:
            handled = self.ctx.__exit__(*args)
            message = str(self.info.value)
            for word in words:
                assert word in message, f"{word!r} not in {message!r}"
            return bool(handled)

    return Check()


def test_start_after_end(spark: Any, shaped: str) -> None:
    with _raises(InvalidInterval, shaped, "version 4", "version 2", "must not be after"):
        resolve_interval(spark, shaped, at=Bound.version(4), end=Bound.version(2))


def test_version_does_not_exist(spark: Any, shaped: str) -> None:
    with _raises(VersionNotFound, shaped, "version 99", "0 to 5"):
        resolve_interval(spark, shaped, at=Bound.version(99))
    with _raises(VersionNotFound, shaped, "version -1"):
        resolve_interval(spark, shaped, at=Bound.version(1), end=Bound.version(-1))


def test_bounds_must_name_one_start(spark: Any, shaped: str) -> None:
    with _raises(InvalidInterval, shaped, "AT", "BEFORE"):
        resolve_interval(spark, shaped)
    with _raises(InvalidInterval, shaped, "AT", "BEFORE"):
        resolve_interval(spark, shaped, at=Bound.version(1), before=Bound.version(2))
    with _raises(InvalidInterval, shaped, "version 0"):
        resolve_interval(spark, shaped, before=Bound.version(0))


def test_timestamp_before_creation(spark: Any, shaped: str) -> None:
    with _raises(InvalidInterval, shaped, "created", "later time"):
        resolve_interval(spark, shaped, at=Bound.timestamp("2001-01-01T00:00:00"))


def test_offset_bound_reads_recent_history(spark: Any, shaped: str) -> None:
    interval = resolve_interval(spark, shaped, at=Bound.offset(-0.0))
    assert (interval.start_version, interval.end_version) == (5, 5)


def test_unknown_change_format(spark: Any, shaped: str) -> None:
    with _raises(InvalidInterval, shaped, "REDO", "DEFAULT or APPEND_ONLY"):
        read_changes(spark, resolve_interval(spark, shaped, at=Bound.version(1)), "REDO")


def test_not_a_delta_table(spark: Any) -> None:
    with _raises(NotADeltaTable, "no_such_table_anywhere"):
        resolve_interval(spark, "no_such_table_anywhere", at=Bound.version(0))


def test_tracking_off_at_start(spark: Any, make_table: Any, run: Any) -> None:
    table = make_table("k INT", properties="")
    run(
        table,
        "INSERT INTO {t} VALUES (1)",
        "ALTER TABLE {t} SET TBLPROPERTIES ('delta.enableRowTracking' = 'true', 'delta.enableChangeDataFeed' = 'true')",
        "INSERT INTO {t} VALUES (2)",
    )
    with _raises(TrackingDisabled, table, "version 1", "ALTER TABLE", "later version"):
        resolve_interval(spark, table, at=Bound.version(1))
    history = spark.sql(f"DESCRIBE HISTORY {table}").collect()
    last = max(r["version"] for r in history)
    # Once on, changes from then on read fine: only the insert of 2.
    interval = resolve_interval(spark, table, at=Bound.version(last - 1))
    assert_same_rows(read_changes(spark, interval).df.select("k").collect(), [(2,)])


def test_tracking_turned_off_inside_interval(spark: Any, make_table: Any, run: Any) -> None:
    table = make_table("k INT")
    run(
        table,
        "INSERT INTO {t} VALUES (1)",
        "ALTER TABLE {t} SET TBLPROPERTIES ('delta.enableRowTracking' = 'false')",
    )
    with _raises(TrackingDisabled, table, "turned off", "version 2", "inside the interval"):
        resolve_interval(spark, table, at=Bound.version(0))


def test_log_cleaned_up(spark: Any, make_table: Any, run: Any) -> None:
    table = make_table("k INT")
    run(table, "INSERT INTO {t} VALUES (1)", "INSERT INTO {t} VALUES (2)", "INSERT INTO {t} VALUES (3)")
    log = Path(table[len("delta.`") : -1]) / "_delta_log"
    # What log cleanup does once a checkpoint exists: older commit files disappear.
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('delta.checkpointInterval' = '1')")
    run(table, "INSERT INTO {t} VALUES (4)")
    for v in (1, 2):
        os.remove(log / f"{v:020d}.json")
    with _raises(HistoryNotRetained, table, "version 0", "earliest retained commit: 0", "stale"):
        resolve_interval(spark, table, at=Bound.version(0))
    with _raises(HistoryNotRetained, table, "version 2"):
        read_changes(spark, Interval(table, 1, 4))
    interval = resolve_interval(spark, table, at=Bound.version(2))
    assert_same_rows(read_changes(spark, interval).df.select("k").collect(), [(3,), (4,)])


def test_data_files_removed_like_vacuum(spark: Any, make_table: Any, run: Any) -> None:
    table = make_table("k INT")
    run(table, "INSERT INTO {t} VALUES (1)", "DELETE FROM {t} WHERE k = 1")
    folder = Path(table[len("delta.`") : -1])
    for data_file in folder.glob("*.parquet"):  # what VACUUM does to files unreferenced past retention
        os.remove(data_file)
    interval = resolve_interval(spark, table, at=Bound.version(1), end=Bound.version(2))
    with _raises(HistoryNotRetained, table, "VACUUM", "(1, 2]", "recreated"):
        read_changes(spark, interval)


@pytest.mark.slow
def test_data_files_vacuumed(spark: Any, make_table: Any, run: Any) -> None:
    table = make_table("k INT")
    run(table, "INSERT INTO {t} VALUES (1)", "DELETE FROM {t} WHERE k = 1")
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        spark.sql(f"VACUUM {table} RETAIN 0 HOURS")
    finally:
        spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "true")
    interval = resolve_interval(spark, table, at=Bound.version(1), end=Bound.version(2))
    with _raises(HistoryNotRetained, table, "VACUUM", "(1, 2]", "recreated"):
        read_changes(spark, interval)


@pytest.mark.parametrize("engine, trusted", [
    ("Apache-Spark/4.2.0 Delta-Lake/4.4.0", True),
    ("Apache-Spark/3.5.1 Delta-Lake/3.2.0", False),  # older change data is not known to carry row ids
    ("delta-rs:0.25.0", False),
    (None, False),
])
def test_change_data_trusted_only_from_writers_known_to_store_row_ids(engine: str | None, trusted: bool) -> None:
    from dtables.changes.log import Commit
    from dtables.changes.commits import ids_in_change_data

    assert ids_in_change_data(Commit(3, None, "DELETE", (), (), engine)) is trusted
