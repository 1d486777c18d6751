"""The commits at an interval's ends that change no row (compactions) are left out of its change read, and what is
left reads the same changes."""

from __future__ import annotations

from typing import Any

from dtables import changes as ch
from dtables.changes.log import DeltaLog
from dtables.changes.window import changed_window, narrowed
from dtables.testing import assert_same_rows


def _version(dt: Any, table: str) -> int:
    return dt.spark.sql(f"DESCRIBE HISTORY {table}").first()["version"]


def _rows(df: Any) -> list[tuple]:
    return [(r["k"], r["v"], r[ch.ACTION]) for r in df.collect()]


def test_compactions_at_either_end_are_read_past_and_the_changes_stay_the_same(dt: Any) -> None:
    dt.sql("CREATE TABLE t (k BIGINT, v INT)")
    for b in range(3):
        dt.sql(f"INSERT INTO t SELECT id, CAST(id % 4 AS INT) FROM range({b * 10}, {(b + 1) * 10})")
    start = _version(dt, "t")
    files = dt.spark.sql("DESCRIBE DETAIL t").first()["numFiles"]
    dt.sql("OPTIMIZE t")
    compacted = _version(dt, "t")
    dt.sql("UPDATE t SET v = 9 WHERE k = 4")
    updated = _version(dt, "t")
    dt.sql("INSERT INTO t VALUES (100, 1)")
    dt.sql("OPTIMIZE t")
    dt.sql("ALTER TABLE t SET TBLPROPERTIES ('x' = 'y')")  # metadata: an interval is never narrowed past it
    dt.sql("OPTIMIZE t")  # nothing left to compact: no commit
    end = _version(dt, "t")
    log = DeltaLog(dt.spark, dt.catalog.lookup("t")["location"], "default.t")
    assert compacted == start + 1
    assert changed_window(log, start, compacted) == (compacted, compacted)  # only the compaction: no change
    assert changed_window(log, start, updated) == (compacted, updated)
    assert changed_window(log, start, end - 1) == (compacted, updated + 1)  # the trailing OPTIMIZE is left out
    assert changed_window(log, start, end) == (compacted, end)  # ends with the property set: kept
    assert changed_window(log, updated, updated) == (updated, updated)

    whole = ch.resolve_interval(dt.spark, "t", at=ch.Bound.version(start), end=ch.Bound.version(end - 1))
    narrow = narrowed(log, whole)
    assert (narrow.start_version, narrow.end_version) == (compacted, updated + 1)
    assert ch.plan_changes(dt.spark, narrow).stats.removed_files == 1  # the file the UPDATE rewrote, not all
    assert ch.plan_changes(dt.spark, whole).stats.removed_files == files > 1  # every file the OPTIMIZE compacted
    expected = [(4, 0, "DELETE"), (4, 9, "INSERT"), (100, 1, "INSERT")]
    assert_same_rows(_rows(ch.read_changes(dt.spark, narrow).df), expected)
    assert_same_rows(_rows(ch.read_changes(dt.spark, whole).df), expected)


def test_a_users_changes_query_reads_past_a_compaction_at_its_start(dt: Any) -> None:
    dt.sql("CREATE TABLE u (k BIGINT, v INT); CREATE VIEW uv AS SELECT k, v FROM u WHERE v > 0")
    for b in range(3):
        dt.sql(f"INSERT INTO u SELECT id, CAST(id % 4 AS INT) FROM range({b * 10}, {(b + 1) * 10})")
    start = _version(dt, "u")
    dt.sql("OPTIMIZE u")
    dt.sql("UPDATE u SET v = 9 WHERE k = 5")
    end = _version(dt, "u")
    clause = f"CHANGES(INFORMATION => DEFAULT) AT(VERSION => {start})"
    text = dt.sql(f"EXPLAIN SELECT * FROM u {clause}").first()[0]
    assert f"default.u ({start + 1}, {end}]" in text, text  # the compaction at the start is not read
    expected = [(5, 1, "DELETE"), (5, 9, "INSERT")]
    assert_same_rows(_rows(dt.sql(f"SELECT * FROM u {clause}")), expected)
    assert_same_rows(_rows(dt.sql(f"SELECT * FROM uv {clause}")), expected)
    assert _rows(dt.sql(f"SELECT * FROM u {clause} END(VERSION => {start + 1})")) == []
