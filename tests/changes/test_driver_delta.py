"""A held change read made by pyarrow on the driver (``dtables.changes.driver_delta``) holds exactly the rows
Spark's read of the same interval gives (``commit_sides``): random INSERTs, UPDATEs (NULLs, duplicates, values set
back to themselves), DELETEs and MERGEs, deletion vectors on and off, every interval of the history, every column
or some; and the interval it applies to is read with no Spark job."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from differentiation.vocabulary import ChangeFormat
from dtables.changes import Bound, reader, redundant_delta, resolve_interval, shared_reads
from dtables.changes.shapes import plan_changes
from dtables.spark.jobs import SparkWork

PROPERTIES = "delta.enableChangeDataFeed = true, delta.enableRowTracking = true, delta.enableDeletionVectors = {on}"

_value = st.one_of(st.none(), st.integers(0, 2))
_statement = st.one_of(
    st.tuples(st.just("insert"), st.lists(st.tuples(st.integers(0, 4), _value, st.sampled_from(["a", "b", None])),
                                          min_size=1, max_size=4)),
    st.tuples(st.just("update"), st.sampled_from(["v = v + 1", "v = NULL", "s = 'b'", "v = v", "s = s, v = 0"]),
              st.integers(0, 4)),
    st.tuples(st.just("delete"), st.integers(0, 4)),
    st.tuples(st.just("merge"), st.integers(0, 5)),
)


def _sql(table: str, statement: tuple[Any, ...]) -> str:
    kind = statement[0]
    if kind == "insert":
        values = ", ".join(f"({k}, {'NULL' if v is None else v}, {'NULL' if s is None else repr(s)})"
                           for k, v, s in statement[1])
        return f"INSERT INTO {table} VALUES {values}"
    if kind == "update":
        return f"UPDATE {table} SET {statement[1]} WHERE k = {statement[2]}"
    if kind == "delete":
        return f"DELETE FROM {table} WHERE k = {statement[1]}"
    # a key that may match (its rows updated) and one that does not (inserted): the files MERGE adds hold both
    return (f"MERGE INTO {table} t USING (SELECT {statement[1]} AS k, 7 AS v, 'm' AS s UNION ALL "
            f"SELECT {statement[1] + 10}, 8, NULL) u ON t.k = u.k "
            f"WHEN MATCHED THEN UPDATE SET v = u.v WHEN NOT MATCHED THEN INSERT *")


def _rows(df: Any) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(r) for r in df.collect())


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(statements=st.lists(_statement, min_size=2, max_size=6), vectors=st.booleans(),
       only=st.sampled_from([None, frozenset({"k", "v"}), frozenset({"s"})]))
def test_the_driver_holds_the_rows_spark_reads(spark: Any, make_table: Any, statements: list, vectors: bool,
                                               only: frozenset[str] | None) -> None:
    table = make_table("k INT, v INT, s STRING", PROPERTIES.format(on=str(vectors).lower()))
    spark.sql(f"INSERT INTO {table} SELECT CAST(id % 5 AS INT), CAST(id AS INT), 'a' FROM range(12)")
    for statement in statements:
        spark.sql(_sql(table, statement))
    last = int(spark.sql(f"DESCRIBE HISTORY {table} LIMIT 1").first()["version"])
    for start in range(1, last):
        for end in range(start + 1, last + 1):
            plan = plan_changes(spark, resolve_interval(spark, table, at=Bound.version(start), end=Bound.version(end)),
                                ChangeFormat.DEFAULT)
            driver = reader._delta_on_driver(spark, plan, only)
            if driver is None:
                continue
            in_spark = reader._redundant_delta(spark, plan, only=only)
            if only is not None:
                in_spark = reader._narrowed(in_spark, only)
            assert driver.columns == in_spark.columns
            assert _rows(driver) == _rows(in_spark), (start, end, statements)


def test_a_mixed_interval_is_held_without_a_spark_job(spark: Any, make_table: Any) -> None:
    """An INSERT, an UPDATE and a DELETE with vectors (the benchmark's mixed round): the driver reads the change
    data, the appended file and the rows the vectors newly mark, and holds them, with no Spark job; switched off,
    Spark's read gives the same rows."""
    table = make_table("k INT, v INT, s STRING", PROPERTIES.format(on="true"))
    spark.sql(f"INSERT INTO {table} SELECT CAST(id AS INT), CAST(id % 7 AS INT), 'a' FROM range(100)")
    spark.sql(f"INSERT INTO {table} VALUES (100, 1, NULL), (100, 1, NULL)")
    spark.sql(f"UPDATE {table} SET v = v + 1 WHERE k % 10 = 1")
    spark.sql(f"DELETE FROM {table} WHERE k % 10 = 2")
    interval = resolve_interval(spark, table, at=Bound.version(1), end=Bound.version(4))
    plan = plan_changes(spark, interval, ChangeFormat.DEFAULT)
    assert plan.commit_reads is not None and plan.commit_reads.gone and plan.commit_reads.new_rows is not None
    shared_reads.forget_all(spark)
    with SparkWork(spark, "read") as work:
        held = redundant_delta(spark, interval, read_once=True)
        rows = _rows(held)
    assert work.cost.jobs == 0 and reader.held_rows(held) is not None
    assert shared_reads.held_table(held) is not None  # made by pyarrow (``driver_delta``)
    assert sum(rows.values()) == 2 + 2 * 10 + 10
    shared_reads.forget_all(spark)
    spark.conf.set(reader.DELTA_ON_DRIVER, "false")
    try:
        assert _rows(redundant_delta(spark, interval, read_once=True)) == rows
    finally:
        spark.conf.unset(reader.DELTA_ON_DRIVER)
        shared_reads.forget_all(spark)


def test_row_ids_are_derived_where_they_are_read(spark: Any, make_table: Any) -> None:
    """The driver's read holds the row-tracking ids and derives the opaque row ids only where they are read
    (``shared_reads.Derived``): a plan that does not read them computes none, one that does gets Spark's ids, as
    does the Arrow table asked for; an UPDATE that leaves some rows' compared column as it was is paired by the ids
    they come from, in the first read and in the read kept for later readers, leaving out what Spark's read does."""
    table = make_table("k INT, v INT, s STRING", PROPERTIES.format(on="true"))
    spark.sql(f"INSERT INTO {table} SELECT CAST(id AS INT), CAST(id % 7 AS INT), 'a' FROM range(30)")
    spark.sql(f"UPDATE {table} SET v = CASE WHEN k % 2 = 0 THEN v ELSE v + 1 END, s = 'b' WHERE k % 3 = 0")
    interval = resolve_interval(spark, table, at=Bound.version(1), end=Bound.version(2))
    plan = plan_changes(spark, interval, ChangeFormat.DEFAULT)
    held = reader._delta_on_driver(spark, plan, None)
    assert held is not None and shared_reads.held_source(held) is not None
    assert "md5" not in held.select("v", "__action")._jdf.queryExecution().optimizedPlan().toString()
    in_spark = _rows(reader._redundant_delta(spark, plan))
    assert _rows(held) == in_spark and sum(in_spark.values()) == 20
    arrow = shared_reads.held_table(held)
    assert arrow.column_names == held.columns
    assert Counter(tuple(r.values()) for r in arrow.to_pylist()) == in_spark
    shared_reads.forget_all(spark)
    try:
        first, kept = (redundant_delta(spark, interval, read_once=True, compared=frozenset({"v"})) for _ in range(2))
        spark.conf.set(reader.DELTA_ON_DRIVER, "false")
        shared_reads.forget_all(spark)
        spark_read = redundant_delta(spark, interval, read_once=True, compared=frozenset({"v"}))
        assert _rows(first) == _rows(kept) == _rows(spark_read)
        assert sum(_rows(first).values()) == 10  # k = 3, 9, 15, 21, 27 moved v; the even ones did not
    finally:
        spark.conf.unset(reader.DELTA_ON_DRIVER)
        shared_reads.forget_all(spark)
