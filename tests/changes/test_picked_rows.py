"""Rows a DELETE's deletion vectors pick out of data files, read on the driver by pyarrow
(``dtables.changes.picked_rows``), are exactly the rows Spark's scan picks: every flat type, NULLs and duplicates,
partition values, materialized row ids, a column the older files lack, INT96 and microsecond timestamps in a
session time zone that is not UTC; the read runs no Spark job; types pyarrow is not trusted with go to Spark."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from dtables.changes import Bound, picked_rows, plan_changes, redundant_delta, resolve_interval, shared_reads
from dtables.changes.interval import open_log
from dtables.spark.jobs import SparkWork

VECTORS = "delta.enableChangeDataFeed = true, delta.enableRowTracking = true, delta.enableDeletionVectors = true"
COLUMNS = ("k INT, t TINYINT, s SMALLINT, b BIGINT, f FLOAT, d DOUBLE, m DECIMAL(12, 3), v STRING, y BINARY, "
           "o BOOLEAN, day DATE, ts TIMESTAMP, ntz TIMESTAMP_NTZ")
# Three files a statement, NULLs every fifth row, duplicates (id % 7), values past 2^31 and before 1970
ROWS = ("INSERT INTO {t} SELECT /*+ REPARTITION(3) */ CAST(id % 7 AS INT), CAST(id % 100 AS TINYINT), "
        "CAST(id * 250 AS SMALLINT), id * 3000000000, CAST(id / 3 AS FLOAT), id / 7, CAST(id / 8 AS DECIMAL(12, 3)), "
        "CASE WHEN id % 5 = 0 THEN NULL ELSE concat('v', id % 4, '\u00e9') END, CAST(concat('y', id % 3) AS BINARY), "
        "id % 2 = 0, date_add(DATE'1965-03-01', CAST(id * 400 AS INT)), "
        "CASE WHEN id % 5 = 1 THEN NULL ELSE TIMESTAMP'1969-12-31 23:59:59.123456' + make_interval(0, 0, 0, id) END, "
        "TIMESTAMP_NTZ'2024-03-10 02:30:00' + make_interval(0, 0, 0, 0, id) FROM range({lo}, {hi})")


def _rows(df: Any) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(tuple(v) if isinstance(v, list) else v for v in r) for r in df.collect())


def _read(spark: Any, table: str, start: int, end: int, kept: frozenset[str] | None = None) -> tuple[Counter, int]:
    interval = resolve_interval(spark, table, at=Bound.version(start), end=Bound.version(end))
    with SparkWork(spark, "read") as work:
        df = redundant_delta(spark, interval, read_once=True, kept=kept)
    assert work.cost.jobs is not None
    try:
        return _rows(df), work.cost.jobs
    finally:
        shared_reads.forget_all(spark)


def _both_ways(spark: Any, table: str, start: int, end: int, kept: frozenset[str] | None = None
               ) -> tuple[Counter, Counter, int, int]:
    found = {}
    for on in ("true", "false"):
        spark.conf.set(picked_rows.PICK_ON_DRIVER, on)
        try:
            found[on] = _read(spark, table, start, end, kept)
        finally:
            spark.conf.unset(picked_rows.PICK_ON_DRIVER)
    return found["true"][0], found["false"][0], found["true"][1], found["false"][1]


@pytest.fixture
def spied(monkeypatch: Any) -> list[int]:
    """Counts the rows each read on the driver returned."""
    calls: list[int] = []
    read = picked_rows.read

    def counted(*args: Any, **kwargs: Any) -> Any:
        table = read(*args, **kwargs)
        calls.append(-1 if table is None else table.num_rows)
        return table

    monkeypatch.setattr(picked_rows, "read", counted)
    return calls


@pytest.mark.parametrize("partitioned", [False, True], ids=["unpartitioned", "partitioned"])
def test_rows_picked_on_the_driver_are_those_spark_picks(spark: Any, make_table: Any, run: Any, spied: list[int],
                                                         partitioned: bool) -> None:
    table = make_table(COLUMNS, VECTORS, partitioned_by="o" if partitioned else None)
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        spark.conf.set("spark.sql.parquet.outputTimestampType", "INT96")
        run(table, ROWS.replace("{lo}", "0").replace("{hi}", "60"))
        spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        run(table, ROWS.replace("{lo}", "60").replace("{hi}", "120"),
            "UPDATE {t} SET v = 'updated' WHERE k = 3",  # new files whose rows carry materialized ids
            "ALTER TABLE {t} ADD COLUMNS (late STRING)",  # the files above lack it: NULL
            "UPDATE {t} SET late = 'late' WHERE k = 4",
            "DELETE FROM {t} WHERE t % 3 = 0 AND k <> 1",  # every file: rows picked by vector
            "DELETE FROM {t} WHERE k = 1 OR v IS NULL")
        latest = open_log(spark, table).latest_version
        picked_everywhere: list[tuple[int, int]] = []
        for start, end in ((latest - 1, latest), (latest - 2, latest - 1), (latest - 2, latest), (1, latest)):
            spied.clear()
            on, off, jobs_on, _ = _both_ways(spark, table, start, end)
            assert on == off and on, (start, end)
            assert spied and -1 not in spied, (start, end)  # read on the driver
            plan = plan_changes(spark, resolve_interval(spark, table, at=Bound.version(start), end=Bound.version(end)))
            if plan.added is None and plan.removed is not None and all(  # rows picked out of every file: no job
                    r.selective for r in plan.removed.row_filters) and len(plan.removed.row_filters) == len(
                    plan.removed.files):
                picked_everywhere.append((start, end))
                assert jobs_on == 0, (start, end, jobs_on)
        assert (latest - 2, latest - 1) in picked_everywhere or partitioned  # the first DELETE, at least unpartitioned
        spied.clear()
        narrow_on, narrow_off, _, _ = _both_ways(spark, table, latest - 1, latest, frozenset({"k", "ts", "m"}))
        assert narrow_on == narrow_off and spied
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
        spark.conf.unset("spark.sql.parquet.outputTimestampType")


def _deleted(spark: Any, make_table: Any, run: Any, columns: str = "k INT, v STRING",
             values: str = "CAST(id AS STRING)", rows: int = 40) -> tuple[str, int]:
    """A table of two files whose last commit, a DELETE of every row with k = 2, marks rows in both."""
    table = make_table(columns, VECTORS)
    run(table, f"INSERT INTO {{t}} SELECT /*+ REPARTITION(2) */ CAST(id % 5 AS INT), {values} FROM range({rows})",
        "DELETE FROM {t} WHERE k = 2")
    return table, open_log(spark, table).latest_version


def test_nested_columns_are_picked_by_spark(spark: Any, make_table: Any, run: Any, spied: list[int]) -> None:
    table, latest = _deleted(spark, make_table, run, "k INT, a ARRAY<INT>", "array(id, NULL)")
    on, off, _, _ = _both_ways(spark, table, latest - 1, latest)
    assert on == off and len(on) == 8 and not spied


def test_more_rows_than_the_driver_picks_are_picked_by_spark(spark: Any, make_table: Any, run: Any,
                                                              spied: list[int]) -> None:
    table, latest = _deleted(spark, make_table, run)
    spark.conf.set(picked_rows.PICKS_MAX, "7")
    try:
        on, off, _, _ = _both_ways(spark, table, latest - 1, latest)
    finally:
        spark.conf.unset(picked_rows.PICKS_MAX)
    assert on == off and len(on) == 8 and not spied


def test_the_bytes_read_on_the_driver_count_as_the_work_s_input(spark: Any, make_table: Any, run: Any) -> None:
    """A read with no Spark job still reports the bytes and rows of the column chunks it decoded (a refresh's
    history shows its input however it was read)."""
    table, latest = _deleted(spark, make_table, run, "k INT, v STRING, unread STRING",
                             "CAST(id AS STRING), repeat('x', 1000)", rows=400)
    interval = resolve_interval(spark, table, at=Bound.version(latest - 1), end=Bound.version(latest))
    costs = []
    for kept in (frozenset({"k", "v"}), None):
        picked_rows.forget_decoded()  # each read decodes its columns from the files
        with SparkWork(spark, "read") as work:
            rows = _rows(redundant_delta(spark, interval, read_once=True, kept=kept))
        shared_reads.forget_all(spark)
        assert len(rows) == 80 and work.cost.jobs == 0
        costs.append(work.cost)
    narrow, every = costs
    assert narrow.records_read == every.records_read == 400
    assert 0 < narrow.bytes_read < every.bytes_read  # the unread column is not decoded for the narrow read


def test_more_rows_than_the_driver_holds_are_picked_there_and_checkpointed(spark: Any, make_table: Any, run: Any,
                                                                           spied: list[int]) -> None:
    table, latest = _deleted(spark, make_table, run)
    interval = resolve_interval(spark, table, at=Bound.version(latest - 1), end=Bound.version(latest))
    spark.conf.set(shared_reads.DRIVER_ROWS_MAX, "7")
    try:
        df = redundant_delta(spark, interval, read_once=True)
        assert spied == [8] and not shared_reads.is_on_driver(df)
        assert len(_rows(df)) == 8
    finally:
        spark.conf.unset(shared_reads.DRIVER_ROWS_MAX)
        shared_reads.forget_all(spark)


def test_a_vector_s_earlier_rows_do_not_count_against_the_driver_s_bound(spark: Any, make_table: Any, run: Any,
                                                                          spied: list[int]) -> None:
    """A file's vector holds every row ever deleted from it; what one interval picks is what its vector added. Two
    DELETEs of the same files: the second's vectors mark 16 rows, of which it picks 8, so it is held by the
    driver under a bound of 10 (and is not when the bound is below what it picks)."""
    table, _ = _deleted(spark, make_table, run)
    run(table, "DELETE FROM {t} WHERE k = 3")
    latest = open_log(spark, table).latest_version
    interval = resolve_interval(spark, table, at=Bound.version(latest - 1), end=Bound.version(latest))
    for bound, held in (("10", True), ("7", False)):
        spark.conf.set(shared_reads.DRIVER_ROWS_MAX, bound)
        try:
            df = redundant_delta(spark, interval, read_once=True)
            assert shared_reads.is_on_driver(df) == held
            assert sorted(int(r["k"]) for r in df.collect()) == [3] * 8
        finally:
            spark.conf.unset(shared_reads.DRIVER_ROWS_MAX)
            shared_reads.forget_all(spark)
    assert spied == [8, 8]


def test_strings_that_are_not_utf8_come_back_as_spark_reads_them(spark: Any, make_table: Any, run: Any,
                                                                  spied: list[int]) -> None:
    """Spark stores a string's bytes as they are (a CAST of binary need not be UTF-8); where pyarrow refuses to
    decode them the read falls back to Spark's scan, and either way the rows are Spark's."""
    table, latest = _deleted(spark, make_table, run, values="CAST(unhex(CASE WHEN id % 3 = 0 THEN 'FF61' ELSE "
                                                            "'C3A9' END) AS STRING)")
    on, off, _, _ = _both_ways(spark, table, latest - 1, latest)
    assert on == off and len(on) == 8 and spied


def test_a_vector_is_decoded_once_per_process(spark: Any, make_table: Any, run: Any, monkeypatch: Any) -> None:
    """A vector never changes once written: decoded once (and kept immutable), however many reads need it."""
    from pyroaring import FrozenBitMap64

    from dtables.changes import deletion_vectors as dv
    from dtables.changes import scan

    table, latest = _deleted(spark, make_table, run)
    log = open_log(spark, table)
    vectors = [f.deletion_vector for f in log.files_at(latest) or () if f.deletion_vector is not None]
    assert len(vectors) == 2
    calls: list[str] = []
    read = dv.read_rows
    monkeypatch.setattr(dv, "read_rows", lambda d, *a, **k: calls.append(d.unique_id) or read(d, *a, **k))
    location = resolve_interval(spark, table, at=Bound.version(latest - 1), end=Bound.version(latest)).location
    scan._decoded.clear()
    first = [scan._vector_rows(spark, location)(v) for v in vectors]
    again = [scan._vector_rows(spark, location)(v) for v in vectors]
    assert first == again and all(isinstance(r, FrozenBitMap64) for r in first) and sum(map(len, first)) == 8
    assert sorted(calls) == sorted(v.unique_id for v in vectors)
    # A benchmark's pass forgets what it decoded (``forget_vectors_since``): the next pass decodes it again
    scan._decoded.clear()
    scan._vector_rows(spark, location)(vectors[0])
    mark, counted = scan.vectors_decoded(), scan._decoded_rows
    scan._vector_rows(spark, location)(vectors[1])
    scan.forget_vectors_since(mark)
    assert scan.vectors_decoded() == mark and scan._decoded_rows == counted
    calls.clear()
    assert [scan._vector_rows(spark, location)(v) for v in vectors] == first
    assert calls == [vectors[1].unique_id]


@pytest.mark.parametrize("batch_rows", [13, 1 << 16], ids=["small-batches", "default-batches"])
def test_rows_are_picked_across_row_groups_and_decoding_batches(tmp_path: Any, monkeypatch: Any,
                                                                batch_rows: int) -> None:
    """A file of several row groups, decoded a batch at a time: the picked rows (first and last of a group or a
    batch, none in some groups) come back with their values and indexes, in order; the whole file read too."""
    import random

    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyroaring import BitMap64
    from pyspark.sql import types as T

    n = 1000
    path = str(tmp_path / "part-0.parquet")
    values = [None if i % 5 == 0 else f"v{i}" for i in range(n)]
    pq.write_table(pa.table({"k": pa.array(range(n), pa.int64()), "v": pa.array(values, pa.string())}), path,
                   row_group_size=97)
    monkeypatch.setattr(picked_rows, "_BATCH_ROWS", batch_rows)
    fields = [T.StructField("k", T.LongType()), T.StructField("v", T.StringType())]
    wanted = sorted({0, 12, 13, 96, 97, 193, 194, n - 1, *random.Random(7).sample(range(n), 60)} - set(range(291, 485)))
    for rows in (BitMap64(wanted), None):
        table = picked_rows.read([picked_rows.PickedFile(path, "part-0", rows)], fields, None, "__file", "__row")
        expected = wanted if rows is not None else list(range(n))
        assert table.column("__row").to_pylist() == expected
        assert table.column("k").to_pylist() == expected
        assert table.column("v").to_pylist() == [values[i] for i in expected]
        assert set(table.column("__file").to_pylist()) == {"part-0"}


def test_a_second_pick_from_the_same_files_decodes_no_column_again(spark: Any, make_table: Any, run: Any,
                                                                    monkeypatch: Any) -> None:
    """Scattered deletes pick rows out of the same files refresh after refresh: their decoded columns are kept
    (``picked_rows._decoded``), within ``DECODED_BYTES_MAX``, and the rows taken from them are Spark's."""
    table, first = _deleted(spark, make_table, run, rows=400)
    run(table, "DELETE FROM {t} WHERE k = 3")
    picked_rows.forget_decoded()
    costs = []
    for start, end in ((first - 1, first), (first, first + 1)):
        interval = resolve_interval(spark, table, at=Bound.version(start), end=Bound.version(end))
        with SparkWork(spark, "read") as work:
            rows = _rows(redundant_delta(spark, interval, read_once=True))
        shared_reads.forget_all(spark)
        assert len(rows) == 80 and work.cost.jobs == 0
        assert rows == _both_ways(spark, table, start, end)[1]  # Spark's read of the same interval
        costs.append(work.cost)
    assert costs[0].bytes_read > 0 and costs[0].records_read == 400
    assert costs[1].bytes_read == 0 and costs[1].records_read == 0  # every column taken from the first read's
    kept = picked_rows._decoded_bytes
    assert kept > 0
    monkeypatch.setattr(picked_rows, "DECODED_BYTES_MAX", kept // 2)
    picked_rows.forget_decoded()
    interval = resolve_interval(spark, table, at=Bound.version(first), end=Bound.version(first + 1))
    assert len(_rows(redundant_delta(spark, interval, read_once=True))) == 80
    shared_reads.forget_all(spark)
    assert 0 < picked_rows._decoded_bytes <= kept // 2  # the bound holds: some columns are not kept
