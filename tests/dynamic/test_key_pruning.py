"""Key pruning end to end: a join term reads of its snapshot side only the files and rows whose keys the change
carries, and the refresh still equals its query (the property tests of test_dynamic_properties and
test_nested_joins run every join with pruning forced)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlglot import exp
from oracle import oracle_rows, table_rows

from differentiation import KeyFilter, KeyProbe
from dtables.changes import keys
from dtables.changes.log import FileAction
from dtables.testing import assert_same_rows

QUERY = "SELECT o.ok, o.st, l.qty FROM o JOIN l ON o.ok = l.lk WHERE l.qty > 3"


def test_ranges_split_at_the_widest_gaps() -> None:
    values = [str(v) for v in (1, 2, 3, 100, 101, 5000)]
    assert keys.merged_ranges(values, int, 3) == (("1", "3"), ("100", "101"), ("5000", "5000"))
    assert keys.merged_ranges(values, int, 10) == tuple((v, v) for v in values)
    dates = ["2024-01-01", "2024-01-02", "2025-06-01"]
    assert keys.merged_ranges(dates, keys._order("date"), 2) == (("2024-01-01", "2024-01-02"), ("2025-06-01", "2025-06-01"))


def test_key_filters_by_type_and_count() -> None:
    probe = KeyProbe((("t", "k"),), "string")
    assert keys.key_filter(probe, 2, "a", "b", ["a", "b"]).values == ("a", "b")
    assert keys.key_filter(probe, 0, None, None, []).values == ()  # no key changed: the term reads nothing
    assert keys.key_filter(probe, 10**6, "a", "z", None).ranges == (("a", "z"),)  # too many to collect
    many = [str(v) for v in range(0, 2000, 2)]
    assert len(keys.key_filter(KeyProbe((("t", "k"),), "bigint"), 1000, "0", "1998", many).ranges) == keys.MAX_RANGES


def _file(low: Any, high: Any) -> FileAction:
    stats = json.dumps({"numRecords": 1, "minValues": {"k": low}, "maxValues": {"k": high}})
    return FileAction("add", "f.parquet", True, 0, 0, (), False, 1, stats)


def test_files_are_skipped_by_their_statistics_only_when_no_key_can_be_in_them() -> None:
    keep = keys.file_filter([KeyFilter("k", "bigint", ranges=(("10", "20"), ("50", "50")))], {"k": "bigint"})
    assert [keep(_file(a, b)) for a, b in ((0, 9), (0, 10), (21, 49), (50, 60), (51, 99))] == [
        False, True, False, True, False]
    assert keep(FileAction("add", "f.parquet", True, 0, 0, (), False, 1, None))  # no statistics: read it
    by_value = keys.file_filter([KeyFilter("k", "decimal(15,2)", values=("1.50",))], {"k": "decimal(15,2)"})
    assert by_value(_file(1.5, 2)) and not by_value(_file(1.51, 2))
    text = keys.file_filter([KeyFilter("k", "string", values=("x",))], {"k": "string"})
    assert text(_file("a", "b"))  # statistics of strings are truncated: never used to skip


def test_keys_of_appended_files_are_bounded_by_their_statistics() -> None:
    """Inserts only: the files the interval appended bound the keys, no probe job; merged where they overlap."""
    probe = KeyProbe((("default.o", "k"),), "bigint")

    def added(low: Any, high: Any, nulls: int = 0, rows: int = 5) -> FileAction:
        stats = {"numRecords": rows, "nullCount": {"k": nulls}, "minValues": {}, "maxValues": {}}
        if low is not None:
            stats["minValues"], stats["maxValues"] = {"k": low}, {"k": high}
        return FileAction("add", "f.parquet", True, 0, 0, (), False, rows, json.dumps(stats))

    got = keys.stats_filter(probe, {"default.o": [added(10, 20), added(15, 30), added(100, 100)]})
    assert got == KeyFilter("", "bigint", ranges=(("10", "30"), ("100", "100")))
    with_nulls = keys.stats_filter(probe, {"default.o": [added(10, 20, nulls=2), added(None, None, 5)]})
    assert with_nulls == KeyFilter("", "bigint", ranges=(("10", "20"),), nulls=True)
    assert keys.stats_filter(probe, {"default.o": []}) == KeyFilter("", "bigint", values=())
    many = keys.stats_filter(probe, {"default.o": [added(i * 10, i * 10 + 1) for i in range(100)]})
    assert many is not None and len(many.ranges) == keys.MAX_RANGES and many.ranges[0][0] == "0"
    assert many.ranges[-1][1] == "991"
    # what the statistics cannot bound is probed
    assert keys.stats_filter(probe, {"default.o": [FileAction("add", "f", True, 0, 0, (), False, 1, None)]}) is None
    assert keys.stats_filter(probe, {"default.o": [added(None, None, nulls=1, rows=5)]}) is None
    assert keys.stats_filter(KeyProbe((("default.o", "k"),), "string"), {"default.o": [added("a", "b")]}) is None


@pytest.fixture
def shop(dt: Any) -> Any:
    """Orders and lines in four files each, with disjoint key ranges (as data loaded in key order is)."""
    dt.sql("CREATE TABLE o (ok BIGINT, cust INT, st STRING)")
    dt.sql("CREATE TABLE l (lk BIGINT, qty INT)")
    for b in range(4):
        dt.sql(f"INSERT INTO o SELECT id, CAST(id % 7 AS INT), IF(id % 3 = 0, 'F', 'O') FROM range({b * 500}, "
               f"{(b + 1) * 500})")
        dt.sql(f"INSERT INTO l SELECT id DIV 3, CAST(id % 11 AS INT) FROM range({b * 1500}, {(b + 1) * 1500})")
    dt.sql(f"CREATE DYNAMIC TABLE j TARGET_LAG = '1 minute' REFRESH_MODE = INCREMENTAL AS {QUERY}")
    yield dt
    dt.spark.conf.unset(keys.MIN_BYTES)
    dt.spark.conf.unset(keys.KEY_PRUNING)


def _refresh(dt: Any) -> Any:
    [record] = dt.refresh("j")
    assert (record.state, record.action) == ("SUCCEEDED", "INCREMENTAL"), record.error
    assert_same_rows(table_rows(dt, "j"), oracle_rows(dt, "j"))
    return record


def test_new_keys_read_only_the_new_files_of_the_other_side(shop: Any) -> None:
    shop.spark.conf.set(keys.MIN_BYTES, "0")
    new = "INSERT INTO o VALUES ({k}, 1, 'F'), (NULL, 3, 'F'); INSERT INTO l VALUES ({k}, 4), ({k}, 5), (NULL, 9)"
    shop.sql(new.format(k=5000))
    pruned = _refresh(shop)
    shop.spark.conf.set(keys.KEY_PRUNING, "false")
    shop.sql(new.format(k=5001))
    whole = _refresh(shop)
    # the unpruned refresh reads all 6,000 lines and 2,000 orders; the pruned one the new files and the probe's
    assert whole.records_read > 8000 and pruned.records_read < 100, (pruned.records_read, whole.records_read)
    # the history says which snapshot reads were narrowed and how many files they read of the version's
    reads = {(r["table"], r["at"]): (r["files"], r["of"]) for r in json.loads(pruned.pruning)}
    (lines_read, lines), (orders_read, orders) = reads[("default.l", "end")], reads[("default.o", "start")]
    assert lines >= 5 and lines_read <= lines - 4 and (orders_read, orders >= 4) == (0, True), reads
    assert whole.pruning is None
    # keys scattered over every file of the other side: the probe runs, the filter is left out (it would skip
    # nothing), unless the fraction of a snapshot a filter may leave is raised to 1
    shop.spark.conf.unset(keys.KEY_PRUNING)
    shop.sql("UPDATE l SET qty = qty + 1 WHERE lk IN (10, 800, 1300, 1900)")
    reads = {(r["table"], r["at"]) for r in json.loads(_refresh(shop).pruning or "[]")}
    assert ("default.o", "end") not in reads, reads


@pytest.mark.slow  # the default suite's property tests run deletes and updates with pruning forced
def test_pruned_terms_stay_exact_under_deletes_updates_and_keys_that_vanish(shop: Any) -> None:
    shop.spark.conf.set(keys.MIN_BYTES, "0")
    shop.sql("DELETE FROM o WHERE ok = 17; UPDATE l SET qty = qty + 5 WHERE lk IN (2, 1900)")
    _refresh(shop)
    shop.sql("DELETE FROM l WHERE lk = 1900; INSERT INTO o VALUES (1900, 0, 'X'), (1900, 0, 'X')")
    _refresh(shop)
    shop.sql("DELETE FROM l WHERE lk > 1990")  # only the line side changed: orders pruned by the deleted keys
    _refresh(shop)


def test_null_keys_of_a_change_keep_their_rows_where_the_restriction_is_null_safe(dt: Any) -> None:
    """An outer join's padded rows and an aggregate's NULL group are recomputed for the keys a change touched,
    NULL among them: the pruned snapshot keeps the rows whose key is NULL (a probe's IN list never matches NULL)."""
    dt.spark.conf.set(keys.MIN_BYTES, "0")
    dt.spark.conf.set(keys.MAX_FRACTION, "1")
    try:
        for t in ("r", "u"):
            dt.sql(f"CREATE TABLE {t} (i INT, v INT)")
            dt.sql(f"INSERT INTO {t} VALUES (1, 0), (2, 1), (3, NULL), (NULL, 2)")
        for name, sql in (("fj", "SELECT r.i AS ri, r.v AS rv, u.i AS ui, u.v AS uv FROM r FULL JOIN u ON r.i = u.i"),
                          ("g", "SELECT i, count(*) AS n, max(v) AS m FROM u GROUP BY i")):
            dt.sql(f"CREATE DYNAMIC TABLE {name} TARGET_LAG = '1 minute' REFRESH_MODE = INCREMENTAL AS {sql}")
        dt.sql("UPDATE u SET v = NULL WHERE i IS NULL; INSERT INTO u VALUES (NULL, NULL), (NULL, 7)")
        for name in ("fj", "g"):
            [record] = dt.refresh(name)
            assert (record.state, record.action) == ("SUCCEEDED", "INCREMENTAL"), record.error
            assert_same_rows(table_rows(dt, name), oracle_rows(dt, name))
    finally:
        dt.spark.conf.unset(keys.MIN_BYTES)
        dt.spark.conf.unset(keys.MAX_FRACTION)


def test_a_probe_that_saw_a_null_key_keeps_null_rows_and_the_files_holding_them() -> None:
    found = keys.key_filter(KeyProbe((("t", "k"),), "bigint"), 0, None, None, [], nulls=True)
    assert (found.values, found.nulls) == ((), True)
    assert "IS NULL" in found.condition(exp.column("k")).sql()
    keep = keys.file_filter([KeyFilter("k", "bigint", ranges=(("10", "20"),), nulls=True)], {"k": "bigint"})

    def file(nulls: int) -> FileAction:
        stats = json.dumps({"numRecords": 9, "minValues": {"k": 50}, "maxValues": {"k": 60}, "nullCount": {"k": nulls}})
        return FileAction("add", "f.parquet", True, 0, 0, (), False, 1, stats)

    assert keep(file(3)) and not keep(file(0))
