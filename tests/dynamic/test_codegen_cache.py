"""The classes Spark generates for an incremental refresh's stages are compiled once and kept (the session's
``spark.sql.codegen.cache.maxEntries``, dtables.spark.builder): a later refresh of the same kind of change compiles
none of them again, even after other work compiled more classes than Spark's default cache of 100 holds."""

from __future__ import annotations

from typing import Any

from dtables.spark.builder import CODEGEN_CACHE
from oracle import oracle_rows, table_rows
from dtables.testing import assert_same_rows

QUERY = ("SELECT d.region, count(*) AS n, sum(f.amount) AS total FROM f JOIN d ON f.dim = d.dim "
         "GROUP BY d.region")


def _compiled(spark: Any) -> int:
    metrics = getattr(getattr(spark._jvm.org.apache.spark.metrics.source, "CodegenMetrics$"), "MODULE$")
    return int(metrics.METRIC_COMPILATION_TIME().getCount())


def _fact_and_aggregate(dt: Any, n: str) -> None:
    """Tables ``d<n>`` and ``f<n>`` and the dynamic table ``agg<n>`` of QUERY over them."""
    dt.sql(f"CREATE TABLE d{n} (dim INT, region STRING)")
    dt.sql(f"INSERT INTO d{n} SELECT CAST(id AS INT), concat('r', CAST(id % 3 AS STRING)) FROM range(7)")
    dt.sql(f"CREATE TABLE f{n} (id BIGINT, dim INT, amount DOUBLE)")
    dt.sql(f"INSERT INTO f{n} SELECT id, CAST(id % 7 AS INT), CAST(id AS DOUBLE) FROM range(100)")
    dt.sql(f"CREATE DYNAMIC TABLE agg{n} TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS "
           + QUERY.replace(" f ", f" f{n} AS f ").replace(" d ", f" d{n} AS d "))


def _classes_of_refresh(dt: Any, name: str) -> int:
    """Classes compiled by one refresh of ``name``, which must run INCREMENTAL."""
    before = _compiled(dt.spark)
    [record] = dt.refresh([name])
    compiled = _compiled(dt.spark) - before
    assert record.action == "INCREMENTAL", record.reason
    return compiled


def _refresh_after_inserts(dt: Any, start: int) -> int:
    """Classes compiled by one INCREMENTAL refresh after an append to the fact."""
    dt.sql(f"INSERT INTO f SELECT id, CAST(id % 7 AS INT), CAST(id AS DOUBLE) FROM range({start}, {start + 50})")
    return _classes_of_refresh(dt, "agg")


def test_a_refresh_of_the_same_kind_of_change_compiles_nothing_again(dt: Any) -> None:
    assert dt.spark.conf.get("spark.sql.codegen.cache.maxEntries") == CODEGEN_CACHE[
        "spark.sql.codegen.cache.maxEntries"]
    _fact_and_aggregate(dt, "")
    first = _refresh_after_inserts(dt, 1000)
    compiled_before_others = _compiled(dt.spark)
    # other work in between: more distinct generated classes than Spark's default cache keeps (each literal is
    # inlined into its stage's code, so each plan is a class of its own; preparing its RDD compiles it, no job runs)
    for i in range(120):
        dt.spark.range(3).selectExpr(f"id * {i + 2} + {i} AS x")._jdf.queryExecution().executedPlan().execute()
    assert _compiled(dt.spark) - compiled_before_others >= 120
    second = _refresh_after_inserts(dt, 2000)
    assert_same_rows(table_rows(dt, "agg"), oracle_rows(dt, "agg"))
    # Alone, the first refresh compiles about 45 classes; after other tests of the run, some of them may already be
    # kept. With Spark's cache of 100 the second compiled them all again (first 45, second 51).
    assert second <= max(3, first // 4), (first, second)


def test_a_refresh_after_an_update_or_delete_compiles_nothing_again(dt: Any) -> None:
    # A one-commit change read is the same statement at every version (its start version is not written into it):
    # Spark writes a number literal into the code it generates, so a version in the statement made new classes,
    # compiled at every refresh.
    _fact_and_aggregate(dt, "2")
    compiled = []
    for i in range(3):
        for statement in (f"UPDATE f2 SET amount = amount + 1 WHERE id = {i * 7}", f"DELETE FROM f2 WHERE id = {i * 7 + 1}"):
            dt.sql(statement)
            compiled.append(_classes_of_refresh(dt, "agg2"))
    assert_same_rows(table_rows(dt, "agg2"), oracle_rows(dt, "agg2"))
    assert compiled[2:] == [0] * 4, compiled


def test_a_refresh_over_several_commits_compiles_nothing_again(dt: Any) -> None:
    # An interval of several commits compares its rows' commit versions with its start version; as a number in the
    # statement, that made new classes at every refresh (a table refreshed less often than its sources commit).
    _fact_and_aggregate(dt, "3")
    compiled = []
    for i in range(4):
        dt.sql(f"UPDATE f3 SET amount = amount + 1 WHERE id = {i * 7}")
        dt.sql(f"UPDATE f3 SET amount = amount * 2 WHERE id = {i * 7} OR id = {i * 7 + 2}")  # the row again
        dt.sql(f"DELETE FROM f3 WHERE id = {i * 7 + 1}")
        compiled.append(_classes_of_refresh(dt, "agg3"))
        assert_same_rows(table_rows(dt, "agg3"), oracle_rows(dt, "agg3"))
    assert compiled[2:] == [0] * 2, compiled
