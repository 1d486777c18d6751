"""Local rows held in the plan (``dtables.spark.sessions.local_frame``): the row marks of change reads."""

from __future__ import annotations

from typing import Any

from pyspark.sql import types as T

from dtables.spark.sessions import local_frame

SCHEMA = T.StructType([T.StructField("file", T.StringType(), False), T.StructField("row", T.LongType(), False),
                       T.StructField("keep", T.BooleanType(), True)])


def _leaf(df: Any) -> str:
    plan = df._jdf.queryExecution().analyzed()
    while plan.children().size() > 0:
        plan = plan.children().apply(0)
    return str(plan.nodeName())


def test_local_rows_are_a_local_relation_with_their_values(spark: Any) -> None:
    rows = [("part-0.parquet", 3, True), ("part-0.parquet", 2**40, None), ("päth with space.parquet", 0, False)]
    df = local_frame(spark, rows, SCHEMA)
    assert _leaf(df) == "LocalRelation"  # no RDD whose tasks unpickle the rows in Python workers
    assert df.schema == SCHEMA
    assert sorted(tuple(r) for r in df.collect()) == sorted(rows, key=lambda r: (r[0], r[1]))


def test_no_local_rows_are_an_empty_relation_of_the_schema(spark: Any) -> None:
    df = local_frame(spark, [], SCHEMA)
    assert df.schema == SCHEMA and df.collect() == []
