"""Property: for random DML histories (INSERT/UPDATE/DELETE/MERGE, duplicates, NULLs) and random intervals,
the DEFAULT change set turns the table at the start into the table at the end (as multisets, and row id by row
id), holds no cancelling pair, and APPEND_ONLY equals the rows inserted in the interval (Delta's Change Data Feed
is the independent oracle for those)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from changes_helpers import assert_same_rows
from dtables.changes import picked_rows, scan
from dtables.changes.interval import open_log
from dtables.changes import Bound, plan_changes, read_changes, redundant_delta, resolve_interval, snapshot

keys = st.sampled_from([1, 2, 3])
values = st.one_of(st.none(), st.sampled_from(["a", "b"]))
rows = st.lists(st.tuples(st.one_of(st.none(), keys), values), min_size=1, max_size=4)


def _lit(v: Any) -> str:
    return "NULL" if v is None else (f"'{v}'" if isinstance(v, str) else str(v))


def _values(rs: list[tuple[Any, Any]]) -> str:
    return ", ".join(f"(CAST({_lit(k)} AS INT), CAST({_lit(v)} AS STRING))" for k, v in rs)


statements = st.one_of(
    rows.map(lambda rs: f"INSERT INTO {{t}} VALUES {_values(rs)}"),
    st.tuples(keys, values).map(lambda kv: f"UPDATE {{t}} SET v = {_lit(kv[1])} WHERE k = {kv[0]}"),
    st.tuples(keys, values).map(lambda kv: f"UPDATE {{t}} SET v = {_lit(kv[1])} WHERE v IS NULL OR k = {kv[0]}"),
    keys.map(lambda k: f"DELETE FROM {{t}} WHERE k = {k}"),
    # A MERGE source must not match one target row twice (Delta refuses), so its keys are distinct.
    st.lists(st.tuples(st.one_of(st.none(), keys), values), min_size=1, max_size=3, unique_by=lambda r: r[0]).map(
        lambda rs: "MERGE INTO {t} AS t USING (SELECT * FROM VALUES "
        + _values(rs)
        + " AS s(k, v)) AS s ON t.k = s.k WHEN MATCHED AND s.v IS NULL THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT (k, v) VALUES (s.k, s.v)"
    ),
)


DELETION_VECTORS = (
    "delta.enableChangeDataFeed = true, delta.enableRowTracking = true, delta.enableDeletionVectors = true"
)


def _time_travel(spark: Any, table: str, version: int) -> Counter:
    """The table's rows at ``version`` by Delta's own reader (which applies deletion vectors itself)."""
    df = spark.read.format("delta").option("versionAsOf", version).load(table[len("delta.`"):-1])
    return Counter((r["k"], r["v"]) for r in df.collect())


SWITCH_ON = "ALTER TABLE {t} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"


def check_history(spark: Any, make_table: Any, run: Any, history: list[str], cuts: list[tuple[int, int]],
                  properties: str | None = None, partitioned_by: str | None = None) -> None:
    table = make_table("k INT, v STRING", *([properties] if properties else []), partitioned_by=partitioned_by)
    run(table, "INSERT INTO {t} VALUES (1, 'a'), (1, 'a'), (2, NULL), (NULL, 'b')", *history)
    # Not 1 + len(history): a DML that matches no row (UPDATE ... WHERE k = 3 on a table without k = 3) commits
    # no version in Delta.
    latest = open_log(spark, table).latest_version
    for a, b in cuts:
        start, end = sorted((a % (latest + 1), b % (latest + 1)))
        interval = resolve_interval(spark, table, at=Bound.version(start), end=Bound.version(end))
        changes = [
            (r["k"], r["v"], r["METADATA$ACTION"], r["METADATA$ROW_ID"], r["METADATA$ISUPDATE"])
            for r in read_changes(spark, interval).df.collect()
        ]
        before = {r["__row_id"]: (r["k"], r["v"]) for r in snapshot(spark, table, start).collect()}
        after = {r["__row_id"]: (r["k"], r["v"]) for r in snapshot(spark, table, end).collect()}
        if properties == DELETION_VECTORS or SWITCH_ON in history:  # snapshots apply vectors themselves: Delta's reader is the oracle
            assert Counter(before.values()) == _time_travel(spark, table, start)
            assert Counter(after.values()) == _time_travel(spark, table, end)
            plan = plan_changes(spark, interval)
            assert all(s.direct for s in (plan.removed, plan.added) if s is not None), plan.to_text()
        deleted = {rid: (k, v) for k, v, action, rid, _ in changes if action == "DELETE"}
        inserted = {rid: (k, v) for k, v, action, rid, _ in changes if action == "INSERT"}
        assert len(deleted) + len(inserted) == len(changes), "a row id appears twice with the same action"
        # Applying the change set, row id by row id (which implies the multiset equality).
        assert all(before.get(rid) == row for rid, row in deleted.items()), "DELETE of a row not in the start"
        applied = {rid: row for rid, row in before.items() if rid not in deleted} | inserted
        assert Counter(applied.values()) == Counter(after.values())
        assert applied == after
        # Minimum: no cancelling pair; ISUPDATE exactly on DELETE+INSERT pairs of one row id.
        assert not [rid for rid in deleted if inserted.get(rid) == deleted[rid]], "cancelling pair"
        for _, _, _, rid, is_update in changes:
            assert is_update == (rid in deleted and rid in inserted)
        # APPEND_ONLY: the rows inserted by the commits of the interval, with their inserted values.
        append = read_changes(spark, interval, "APPEND_ONLY").df.select("k", "v").collect()
        expected = (
            spark.read.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", start + 1)
            .option("endingVersion", end)
            .load(table[len("delta.`") : -1])
            .where("_change_type = 'insert'")
            .select("k", "v")
            .collect()
            if end > start
            else []
        )
        assert_same_rows(append, expected)
        # The engine's redundant delta (deletes from Delta's change data files where it can): DELETE rows are
        # rows of the start, with their ids; applying it gives the end, row id by row id.
        delta = [(r["k"], r["v"], r["__action"], r["__row_id"]) for r in redundant_delta(spark, interval).collect()]
        gone = [rid for _, _, action, rid in delta if action == "DELETE"]
        assert len(gone) == len(set(gone)) and all(before.get(rid) == (k, v) for k, v, a, rid in delta
                                                   if a == "DELETE"), "DELETE of a row not in the start"
        new = {rid: (k, v) for k, v, action, rid in delta if action == "INSERT"}
        assert len(new) + len(gone) == len(delta) and not new.keys() & (before.keys() - set(gone)), "INSERT twice"
        assert {rid: row for rid, row in before.items() if rid not in gone} | new == after


_settings = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@settings(max_examples=3, **_settings)  # type: ignore[arg-type]
@given(
    history=st.lists(statements, min_size=2, max_size=4),
    cuts=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), min_size=2, max_size=3),
)
def test_changes_apply_minimal_and_append_only(spark: Any, make_table: Any, run: Any, history: list[str],
                                               cuts: list[tuple[int, int]]) -> None:
    check_history(spark, make_table, run, history, cuts)


@pytest.mark.slow
@settings(max_examples=25, **_settings)  # type: ignore[arg-type]
@given(
    history=st.lists(statements, min_size=3, max_size=8),
    cuts=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), min_size=3, max_size=5),
)
def test_changes_apply_minimal_and_append_only_long(spark: Any, make_table: Any, run: Any, history: list[str],
                                                    cuts: list[tuple[int, int]]) -> None:
    check_history(spark, make_table, run, history, cuts)


@pytest.mark.slow
@settings(max_examples=30, **_settings)  # type: ignore[arg-type]
@given(
    history=st.lists(statements, min_size=3, max_size=8),
    cuts=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), min_size=3, max_size=5),
    layout=st.sampled_from(["vectors", "vectors, partitioned", "switched on mid-history"]),
)
def test_changes_with_deletion_vectors_read_only_what_changed(spark: Any, make_table: Any, run: Any,
                                                              history: list[str], cuts: list[tuple[int, int]],
                                                              layout: str) -> None:
    """The same properties on a table whose DELETE / UPDATE / MERGE mark rows in deletion vectors: change reads
    and snapshots apply the vectors by row index (direct scans, no time-travel fallback); also partitioned, and
    on a copy-on-write table whose vectors are switched on halfway (intervals across the switch)."""
    if layout == "switched on mid-history":
        history = history[: len(history) // 2] + [SWITCH_ON] + history[len(history) // 2:]
        check_history(spark, make_table, run, history, cuts)
    else:
        check_history(spark, make_table, run, history, cuts, DELETION_VECTORS,
                      partitioned_by="k" if layout.endswith("partitioned") else None)


# Rows spread over three files, with NULLs among the values; the last insert's values start with 's', which no other
# statement writes, and its k comes from a hash (not from the position that decides a row's file), so its DELETE
# marks some of the rows of several of its files and removes none whole.
SPREAD = ("INSERT INTO {t} SELECT /*+ REPARTITION(3) */ CAST(id % 3 AS INT), "
          "CASE WHEN id % 4 = 0 THEN NULL ELSE CAST(id % 2 AS STRING) END FROM range(24)")
LAST_SPREAD = ("INSERT INTO {t} SELECT /*+ REPARTITION(3) */ CAST(abs(hash(id)) % 3 AS INT), "
               "concat('s', CAST(id % 2 AS STRING)) FROM range(24)")
LAST_DELETE = "DELETE FROM {t} WHERE k = 2 AND v LIKE 's%'"


@settings(max_examples=3, **_settings)  # type: ignore[arg-type]
@given(
    history=st.lists(statements, min_size=1, max_size=4),
    cuts=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), min_size=1, max_size=2),
    picked_as_literals_max=st.sampled_from([0, scan.PICKED_AS_LITERALS_MAX]),
)
@pytest.mark.parametrize("on_driver", [True, False], ids=["on the driver", "in Spark"])
def test_rows_vectors_newly_mark_in_every_file_are_picked_exactly(spark: Any, make_table: Any, run: Any,
                                                                  history: list[str], cuts: list[tuple[int, int]],
                                                                  picked_as_literals_max: int,
                                                                  on_driver: bool) -> None:
    """A read of a DELETE that marked rows in every file it reads picks those rows by row index: decoded by pyarrow
    on the driver (``picked_rows``), or in Spark as a filter of literals or (past PICKED_AS_LITERALS_MAX) by one
    broadcast join keyed on the row index that compares the file name in its condition: after random DML over
    several files, the last DELETE's interval (and random ones) equal the oracle, and the join really ran when the
    limit says so."""
    joined: list[int] = []
    frame = scan.local_columns
    decoded: list[int] = []
    read_picked = picked_rows.read

    def spied(spark: Any, columns: Any, schema: Any) -> Any:
        if schema is scan.PICKED_SCHEMA:
            joined.append(len(columns[0]))
        return frame(spark, columns, schema)

    made: list[str] = []

    def recording_make_table(*args: Any, **kwargs: Any) -> str:
        made.append(make_table(*args, **kwargs))
        return made[-1]

    with pytest.MonkeyPatch.context() as patch:  # hypothesis runs every example in one test call: one context each
        patch.setattr(scan, "PICKED_AS_LITERALS_MAX", picked_as_literals_max)
        patch.setattr(scan, "local_columns", spied)
        patch.setattr(picked_rows, "read", lambda *a, **k: decoded.append(1) or read_picked(*a, **k))
        spark.conf.set(picked_rows.PICK_ON_DRIVER, str(on_driver).lower())
        try:
            check_history(spark, recording_make_table, run, [SPREAD, *history, LAST_SPREAD, LAST_DELETE],
                          [(-2, -1), *cuts], DELETION_VECTORS)
        finally:
            spark.conf.unset(picked_rows.PICK_ON_DRIVER)
    latest = open_log(spark, made[-1]).latest_version
    plan = plan_changes(spark, resolve_interval(spark, made[-1], at=Bound.version(latest - 1),
                                                end=Bound.version(latest)))
    assert plan.removed is not None and len(plan.removed.files) >= 2, plan.to_text()
    filters = plan.removed.row_filters  # one per file, each picking the rows its vector newly marks
    assert len(filters) == len(plan.removed.files) and all(r.selective for r in filters), plan.to_text()
    assert bool(decoded) == on_driver, decoded
    assert bool(joined) == (picked_as_literals_max == 0 and not on_driver), joined
