"""Sessions of their own for writers, on a classic Spark session and over Spark Connect alike.

A writer whose settings must not leak to other writers in the process (Delta's idempotent-write options, the
refresh's tuning) runs on a session of its own that shares the catalog and the cluster. Classic Spark makes one
with ``newSession()`` (default settings, no temporary views); Spark Connect has no ``newSession`` (it "depends on
the JVM") but clones the server-side session with ``cloneSession()`` (the parent's settings and temporary views
copied). Either way the parent's later settings are not seen, and the writer's are not leaked. A Connect clone is a
session on the server, released when the writer is done.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from weakref import WeakSet

from dtables.spark.jvm import jvm_class, scala_object, static

# Connect clones in use, so that cancel_jobs reaches their operations too (interruptAll is per server session)
_clones: WeakSet[Any] = WeakSet()


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (no JVM on this side)."""
    return getattr(spark, "_jsparkSession", None) is None and hasattr(spark, "client")


@contextmanager
def own_session(spark: Any) -> Iterator[Any]:
    """A session of its own, sharing ``spark``'s catalog and cluster, for the duration of the block."""
    if not is_connect(spark):
        yield spark.newSession()
        return
    clone = spark.cloneSession()
    _clones.add(clone)
    # The clone is this thread's active session for the block: PySpark binds some results to the active session
    # rather than to the one that made them (4.2: a local checkpoint's DataFrame, which the server then looks for
    # in the wrong session and does not find).
    active = type(clone)._active_session
    saved = getattr(active, "session", None)
    active.session = clone
    try:
        yield clone
    finally:
        active.session = saved
        _clones.discard(clone)
        # not clone.stop(): for a "local" Connect session that would stop the local server as well
        clone.client.release_session()
        clone.client.close()


def cancel_jobs(spark: Any) -> None:
    """Cancel the Spark jobs running for ``spark``: every job of the SparkContext on classic Spark; over Spark
    Connect, the operations of ``spark`` and of every session of its own this process has in use (the daemon's
    shutdown: one session per process)."""
    if is_connect(spark):
        spark.interruptAll()
        for clone in list(_clones):
            clone.interruptAll()
    else:
        spark.sparkContext.cancelAllJobs()


def rows_frame(spark: Any, rows: Any, schema: Any) -> Any:
    """``spark.createDataFrame(rows, schema)`` for rows built to fit ``schema``: classic Spark skips checking each
    value (``verifySchema=False``); Spark Connect has no such check to skip (and warns when asked to)."""
    if is_connect(spark):
        return spark.createDataFrame(rows, schema)
    return spark.createDataFrame(rows, schema, verifySchema=False)


def local_frame(spark: Any, rows: list[tuple[Any, ...]], schema: Any) -> Any:
    """``rows`` (tuples of strings, longs and booleans fitting the flat ``schema``) as a DataFrame that holds them
    in its plan, a ``LocalRelation``. Classic ``createDataFrame`` of Python rows makes an RDD whose every task
    unpickles its rows in a Python worker: a broadcast join with the 2,000 row marks of a change read took a job of
    115-135 ms on the 2-core benchmark machine, as Arrow batches collected in the JVM one of 15-20 ms. Spark Connect
    sends local rows as Arrow already."""
    columns = list(zip(*rows)) if rows else [() for _ in schema.fields]
    return local_columns(spark, [list(values) for values in columns], schema)


# A local relation's rows are part of its plan: each rule of Spark's analyzer and optimizer that maps a plan's
# expressions copies the sequence of rows of every local relation in it (``QueryPlan.mapExpressions``), once per use
# after common table expressions are inlined. TPC-H Q20's RF2 refresh reads 5,726 held change rows in six places and
# 23,776 row marks in one: a quarter of its driver's time in the JVM went to those copies (sampled, bench/README.md).
# Above this many rows, rows held for plans are given to them as an RDD of the same rows (``rows_for_plans``).
PLANNED_ROWS_MAX = 2_000
# Rows of such an RDD per partition (one task each, up to the default parallelism). Spark's scan of a local
# relation makes as many as the leaf-node parallelism allows, set when the plan runs: a tiny REWRITE's single task
# (``tiny_plans.one_job``). The RDD's partitions are fixed when it is made, so they are sized by the rows: a held
# change of 10,000 rows in four tasks cost the write's job a stage of four tasks and four map outputs to fetch.
ROWS_PER_SLICE = 50_000


def rows_for_plans(df: Any, rows: int) -> Any:
    """``df``, a local relation of ``rows`` rows, as the plans that read it should hold it: itself up to
    ``PLANNED_ROWS_MAX`` rows (the optimizer folds projections of it and prunes it when empty), else a leaf over an
    RDD of the same rows (those Spark's scan of the relation parallelizes), as ``Dataset.checkpoint`` makes its leaf
    but with nothing stored: planning passes over it without copying the rows, it is sized as the relation (so joins
    still broadcast it), and a lost executor's partitions come again from the driver's rows. Collecting it costs a
    job where the local relation's does not: keep ``df`` for that. ``df`` itself over Spark Connect (no JVM on this
    side) or where its optimized plan is not a local relation."""
    if rows <= PLANNED_ROWS_MAX or is_connect(df.sparkSession):
        return df
    from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame

    session, jdf = df.sparkSession, df._jdf
    relation = _local_relation(jdf.queryExecution().analyzed())
    if relation is not None:
        leaf = _rdd_leaf(session, relation)
    elif jdf.queryExecution().optimizedPlan().nodeName() == "LocalRelation":
        # A projection over the relation (PySpark's Arrow path makes one in some cases), folded in by the
        # optimizer: Spark's own leaf of the optimized rows (the optimizer copies them at each rule, as above)
        leaf = scala_object(session, "org.apache.spark.sql.execution.LogicalRDD").fromDataset(
            jdf.queryExecution().toRdd(), jdf, False)
    else:  # the rows of other plans would need computing
        return df
    dataset = jvm_class(session, "org.apache.spark.sql.classic.Dataset")
    return ClassicDataFrame(dataset.ofRows(session._jsparkSession, leaf), session)


def _local_relation(plan: Any) -> Any:
    """The ``LocalRelation`` that analyzed ``plan`` is, under the aliases and views that name it (a kept read looked
    up as a view), or None."""
    while plan.nodeName() in ("SubqueryAlias", "View") and \
            plan.output().toString() == plan.children().head().output().toString():  # the same columns, in order
        plan = plan.children().head()
    return plan if plan.nodeName() == "LocalRelation" else None


def _rdd_leaf(session: Any, relation: Any) -> Any:
    """A ``LogicalRDD`` of ``relation``'s rows, with its output and statistics, made without optimizing a plan that
    holds them (the optimizer's rules copy the rows: 26 ms for 20,000 change rows, twice per refresh that kept them,
    against 9 ms here). Its RDD is what ``LocalTableScanExec`` parallelizes, in a slice per ``ROWS_PER_SLICE`` rows
    up to the default parallelism; the rows are turned unsafe by the scan of the RDD, as any ``LogicalRDD``'s."""
    jsc = session.sparkContext._jsc
    data = static(session, "scala.jdk.javaapi.CollectionConverters", "asJava")(relation.data())
    slices = -(-int(data.size()) // ROWS_PER_SLICE)
    rdd = jsc.parallelize(data, max(1, min(slices, int(jsc.defaultParallelism())))).rdd()
    none = scala_object(session, "scala.None")
    unknown = jvm_class(session, "org.apache.spark.sql.catalyst.plans.physical.UnknownPartitioning")(0)
    stats = jvm_class(session, "scala.Some")(relation.stats())
    return scala_object(session, "org.apache.spark.sql.execution.LogicalRDD").apply(
        relation.output(), rdd, unknown, scala_object(session, "scala.collection.immutable.Nil"), False, none,
        session._jsparkSession, stats, none)


def local_columns(spark: Any, columns: list[Any], schema: Any) -> Any:
    """``local_frame`` of its columns: one sequence of values (a list, or a NumPy array built without a Python
    object per value) per field of ``schema``, all of one length."""
    import pyarrow as pa  # PySpark's own dependency for its SQL module; imported where local rows are made

    types = {"string": pa.string(), "long": pa.int64(), "boolean": pa.bool_()}
    table = pa.table({f.name: pa.array(values, types[f.dataType.typeName()])
                      for f, values in zip(schema.fields, columns)})
    if is_connect(spark):
        return spark.createDataFrame([tuple(r.values()) for r in table.to_pylist()], schema)
    return spark.createDataFrame(table, schema)
