"""Issue 19 item 3, layout: CLUSTER BY on source tables, dynamic tables clustered on their row id with MERGEs
pruned to the files their change set's ids can be in, OPTIMIZE (by hand, by the CLI in tests/cli, by the daemon's
policy) between refreshes without breaking change reads, refresh idempotence or the oracle."""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import urlparse

import pytest
from oracle import oracle_rows, table_rows

from dtables.daemon.refresher import ScheduledRefresher
from dtables.dynamic import definition as defs
from dtables.dynamic import history
from differentiation.sql import col
from dtables.dynamic.apply import committed_refresh, merge_statement
from dtables.dynamic.definition import ROW_ID_COLUMN, Column, now_utc
from dtables.dynamic.executor import REWRITE_SWITCH
from dtables.dynamic.errors import DynamicTableError
from dtables.dynamic.layout import (CHECKPOINT_INTERVAL, DEFAULT_CHECKPOINT_INTERVAL, MERGE_PRUNING, ROW_ID_RANGES,
                                    ranges_condition, row_id_ranges)
from dtables.dynamic.optimize import SMALL_FILE_BYTES, SMALL_FILES, optimize
from dtables.testing import assert_same_rows
from scheduler.vocabulary import Trigger


def _detail(dt: Any, name: str) -> Any:
    return dt.spark.sql(f"DESCRIBE DETAIL {name}").first()


def _incremental(dt: Any, name: str) -> history.RefreshRecord:
    [record] = [r for r in dt.refresh(name) if r.name.endswith(name)]
    assert (record.state, record.action) == ("SUCCEEDED", "INCREMENTAL"), (record.action, record.error)
    assert_same_rows(table_rows(dt, name), oracle_rows(dt, name))
    return record


def test_row_id_ranges_merge_at_the_widest_gaps() -> None:
    ids = ["a1", "a2", "a3", "f0", "f1", "z9"]
    assert row_id_ranges(ids, 3) == (("a1", "a3"), ("f0", "f1"), ("z9", "z9"))
    assert row_id_ranges(ids * 2, 10) == tuple((i, i) for i in ids)  # distinct ids, each its own range


def test_merge_matches_on_the_row_id_within_the_ranges() -> None:
    ranges = ranges_condition(col(ROW_ID_COLUMN, "t"), (("a", "c"), ("f", "f")))
    merge = merge_statement("/x", "src", [Column("k", "int")], ranges).sql(dialect="spark")
    assert ("ON `t`.`__dtables_row_id` = `s`.`__dt_rid` AND (`t`.`__dtables_row_id` BETWEEN 'a' AND 'c' OR "
            "`t`.`__dtables_row_id` = 'f') WHEN") in merge


def test_cluster_by_in_create_ctas_and_alter_keeps_change_tracking(dt: Any, connect: Any) -> None:
    dt.sql("CREATE TABLE c1 (k INT, s STRING) CLUSTER BY (k)")
    dt.sql("CREATE TABLE c2 CLUSTER BY (k) TBLPROPERTIES ('x' = '1') AS SELECT id AS k, 'a' AS s FROM range(5)")
    for name in ("c1", "c2"):
        detail = _detail(dt, name)
        assert detail["clusteringColumns"] == ["k"] and detail["format"] == "delta"
        assert detail["properties"]["delta.enableRowTracking"] == "true"
        assert detail["properties"]["delta.enableChangeDataFeed"] == "true"
    assert _detail(dt, "c2")["properties"]["x"] == "1"
    dt.sql("ALTER TABLE c1 CLUSTER BY (s, k)")
    assert _detail(connect(), "c1")["clusteringColumns"] == ["s", "k"]  # in the log: a new session sees it
    dt.sql("ALTER TABLE c1 CLUSTER BY NONE")
    assert _detail(dt, "c1")["clusteringColumns"] == []


def test_dynamic_tables_checkpoint_their_log_at_the_interval_set(dt: Any) -> None:
    """A dynamic table's storage gets the checkpoint interval of the setting when it is created (100 commits by
    default, not Delta's 10); its refreshes stay exact across checkpoints, read back from a cold log cache."""
    dt.sql("CREATE TABLE src (k INT, v INT)")
    dt.sql("INSERT INTO src VALUES (1, 1), (2, NULL)")
    dt.sql("CREATE DYNAMIC TABLE often TARGET_LAG = '1 minute' REFRESH_MODE = INCREMENTAL "
           "AS SELECT k, sum(v) AS s FROM src GROUP BY k")
    properties = _detail(dt, "often")["properties"]
    assert properties["delta.checkpointInterval"] == str(DEFAULT_CHECKPOINT_INTERVAL)
    try:
        dt.spark.conf.set(CHECKPOINT_INTERVAL, "0")
        with pytest.raises(DynamicTableError, match="checkpointInterval must be a whole number"):
            dt.sql("CREATE OR REPLACE DYNAMIC TABLE often TARGET_LAG = '1 minute' AS SELECT k FROM src")
        assert _detail(dt, "often")["properties"] == properties  # the table the statement would replace is kept
        dt.spark.conf.set(CHECKPOINT_INTERVAL, "2")
        dt.sql("CREATE OR REPLACE DYNAMIC TABLE often TARGET_LAG = '1 minute' REFRESH_MODE = INCREMENTAL "
               "AS SELECT k, sum(v) AS s FROM src GROUP BY k")
    finally:
        dt.spark.conf.unset(CHECKPOINT_INTERVAL)
    assert _detail(dt, "often")["properties"]["delta.checkpointInterval"] == "2"
    for i in range(3):
        dt.sql(f"INSERT INTO src VALUES ({i}, {i}), (NULL, {i})")
        _incremental(dt, "often")
        dt.spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # the next refresh reads the log cold
    names = os.listdir(urlparse(_detail(dt, "often")["location"]).path + "/_delta_log")
    latest = max(int(n[:20]) for n in names if n.endswith(".json"))
    checkpoints = sorted(int(n[:20]) for n in names if n.endswith(".checkpoint.parquet"))
    assert latest >= 4 and checkpoints == list(range(2, latest + 1, 2)), (latest, checkpoints)
    assert_same_rows(table_rows(dt, "often"), oracle_rows(dt, "often"))


def test_a_compaction_right_after_the_frontier_is_read_past(dt: Any) -> None:
    """An OPTIMIZE of a source after its reader's last refresh changes no row: the reader's next change read starts
    after it (NO_DATA if nothing else happened), instead of taking every compacted file as deleted and every new
    file as inserted."""
    dt.sql("CREATE TABLE src (k BIGINT, v INT)")
    for b in range(3):
        dt.sql(f"INSERT INTO src SELECT id, CAST(id % 5 AS INT) FROM range({b * 20}, {(b + 1) * 20})")
    dt.sql("CREATE DYNAMIC TABLE rows_of TARGET_LAG = '1 minute' REFRESH_MODE = INCREMENTAL AS "
           "SELECT k, v FROM src WHERE v > 0")
    dt.sql("OPTIMIZE src")
    optimized = dt.spark.sql("DESCRIBE HISTORY src").first()
    assert optimized["operation"] == "OPTIMIZE"
    [quiet] = dt.refresh("rows_of")
    assert quiet.action == "NO_DATA", quiet.reason
    dt.sql("UPDATE src SET v = 0 WHERE k = 7")
    dt.sql("OPTIMIZE src")  # compacts the rewritten file with the rest: the reader's next frontier moves past it
    record = _incremental(dt, "rows_of")
    assert f"({optimized['version']} -> {optimized['version'] + 1}: +-)" in record.reason, record.reason
    [quiet] = dt.refresh("rows_of")
    assert quiet.action == "NO_DATA", quiet.reason


@pytest.mark.slow
def test_clustered_source_optimized_between_refreshes_reads_no_change(dt: Any) -> None:
    dt.sql("CREATE TABLE src (k BIGINT, v INT) CLUSTER BY (k)")
    dt.sql("CREATE TABLE dim (k BIGINT, name STRING)")
    dt.sql("INSERT INTO dim SELECT id, concat('n', id) FROM range(0, 40)")
    for b in range(4):
        dt.sql(f"INSERT INTO src SELECT id, CAST(id % 5 AS INT) FROM range({b * 30}, {(b + 1) * 30})")
    query = "SELECT s.k, s.v, d.name FROM src s JOIN dim d ON s.k = d.k"
    dt.sql(f"CREATE DYNAMIC TABLE j TARGET_LAG = '1 minute' REFRESH_MODE = INCREMENTAL AS {query}")
    dt.sql("CREATE DYNAMIC TABLE g TARGET_LAG = '1 minute' REFRESH_MODE = INCREMENTAL AS "
           "SELECT v, count(*) AS n, sum(k) AS total FROM src GROUP BY v")
    dt.sql("UPDATE src SET v = v + 1 WHERE k % 7 = 0")
    dt.sql("DELETE FROM src WHERE k = 3")
    before = dt.spark.sql("DESCRIBE HISTORY src").first()["version"]
    dt.sql("OPTIMIZE src")
    optimized = dt.spark.sql("DESCRIBE HISTORY src").first()
    assert optimized["operation"] == "OPTIMIZE" and optimized["version"] == before + 1
    assert _detail(dt, "src")["numFiles"] == 1
    assert dt.changes("src", before=optimized["version"]).count() == 0  # OPTIMIZE changes no row
    assert dt.sql(f"SELECT * FROM src CHANGES(INFORMATION => DEFAULT) AT(VERSION => {before})").count() == 0
    changed = dt.changes("src", start=1).select("k").distinct().count()
    assert changed > 0
    for name in ("j", "g"):
        _incremental(dt, name)
    dt.sql("INSERT INTO src VALUES (7, 1), (500, 2)")
    dt.sql("UPDATE src SET v = 9 WHERE k IN (8, 9)")
    dt.sql("OPTIMIZE src")
    for name in ("j", "g"):
        _incremental(dt, name)


@pytest.fixture
def wide(dt: Any) -> Any:
    """A dynamic table of 2,000 rows in eight files, each a narrow slice of the row-id space."""
    dt.sql("CREATE TABLE base (id BIGINT, v INT)")
    dt.sql("INSERT INTO base SELECT id, CAST(id % 13 AS INT) FROM range(2000)")
    dt.spark.conf.set(ROW_ID_RANGES, "8")
    dt.spark.conf.set(REWRITE_SWITCH, "0")  # a MERGE, as a large table has (a table this small is rewritten)
    dt.sql("CREATE DYNAMIC TABLE w TARGET_LAG = '1 minute' REFRESH_MODE = INCREMENTAL AS "
           "SELECT id, v FROM base WHERE v <> 5")
    yield dt
    dt.spark.conf.unset(MERGE_PRUNING)
    dt.spark.conf.unset(ROW_ID_RANGES)
    dt.spark.conf.unset(REWRITE_SWITCH)


def _merge_pruning(record: history.RefreshRecord) -> dict[str, Any]:
    [entry] = [e for e in json.loads(record.pruning or "[]") if e.get("at") == "merge"]
    return entry


def test_dynamic_table_is_clustered_on_its_row_id_and_its_merge_reads_only_touched_files(wide: Any) -> None:
    dt = wide
    assert _detail(dt, "w")["clusteringColumns"] == [ROW_ID_COLUMN]
    assert _detail(dt, "w")["numFiles"] == 8
    dt.sql("UPDATE base SET v = v + 100 WHERE id IN (10, 11)")
    record = _incremental(dt, "w")
    assert record.write_kind == "MERGE"
    entry = _merge_pruning(record)
    assert entry["of"] == 8 and 1 <= entry["files"] <= 4, entry  # four ids: at most four files of eight
    assert entry["table"] == "default.w" and entry["keys"]
    dt.sql("DELETE FROM base WHERE id = 20; INSERT INTO base VALUES (5000, 1)")
    mixed = _merge_pruning(_incremental(dt, "w"))
    assert mixed["files"] < mixed["of"], mixed
    dt.spark.conf.set(MERGE_PRUNING, "false")
    dt.sql("UPDATE base SET v = 0 WHERE id = 30")
    unpruned = _merge_pruning(_incremental(dt, "w"))
    assert unpruned["files"] == unpruned["of"] and not unpruned["keys"]


def test_a_table_its_refreshes_rewrite_whole_is_overwritten_without_the_row_id_layout(dt: Any) -> None:
    # at CREATE the size is unknown: laid out by row id; once known to be under the REWRITE bound, its incremental
    # refreshes rewrite it whole and never MERGE, so an overwrite skips the layout's sampling job and shuffle
    dt.sql("CREATE TABLE small (id BIGINT, v INT)")
    dt.sql("INSERT INTO small SELECT id, CAST(id % 13 AS INT) FROM range(2000)")
    dt.spark.conf.set(ROW_ID_RANGES, "8")
    try:
        dt.sql("CREATE DYNAMIC TABLE s TARGET_LAG = '1 minute' REFRESH_MODE = INCREMENTAL AS "
               "SELECT id, v FROM small WHERE v <> 5")
        assert _detail(dt, "s")["numFiles"] == 8
        dt.sql("ALTER TABLE small ADD COLUMN extra INT")  # the next refresh recomputes and overwrites every row
        dt.sql("INSERT INTO small VALUES (9001, 1, 0)")
        [record] = dt.refresh("s")
        assert (record.state, record.action, record.write_kind) == ("SUCCEEDED", "REINITIALIZE", "OVERWRITE")
        assert_same_rows(table_rows(dt, "s"), oracle_rows(dt, "s"))
        assert _detail(dt, "s")["numFiles"] < 8
        assert _detail(dt, "s")["clusteringColumns"] == [ROW_ID_COLUMN]
        dt.sql("UPDATE small SET v = 5 WHERE id < 10")
        assert _incremental(dt, "s").write_kind == "REWRITE"
    finally:
        dt.spark.conf.unset(ROW_ID_RANGES)


@pytest.mark.slow
def test_overwrites_keep_the_clustering(wide: Any) -> None:
    dt = wide
    dt.sql("CREATE DYNAMIC TABLE a TARGET_LAG = '1 minute' REFRESH_MODE = INCREMENTAL AS "
           "SELECT v, count(*) AS n, avg(id) AS m FROM w GROUP BY v")  # hidden state columns: a new schema
    assert _detail(dt, "a")["clusteringColumns"] == [ROW_ID_COLUMN]
    dt.sql("ALTER TABLE base ADD COLUMN extra INT")
    dt.sql("INSERT INTO base VALUES (9001, 1, 0), (9002, 2, 0)")
    [rec_w, rec_a] = dt.refresh("a")
    assert (rec_w.state, rec_w.action, rec_w.write_kind) == ("SUCCEEDED", "REINITIALIZE", "OVERWRITE")
    assert rec_a.state == "SUCCEEDED", rec_a.error
    for name in ("w", "a"):
        assert_same_rows(table_rows(dt, name), oracle_rows(dt, name))
        assert _detail(dt, name)["clusteringColumns"] == [ROW_ID_COLUMN]
    assert _detail(dt, "w")["numFiles"] > 1  # written by row-id ranges


@pytest.mark.slow
def test_optimize_between_refreshes_keeps_refreshes_exact_and_idempotent(wide: Any) -> None:
    dt = wide
    dt.sql("CREATE DYNAMIC TABLE agg TARGET_LAG = '1 minute' REFRESH_MODE = INCREMENTAL AS "
           "SELECT v, count(*) AS n FROM w GROUP BY v")  # reads w: its change reads must see no OPTIMIZE change
    for i in range(3):
        dt.sql(f"UPDATE base SET v = v + 1 WHERE id = {100 + i}; INSERT INTO base VALUES ({9000 + i}, 3)")
        _incremental(dt, "agg")
    files = _detail(dt, "w")["numFiles"]
    [done, _] = optimize(dt, ["w", "agg"])
    assert done.name == "default.w" and done.files_before == files and done.files_after < files
    assert done.version is not None and done.clustering == (ROW_ID_COLUMN,)
    d = defs.require(dt.store, "w")
    location = dt.catalog.lookup("w")["location"]
    found = committed_refresh(dt.spark, location, min_sequence=d.refresh_seq)
    assert found is not None and found.version == d.data_version < done.version  # the refresh commit, not OPTIMIZE
    assert optimize(dt, ["w"])[0].version is None  # nothing left to compact: no commit
    after_optimize = dt.refresh("agg")
    assert [r.action for r in after_optimize] == ["NO_DATA", "NO_DATA"], [r.reason for r in after_optimize]
    dt.sql("UPDATE base SET v = 7 WHERE id IN (200, 1500); DELETE FROM base WHERE id = 300")
    assert _incremental(dt, "agg").action == "INCREMENTAL"
    assert_same_rows(table_rows(dt, "w"), oracle_rows(dt, "w"))
    assert _merge_pruning(history.records(dt.store, "w")[-1])["of"] >= 1


@pytest.mark.slow
def test_daemon_compacts_after_a_refresh_that_leaves_many_small_files(wide: Any) -> None:
    dt = wide
    dt.spark.conf.set(SMALL_FILES, "10")
    dt.spark.conf.set(SMALL_FILE_BYTES, str(1 << 30))
    try:
        refresher = ScheduledRefresher(dt)
        versions = []
        for i in range(3):
            dt.sql(f"UPDATE base SET v = v + 1 WHERE id = {i * 500}")
            outcome = refresher.refresh("default.w", now_utc(), Trigger.SCHEDULED)
            assert outcome.state == "SUCCEEDED", outcome.error
            versions.append(dt.spark.sql("DESCRIBE HISTORY w").first()["operation"])
        # eight files, each MERGE adds some: the policy fires once the table has ten
        assert "OPTIMIZE" in versions and _detail(dt, "w")["numFiles"] < 10
        dt.spark.conf.set(SMALL_FILES, "0")  # off
        dt.sql("UPDATE base SET v = 1 WHERE id = 1999")
        refresher.refresh("default.w", now_utc(), Trigger.SCHEDULED)
        assert dt.spark.sql("DESCRIBE HISTORY w").first()["operation"] == "MERGE"
        assert_same_rows(table_rows(dt, "w"), oracle_rows(dt, "w"))
    finally:
        dt.spark.conf.unset(SMALL_FILES)
        dt.spark.conf.unset(SMALL_FILE_BYTES)
