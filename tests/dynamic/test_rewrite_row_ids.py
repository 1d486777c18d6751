"""A REWRITE (one overwrite of a small dynamic table) keeps the Delta row ids of the rows it copies and updates, as
Delta's own MERGE does (dynamic/overwrite.py, ``Overwrite.write``): streams, CHANGES queries and downstream dynamic
tables read the rows a refresh changed, not the whole table deleted and inserted again. Neither shows the hidden
``__dtables_`` columns."""

from __future__ import annotations

from typing import Any

import pytest

from dtables import changes as ch
from dtables.changes.log import DeltaLog
from dtables.dynamic import apply
from dtables.testing import assert_same_rows
from oracle import oracle_rows, table_rows

METADATA = ["METADATA$ACTION", "METADATA$ISUPDATE", "METADATA$ROW_ID", "METADATA$COMMIT_VERSION",
            "METADATA$COMMIT_TIMESTAMP"]


@pytest.fixture
def groups(dt: Any) -> Any:
    dt.sql("CREATE TABLE f (id INT, g INT, v INT)")
    dt.sql("INSERT INTO f SELECT id, id % 5, id FROM range(100)")
    dt.sql("CREATE DYNAMIC TABLE agg TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS "
           "SELECT g, count(*) AS c, sum(v) AS s FROM f GROUP BY g")
    return dt


def _refresh(dt: Any, name: str) -> None:
    for record in dt.refresh(name):
        assert (record.action, record.state) == ("INCREMENTAL", "SUCCEEDED"), (record.name, record.reason)
        if record.name.endswith(".agg"):
            assert record.write_kind == "REWRITE"
        assert_same_rows(table_rows(dt, record.name), oracle_rows(dt, record.name))


def _changes(dt: Any, query: str) -> list[tuple]:
    df = dt.sql(query)
    assert df.columns == ["g", "c", "s", *METADATA]
    rows = df.collect()
    pairs = {r["METADATA$ROW_ID"] for r in rows if r["METADATA$ISUPDATE"]}
    # an update is a DELETE and an INSERT of one row id
    assert all(sum(r["METADATA$ROW_ID"] == p for r in rows) == 2 for p in pairs)
    return sorted((r.g, r.c, r.s, r["METADATA$ACTION"], r["METADATA$ISUPDATE"]) for r in rows)


def test_a_stream_and_changes_see_only_the_groups_a_rewrite_changed(groups: Any) -> None:
    groups.sql("CREATE STREAM st ON DYNAMIC TABLE agg")  # turns row tracking on: later commits, no row changed
    location = groups.catalog.lookup("agg")["location"]
    start = DeltaLog(groups.spark, location).latest_version
    groups.sql("INSERT INTO f VALUES (1000, 1, 5), (1001, 7, 1)")
    _refresh(groups, "agg")
    assert _changes(groups, "SELECT * FROM st") == [(1, 20, 970, "DELETE", True), (1, 21, 975, "INSERT", True),
                                                    (7, 1, 1, "INSERT", False)]
    groups.sql("CREATE TABLE sink (g INT, c BIGINT, s BIGINT)")
    groups.sql("INSERT INTO sink SELECT g, c, s FROM st")  # consumes
    groups.sql("DELETE FROM f WHERE g = 4")
    groups.sql("UPDATE f SET v = v + 1 WHERE id = 3")
    _refresh(groups, "agg")
    assert _changes(groups, "SELECT * FROM st") == [(3, 20, 1010, "DELETE", True), (3, 20, 1011, "INSERT", True),
                                                    (4, 20, 1030, "DELETE", False)]
    # both refreshes at once, as a CHANGES query: the groups 1 and 3 updated, 4 gone, 7 new; 0 and 2 untouched
    assert _changes(groups, f"SELECT * FROM agg CHANGES(INFORMATION => DEFAULT) AT(VERSION => {start})") == [
        (1, 20, 970, "DELETE", True), (1, 21, 975, "INSERT", True), (3, 20, 1010, "DELETE", True),
        (3, 20, 1011, "INSERT", True), (4, 20, 1030, "DELETE", False), (7, 1, 1, "INSERT", False)]
    appended = groups.sql(f"SELECT * FROM agg CHANGES(INFORMATION => APPEND_ONLY) AT(VERSION => {start})")
    assert appended.columns == ["g", "c", "s", *METADATA]
    assert [tuple(r)[:3] for r in appended.collect()] == [(7, 1, 1)]


def test_a_downstream_table_reads_the_rows_a_rewrite_changed(groups: Any) -> None:
    groups.sql("CREATE DYNAMIC TABLE big TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS "
               "SELECT g, s FROM agg WHERE c >= 20")
    location = groups.catalog.lookup("agg")["location"]
    start = DeltaLog(groups.spark, location).latest_version
    groups.sql("INSERT INTO f VALUES (1000, 1, 5)")
    _refresh(groups, "big")  # refreshes agg first
    [record] = [r for r in groups.history("big").collect() if r.action == "INCREMENTAL"]
    # one group's row updated; before row ids were kept, all five were deleted and inserted again
    assert (record.rows_inserted, record.rows_deleted, record.rows_updated) == (0, 0, 1)
    interval = ch.resolve_interval(groups.spark, "default.agg", at=ch.Bound.version(start))
    delta = ch.redundant_delta(groups.spark, interval).collect()
    assert sorted((r.g, r.c, r["__action"]) for r in delta) == [(1, 20, "DELETE"), (1, 21, "INSERT")]


def test_a_rewrite_that_probes_old_rows_keeps_the_ids_of_the_rows_it_copies(groups: Any,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # the path of tables too large to join whole: the change set's ids broadcast and probed by the old rows. Rows
    # it copies keep their ids, a row it updates the id of the row it replaces (joined back from the old rows), a
    # new row takes a fresh one
    monkeypatch.setattr(apply, "REWRITE_BROADCAST_MIN_BYTES", 0)
    groups.sql("CREATE STREAM st ON DYNAMIC TABLE agg")
    groups.sql("INSERT INTO f VALUES (1000, 1, 5), (1001, 7, 1)")
    groups.sql("DELETE FROM f WHERE g = 4")
    _refresh(groups, "agg")
    assert _changes(groups, "SELECT * FROM st") == [(1, 20, 970, "DELETE", True), (1, 21, 975, "INSERT", True),
                                                    (4, 20, 1030, "DELETE", False), (7, 1, 1, "INSERT", False)]
    [record] = [r for r in groups.history("agg").collect() if r.action == "INCREMENTAL"]
    assert (record.rows_inserted, record.rows_deleted, record.rows_updated) == (1, 1, 1)
