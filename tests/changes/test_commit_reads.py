"""Change reads commit by commit (dtables/changes/commits.py): update postimages from change data across
multi-commit intervals equal the oracle and the read of the data files, a copy-on-write UPDATE reads no data file,
and a commit without change data that rewrote files makes the read fall back, which the plan and EXPLAIN say."""

from __future__ import annotations

from typing import Any

import pytest

from dtables.changes import Bound, plan_changes, read_changes, resolve_interval
from dtables.changes import picked_rows, scan
from dtables.changes.interval import open_log
from dtables.changes.reader import CHANGE_DATA_FILES, redundant_delta
from test_change_properties import DELETION_VECTORS, check_history

COPY_ON_WRITE = (
    "delta.enableChangeDataFeed = true, delta.enableRowTracking = true, delta.enableDeletionVectors = false"
)

DEFAULT_HISTORIES = ("update back to the old values", "NULLs and duplicates through MERGE")
HISTORIES = {
    "update twice": ["UPDATE {t} SET v = 'x' WHERE k = 1", "UPDATE {t} SET v = 'y' WHERE k = 1"],
    "update then delete": ["UPDATE {t} SET v = 'x' WHERE k = 1", "DELETE FROM {t} WHERE k = 1"],
    "append then update": ["INSERT INTO {t} VALUES (3, 'c'), (3, 'c'), (NULL, NULL)",
                           "UPDATE {t} SET v = 'd' WHERE k = 3 OR k IS NULL", "UPDATE {t} SET v = 'e' WHERE k = 2"],
    "update back to the old values": ["UPDATE {t} SET v = 'x' WHERE k = 1", "UPDATE {t} SET v = 'a' WHERE k = 1",
                                      "UPDATE {t} SET v = NULL WHERE k = 2", "UPDATE {t} SET v = NULL WHERE k = 2"],
    "NULLs and duplicates through MERGE": [
        "MERGE INTO {t} AS t USING (SELECT * FROM VALUES (1, NULL), (2, 'b'), (7, 'n') AS s(k, v)) AS s "
        "ON t.k = s.k WHEN MATCHED AND s.v IS NULL THEN DELETE WHEN MATCHED THEN UPDATE SET v = s.v "
        "WHEN NOT MATCHED THEN INSERT (k, v) VALUES (s.k, s.v)",
        "UPDATE {t} SET v = NULL WHERE k = 7", "DELETE FROM {t} WHERE v IS NULL"],
}


def _changes(spark: Any, interval: Any, flag: str) -> list[tuple]:
    spark.conf.set(CHANGE_DATA_FILES, flag)
    try:
        df = read_changes(spark, interval).df
        return sorted((tuple(r) for r in df.select(
            "k", "v", "METADATA$ACTION", "METADATA$ISUPDATE", "METADATA$ROW_ID",
            # a DELETE's commit from the data files is only the first commit that could have deleted it
            "METADATA$COMMIT_VERSION").collect()), key=repr)
    finally:
        spark.conf.unset(CHANGE_DATA_FILES)


# Vectors are the default layout; copy-on-write and partitioned tables run in the slow suite.
@pytest.mark.parametrize("name, layout", [
    # the default suite keeps the two histories with the most to get wrong (NULLs, duplicates, values restored)
    *[(name, "vectors") if name in DEFAULT_HISTORIES else pytest.param(name, "vectors", marks=pytest.mark.slow)
      for name in sorted(HISTORIES)],
    *[pytest.param(name, "copy-on-write", marks=pytest.mark.slow) for name in sorted(HISTORIES)],
    pytest.param("append then update", "vectors, partitioned", marks=pytest.mark.slow),
    pytest.param("NULLs and duplicates through MERGE", "copy-on-write, partitioned", marks=pytest.mark.slow),
])
def test_postimages_from_change_data_over_several_commits(spark: Any, make_table: Any, run: Any, name: str,
                                                          layout: str) -> None:
    """Every interval of the history: CHANGES (both formats) and the redundant delta equal the oracle
    (``check_history``), the read is planned commit by commit, and it gives the same rows, ids and ISUPDATE as
    the read of the data files."""
    properties = COPY_ON_WRITE if layout == "copy-on-write" else DELETION_VECTORS
    made: list[str] = []

    def recording_make_table(*args: Any, **kwargs: Any) -> str:
        made.append(make_table(*args, **kwargs))
        return made[-1]

    check_history(spark, recording_make_table, run, HISTORIES[name], [(0, 9), (1, 9), (1, 2), (2, 9)], properties,
                  partitioned_by="k" if layout.endswith("partitioned") else None)
    table = made[-1]
    latest = open_log(spark, table).latest_version
    for start in range(1, latest):
        interval = resolve_interval(spark, table, at=Bound.version(start), end=Bound.version(latest))
        plan = plan_changes(spark, interval)
        if plan.removed is not None and plan.added is not None:
            assert plan.commit_reads is not None, plan.to_text()
        by_commit, from_files = _changes(spark, interval, "true"), _changes(spark, interval, "false")
        assert [r[:5] for r in by_commit] == [r[:5] for r in from_files]
        assert [r for r in by_commit if r[2] == "INSERT"] == [r for r in from_files if r[2] == "INSERT"]


def _interval(spark: Any, table: str, start: int, end: int) -> Any:
    return resolve_interval(spark, table, at=Bound.version(start), end=Bound.version(end))


@pytest.mark.parametrize("properties, picked_as_literals_max, on_driver", [
    (COPY_ON_WRITE, scan.PICKED_AS_LITERALS_MAX, False), (DELETION_VECTORS, scan.PICKED_AS_LITERALS_MAX, False),
    (DELETION_VECTORS, 0, False),  # the rows a vector marked picked by a broadcast join, past the literals' limit
    (DELETION_VECTORS, scan.PICKED_AS_LITERALS_MAX, True),  # picked by pyarrow on the driver (the default)
])
def test_an_update_reads_change_data_only(spark: Any, make_table: Any, run: Any, monkeypatch: Any, properties: str,
                                          picked_as_literals_max: int, on_driver: bool) -> None:
    """A scattered UPDATE rewrites (or marks rows in) every file; its change read reads its change data and no
    data file, and so does a copy-on-write DELETE after it (one with vectors reads the rows it marked, on the
    driver, or in Spark as a filter of literals or by joins); an append inside the interval is read from its own
    files."""
    monkeypatch.setattr(scan, "PICKED_AS_LITERALS_MAX", picked_as_literals_max)
    spark.conf.set(picked_rows.PICK_ON_DRIVER, str(on_driver).lower())
    on_the_driver: list[int] = []
    read_picked = picked_rows.read
    monkeypatch.setattr(picked_rows, "read", lambda *a, **k: on_the_driver.append(1) or read_picked(*a, **k))
    try:
        _check_update_reads(spark, make_table, run, monkeypatch, properties, picked_as_literals_max)
    finally:
        spark.conf.unset(picked_rows.PICK_ON_DRIVER)
    assert bool(on_the_driver) == (properties == DELETION_VECTORS and on_driver)


def _check_update_reads(spark: Any, make_table: Any, run: Any, monkeypatch: Any, properties: str,
                        picked_as_literals_max: int) -> None:
    as_literals: list[int] = []
    literal_filter = scan._picked_rows

    def spied(rows: list[tuple[str, int]]) -> Any:
        as_literals.append(len(rows))
        return literal_filter(rows)

    monkeypatch.setattr(scan, "_picked_rows", spied)
    table = make_table("id INT, name STRING", properties)
    run(table, "INSERT INTO {t} SELECT /*+ REPARTITION(4) */ id, CAST(id AS STRING) FROM range(40)",
        "UPDATE {t} SET name = 'x' WHERE id % 10 = 3", "DELETE FROM {t} WHERE id % 10 = 4",
        "INSERT INTO {t} VALUES (100, 'new')", "UPDATE {t} SET name = 'y' WHERE id IN (3, 100)")
    plan = plan_changes(spark, _interval(spark, table, 1, 2))  # the UPDATE
    assert plan.removed is not None and plan.added is not None and len(plan.removed.files) >= 3
    assert plan.commit_reads is not None and plan.commit_reads.scans == (), plan.to_text()
    assert plan.commit_reads.change_files and all(f.path.startswith("_change_data/")
                                                  for f, _ in plan.commit_reads.change_files)
    text = plan.to_text()
    assert "no data file these commits wrote is read" in text and "new rows" not in text and "deleted rows" not in text
    reads = plan_changes(spark, _interval(spark, table, 1, 3)).commit_reads  # and the DELETE
    assert reads is not None and reads.new_rows is None
    if properties == COPY_ON_WRITE:
        assert reads.scans == ()
    else:  # a DELETE with vectors writes no change data: the rows its vectors newly mark are read, by row index
        filters = [r for gone in reads.gone for r in gone.scan.row_filters]
        assert filters and all(r.selective for r in filters)
        assert len(filters) == sum(len(gone.scan.files) for gone in reads.gone)
    longer = plan_changes(spark, _interval(spark, table, 1, 5))
    assert longer.commit_reads is not None and longer.commit_reads.new_rows is not None
    assert len(longer.commit_reads.new_rows.files) == 1  # the append's file
    got = sorted((r["id"], r["name"], r["METADATA$ACTION"], r["METADATA$ISUPDATE"], r["METADATA$COMMIT_VERSION"])
                 for r in read_changes(spark, _interval(spark, table, 1, 5)).df.collect())
    expected = [(i, str(i), "DELETE", i % 10 == 3, 5 if i == 3 else 2 if i % 10 == 3 else 3)
                for i in range(40) if i % 10 in (3, 4)]
    expected += [(i, "y" if i == 3 else "x", "INSERT", True, 5 if i == 3 else 2) for i in range(40) if i % 10 == 3]
    assert got == sorted(expected + [(100, "y", "INSERT", False, 5)])
    on_driver = spark.conf.get(picked_rows.PICK_ON_DRIVER) == "true"
    assert bool(as_literals) == (properties == DELETION_VECTORS and picked_as_literals_max > 0 and not on_driver)


def test_a_commit_that_rewrote_files_without_change_data_falls_back(spark: Any, make_table: Any, run: Any,
                                                                    dt: Any) -> None:
    """An overwrite removes and adds files without change data: the interval's data files are read, and the
    plan, like EXPLAIN of a CHANGES query, names the commit and why; later intervals read commit by commit."""
    table = make_table("id INT, name STRING")
    run(table, "INSERT INTO {t} VALUES (1, 'a'), (2, 'b')", "UPDATE {t} SET name = 'x' WHERE id = 1",
        "INSERT OVERWRITE {t} VALUES (1, 'x'), (3, 'c')", "UPDATE {t} SET name = 'z' WHERE id = 3")
    plan = plan_changes(spark, _interval(spark, table, 1, 4))
    assert plan.commit_reads is None
    assert plan.fallback == ("version 3 (WRITE): removed and added data files without writing change data (an "
                             "overwrite, or DML while the Change Data Feed was off)",)
    assert "change data not used, the data files of both sides are read:\n    version 3 (WRITE)" in plan.to_text()
    got = sorted((r["id"], r["name"], r["METADATA$ACTION"]) for r in read_changes(
        spark, _interval(spark, table, 1, 4)).df.collect())
    assert got == [(1, "a", "DELETE"), (1, "x", "INSERT"), (2, "b", "DELETE"), (3, "z", "INSERT")]
    assert plan_changes(spark, _interval(spark, table, 3, 4)).commit_reads is not None
    dt.sql("CREATE TABLE people (id INT, name STRING)")  # a table of the session: vectors on
    for statement in ("INSERT INTO people VALUES (1, 'a'), (2, 'b')", "UPDATE people SET name = 'x' WHERE id = 1",
                      "INSERT OVERWRITE people VALUES (1, 'x'), (3, 'c')", "UPDATE people SET name = 'z' WHERE id = 3"):
        dt.sql(statement)
    text = dt.sql("EXPLAIN SELECT * FROM people CHANGES(INFORMATION => DEFAULT) AT(VERSION => 1)").first()[0]
    assert "removed and added data files without writing change data" in text, text


def _row_index_scans(df: Any) -> int:
    """How many scans of data files (by row index: the reads that pick rows by deletion vector) ``df``'s plan runs;
    change data files are not data files."""
    plan = df._jdf.queryExecution().executedPlan().toString()
    return sum(1 for line in plan.splitlines()
               if "FileScan parquet" in line and "_tmp_metadata_row_index" in line and "/_change_data/" not in line)


def test_rows_a_vector_deleted_from_files_older_than_the_start_are_read_once(spark: Any, make_table: Any,
                                                                          run: Any) -> None:
    """In an interval of several commits, rows a DELETE's vectors picked out of a file added by the start were born
    by the start: their versions are not compared with it (``commit_sides._by_birth``), so that file is scanned
    once, not a second time for the deaths born inside the interval (on 10M rows each pass cost seconds). A file
    added inside the interval still is (a row inserted, then deleted): every interval equals the oracle. Where no
    file added inside the interval lost rows, no death is compared with the births at all."""
    made: list[str] = []

    def recording_make_table(*args: Any, **kwargs: Any) -> str:
        made.append(make_table(*args, **kwargs))
        return made[-1]

    check_history(spark, recording_make_table, run,
                  ["INSERT INTO {t} VALUES (5, 'e')", "UPDATE {t} SET v = 'x' WHERE k = 2",
                   "DELETE FROM {t} WHERE k = 1 OR k = 5"], [(0, 9), (1, 9), (2, 9), (1, 3)], DELETION_VECTORS)
    table = made[-1]
    latest = open_log(spark, table).latest_version
    # From version 2 (after the INSERT): the DELETE picks rows out of files that are all older than the start
    interval = resolve_interval(spark, table, at=Bound.version(2), end=Bound.version(latest))
    assert plan_changes(spark, interval).commit_reads is not None
    assert _row_index_scans(redundant_delta(spark, interval)) == 1
    # Deaths are matched with births (an anti join) only where a file added inside the interval lost rows: from
    # version 1, the DELETE takes the row the INSERT added (checked against the oracle above with the others)
    for start, end, matched in ((2, latest, False), (1, latest - 1, False), (1, latest, True)):
        interval = resolve_interval(spark, table, at=Bound.version(start), end=Bound.version(end))
        plan = plan_changes(spark, interval)
        assert plan.commit_reads is not None and plan.commit_reads.deaths_born_by_start is not matched
        assert ("deaths are matched with births row by row" in plan.to_text()) is matched
        executed = redundant_delta(spark, interval)._jdf.queryExecution().executedPlan().toString()
        assert ("LeftAnti" in executed) is matched, executed
