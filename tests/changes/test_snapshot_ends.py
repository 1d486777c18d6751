"""Both ends of an interval in one read (`reader.snapshot_ends`): the rows flagged `__at_start` are exactly the
snapshot at the start, those flagged `__at_end` the snapshot at the end, ids included, whatever happened between:
deletes and updates marked by deletion vectors, copy-on-write rewrites, appends, vectors switched on midway,
partitioned tables, and each path (one direct read, and the two snapshots when a direct read is off)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dtables.changes.reader import snapshot, snapshot_ends
from dtables.testing import assert_same_rows

WITH_VECTORS = "delta.enableChangeDataFeed = true, delta.enableRowTracking = true, delta.enableDeletionVectors = true"
WITHOUT = "delta.enableChangeDataFeed = true, delta.enableRowTracking = true, delta.enableDeletionVectors = false"
SWITCHED = ("ALTER TABLE {t} SET TBLPROPERTIES (delta.enableDeletionVectors = true)",)

HISTORY = (
    "INSERT INTO {t} SELECT CAST(id AS INT), CAST(id % 3 AS INT), CAST(id % 7 AS STRING) FROM range(40)",
    "INSERT INTO {t} SELECT CAST(id AS INT), CAST(id % 3 AS INT), NULL FROM range(40, 60)",
)
BETWEEN = (
    "DELETE FROM {t} WHERE k % 5 = 0",
    "UPDATE {t} SET name = 'x' WHERE k % 7 = 1",
    "INSERT INTO {t} VALUES (1, 1, 'dup'), (1, 1, 'dup'), (NULL, 2, NULL)",
    "UPDATE {t} SET name = CAST(k % 7 AS STRING) WHERE name = 'x'",  # back to the old values
    "DELETE FROM {t} WHERE k = 1",
)


def _version(spark: Any, table: str) -> int:
    return int(spark.sql(f"DESCRIBE HISTORY {table} LIMIT 1").collect()[0]["version"])


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in df.collect()]


# the shared read is off by default (spark.dtables.refresh.shareEnds): its other layouts run in the slow suite
@pytest.mark.parametrize("properties, partitioned, switch, direct", [
    (WITH_VECTORS, None, (), "true"),
    *(pytest.param(*p, marks=pytest.mark.slow) for p in [
        (WITHOUT, None, (), "true"), (WITHOUT, None, SWITCHED, "true"), (WITH_VECTORS, "part", (), "true"),
        (WITH_VECTORS, None, (), "false")]),
], ids=["vectors", "copy-on-write", "vectors-switched-on", "partitioned", "vectors-two-snapshots"])
def test_each_flag_is_exactly_its_ends_snapshot(spark: Any, make_table: Callable[..., str],
                                                run: Callable[..., None], properties: str, partitioned: str | None,
                                                switch: tuple[str, ...], direct: str) -> None:
    table = make_table("k INT, part INT, name STRING", properties, partitioned)
    run(table, *HISTORY)
    start = _version(spark, table)
    run(table, *switch, *BETWEEN)
    end = _version(spark, table)
    spark.conf.set("spark.dtables.directSnapshots", direct)
    try:
        both = snapshot_ends(spark, table, start, end)
        columns = [c for c in both.columns if not c.startswith("__at_")]
        assert_same_rows(_rows(both.where("__at_start").select(*columns)), _rows(snapshot(spark, table, start)))
        assert_same_rows(_rows(both.where("__at_end").select(*columns)), _rows(snapshot(spark, table, end)))
        assert both.where("NOT __at_start AND NOT __at_end").isEmpty()
        if direct == "true" and (properties == WITH_VECTORS or switch):
            # one read of files the DML marked in place: a row both ends hold comes once, with both flags
            assert not both.where("__at_start AND __at_end").isEmpty()
    finally:
        spark.conf.unset("spark.dtables.directSnapshots")


def test_a_file_left_out_by_key_pruning_is_not_read(spark: Any, make_table: Callable[..., str],
                                                    run: Callable[..., None]) -> None:
    table = make_table("k INT, part INT, name STRING", WITH_VECTORS)
    run(table, *HISTORY)
    start = _version(spark, table)
    run(table, "DELETE FROM {t} WHERE k IN (3, 45)")
    [chosen] = [r[0] for r in spark.sql(f"SELECT _metadata.file_name FROM {table} VERSION AS OF {start} "
                                        "WHERE k = 3").collect()]
    expected = {r[0] for r in spark.sql(f"SELECT k FROM {table} VERSION AS OF {start} "
                                        f"WHERE _metadata.file_name = '{chosen}'").collect()}
    asked: set[str] = set()

    def keep(f: Any) -> bool:
        asked.add(f.path)
        return f.file_name == chosen

    both = snapshot_ends(spark, table, start, _version(spark, table), keep=keep)
    assert len(asked) > 1  # every file of both ends was asked about, one kept
    assert {r["k"] for r in both.collect()} == expected
    assert {r["k"] for r in both.where("NOT __at_end").collect()} == {3}
