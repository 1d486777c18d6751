"""One commit's change data read by pyarrow on the driver (``dtables.changes.change_data``): which columns an UPDATE
moved, answered without a Spark job, equals the answer Spark's read of the same interval gives, under random
UPDATEs (NULLs, duplicates, values set back to themselves, a partition column moved), with deletion vectors on and
off, partitioned or not."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dtables.changes import Bound, resolve_interval
from dtables.changes import moved as moved_module
from dtables.changes import reader
from dtables.spark.jobs import SparkWork

VECTORS = "delta.enableChangeDataFeed = true, delta.enableRowTracking = true, delta.enableDeletionVectors = {on}"

_value = st.one_of(st.none(), st.integers(0, 2))
_updates = st.lists(st.tuples(st.sampled_from(["v", "w", "p", "v, w", "p, v"]),  # the columns set
                              st.sampled_from(["v", "w", "p", "const", "null"]),  # to what
                              st.one_of(st.none(), st.integers(0, 3))),  # which rows: k = n, or all
                    min_size=1, max_size=3)


def _version(spark: Any, table: str) -> int:
    return int(spark.sql(f"DESCRIBE HISTORY {table} LIMIT 1").first()["version"])


def _moved(spark: Any, table: str, start: int, *, on_driver: bool, monkeypatch: Any) -> Any:
    interval = resolve_interval(spark, table, at=Bound.version(start))
    with monkeypatch.context() as patch:
        if not on_driver:
            patch.setattr(moved_module, "change_data_on_driver", lambda *a: None)
        with SparkWork(spark, "moved") as work:
            # a key of its own per way, so that neither answer is the other's kept one
            moved = moved_module.moved_columns(spark, interval, f"{table}-{start}-{on_driver}")
    return moved, work.cost.jobs


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.integers(0, 3), _value, _value, st.integers(0, 1)), min_size=1, max_size=8),
       updates=_updates, vectors=st.booleans(), partitioned=st.booleans())
def test_moved_columns_read_on_the_driver_agree_with_spark(spark: Any, make_table: Any, monkeypatch: Any,
                                                           rows: list, updates: list, vectors: bool,
                                                           partitioned: bool) -> None:
    table = make_table("k INT, v INT, w INT, p INT", VECTORS.format(on=str(vectors).lower()),
                       "p" if partitioned else None)
    values = ", ".join(f"({k}, {'NULL' if v is None else v}, {'NULL' if w is None else w}, {p})"
                       for k, v, w, p in rows)
    spark.sql(f"INSERT INTO {table} VALUES {values}")
    for columns, source, key in updates:
        value = {"const": "1", "null": "NULL"}.get(source, source)
        assignments = ", ".join(f"{c} = {value if c != 'p' else f'coalesce({value}, 0) % 2'}"
                                for c in columns.split(", "))
        where = f" WHERE k = {key}" if key is not None else ""
        version = _version(spark, table)
        spark.sql(f"UPDATE {table} SET {assignments}{where}")
        if _version(spark, table) == version:  # no row matched: no commit
            continue
        plan = reader.change_data_on_driver(spark, resolve_interval(spark, table, at=Bound.version(version)))
        driver, jobs = _moved(spark, table, version, on_driver=True, monkeypatch=monkeypatch)
        in_spark, _ = _moved(spark, table, version, on_driver=False, monkeypatch=monkeypatch)
        assert (driver.rows, driver.columns, driver.always) == (in_spark.rows, in_spark.columns, in_spark.always)
        if plan is not None:  # every updated row's commit: read on the driver, no job
            assert jobs == 0


def test_an_update_is_read_on_the_driver_and_a_change_of_several_commits_is_not(spark: Any, make_table: Any) -> None:
    """Only one commit's change data alone is read on the driver: an interval that also appended rows, or of
    several commits, is Spark's to read."""
    table = make_table("k INT, v INT", VECTORS.format(on="true"))
    spark.sql(f"INSERT INTO {table} SELECT CAST(id AS INT), 0 FROM range(20)")
    spark.sql(f"UPDATE {table} SET v = 1 WHERE k < 5")
    spark.sql(f"UPDATE {table} SET v = 2 WHERE k < 5")
    one = reader.change_data_on_driver(spark, resolve_interval(spark, table, at=Bound.version(1),
                                                                 end=Bound.version(2)))
    assert one is not None
    several = resolve_interval(spark, table, at=Bound.version(1), end=Bound.version(3))
    assert reader.change_data_on_driver(spark, several) is None
    with_append = resolve_interval(spark, table, at=Bound.version(0), end=Bound.version(2))
    assert reader.change_data_on_driver(spark, with_append) is None


@pytest.mark.parametrize("pick", ["true", "false"])
def test_the_driver_read_follows_the_picked_rows_switch(spark: Any, make_table: Any, pick: str) -> None:
    """``spark.dtables.changes.pickOnDriver = false`` leaves change data to Spark too."""
    from dtables.changes import picked_rows

    table = make_table("k INT, v INT", VECTORS.format(on="true"))
    spark.sql(f"INSERT INTO {table} SELECT CAST(id AS INT), 0 FROM range(20)")
    spark.sql(f"UPDATE {table} SET v = 1 WHERE k < 5")
    spark.conf.set(picked_rows.PICK_ON_DRIVER, pick)
    try:
        plan = reader.change_data_on_driver(spark, resolve_interval(spark, table, at=Bound.version(1)))
        assert (plan is not None) is (pick == "true")
    finally:
        spark.conf.unset(picked_rows.PICK_ON_DRIVER)


def test_the_change_read_after_moved_reads_no_file_again(spark: Any, make_table: Any, monkeypatch: Any) -> None:
    """``moved`` reads one commit's change data whole; the refresh's change read made on the driver after it
    (``driver_delta``) takes those rows (``change_data.files_table``) instead of reading the files again, and holds
    what Spark's read of the interval gives. A read of some columns only is not kept for others."""
    from collections import Counter

    from differentiation.vocabulary import ChangeFormat
    from dtables.changes import change_data, picked_rows
    from dtables.changes.shapes import plan_changes

    table = make_table("k INT, v INT, s STRING", VECTORS.format(on="true"))
    spark.sql(f"INSERT INTO {table} SELECT CAST(id AS INT), CAST(id % 7 AS INT), 'a' FROM range(40)")
    spark.sql(f"UPDATE {table} SET v = v + 1, s = NULL WHERE k % 4 = 1")
    interval = resolve_interval(spark, table, at=Bound.version(1))
    plan = plan_changes(spark, interval, ChangeFormat.DEFAULT)
    reads: list[Any] = []
    original = picked_rows.read
    monkeypatch.setattr(picked_rows, "read", lambda *a: reads.append(a[2]) or original(*a))

    def rows(df: Any) -> Counter[tuple[Any, ...]]:
        return Counter(tuple(r) for r in df.collect())

    narrowed = reader._delta_on_driver(spark, plan, frozenset({"v"}))
    assert len(reads) == 1 and reads[0] is not None  # some columns
    assert rows(narrowed) == rows(reader._narrowed(reader._redundant_delta(spark, plan, only=frozenset({"v"})),
                                                   frozenset({"v"})))
    moved = moved_module.moved_columns(spark, interval, f"{table}-files-table")
    assert moved.columns == frozenset({"v", "s"}) and reads[1:] == [None]  # read whole, and kept
    for only in (None, frozenset({"s"})):
        held = reader._delta_on_driver(spark, plan, only)
        in_spark = reader._redundant_delta(spark, plan, only=only)
        if only is not None:
            in_spark = reader._narrowed(in_spark, only)
        assert rows(held) == rows(in_spark)
    assert len(reads) == 2, reads  # no file read after ``moved``'s
    assert change_data.files_table(plan) is change_data.files_table(plan, frozenset({"k"}))
