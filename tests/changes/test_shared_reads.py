"""A change read that picks rows by deletion vector, or that the log bounds to a few rows, is computed once per
application and interval, then read by every later refresh of that interval (``dtables.changes.shared_reads``),
from any session; a few rows are held by the driver."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from dtables.changes import Bound, redundant_delta, resolve_interval
from dtables.changes import picked_rows, shared_reads
from dtables.spark.jobs import SparkWork

VECTORS = "delta.enableChangeDataFeed = true, delta.enableRowTracking = true, delta.enableDeletionVectors = true"


def _rows(df: Any) -> Counter[tuple[Any, ...]]:
    return Counter((r["k"], r["v"], r["__action"], r["__row_id"]) for r in df.collect())


def _read(spark: Any, table: str, start: int, end: int) -> tuple[Any, int]:
    interval = resolve_interval(spark, table, at=Bound.version(start), end=Bound.version(end))
    with SparkWork(spark, "read") as work:
        df = redundant_delta(spark, interval, read_once=True)
    assert work.cost.jobs is not None
    return df, work.cost.jobs


def _other(spark: Any) -> Any:
    """A refresh's clone: its own settings (the picked rows' switch as ``spark`` has it), the same application."""
    session = spark.newSession()
    session.conf.set(picked_rows.PICK_ON_DRIVER, spark.conf.get(picked_rows.PICK_ON_DRIVER, "true"))
    return session


@pytest.fixture
def deleted(spark: Any, make_table: Any, run: Any) -> str:
    """A table with vectors: 200 rows in one file (version 1), then scattered DELETEs (versions 2 and 3), which
    write no change data: their rows are picked out of the file by row index, here by a Spark scan (as for a
    remote table, nested columns or more rows than the driver holds; ``test_picked_rows`` reads them on the
    driver), which the first read computes and checkpoints."""
    table = make_table("k INT, v STRING", VECTORS)
    run(table, "INSERT INTO {t} SELECT CAST(id AS INT), CAST(id % 3 AS STRING) FROM range(200)",
        "DELETE FROM {t} WHERE k % 10 = 3", "DELETE FROM {t} WHERE k % 10 = 7")
    spark.conf.set(picked_rows.PICK_ON_DRIVER, "false")
    yield table
    spark.conf.unset(picked_rows.PICK_ON_DRIVER)
    shared_reads.forget_all(spark)


def test_what_was_kept_since_a_mark_is_forgotten_and_what_was_kept_before_stays(spark: Any, deleted: str):
    """``forget_since``: a benchmark's passes over one interval each start from what the process kept before it."""
    _read(spark, deleted, 1, 2)
    shared_reads.value_once(spark, ("test fact", 1), lambda: "before")
    mark = shared_reads.remembered(spark)
    _, jobs = _read(spark, deleted, 2, 3)
    assert jobs >= 1
    shared_reads.value_once(spark, ("test fact", 2), lambda: "after")
    shared_reads.forget_since(spark, mark)
    assert shared_reads.remembered(spark) == mark
    assert shared_reads.known_value(spark, ("test fact", 1)) == "before"
    assert shared_reads.known_value(spark, ("test fact", 2)) is None
    assert _read(spark, deleted, 1, 2)[1] == 0  # kept before the mark: still read without a job
    assert _read(spark, deleted, 2, 3)[1] >= 1  # kept after it: computed again


def test_a_second_read_of_the_interval_runs_no_job_even_from_another_session(spark: Any, deleted: str):
    first, jobs = _read(spark, deleted, 1, 2)
    assert jobs >= 1  # the checkpoint is computed here
    expected = _rows(first)
    assert len(expected) == 20 and {a for _, _, a, _ in expected} == {"DELETE"}
    other = _other(spark)  # a refresh's clone: its own settings and temp views, the same application
    again, jobs = _read(other, deleted, 1, 2)
    assert jobs == 0
    assert _rows(again) == expected
    # Another interval of the same table is its own read: it holds both DELETEs, computed anew.
    both, jobs = _read(other, deleted, 1, 3)
    assert jobs >= 1 and len(_rows(both)) == 40 and expected <= _rows(both)


def test_reads_are_not_kept_when_switched_off_or_too_many_rows(spark: Any, deleted: str):
    # Switched off; or a bound of 19 rows, where the read holds 20 (bounded by the vector): computed every time.
    for key, value in ((shared_reads.SHARED_READS, "false"), (shared_reads.SHARED_READS_MAX_ROWS, "19")):
        spark.conf.set(key, value)
        try:
            _, first = _read(spark, deleted, 1, 2)
            _, second = _read(spark, deleted, 1, 2)
            assert first >= 1 and second >= 1, key
        finally:
            spark.conf.unset(key)


def test_the_least_recently_used_read_is_dropped_past_the_limit(spark: Any, deleted: str, monkeypatch: Any):
    monkeypatch.setattr(shared_reads, "MAX_KEPT", 1)
    _read(spark, deleted, 1, 2)
    [kept] = [name for key, name in shared_reads._kept.items() if key[0] == "read"]
    _read(spark, deleted, 2, 3)
    assert kept not in shared_reads._kept.values()
    assert not spark.catalog.tableExists(f"global_temp.{kept}")
    _, jobs = _read(spark, deleted, 1, 2)  # computed again
    assert jobs >= 1


def test_a_snapshot_plan_is_built_once_for_every_session_reading_its_version(spark: Any, deleted: str,
                                                                            monkeypatch: Any):
    from dtables.changes import scan
    from dtables.changes.sources import IntervalSources

    decoded: list[int] = []  # vectors looked up to build a plan (decoded, or found decoded: ``scan._vector_rows``)
    real = scan._vector_rows

    def counted(*args: Any, **kwargs: Any) -> Any:
        rows_of = real(*args, **kwargs)
        return lambda descriptor: decoded.append(1) or rows_of(descriptor)

    monkeypatch.setattr(scan, "_vector_rows", counted)

    def end_rows(session: Any) -> Counter[tuple[Any, ...]]:
        interval = resolve_interval(session, deleted, at=Bound.version(1), end=Bound.version(3))
        sources = IntervalSources(session, {deleted: interval})
        return Counter(tuple(r) for r in session.table(sources.snapshot(deleted, "end").strip("`")).collect())

    first = end_rows(_other(spark))
    assert len(first) == 160 and decoded  # the vector was decoded to leave its 40 rows out
    seen = len(decoded)
    assert end_rows(_other(spark)) == first  # another refresh's session: the same rows ...
    assert len(decoded) == seen  # ... from the kept plan, no vector decoded again
    off = _other(spark)
    off.conf.set(shared_reads.SHARED_READS, "false")
    assert end_rows(off) == first and len(decoded) > seen


def test_a_change_read_plan_is_built_once_and_its_files_checked_at_every_read(spark: Any, make_table: Any,
                                                                             run: Any, monkeypatch: Any):
    import glob
    import os

    from dtables.changes import reader
    from dtables.changes.errors import HistoryNotRetained

    # copy-on-write (no vectors): an UPDATE of v only, and an INSERT
    table = make_table("k INT, v STRING, w INT")
    run(table, "INSERT INTO {t} SELECT CAST(id AS INT), 'a', CAST(id AS INT) FROM range(20)",
        "UPDATE {t} SET v = 'b' WHERE k < 3", "INSERT INTO {t} VALUES (100, 'c', 1)")
    built: list[int] = []
    real = reader._redundant_delta
    monkeypatch.setattr(reader, "_redundant_delta", lambda *a, **k: built.append(1) or real(*a, **k))

    def read(session: Any, compared: frozenset[str] | None) -> Counter[tuple[Any, ...]]:
        session.conf.set(shared_reads.DRIVER_ROWS_MAX, "-1")  # read from the files each time, not rows held
        interval = resolve_interval(session, table, at=Bound.version(1), end=Bound.version(3))
        df = redundant_delta(session, interval, read_once=True, compared=compared)
        return Counter((r["k"], r["v"], r["__action"]) for r in df.collect())

    try:
        every = read(_other(spark), None)
        assert every == Counter({(k, "a", "DELETE"): 1 for k in range(3)} | {(k, "b", "INSERT"): 1 for k in range(3)}
                                | {(100, "c", "INSERT"): 1})
        assert len(built) == 1
        # another refresh's session, reading only k and w: the update is no change to it; the plan is not rebuilt
        assert read(_other(spark), frozenset({"k", "w"})) == Counter({(100, "c", "INSERT"): 1})
        assert read(_other(spark), None) == every and len(built) == 1
        # a file of the interval gone (as VACUUM would): the next read says so, though its plan is kept
        location = spark.sql(f"DESCRIBE DETAIL {table}").first()["location"].replace("file:", "")
        for path in glob.glob(os.path.join(location, "*.parquet")):
            os.remove(path)
        with pytest.raises(HistoryNotRetained):
            read(_other(spark), None)
    finally:
        shared_reads.forget_all(spark)


def test_a_read_the_log_bounds_to_few_rows_is_held_by_the_driver(spark: Any, make_table: Any, run: Any):
    """An UPDATE's change data holds a preimage and a postimage per updated row (its operation metrics count
    them): up to ``driverRowsMax`` rows the read is computed once and held by the driver, and reading it again,
    or collecting it, runs no job. The driver makes those rows itself (``driver_delta``), so the first reader holds
    them; where Spark would have to (``deltaOnDriver`` off), one commit's change data alone is a scan that ``moved``
    reads without Spark (``change_data``): the first reader scans it in its own plan, the second holds it. Above
    the bound it is read from the change data files at each read."""
    from dtables.changes import reader as change_reader

    table = make_table("k INT, v STRING", VECTORS)
    run(table, "INSERT INTO {t} SELECT CAST(id AS INT), 'a' FROM range(50)", "UPDATE {t} SET v = 'b' WHERE k < 5")
    try:
        for limit, on_driver_made, held in (("10", "true", (True, True, True)), ("10", "false", (False, True, True)),
                                            ("9", "true", (False, False, False))):
            spark.conf.set(shared_reads.DRIVER_ROWS_MAX, limit)
            spark.conf.set(change_reader.DELTA_ON_DRIVER, on_driver_made)
            for reader, on_driver in enumerate(held):
                df, _ = _read(spark, table, 1, 2)
                assert shared_reads.is_on_driver(df) is on_driver, (limit, on_driver_made, reader)
                with SparkWork(spark, "collect") as work:
                    rows = _rows(df)
                assert (work.cost.jobs == 0) is on_driver, (limit, on_driver_made, reader)
                assert Counter(r[:3] for r in rows) == Counter(
                    {(k, "a", "DELETE"): 1 for k in range(5)} | {(k, "b", "INSERT"): 1 for k in range(5)})
                assert len({r for _, _, _, r in rows}) == 5  # a DELETE and an INSERT per updated row, by its id
            shared_reads.forget_all(spark)
    finally:
        spark.conf.unset(shared_reads.DRIVER_ROWS_MAX)
        spark.conf.unset(change_reader.DELTA_ON_DRIVER)


def test_a_held_read_is_computed_in_few_tasks(spark: Any, make_table: Any, run: Any, monkeypatch: Any):
    """A held read is bounded to a few thousand rows: its files and local relations are not spread over a task per
    core (``tiny_plans.in_few_tasks``), and the session's own settings are left as they were. Spark's read (the
    driver's own, ``driver_delta``, runs no task: ``test_driver_delta``)."""
    from contextlib import nullcontext

    from dtables.changes import reader

    monkeypatch.setattr(reader, "_delta_on_driver", lambda *args: None)

    table = make_table("k INT, v STRING", VECTORS)
    run(table, "INSERT INTO {t} SELECT CAST(id AS INT), 'a' FROM range(50)",
        "INSERT INTO {t} SELECT /*+ REPARTITION(3) */ CAST(id AS INT), 'n' FROM range(50, 80)",
        "UPDATE {t} SET v = 'b' WHERE k < 5", "DELETE FROM {t} WHERE k = 7")
    tracker = spark.sparkContext.statusTracker()
    interval = resolve_interval(spark, table, at=Bound.version(1), end=Bound.version(4))

    def tasks() -> tuple[int, Counter[tuple[Any, ...]]]:
        try:
            with SparkWork(spark, "read") as work:
                df = redundant_delta(spark, interval, read_once=True)
            assert shared_reads.is_on_driver(df)
            stages = [s for j in tracker.getJobIdsForGroup(work.group) for s in tracker.getJobInfo(j).stageIds]
            return sum(tracker.getStageInfo(s).numTasks for s in stages), _rows(df)
        finally:
            shared_reads.forget_all(spark)

    few, rows = tasks()
    monkeypatch.setattr(shared_reads, "in_few_tasks", lambda session, df=None: nullcontext())
    spread, same = tasks()
    assert rows == same and len(rows) == 41 and 0 < few < spread
    assert spark.conf.get("spark.sql.files.minPartitionNum", None) is None


@pytest.mark.parametrize("pick_on_driver", [False, True])
def test_rows_held_by_the_driver_are_those_the_files_give(spark: Any, deleted: str, make_table: Any, run: Any,
                                                          pick_on_driver: bool):
    """The same rows, ids included, whether the driver holds the read or it is read from the files: a mix of
    appends and updates with NULLs and duplicates; the driver holds reads of rows picked by vector (deletes only,
    and the mix with a DELETE) only where it picks them itself (``picked_rows``)."""
    mixed = make_table("k INT, v STRING", VECTORS)
    run(mixed, "INSERT INTO {t} SELECT CAST(id % 7 AS INT), CAST(id % 3 AS STRING) FROM range(40)",
        "INSERT INTO {t} VALUES (NULL, NULL), (1, '1'), (1, '1')", "UPDATE {t} SET v = NULL WHERE k = 2",
        "UPDATE {t} SET v = 'x' WHERE v IS NULL", "DELETE FROM {t} WHERE k = 3")
    # (1, 4]: appends and updates, held; (1, 5] adds a DELETE whose rows are picked by vector: checkpointed where
    # a Spark scan picks them
    spark.conf.set(picked_rows.PICK_ON_DRIVER, str(pick_on_driver).lower())
    for table, start, end in ((deleted, 1, 3), (mixed, 1, 4), (mixed, 1, 5)):
        found = {}
        for limit in ("10000", "-1"):
            spark.conf.set(shared_reads.DRIVER_ROWS_MAX, limit)
            try:
                df, _ = _read(spark, table, start, end)
                held = limit != "-1" and (pick_on_driver or table == mixed and end == 4)
                assert shared_reads.is_on_driver(df) is held, (table, end, limit)
                found[limit] = _rows(df)
            finally:
                spark.conf.unset(shared_reads.DRIVER_ROWS_MAX)
                shared_reads.forget_all(spark)
        assert found["10000"] == found["-1"] and found["-1"], (table, end)


def test_a_read_narrowed_to_some_columns_is_kept_apart_and_holds_the_others_null(spark: Any, deleted: str):
    """``kept`` (the columns every reader of the table may read) narrows what the checkpoint holds; the read has
    the same columns and rows, those left out NULL, and is shared by readers asking for the same columns only."""
    interval = resolve_interval(spark, deleted, at=Bound.version(1), end=Bound.version(2))

    def read(session: Any, kept: frozenset[str] | None) -> tuple[Counter[tuple[Any, ...]], int, list[str]]:
        with SparkWork(session, "read") as work:
            df = redundant_delta(session, interval, read_once=True, kept=kept)
        assert work.cost.jobs is not None
        return _rows(df), work.cost.jobs, df.columns

    every, jobs, columns = read(spark, None)
    assert jobs >= 1 and len(every) == 20
    narrow, jobs, narrow_columns = read(_other(spark), frozenset({"K", "other"}))
    assert jobs >= 1 and narrow_columns == columns  # its own read, the same columns
    assert narrow == Counter({(k, None, a, r): n for (k, _, a, r), n in every.items()})
    assert read(_other(spark), frozenset({"k"}))[:2] == (narrow, 0)  # shared with the same columns
    assert read(_other(spark), frozenset({"k", "v"}))[:2] == (every, 0)  # every column: the first read


def test_rows_held_as_arrow_are_the_rows_of_the_read(spark: Any):
    """Flat columns whose values Arrow carries unchanged come to the driver as one Arrow table and go back as the
    local relation (``held_table`` gives the table): every such type, NULLs, a NaN, old dates, no rows at all.
    A timestamp (a time zone to convert) keeps the rows in the JVM, as before."""
    import math

    query = """SELECT CAST(id AS TINYINT) AS b, CAST(id AS SMALLINT) AS s, CAST(id AS INT) AS i, id AS l,
                      CAST(id / 3 AS FLOAT) AS f, IF(id = 2, CAST('NaN' AS DOUBLE), id / 7) AS d,
                      CAST(id / 3 AS DECIMAL(38, 10)) AS wide, CAST(id AS DECIMAL(5, 0)) AS narrow,
                      IF(id = 1, NULL, concat('é☃', id)) AS text, CAST(concat('x', id) AS BINARY) AS bytes,
                      IF(id = 3, NULL, id % 2 = 0) AS flag, date_add(DATE'1582-10-01', CAST(id AS INT)) AS day,
                      DATE'0001-01-01' AS first_day FROM range(5)"""

    def rows(df: Any) -> Counter[tuple[Any, ...]]:
        return Counter(tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in r) for r in df.collect())

    for where, count in (("", 5), (" WHERE id < 0", 0)):
        df = spark.sql(query + where)
        held = shared_reads.on_driver(df)
        assert held.schema == df.schema
        assert shared_reads.held_rows(held) == count and shared_reads.held_table(held).num_rows == count
        assert held._jdf.queryExecution().optimizedPlan().nodeName() == "LocalRelation"
        expected = rows(df)
        with SparkWork(spark, "collect") as work:
            assert rows(held) == expected
        assert work.cost.jobs == 0
    stamped = shared_reads.on_driver(spark.sql("SELECT TIMESTAMP'2026-03-29 02:30:00' AS at, 1 AS x"))
    assert shared_reads.held_table(stamped) is None and shared_reads.held_rows(stamped) == 1
    assert stamped.collect()[0]["x"] == 1


def test_a_read_of_unbounded_size_is_held_from_its_second_asker_and_only_if_small(spark: Any):
    """``held_once``: the first asker computes the read in its own plan; the second holds it for every later one;
    a read found larger than asked is not held, and not tried again."""
    shared_reads.forget_all(spark)
    built: list[int] = []

    def build(n: int) -> Any:
        built.append(n)
        return spark.range(n).selectExpr("id", "CAST(id AS STRING) AS s")

    try:
        assert shared_reads.held_once(spark, ("small",), lambda: build(3), 5) is None
        assert built == []  # nothing computed for the first asker
        held = shared_reads.held_once(spark, ("small",), lambda: build(3), 5)
        assert held is not None and sorted(held.collect()) == sorted(build(3).collect())
        assert shared_reads.held_rows(held) == 3
        with SparkWork(spark, "collect") as work:
            again = shared_reads.held_once(spark, ("small",), lambda: build(3), 5)
            assert again is not None and len(again.collect()) == 3
        assert work.cost.jobs == 0
        built.clear()
        for _ in range(3):
            assert shared_reads.held_once(spark, ("large",), lambda: build(9), 5) is None
        assert built == [9]  # tried once, by the second asker, and remembered
        assert shared_reads.held_once(spark, ("off",), lambda: build(1), 0) is None
    finally:
        shared_reads.forget_all(spark)


def _leaves(df: Any) -> list[str]:
    leaves = df._jdf.queryExecution().analyzed().collectLeaves()
    return [str(leaves.apply(i).nodeName()) for i in range(leaves.size())]


def _size(df: Any) -> int:
    return int(str(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))


def test_many_held_rows_are_given_to_plans_as_an_rdd_and_collected_from_the_local_relation(spark: Any,
                                                                                          monkeypatch: Any):
    """Above ``PLANNED_ROWS_MAX`` rows, a held read is a plan leaf over an RDD of its rows (planning does not copy
    them at every rule), sized as the local relation (so joins still broadcast it), and kept: a later asker gets
    the same; ``held_local`` is the local relation, collected without a job. Fewer rows stay a local relation."""
    from dtables.spark import sessions

    shared_reads.forget_all(spark)
    monkeypatch.setattr(sessions, "PLANNED_ROWS_MAX", 10)
    query = "SELECT id, CAST(id AS STRING) AS s FROM range({})"
    try:
        for n, planned in ((10, "LocalRelation"), (11, "LogicalRDD")):
            held = shared_reads.read_once(spark, ("many", n), n, lambda n=n: spark.sql(query.format(n)), hold=True)
            again = shared_reads.read_once(spark, ("many", n), n, lambda: spark.sql("SELECT 1"), hold=True)
            expected = sorted(spark.sql(query.format(n)).collect())
            for df in (held, again):
                assert _leaves(df) == [planned] and shared_reads.held_rows(df) == n
                local = shared_reads.held_local(df)
                assert _leaves(local) == ["LocalRelation"] and _size(df) == _size(local)
                with SparkWork(spark, "collect") as work:
                    assert sorted(local.collect()) == expected
                assert work.cost.jobs == 0
                assert sorted(df.collect()) == expected
            joined = spark.sql(query.format(100_000)).join(held, "id")
            assert "BroadcastHashJoin" in joined._jdf.queryExecution().executedPlan().toString()
            assert sorted(joined.select("id", held["s"]).collect()) == expected
    finally:
        shared_reads.forget_all(spark)


@pytest.mark.parametrize("dml", ["INSERT INTO {t} VALUES (5, 50), (NULL, 60); INSERT INTO {t} VALUES (5, 70)",
                                 "DELETE FROM {t} WHERE k % 7 = 1 OR k IS NULL"])
def test_change_keys_the_driver_has_are_the_change_reads(spark: Any, make_table: Any, dml: str) -> None:
    # appended files read by pyarrow, rows a DELETE picked by vector held by the driver: the key probes' rows
    # (``keys._probed_on_driver``) are the change read's, with no Spark job
    from dtables.changes.sources import IntervalSources
    from differentiation.vocabulary import ACTION

    table = make_table("k BIGINT, v INT", properties="delta.enableChangeDataFeed = true, "
                       "delta.enableRowTracking = true, delta.enableDeletionVectors = true")
    spark.sql(f"INSERT INTO {table} SELECT CAST(id AS BIGINT), CAST(id AS INT) FROM range(100)")
    spark.sql(f"INSERT INTO {table} VALUES (NULL, 1)")
    for statement in dml.format(t=table).split("; "):
        spark.sql(statement)
    interval = resolve_interval(spark, table, at=Bound.version(2))
    sources = IntervalSources(spark, {table: interval})
    expected = Counter(tuple(r) for r in spark.sql(f"SELECT k, {ACTION} FROM {sources.changes(table)}").collect())
    with SparkWork(spark, "keys") as work:
        found = sources.change_keys(table, ["k"])
    assert found is not None and Counter(found) == expected and expected
    assert work.cost.jobs == 0
