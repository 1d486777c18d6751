"""A small grouped aggregate's REWRITE merges its stored state with the change's sums per group
(``apply._rewrite_merged``, ``differentiation.merge_state``) instead of building, consolidating and joining a change
set. Both paths must leave the same rows, counts and row ids; the oracle is the query recomputed."""

from __future__ import annotations

from typing import Any

import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from differentiation import ChangeStats, build_plan, differentiate, merges_state
from differentiation.rules.aggregate_algebraic import with_state_columns
from dtables.dynamic import apply
from dtables.testing import assert_same_rows
from oracle import oracle_rows, table_rows

MERGE_STATE = "spark.dtables.refresh.mergeState"
SCHEMA = {"f": {"id": "int", "g": "int", "v": "int"}}

# One interval per step: a new group, NULL group keys and duplicates, a group that loses all its rows, one that
# comes back, two updates of one group whose sums cancel (touched, unchanged: nothing written), a group inserted and deleted
# in the same interval (beside a change of another), a SUM over only NULLs.
STEPS = (
    ["INSERT INTO f VALUES (100, 7, 1), (101, NULL, 2), (101, NULL, 2), (102, NULL, NULL)"],
    ["UPDATE f SET v = v + 10 WHERE id IN (3, 101)"],
    ["DELETE FROM f WHERE g = 4"],
    ["INSERT INTO f VALUES (103, 4, NULL)"],
    ["UPDATE f SET v = v - 10 WHERE id = 3"],
    ["UPDATE f SET v = v + 1 WHERE id = 0", "UPDATE f SET v = v - 1 WHERE id = 5"],
    ["INSERT INTO f VALUES (104, 9, 9), (105, 1, 1)", "DELETE FROM f WHERE g = 9"],
    ["DELETE FROM f WHERE g IS NULL AND v IS NOT NULL", "UPDATE f SET g = 8 WHERE g = 2"],
)


def _count_merges(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one at each call of the merge path (the real one, wrapped)."""
    calls: list[int] = []
    real = apply._rewrite_merged

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(apply, "_rewrite_merged", counted)
    return calls


def _run(dt: Any, merged: bool, monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    calls = _count_merges(monkeypatch)
    dt.spark.conf.set(MERGE_STATE, str(merged).lower())
    try:
        return _steps(dt, merged, calls)
    finally:
        dt.spark.conf.unset(MERGE_STATE)


def _steps(dt: Any, merged: bool, calls: list[int]) -> list[tuple[Any, ...]]:
    dt.sql("CREATE TABLE f (id INT, g INT, v INT)")
    dt.sql("INSERT INTO f SELECT id, id % 5, id FROM range(100)")
    dt.sql("CREATE DYNAMIC TABLE agg TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS "
           "SELECT g, count(*) AS c, sum(v) AS s, avg(v) AS a, count(v) AS n FROM f GROUP BY g")
    dt.sql("CREATE STREAM st ON DYNAMIC TABLE agg")  # row tracking on: a group keeps its Delta row id
    seen: list[tuple[Any, ...]] = []
    for statements in STEPS:
        for statement in statements:
            dt.sql(statement)
        [record] = dt.refresh("agg")
        assert (record.action, record.state) == ("INCREMENTAL", "SUCCEEDED"), (statements, record.reason)
        assert_same_rows(table_rows(dt, "agg"), oracle_rows(dt, "agg"))
        changes = dt.sql("SELECT g, c, s, `METADATA$ACTION`, `METADATA$ISUPDATE` FROM st").collect()
        dt.sql("CREATE TABLE IF NOT EXISTS sink (g INT, c BIGINT, s BIGINT)")
        dt.sql("INSERT INTO sink SELECT g, c, s FROM st")  # consumes the stream
        seen.append((record.write_kind, record.rows_inserted, record.rows_deleted, record.rows_updated,
                     sorted((tuple(r) for r in changes), key=repr)))
    assert bool(calls) == merged
    return seen


def test_merging_the_state_writes_what_the_change_set_path_writes(connect: Any, tmp_path: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    merged = _run(connect(tmp_path / "merged"), True, monkeypatch)
    from_changes = _run(connect(tmp_path / "changes"), False, monkeypatch)
    assert merged == from_changes
    # the updates that cancel write nothing
    assert [m[0] for m in merged] == ["REWRITE"] * 5 + ["NONE", "REWRITE", "REWRITE"]
    # a stream sees an update as a pair of one row id (group 3, and the NULL group's duplicates), an untouched
    # group not at all
    assert merged[1][1:] == (0, 0, 2, sorted([(3, 20, 1010, "DELETE", True), (3, 20, 1020, "INSERT", True),
                                              (None, 3, 4, "DELETE", True), (None, 3, 24, "INSERT", True)], key=repr))

def test_groups_of_two_keys_merge_with_their_own_row_nulls_included(connect: Any, tmp_path: Any,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The stored groups and the change's sums are joined on all of a group's keys at once (one struct): groups
    that share one key, NULL in either key or both, and -0.0 beside 0.0 each merge with their own stored row."""
    calls = _count_merges(monkeypatch)
    dt = connect(tmp_path / "two")
    dt.sql("CREATE TABLE f2 (id INT, g INT, h STRING, w DOUBLE, v DOUBLE)")
    dt.sql("INSERT INTO f2 VALUES (1, 1, 'a', 0.0, 1.0), (2, 1, NULL, 0.0, 2.0), (3, NULL, 'a', 1.5, 3.0), "
           "(4, NULL, NULL, NULL, 4.0), (5, 2, 'a', -0.0, 5.0)")
    dt.sql("CREATE DYNAMIC TABLE agg2 TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS "
           "SELECT g, h, w, count(*) AS c, sum(v) AS s FROM f2 GROUP BY g, h, w")
    for statements in (["INSERT INTO f2 VALUES (6, 1, NULL, 0.0, 10.0), (7, NULL, NULL, NULL, 20.0), "
                        "(8, 2, 'a', 0.0, 1.0), (9, NULL, NULL, 0.0, 1.0)"],
                       ["UPDATE f2 SET v = v + 1 WHERE h IS NULL"],
                       ["DELETE FROM f2 WHERE g IS NULL AND h = 'a'", "INSERT INTO f2 VALUES (10, 3, NULL, -0.0, 1.0)"]):
        for statement in statements:
            dt.sql(statement)
        [record] = dt.refresh("agg2")
        assert (record.action, record.state) == ("INCREMENTAL", "SUCCEEDED"), (statements, record.reason)
        assert_same_rows(table_rows(dt, "agg2"), oracle_rows(dt, "agg2"))
    assert calls


def test_only_a_grouped_aggregate_kept_from_its_state_merges() -> None:
    stats = {"f": ChangeStats(inserts=True, deletes=True)}

    def merges(query: str) -> bool:
        plan = with_state_columns(build_plan(query, SCHEMA))
        return merges_state(differentiate(plan, stats=stats, state=True))

    assert merges("SELECT g, count(*) AS c, sum(v) AS s FROM f GROUP BY g")
    assert not merges("SELECT count(*) AS c, sum(v) AS s FROM f")  # one row, always touched: nothing to merge by
    plain = differentiate(build_plan("SELECT g, v FROM f WHERE v > 1", SCHEMA), stats=stats)
    assert not merges_state(plain)


keys = st.one_of(st.none(), st.integers(0, 3))
values = st.one_of(st.none(), st.integers(-2, 3))
dml = st.one_of(
    st.tuples(st.just("insert"), st.lists(st.tuples(keys, values), min_size=1, max_size=3)),  # duplicates, NULLs
    st.tuples(st.just("delete"), keys),
    st.tuples(st.just("update"), keys),  # v + 1 (NULL stays NULL)
    st.tuples(st.just("regroup"), keys),  # rows move to another group
)


def _dml(dt: Any, op: tuple) -> None:
    kind, arg = op
    where = "g IS NULL" if arg is None else f"g = {arg}"
    if kind == "insert":
        rows = ", ".join(f"(0, {'NULL' if g is None else g}, {'NULL' if v is None else v})" for g, v in arg)
        dt.sql(f"INSERT INTO f VALUES {rows}")
    elif kind == "delete":
        dt.sql(f"DELETE FROM f WHERE {where}")
    elif kind == "update":
        dt.sql(f"UPDATE f SET v = v + 1 WHERE {where}")
    else:
        dt.sql(f"UPDATE f SET g = coalesce(g, 0) + 1 WHERE {where}")


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(script=st.lists(st.lists(dml, min_size=1, max_size=3), min_size=1, max_size=4))
def test_random_dml_on_a_merged_aggregate_matches_recompute(connect: Any, monkeypatch: pytest.MonkeyPatch,
                                                            script: list) -> None:
    # every REWRITE of this small grouped aggregate is a merge of its state, and every refresh equals the recompute
    calls = _count_merges(monkeypatch)
    dt = connect(tempfile.mkdtemp(prefix="dt-merge-") + "/wh")
    dt.sql("CREATE TABLE f (id INT, g INT, v INT)")
    dt.sql("INSERT INTO f VALUES (1, 0, 1), (2, 1, 2), (2, 1, 2), (3, NULL, NULL), (4, 2, NULL)")
    dt.sql("CREATE DYNAMIC TABLE agg TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS "
           "SELECT g, count(*) AS c, sum(v) AS s, avg(v) AS a, count(v) AS n FROM f GROUP BY g")
    for ops in script:
        for op in ops:
            _dml(dt, op)
        before = len(calls)
        [record] = dt.refresh("agg")
        assert (record.state, record.action in ("INCREMENTAL", "NO_DATA")) == ("SUCCEEDED", True), record.reason
        assert (record.write_kind == "REWRITE") <= (len(calls) > before), record.reason
        assert_same_rows(table_rows(dt, "agg"), oracle_rows(dt, "agg"))


def _hashable(value: Any) -> Any:
    """``value`` with its maps (Python dicts, at any depth) as their sorted items, so rows of maps compare as
    multisets."""
    if isinstance(value, dict):
        return tuple(sorted(((k, _hashable(v)) for k, v in value.items()), key=repr))
    if isinstance(value, (tuple, list)):
        return tuple(_hashable(v) for v in value)
    return value


MAP_TABLES = {
    # merged from its state: a touched group's map cannot be compared with its old one, so it is written again
    "mg": "SELECT g, map('s', sum(v), 'n', count(v)) AS m, count(*) AS c FROM f GROUP BY g",
    # an unconsolidated change set: an id's DELETE and INSERT are not compared where a column holds a map
    "mf": "SELECT id, g, named_struct('m', map('v', v)) AS m FROM f WHERE v > 0",
}


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(script=st.lists(st.lists(dml, min_size=1, max_size=3), min_size=1, max_size=3))
def test_outputs_holding_maps_refresh_incrementally_and_match_recompute(connect: Any, script: list) -> None:
    """Spark cannot compare maps (``<=>`` refuses them): a query whose output holds one is still refreshed
    incrementally, by the merged REWRITE and by the change-set path, and equals the recompute."""
    dt = connect(tempfile.mkdtemp(prefix="dt-maps-") + "/wh")
    dt.sql("CREATE TABLE f (id INT, g INT, v INT)")
    dt.sql("INSERT INTO f VALUES (1, 0, 1), (2, 1, 2), (2, 1, 2), (3, NULL, NULL), (4, 2, NULL)")
    for name, query in MAP_TABLES.items():
        dt.sql(f"CREATE DYNAMIC TABLE {name} TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS {query}")
    for ops in script + [[("update", 1)]]:  # ends with an update that moves a group's sum
        for op in ops:
            _dml(dt, op)
        for name in MAP_TABLES:
            [record] = dt.refresh(name)
            assert record.state == "SUCCEEDED", record.error
            assert record.action in ("INCREMENTAL", "NO_DATA"), record.reason
            assert_same_rows(map(_hashable, table_rows(dt, name)), map(_hashable, oracle_rows(dt, name)))
