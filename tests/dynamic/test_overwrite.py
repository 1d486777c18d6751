"""The direct overwrite (dtables/dynamic/overwrite.py): Delta's own commit of new files and of removes taken from
the checksum, without rebuilding the snapshot's state; idempotent-write settings honoured; a concurrent commit
fails it; tables it cannot take go back to Delta's writer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import Observation
from pyspark.sql import functions as F

from dtables.changes.idempotent import committed, idempotent_session
from dtables.changes.log import DeltaLog
from dtables.dynamic import overwrite
from dtables.spark.fs import local_path
from dtables.spark.sessions import own_session
from dtables.testing import assert_same_rows
from oracle import oracle_rows, table_rows


def _table(spark: Any, tmp_path: Path, commits: int = 3) -> str:
    location = str(tmp_path / "t")
    spark.range(100).selectExpr("id", "id * 2 AS v").write.format("delta").save(location)
    for i in range(1, commits):
        spark.range(10 * i, 10 * i + 4).selectExpr("id", "id * 3 AS v").write.format("delta") \
            .mode("overwrite").save(location)
    return location


def _rows(spark: Any, location: str) -> list[tuple[int, int]]:
    return sorted((r.id, r.v) for r in spark.read.format("delta").load(location).collect())


def _job_descriptions(spark: Any, since: int) -> list[str]:
    sc = spark.sparkContext
    sc._jsc.sc().listenerBus().waitUntilEmpty()
    store, found = sc._jsc.sc().statusStore(), []
    for job in range(since, since + 10_000):
        try:
            data = store.job(job)
        except Exception:
            break
        found.append(data.description().get() if data.description().isDefined() else data.name())
    return found


def _job_count(spark: Any) -> int:
    return len(_job_descriptions(spark, 0))


def test_an_overwrite_commits_new_files_and_removes_the_listed_ones_without_rebuilding_the_state(
        spark: Any, tmp_path: Path) -> None:
    location = _table(spark, tmp_path)
    log = DeltaLog(spark, location)
    version, before = log.latest_version, log.files_at(log.latest_version)
    assert before
    with idempotent_session(spark, "app-a", 5, '{"who": "test"}') as clone:
        jobs = _job_count(clone)
        direct = overwrite.start(clone, location)
        assert direct is not None
        counted = Observation("test_overwrite_rows")
        direct.write(clone.range(1000, 1006).selectExpr("id", "id * 5 AS v")
                     .observe(counted, F.count(F.lit(1)).alias("rows")))
        assert counted.get == {"rows": 6}  # the observation arrives with the write's own job
        assert direct.commit() == version + 1
        ran = _job_descriptions(clone, jobs)
    # one job wrote the files; none rebuilt the snapshot (a table without row tracking: nothing else asks for it)
    assert not [d for d in ran if "Compute snapshot" in d], ran
    assert _rows(spark, location) == [(i, i * 5) for i in range(1000, 1006)]
    commit = DeltaLog(spark, location).commit(version + 1)
    assert {f.path for f in commit.files if f.kind == "remove"} == {f.path for f in before}
    assert committed(spark, location, version, "app-a", 5, marker="test")
    text = (Path(location) / "_delta_log" / f"{version + 1:020d}.json").read_text()
    info = next(json.loads(line)["commitInfo"] for line in text.splitlines() if line.startswith('{"commitInfo"'))
    assert (info["operation"], info["operationParameters"], info["userMetadata"]) == \
        ("WRITE", {"mode": "Overwrite"}, '{"who": "test"}')
    assert info["operationMetrics"]["numOutputRows"] == "6"


def test_an_idempotent_write_already_committed_is_left_to_delta_which_skips_it(spark: Any, tmp_path: Path) -> None:
    location = _table(spark, tmp_path)
    with idempotent_session(spark, "app-b", 3) as clone:
        direct = overwrite.start(clone, location)
        assert direct is not None
        direct.write(clone.range(1).selectExpr("id", "id AS v"))
        direct.commit()
    with idempotent_session(spark, "app-b", 3) as clone:
        assert overwrite.start(clone, location) is None
    with idempotent_session(spark, "app-b", 4) as clone:
        assert overwrite.start(clone, location) is not None


def test_a_commit_that_raced_another_fails_and_loses_no_row(spark: Any, tmp_path: Path) -> None:
    location = _table(spark, tmp_path)
    with own_session(spark) as clone:
        direct = overwrite.start(clone, location)
        assert direct is not None
        direct.write(clone.range(500, 502).selectExpr("id", "id AS v"))
        spark.range(900, 901).selectExpr("id", "id AS v").write.format("delta").mode("append").save(location)
        with pytest.raises(Exception, match="(?i)concurrent"):
            direct.commit()
    assert (900, 900) in _rows(spark, location) and (500, 500) not in _rows(spark, location)


def test_tables_it_cannot_take_go_back_to_deltas_writer(spark: Any, tmp_path: Path) -> None:
    location = _table(spark, tmp_path)
    version = DeltaLog(spark, location).latest_version
    spark.sql(f"ALTER TABLE delta.`{location}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    spark.range(200, 250).coalesce(1).selectExpr("id", "id AS v").write.format("delta").mode("append").save(location)
    spark.sql(f"DELETE FROM delta.`{location}` WHERE id = 207")
    assert any(f.has_deletion_vector for f in DeltaLog(spark, location).files_at(version + 3) or ())
    with own_session(spark) as clone:  # a file with a deletion vector: its remove must name the vector
        assert overwrite.start(clone, location) is None


def test_the_first_incremental_refresh_after_create_commits_directly(dt: Any) -> None:
    """The table's latest commit is then its CLUSTER BY, not the refresh that wrote the rows the REWRITE reads: the
    overwrite replaces the files of the latest version, as Delta's writer does."""
    dt.sql("CREATE TABLE s (k INT, v INT)")
    dt.sql("INSERT INTO s VALUES (1, 5), (2, 7), (1, NULL)")
    dt.sql("CREATE DYNAMIC TABLE g TARGET_LAG = '1 minute' REFRESH_MODE = INCREMENTAL AS "
           "SELECT k, count(*) AS n, sum(v) AS total FROM s GROUP BY k")
    location = dt.catalog.lookup("g")["location"]
    log = DeltaLog(dt.spark, location)
    assert log.commit(log.latest_version).operation == "CLUSTER BY"
    dt.sql("INSERT INTO s VALUES (2, 1), (3, 3)")
    dt.sql("DELETE FROM s WHERE k = 1 AND v IS NULL")
    [rec] = dt.refresh("g")
    assert (rec.action, rec.write_kind) == ("INCREMENTAL", "REWRITE"), rec.error
    text = (Path(local_path(location)) / "_delta_log" / f"{rec.target_version:020d}.json").read_text()
    info = next(json.loads(line)["commitInfo"] for line in text.splitlines() if line.startswith('{"commitInfo"'))
    assert info["operationParameters"] == {"mode": "Overwrite"}  # Delta's writer adds its replaceWhere predicate
    assert_same_rows(table_rows(dt, "g"), oracle_rows(dt, "g"))
