"""Local rows held in the plan (``dtables.spark.sessions.local_frame``): the row marks of change reads; many of
them given to plans as an RDD (``rows_for_plans``)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import types as T

from dtables.spark import sessions
from dtables.spark.sessions import local_frame, rows_for_plans

SCHEMA = T.StructType([T.StructField("file", T.StringType(), False), T.StructField("row", T.LongType(), False),
                       T.StructField("keep", T.BooleanType(), True)])


def _leaf(df: Any) -> str:
    plan = df._jdf.queryExecution().analyzed()
    while plan.children().size() > 0:
        plan = plan.children().apply(0)
    return str(plan.nodeName())


def _size(df: Any) -> str:
    return str(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes())


def test_local_rows_are_a_local_relation_with_their_values(spark: Any) -> None:
    rows = [("part-0.parquet", 3, True), ("part-0.parquet", 2**40, None), ("päth with space.parquet", 0, False)]
    df = local_frame(spark, rows, SCHEMA)
    assert _leaf(df) == "LocalRelation"  # no RDD whose tasks unpickle the rows in Python workers
    assert df.schema == SCHEMA
    assert sorted(tuple(r) for r in df.collect()) == sorted(rows, key=lambda r: (r[0], r[1]))


def test_no_local_rows_are_an_empty_relation_of_the_schema(spark: Any) -> None:
    df = local_frame(spark, [], SCHEMA)
    assert df.schema == SCHEMA and df.collect() == []


def test_many_local_rows_are_given_to_plans_as_an_rdd_of_the_same_rows_and_size(spark: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(sessions, "PLANNED_ROWS_MAX", 2)
    rows = [("f.parquet", i, i % 2 == 0) for i in range(3)]
    local = local_frame(spark, rows, SCHEMA)
    assert rows_for_plans(local, 2) is local  # as many as the limit: the relation itself
    planned = rows_for_plans(local, 3)
    assert _leaf(planned) == "LogicalRDD" and planned.schema == SCHEMA
    assert _size(planned) == _size(local)  # Spark sizes it as the relation: joins still broadcast it
    assert sorted(tuple(r) for r in planned.collect()) == rows
    assert planned.rdd.getNumPartitions() == 1  # a task per ROWS_PER_SLICE rows: Spark's own scan would make 3
    monkeypatch.setattr(sessions, "ROWS_PER_SLICE", 2)
    assert rows_for_plans(local, 3).rdd.getNumPartitions() == min(2, spark.sparkContext.defaultParallelism)
