"""Paper listings 1, 2, 4 and 5 (section 2.1) as tests: the people table, its mutations, and its changes.

Row ids are opaque, so they are checked for their pattern: equal where the paper's are equal (within and across
listings), different where the paper's differ.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from changes_helpers import assert_same_rows
from dtables.changes import Bound, plan_changes, read_changes, resolve_interval, snapshot
from dtables.changes.reader import execute_plan
from conftest import TRACKED

MUTATIONS = [  # Listing 2, one commit each (versions 2..5; version 1 is Listing 1's insert)
    "INSERT INTO {t} VALUES (3, 'Walter'), (4, 'Maud'), (5, 'Uli')",
    "UPDATE {t} SET name = 'Jeffrey' WHERE id = 1",
    "UPDATE {t} SET name = 'Maude' WHERE id = 4",
    "DELETE FROM {t} WHERE id IN (2, 5)",
]


@pytest.fixture(scope="module")
def people(spark: Any, make_table: Any, run: Any) -> str:
    table = make_table("id INT, name STRING")
    run(table, "INSERT INTO {t} VALUES (1, 'Jeff'), (2, 'Donny')", *MUTATIONS)
    return table


def _rows(df: Any) -> list[tuple]:
    return [tuple(r) for r in df.collect()]


def _ids_by_name(rows: list[tuple], name_index: int = 1, id_index: int = -1) -> dict[str, str]:
    return {r[name_index]: r[id_index] for r in rows}


def test_listings_1_and_2_table_states(spark: Any, people: str) -> None:
    assert_same_rows(snapshot(spark, people, 1).select("id", "name").collect(), [(1, "Jeff"), (2, "Donny")])
    assert_same_rows(
        snapshot(spark, people, 5).select("id", "name").collect(), [(1, "Jeffrey"), (3, "Walter"), (4, "Maude")]
    )


def test_listing_4_append_only(spark: Any, people: str) -> None:
    read = read_changes(spark, resolve_interval(spark, people, at=Bound.version(1)), "APPEND_ONLY")
    rows = _rows(read.df.select("id", "name", "METADATA$ACTION", "METADATA$ISUPDATE", "METADATA$ROW_ID"))
    assert_same_rows(
        [r[:4] for r in rows],
        [(3, "Walter", "INSERT", False), (4, "Maud", "INSERT", False), (5, "Uli", "INSERT", False)],
    )
    assert len({r[4] for r in rows}) == 3
    assert read.shape == "ADDED_ONLY"


def test_listing_5_minimum_delta(spark: Any, people: str) -> None:
    read = read_changes(spark, resolve_interval(spark, people, at=Bound.version(1)), "DEFAULT")
    rows = _rows(read.df.select("id", "name", "METADATA$ACTION", "METADATA$ISUPDATE", "METADATA$ROW_ID"))
    assert_same_rows(
        [r[:4] for r in rows],
        [
            (3, "Walter", "INSERT", False),
            (1, "Jeff", "DELETE", True),
            (1, "Jeffrey", "INSERT", True),
            (4, "Maude", "INSERT", False),
            (2, "Donny", "DELETE", False),
        ],
    )
    ids = _ids_by_name(rows)
    assert ids["Jeff"] == ids["Jeffrey"]
    assert len({ids["Walter"], ids["Jeff"], ids["Maude"], ids["Donny"]}) == 4
    assert read.shape == "MINIMIZE"


def test_row_ids_agree_across_listings_and_snapshots(spark: Any, people: str) -> None:
    interval = resolve_interval(spark, people, at=Bound.version(1))
    append_ids = _ids_by_name(_rows(read_changes(spark, interval, "APPEND_ONLY").df.select("id", "name", "METADATA$ROW_ID")))
    delta_ids = _ids_by_name(_rows(read_changes(spark, interval).df.select("id", "name", "METADATA$ROW_ID")))
    # Listing 4's Maud (e4d0387c) is Listing 5's Maude; Walter keeps 5ca38031 in both.
    assert append_ids["Maud"] == delta_ids["Maude"]
    assert append_ids["Walter"] == delta_ids["Walter"]
    assert append_ids["Uli"] not in delta_ids.values()
    start_ids = _ids_by_name(_rows(snapshot(spark, people, 1)))
    end_ids = _ids_by_name(_rows(snapshot(spark, people, 5)))
    assert start_ids["Jeff"] == end_ids["Jeffrey"] == delta_ids["Jeff"]
    assert start_ids["Donny"] == delta_ids["Donny"]


def test_commit_metadata_names_the_commit_that_made_each_row_state(spark: Any, people: str) -> None:
    read = read_changes(spark, resolve_interval(spark, people, at=Bound.version(1)))
    versions = {
        (r["name"], r["METADATA$ACTION"]): r["METADATA$COMMIT_VERSION"]
        for r in read.df.select("name", "METADATA$ACTION", "METADATA$COMMIT_VERSION").collect()
    }
    # Walter inserted by v2, Jeff->Jeffrey by v3 (both halves), Maude's state by v4, Donny deleted by v5.
    assert versions == {
        ("Walter", "INSERT"): 2,
        ("Jeff", "DELETE"): 3,
        ("Jeffrey", "INSERT"): 3,
        ("Maude", "INSERT"): 4,
        ("Donny", "DELETE"): 5,
    }
    history = {r["version"]: r["timestamp"] for r in spark.sql(f"DESCRIBE HISTORY {people}").collect()}
    for r in read.df.select("METADATA$COMMIT_VERSION", "METADATA$COMMIT_TIMESTAMP").collect():
        assert r[1] == history[r[0]]


def test_at_timestamp_of_listing_1_reads_listing_5(spark: Any, people: str) -> None:
    """``AT(TS => 12:00)``: the latest version committed at or before the time of Listing 1's state."""
    history = {r["version"]: r["timestamp"] for r in spark.sql(f"DESCRIBE HISTORY {people}").collect()}
    interval = resolve_interval(spark, people, at=Bound.timestamp(history[1]))
    assert (interval.start_version, interval.end_version) == (1, 5)
    before = resolve_interval(spark, people, before=Bound.timestamp(history[2]), end=Bound.timestamp(history[5]))
    assert (before.start_version, before.end_version) == (1, 5)
    assert resolve_interval(spark, people, before=Bound.version(2)) == interval


@pytest.mark.slow
def test_delta_scan_fallback_gives_the_same_changes(spark: Any, people: str) -> None:
    """The fallback (Delta time-travel scans, used with deletion vectors or column mapping) must equal the
    direct parquet path row for row, ids included."""
    interval = resolve_interval(spark, people, at=Bound.version(1))
    for information in ("DEFAULT", "APPEND_ONLY"):
        plan = plan_changes(spark, interval, information)
        assert all(s.direct for s in (plan.removed, plan.added, *plan.inserted) if s is not None)
        fallback = plan_changes(spark, interval, information, force_delta_scan=True)
        assert not any(s.direct for s in (fallback.removed, fallback.added, *fallback.inserted) if s is not None)
        assert_same_rows(execute_plan(spark, fallback).collect(), execute_plan(spark, plan).collect())


def test_deletion_vector_tables_give_the_same_changes(spark: Any, make_table: Any, run: Any) -> None:
    table = make_table(
        "id INT, name STRING",
        "delta.enableChangeDataFeed = true, delta.enableRowTracking = true, delta.enableDeletionVectors = true",
    )
    # Each insert in one file, so the UPDATEs and the DELETE mark rows in place instead of dropping whole files.
    one_file = [m.replace("VALUES", "SELECT /*+ COALESCE(1) */ * FROM VALUES") for m in MUTATIONS]
    run(table, "INSERT INTO {t} SELECT /*+ COALESCE(1) */ * FROM VALUES (1, 'Jeff'), (2, 'Donny')", *one_file)
    read = read_changes(spark, resolve_interval(spark, table, at=Bound.version(1)))
    # the vectors are applied by row index: parquet read directly, files whose vectors grew read for those rows
    assert all(s.direct for s in (read.plan.removed, read.plan.added) if s is not None), read.plan.to_text()
    assert "deletion vectors" in read.plan.to_text(), read.plan.to_text()
    assert_same_rows(
        read.df.select("id", "name", "METADATA$ACTION", "METADATA$ISUPDATE").collect(),
        [
            (3, "Walter", "INSERT", False),
            (1, "Jeff", "DELETE", True),
            (1, "Jeffrey", "INSERT", True),
            (4, "Maude", "INSERT", False),
            (2, "Donny", "DELETE", False),
        ],
    )
    append = read_changes(spark, resolve_interval(spark, table, at=Bound.version(1)), "APPEND_ONLY")
    assert_same_rows(append.df.select("id", "name").collect(), [(3, "Walter"), (4, "Maud"), (5, "Uli")])


def test_catalog_table_names_work_like_paths(spark: Any, tmp_path: Any) -> None:
    spark.sql("DROP TABLE IF EXISTS changes_people")
    spark.sql(
        f"CREATE TABLE changes_people (id INT, name STRING) USING delta LOCATION '{tmp_path / 'people'}' "
        "TBLPROPERTIES (delta.enableRowTracking = true, delta.enableChangeDataFeed = true)"
    )
    try:
        spark.sql("INSERT INTO changes_people VALUES (1, 'Jeff'), (2, 'Donny')")
        for statement in MUTATIONS:
            spark.sql(statement.replace("{t}", "changes_people"))
        read = read_changes(spark, resolve_interval(spark, "changes_people", at=Bound.version(1)))
        assert read.df.count() == 5
    finally:
        spark.sql("DROP TABLE IF EXISTS changes_people")


@pytest.mark.parametrize("partitioned", [pytest.param(False, marks=pytest.mark.slow), True])
def test_direct_snapshots_equal_delta_time_travel_rows_and_ids(spark: Any, make_table: Any, run: Any,
                                                                partitioned: bool) -> None:
    """Snapshots read from the files a version's checksum lists give Delta time travel's rows and row ids, at every
    version (updated rows carry materialized ids; partition values come from the log)."""
    from dtables.changes.interval import Interval, open_log
    from dtables.changes.reader import DIRECT_SNAPSHOTS

    table = make_table("id INT, name STRING, grp STRING", partitioned_by="grp" if partitioned else None)
    run(table, "INSERT INTO {t} VALUES (1, 'Jeff', 'a'), (2, 'Donny', 'b')", *(
        m.replace("VALUES (3, 'Walter'), (4, 'Maud'), (5, 'Uli')",
                  "VALUES (3, 'Walter', 'a'), (4, 'Maud', 'b'), (5, 'Uli', NULL)") for m in MUTATIONS))
    location = table[len("delta.`"):-1]
    log = open_log(spark, Interval(table, 5, 5, location))
    assert all(log.files_at(v) is not None for v in range(1, 6))  # so the direct path is the one under test
    try:
        for version in range(1, 6):
            spark.conf.set(DIRECT_SNAPSHOTS, "true")
            direct = _rows(snapshot(spark, table, version))
            spark.conf.set(DIRECT_SNAPSHOTS, "false")
            delta = _rows(snapshot(spark, table, version))
            assert sorted(direct, key=repr) == sorted(delta, key=repr), version
    finally:
        spark.conf.unset(DIRECT_SNAPSHOTS)


@pytest.mark.parametrize("change_data", ["true", "false"])
def test_redundant_delta_leaves_out_rows_copied_unchanged(spark: Any, people: str, change_data: str) -> None:
    """Copy-on-write UPDATE/DELETE rewrite whole files; the engine's delta holds only the rows that changed,
    whether the deletes come from Delta's change data files or from the removed data files."""
    from dtables.changes.reader import CHANGE_DATA_FILES, redundant_delta

    def rows(start: int, end: int) -> list[tuple]:
        interval = resolve_interval(spark, people, at=Bound.version(start), end=Bound.version(end))
        return sorted(tuple(r) for r in redundant_delta(spark, interval).select("id", "name", "__action").collect())

    spark.conf.set(CHANGE_DATA_FILES, change_data)
    try:
        assert rows(2, 3) == [(1, "Jeff", "DELETE"), (1, "Jeffrey", "INSERT")]  # Donny was copied, not changed
        assert rows(4, 5) == [(2, "Donny", "DELETE"), (5, "Uli", "DELETE")]
        assert rows(1, 5) == [(1, "Jeff", "DELETE"), (1, "Jeffrey", "INSERT"), (2, "Donny", "DELETE"),
                              (3, "Walter", "INSERT"), (4, "Maude", "INSERT")]
        assert rows(3, 5) == [(2, "Donny", "DELETE"), (4, "Maud", "DELETE"), (4, "Maude", "INSERT"),
                              (5, "Uli", "DELETE")]
    finally:
        spark.conf.unset(CHANGE_DATA_FILES)


def test_change_data_plan_reads_no_data_file_after_a_delete(spark: Any, make_table: Any, run: Any) -> None:
    """Planned from the log: a DELETE's or UPDATE's changes come from its change data files, so no data file is
    read for them, not even the files they rewrote; an append inside the interval is read from its own files."""
    from dtables.changes.reader import redundant_delta

    table = make_table("id INT, name STRING")
    one_file = "INSERT INTO {t} SELECT /*+ REPARTITION(1) */ id, CAST(id AS STRING) FROM range"
    run(table, f"{one_file}(10)", "UPDATE {t} SET name = 'x' WHERE id = 1", "DELETE FROM {t} WHERE id = 2",
        f"{one_file}(10, 12)", "DELETE FROM {t} WHERE id IN (3, 10)")

    def plan(start: int, end: int) -> Any:
        return plan_changes(spark, resolve_interval(spark, table, at=Bound.version(start), end=Bound.version(end)))

    def new_files(start: int, end: int) -> set[str]:
        p = plan(start, end)
        assert p.commit_reads and all(f.path.startswith("_change_data/") for f, _ in p.commit_reads.change_files)
        return {f.path for scan in p.commit_reads.scans for f in scan.files}

    assert new_files(2, 3) == set() and new_files(4, 5) == set()  # DELETEs
    assert new_files(1, 2) == set() and new_files(1, 3) == set()  # the UPDATE too
    appended = plan(3, 4).added
    assert appended is not None and new_files(3, 5) == {f.path for f in appended.files}  # the append's file
    interval = resolve_interval(spark, table, at=Bound.version(3), end=Bound.version(5))
    got = sorted(tuple(r) for r in redundant_delta(spark, interval).select("id", "name", "__action").collect())
    assert got == [(3, "3", "DELETE"), (11, "11", "INSERT")]

    # CHANGES reads the same way: same minimum delta as from the data files, and a deleted row's commit is the
    # one that deleted it (from the data files: the first commit that rewrote its file, here the UPDATE).
    from dtables.changes.reader import CHANGE_DATA_FILES

    def changes(flag: str) -> list[tuple]:
        spark.conf.set(CHANGE_DATA_FILES, flag)
        try:
            df = read_changes(spark, resolve_interval(spark, table, at=Bound.version(1))).df
            return sorted(tuple(r) for r in df.select("id", "name", "METADATA$ACTION", "METADATA$ISUPDATE",
                                                      "METADATA$ROW_ID", "METADATA$COMMIT_VERSION").collect())
        finally:
            spark.conf.unset(CHANGE_DATA_FILES)

    from_change_data, from_files = changes("true"), changes("false")
    assert [r[:5] for r in from_change_data] == [r[:5] for r in from_files]
    assert [(r[0], r[2], r[5]) for r in from_change_data if r[2] == "DELETE"] == [(1, "DELETE", 2), (2, "DELETE", 3),
                                                                                  (3, "DELETE", 5)]
    assert [(r[0], r[5]) for r in from_files if r[2] == "DELETE"][1] == (2, 2)


def test_a_delete_of_whole_partitions_reads_the_files_it_removed(spark: Any, make_table: Any, run: Any) -> None:
    """A DELETE of whole partitions removes files without writing change data: the files it removed are read."""
    from dtables.changes.reader import redundant_delta

    table = make_table("id INT, grp STRING", partitioned_by="grp")
    run(table, "INSERT INTO {t} SELECT /*+ REPARTITION(1) */ * FROM VALUES (1, 'a'), (2, 'a'), (3, 'b'), (4, 'c') "
        "AS v(id, grp)", "DELETE FROM {t} WHERE id = 2", "DELETE FROM {t} WHERE grp = 'b'")
    both = resolve_interval(spark, table, at=Bound.version(1), end=Bound.version(3))
    reads = plan_changes(spark, both).commit_reads
    assert reads is not None and reads.new_rows is None and len(reads.gone) == 1
    assert [dict(f.partition_values) for f in reads.gone[0].scan.files] == [{"grp": "b"}]
    only_rows = resolve_interval(spark, table, at=Bound.version(1), end=Bound.version(2))
    reads = plan_changes(spark, only_rows).commit_reads
    assert reads is not None and reads.scans == ()
    for interval, expected in ((both, [(2, "a", "DELETE"), (3, "b", "DELETE")]), (only_rows, [(2, "a", "DELETE")])):
        got = sorted(tuple(r) for r in redundant_delta(spark, interval).select("id", "grp", "__action").collect())
        assert got == expected  # partition values of change data rows come from the log


@pytest.mark.parametrize("vectors", ["false", "true"])
def test_redundant_delta_drops_updates_of_columns_not_compared(spark: Any, make_table: Any, run: Any,
                                                                vectors: str) -> None:
    """A reader that uses only some columns (``compared``) sees no change where an UPDATE rewrote only others:
    both halves of such a row go; a row whose compared columns changed, was inserted or deleted stays whole. The
    same whether Spark pairs the halves (a read it scans) or the driver does (a read it holds as Arrow)."""
    from dtables.changes.reader import held_rows, redundant_delta
    from dtables.changes.shared_reads import forget_all

    table = make_table("id INT, v INT, note STRING",
                       TRACKED.replace("enableDeletionVectors = false", f"enableDeletionVectors = {vectors}"))
    run(table, "INSERT INTO {t} VALUES (1, 10, 'a'), (2, 20, 'b'), (3, 30, 'c'), (4, NULL, NULL)",
        "UPDATE {t} SET note = 'a2' WHERE id = 1",                   # only a column the reader ignores
        "UPDATE {t} SET v = 21 WHERE id = 2",                        # a compared column
        "UPDATE {t} SET note = 'x' WHERE id = 3", "UPDATE {t} SET note = 'c' WHERE id = 3",  # and back
        "UPDATE {t} SET note = 'n' WHERE id = 4",                    # NULLs compare equal
        "DELETE FROM {t} WHERE id = 1", "INSERT INTO {t} VALUES (5, 50, 'e')")

    def rows(start: int, end: int, compared: frozenset[str] | None) -> list[tuple]:
        interval = resolve_interval(spark, table, at=Bound.version(start), end=Bound.version(end))
        found = []
        for read_once in (False, True):
            forget_all(spark)
            df = redundant_delta(spark, interval, compared=compared, read_once=read_once)
            assert (held_rows(df) is not None) == read_once  # the driver holds the read: it pairs the halves
            found.append(sorted((tuple(r) for r in df.select("id", "v", "note", "__action").collect()), key=repr))
        assert found[0] == found[1]
        return found[0]

    ids = frozenset({"id", "v"})
    assert rows(1, 6, ids) == [(2, 20, "b", "DELETE"), (2, 21, "b", "INSERT")]
    assert rows(1, 6, frozenset()) == []  # a reader of no column (count(*)): updates are no change
    every = sorted([(1, 10, "a", "DELETE"), (1, 10, "a2", "INSERT"), (2, 20, "b", "DELETE"), (2, 21, "b", "INSERT"),
                    (3, 30, "c", "DELETE"), (3, 30, "c", "INSERT"), (4, None, None, "DELETE"),
                    (4, None, "n", "INSERT")], key=repr)
    assert rows(1, 6, None) == every and rows(1, 6, frozenset({"id", "v", "note"})) == every
    # with deletes and inserts of whole rows in the interval: those stay, whatever is compared
    assert rows(1, 8, ids) == [(1, 10, "a", "DELETE"), (2, 20, "b", "DELETE"), (2, 21, "b", "INSERT"),
                               (5, 50, "e", "INSERT")]


@pytest.mark.parametrize("vectors", ["false", "true"])
def test_file_lists_replayed_from_commits_equal_the_checksums(spark: Any, make_table: Any, run: Any,
                                                              vectors: str) -> None:
    """Where a version's checksum holds no file list, the log replays the commits since one that does (or since
    version 0): the same files, with the same deletion vectors and row ids, as Delta's own checksums list."""
    import os

    from dtables.changes.interval import Interval, open_log

    table = make_table("id INT, name STRING", properties=(
        "delta.enableRowTracking = true, delta.enableChangeDataFeed = true, "
        f"delta.enableDeletionVectors = {vectors}"))
    # files of several rows, so that vectors mark rows in them rather than removing them whole
    run(table, "INSERT INTO {t} SELECT CAST(id AS INT), concat('n', id) FROM range(1, 40)", *MUTATIONS)
    location = table[len("delta.`"):-1]

    def lists(log: Any) -> list[set[tuple[Any, ...]]]:
        found = [log.files_at(v) for v in range(0, 6)]
        assert all(f is not None for f in found)
        return [{(f.path, f.deletion_vector.unique_id if f.deletion_vector else None, f.base_row_id,
                  f.default_row_commit_version) for f in files} for files in found]

    listed = lists(open_log(spark, Interval(table, 5, 5, location)))
    assert any(s for s in listed) and (vectors == "false" or any(
        dv for files in listed for _, dv, _, _ in files))  # vectors on: some version holds a marked file
    for v in (1, 3, 4):  # versions whose checksums lose their list: replayed from 0, from 2, and two in a row
        crc = os.path.join(location, "_delta_log", f"{v:020d}.crc")
        with open(crc) as f:
            body = json.load(f)
        body.pop("allFiles", None)
        with open(crc, "w") as f:
            json.dump(body, f)
    assert lists(open_log(spark, Interval(table, 5, 5, location))) == listed
    os.remove(os.path.join(location, "_delta_log", f"{5:020d}.crc"))  # no checksum at all: replayed, unchecked
    assert lists(open_log(spark, Interval(table, 5, 5, location))) == listed
