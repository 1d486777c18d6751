"""A query over tiny inputs runs as one Spark job (``dtables.spark.tiny_plans``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dtables.spark.jobs import SparkWork
from dtables.spark.tiny_plans import input_bytes, known_rows, one_job

JOIN = "SELECT a.id, b.name FROM {a} AS a JOIN {b} AS b ON a.k = b.k"


def _tables(spark: Any, tmp_path: Path) -> tuple[Any, Any, int]:
    """A 100-row and a 7-row parquet table, and the bytes of the first's files."""
    spark.range(100).selectExpr("id", "id % 7 AS k").write.parquet(str(tmp_path / "a"))
    spark.range(7).selectExpr("id AS k", "CAST(id AS STRING) AS name").write.parquet(str(tmp_path / "b"))
    files = sum(p.stat().st_size for p in (tmp_path / "a").glob("*.parquet"))
    return spark.read.parquet(str(tmp_path / "a")), spark.read.parquet(str(tmp_path / "b")), files


def test_input_bytes_are_the_files_a_query_reads_a_common_table_expression_once(spark: Any, tmp_path: Path) -> None:
    a, b, a_files = _tables(spark, tmp_path)
    assert input_bytes(a) == a_files
    used_twice = spark.sql("WITH c AS (SELECT * FROM {a}) SELECT x.id FROM c AS x JOIN c AS y ON x.k = y.id", a=a)
    assert input_bytes(used_twice) == a_files
    local = input_bytes(spark.createDataFrame([(1, "x")], "k INT, name STRING"))  # a local relation
    assert local is not None and local > 0
    assert input_bytes(spark.range(5)) is None  # a leaf Spark does not size before planning


def test_a_join_of_tiny_inputs_runs_in_one_job_and_the_settings_come_back(spark: Any, tmp_path: Path) -> None:
    session = spark.newSession()
    session.conf.set("spark.sql.adaptive.enabled", "false")  # as for incremental refreshes
    session.conf.set("spark.sql.autoBroadcastJoinThreshold", "12345678")
    a, b, _ = _tables(session, tmp_path)
    query = session.sql(JOIN, a=a, b=b)
    with SparkWork(session, "broadcast") as broadcast:
        expected = sorted(query.collect())
    assert broadcast.cost.jobs == 2  # the broadcast of b, then the query's own job

    query = session.sql(JOIN, a=a, b=b)
    with SparkWork(session, "one job") as work, one_job(session, query) as tiny:
        assert tiny
        assert sorted(query.collect()) == expected
    assert work.cost.jobs == 1
    assert session.conf.get("spark.sql.autoBroadcastJoinThreshold") == "12345678"
    assert session.conf.get("spark.sql.shuffle.partitions") == spark.conf.get("spark.sql.shuffle.partitions")


def test_a_query_over_more_than_the_limit_is_left_alone(spark: Any, tmp_path: Path) -> None:
    session = spark.newSession()
    a, b, _ = _tables(session, tmp_path)
    with one_job(session, session.sql(JOIN, a=a, b=b), max_bytes=10) as tiny:
        assert not tiny
        assert session.conf.get("spark.sql.autoBroadcastJoinThreshold") != "-1"


def test_a_local_checkpoint_of_known_rows_is_sized_by_them(spark: Any, tmp_path: Path) -> None:
    """Spark sizes a local checkpoint as the plan it computed (a scan, however few rows it kept); one whose rows
    are known is sized by them, directly and through a temporary view, and only in this application."""
    spark.range(200_000).selectExpr("id", "id % 7 AS k").write.parquet(str(tmp_path / "big"))
    picked = spark.read.parquet(str(tmp_path / "big")).where("id % 50000 = 3").localCheckpoint(eager=True)
    files = sum(p.stat().st_size for p in (tmp_path / "big").glob("*.parquet"))
    by_spark = input_bytes(picked)
    assert by_spark == files  # the scan's estimate, for 4 rows
    known_rows(picked, 4)
    assert input_bytes(picked) == 4 * (8 + 8 + 8)  # per row: Spark's 8 bytes and the two longs
    picked.createOrReplaceTempView("picked_rows")
    joined = spark.sql("SELECT p.id FROM picked_rows AS p JOIN picked_rows AS q ON p.k = q.k")
    assert input_bytes(joined) == 2 * 4 * 24
    other = spark.read.parquet(str(tmp_path / "big")).where("id = 1").localCheckpoint(eager=True)
    assert input_bytes(other) == by_spark  # not recorded: Spark's estimate


def test_rows_held_by_the_driver_are_left_unfolded_in_a_write_and_the_settings_come_back(spark: Any) -> None:
    """Inside ``local_rows_unfolded`` a projection of a local relation stays a projection for the job to compute
    (the optimizer does not evaluate it row by row), with the same rows; rules the session already excludes stay
    excluded, and the setting comes back as it was."""
    from dtables.spark.tiny_plans import EXCLUDED_RULES, FOLD_LOCAL_RELATIONS, local_rows_unfolded

    session = spark.newSession()
    import pyarrow as pa

    held = session.createDataFrame(pa.table({"k": list(range(50)), "name": [str(i) for i in range(50)]}))
    query = held.selectExpr("k * 2 AS k2", "upper(name) AS name").where("k2 > 10")

    def optimized(df: Any) -> str:
        return str(df._jdf.queryExecution().optimizedPlan().nodeName())

    assert optimized(query.select("*")) == "LocalRelation"  # folded by the optimizer, as Spark does
    expected = sorted(query.collect())
    other = "org.apache.spark.sql.catalyst.optimizer.ConstantFolding"
    session.conf.set(EXCLUDED_RULES, other)
    with local_rows_unfolded(session):
        assert session.conf.get(EXCLUDED_RULES) == f"{other},{FOLD_LOCAL_RELATIONS}"
        unfolded = query.select("*")  # a new query execution, planned under the setting
        assert optimized(unfolded) != "LocalRelation"
        assert sorted(unfolded.collect()) == expected and len(expected) == 44
    assert session.conf.get(EXCLUDED_RULES) == other
    session.conf.unset(EXCLUDED_RULES)
    with local_rows_unfolded(session):
        pass
    assert session.conf.get(EXCLUDED_RULES, None) is None
    assert optimized(query.select("*")) == "LocalRelation"


def _scan_tasks(session: Any, query: Any) -> int:
    tracker = session.sparkContext.statusTracker()
    with SparkWork(session, "scan") as work:
        query.collect()
    stages = [s for j in tracker.getJobIdsForGroup(work.group) for s in tracker.getJobInfo(j).stageIds]
    return sum(tracker.getStageInfo(s).numTasks for s in stages)


def test_files_of_a_plan_another_session_built_are_read_in_one_task_and_its_setting_comes_back(
        spark: Any, tmp_path: Path) -> None:
    """A plan kept from an earlier refresh (a snapshot read through a global view) scans its files under the
    settings of the session that built it: ``one_job`` packs them there too, restores that session's own value
    after, and two blocks over it at once restore it once, after the last."""
    from dtables.spark.tiny_plans import PACK_FILES, in_few_tasks

    builder = spark.newSession()
    spark.range(40).repartition(4).write.parquet(str(tmp_path / "four"))  # four small files
    builder.read.parquet(str(tmp_path / "four")).createOrReplaceGlobalTempView("tiny_plans_kept")
    session = spark.newSession()
    session.conf.set("spark.sql.adaptive.enabled", "false")
    global_db = session.conf.get("spark.sql.globalTempDatabase")

    def query() -> Any:
        return session.sql(f"SELECT id FROM {global_db}.tiny_plans_kept WHERE id % 3 = 1")

    expected = sorted(query().collect())
    spread = _scan_tasks(session, query())
    builder.conf.set(PACK_FILES, "3")
    with one_job(session, query()) as tiny:
        assert tiny and builder.conf.get(PACK_FILES) == "1"
        with in_few_tasks(session, query()):
            assert _scan_tasks(session, query()) == 1 < spread
        assert builder.conf.get(PACK_FILES) == "1"  # the outer block still runs
        assert sorted(query().collect()) == expected
    assert builder.conf.get(PACK_FILES) == "3" and session.conf.get(PACK_FILES, None) is None
    builder.conf.unset(PACK_FILES)
    with in_few_tasks(session, query()):
        pass
    assert builder.conf.get(PACK_FILES, None) is None
    spark.catalog.dropGlobalTempView("tiny_plans_kept")
