"""Queries with nested and parenthesized joins keep their meaning through every rewrite of a definition (issue 24).

Hypothesis generates join trees over four small tables: every join kind, CROSS JOIN, joins in parentheses on
either side, and derived tables that reuse an alias of the outer scope. For each query:
- the stored form of a definition (sources qualified, as CREATE DYNAMIC TABLE stores it) gives the user's rows;
- end to end, a view and a dynamic table of it give the user's rows; after random inserts, updates and deletes
  (duplicates and NULLs) on every table the dynamic table, refreshed, equals its query (INCREMENTAL where chosen),
  and a stream on the view and CHANGES on the view return a minimum change set that turns the rows before into the
  rows after. Not the bare multiset difference: changes are per row identity, so a row deleted and another with the
  same values inserted (DELETE WHERE v IS NULL, then INSERT of the same values) are two changes, as in Snowflake.
"""

from __future__ import annotations

import datetime as dt
import itertools
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from dtables.changes.keys import MAX_FRACTION as KEY_PRUNING_MAX_FRACTION
from dtables.changes.keys import MIN_BYTES as KEY_PRUNING_MIN_BYTES
from dtables.dynamic import definition as defs
from dtables.sql.dynamic_syntax import RefreshMode
from dtables.sql.dialect import parse_one, to_spark
from dtables.testing import assert_same_rows
from scheduler.vocabulary import RefreshState

TABLES = ("nj_r", "nj_s", "nj_t", "nj_u")
KINDS = ("JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN", "CROSS JOIN")
_names = itertools.count()


@dataclass(frozen=True)
class Relation:
    """A FROM item in SQL text, and the aliases (with their tables) it makes visible."""

    sql: str
    aliases: tuple[str, ...]


@st.composite
def relations(draw: Any, depth: int, used: list[str]) -> Relation:
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        alias = f"a{len(used)}"
        used.append(alias)
        table = draw(st.sampled_from(TABLES))
        if draw(st.integers(0, 4)) == 0:  # a derived table reusing the name a0 inside its own scope
            return Relation(f"(SELECT a0.i AS i, a0.v AS v FROM {table} AS a0 WHERE a0.v IS NULL OR a0.v < 3) "
                            f"AS {alias}", (alias,))
        return Relation(f"{table} AS {alias}", (alias,))
    left = draw(relations(depth - 1, used))
    right = draw(relations(depth - 1, used))
    kind = draw(st.sampled_from(KINDS))
    right_sql = f"({right.sql})" if len(right.aliases) > 1 else right.sql
    left_sql = f"({left.sql})" if len(left.aliases) > 1 and draw(st.booleans()) else left.sql
    if kind == "CROSS JOIN":
        on = ""
    else:
        la, ra = draw(st.sampled_from(left.aliases)), draw(st.sampled_from(right.aliases))
        on = f" ON {la}.i = {ra}.i" + (f" AND {la}.v <= {ra}.v" if draw(st.booleans()) else "")
    return Relation(f"{left_sql} {kind} {right_sql}{on}", left.aliases + right.aliases)


@st.composite
def join_queries(draw: Any) -> str:
    relation = draw(relations(draw(st.integers(1, 3)), []))
    top = f"({relation.sql})" if len(relation.aliases) > 1 and draw(st.booleans()) else relation.sql
    columns = ", ".join(f"{a}.{c} AS {a}_{c}" for a in relation.aliases for c in ("i", "v"))
    return f"SELECT {columns} FROM {top}"


def _rows(session: Any, sql: str) -> list[tuple]:
    return [tuple(r) for r in session.sql(sql).collect()]


@pytest.fixture
def base(dt: Any) -> Iterator[Any]:
    """The four tables, once per test function (hypothesis reuses them across its examples; a session per module
    would go stale when other tests' sessions re-register the shared Spark catalog)."""
    session = dt
    for k, table in enumerate(TABLES):
        session.sql(f"CREATE TABLE {table} (i INT, v INT)")
        session.sql(f"INSERT INTO {table} VALUES (1, 0), (2, 1), (2, 1), (3, NULL), (NULL, 2), ({k % 3 + 1}, 3)")
    session.spark.conf.set(KEY_PRUNING_MIN_BYTES, "0")  # every join term a probe can prune is pruned
    session.spark.conf.set(KEY_PRUNING_MAX_FRACTION, "1")
    yield session
    session.spark.conf.unset(KEY_PRUNING_MIN_BYTES)
    session.spark.conf.unset(KEY_PRUNING_MAX_FRACTION)


def _stored_rows_equal(session: Any, query: str) -> None:
    stored, _ = defs.qualify_sources(parse_one(query))
    assert_same_rows(_rows(session, to_spark(stored)), _rows(session, query))


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))  # 300 in the slow version
@given(query=join_queries())
def test_stored_definitions_give_the_users_rows(base: Any, query: str) -> None:
    _stored_rows_equal(base, query)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(query=join_queries())
def test_stored_definitions_give_the_users_rows_many(base: Any, query: str) -> None:
    _stored_rows_equal(base, query)


# -- end to end: dynamic table, view, stream on the view, CHANGES on the view -----------------------------------------

dml = st.lists(st.tuples(st.sampled_from(TABLES), st.sampled_from(("insert", "update", "delete")),
                         st.one_of(st.none(), st.integers(0, 3)), st.one_of(st.none(), st.integers(0, 3))),
               min_size=1, max_size=5)


def _apply(session: Any, steps: list[tuple[str, str, int | None, int | None]]) -> None:
    sql = lambda v: "NULL" if v is None else str(v)  # noqa: E731
    for table, op, a, b in steps:
        if op == "insert":
            session.sql(f"INSERT INTO {table} VALUES ({sql(a)}, {sql(b)}), ({sql(a)}, {sql(b)})")
        elif op == "update":
            session.sql(f"UPDATE {table} SET v = {sql(b)} WHERE i <=> {sql(a)}")
        else:
            session.sql(f"DELETE FROM {table} WHERE v <=> {sql(a)}")


def _check_changes(before: list[tuple], after: list[tuple], changes: list[tuple], source: str) -> None:
    """``changes`` (values..., action, row id) turn ``before`` into ``after``: every DELETE removes a row that was
    there, and no row id and values are both deleted and inserted (a minimum change set)."""
    inserted = Counter(r[:-2] for r in changes if r[-2] == "INSERT")
    deleted = Counter(r[:-2] for r in changes if r[-2] == "DELETE")
    state = Counter(before)
    assert not deleted - state, f"{source}: DELETEs of rows that were not there: {deleted - state}"
    assert state - deleted + inserted == Counter(after), f"{source}: the changes do not give the rows after"
    keyed = Counter((r[:-2], r[-1], r[-2]) for r in changes)
    pairs = [k for (k, rid, action) in keyed if action == "INSERT" and keyed[(k, rid, "DELETE")]]
    assert not pairs, f"{source}: cancelling pairs in a minimum change set: {pairs}"


def _end_to_end(session: Any, query: str, steps: list[tuple[str, str, int | None, int | None]]) -> None:
    n = next(_names)
    view, table, stream = f"jv{n}", f"jd{n}", f"js{n}"
    session.sql(f"CREATE VIEW {view} AS {query}")
    assert_same_rows(_rows(session, f"SELECT * FROM {view}"), _rows(session, query))
    session.sql(f"CREATE DYNAMIC TABLE {table} TARGET_LAG = '1 hour' REFRESH_MODE = AUTO AS {query}")
    assert_same_rows(_rows(session, f"SELECT * FROM {table}"), _rows(session, query))
    session.sql(f"CREATE STREAM {stream} ON VIEW {view}")
    before = _rows(session, query)
    time.sleep(0.05)
    mark = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None).isoformat(sep=" ")
    time.sleep(0.05)
    _apply(session, steps)
    after = _rows(session, query)
    [record] = [r for r in session.sql(f"ALTER DYNAMIC TABLE {table} REFRESH").collect() if r["name"].endswith(table)]
    assert record["state"] == RefreshState.SUCCEEDED, record["error"]
    mode = defs.require(session.store, f"default.{table}").refresh_mode_chosen
    if mode == RefreshMode.INCREMENTAL:
        assert record["action"] in ("INCREMENTAL", "NO_DATA")
    assert_same_rows(_rows(session, f"SELECT * FROM {table}"), after)
    columns = ", ".join(session.sql(f"SELECT * FROM {view}").columns)
    for source in (f"{stream}", f"{view} CHANGES(INFORMATION => DEFAULT) AT(TIMESTAMP => '{mark}')"):
        changes = _rows(session, f"SELECT {columns}, METADATA$ACTION, METADATA$ROW_ID FROM {source}")
        _check_changes(before, after, changes, source)
    session.sql(f"DROP STREAM {stream}")
    session.sql(f"DROP DYNAMIC TABLE {table}")
    session.sql(f"DROP VIEW {view}")


def test_the_issue_examples_are_maintained_incrementally(dt: Any) -> None:
    dt.sql("""CREATE TABLE base_r (i INT); CREATE TABLE base_s (i INT); CREATE TABLE base_t (i INT);
              CREATE TABLE base_u (i INT);
              INSERT INTO base_r VALUES (1), (2), (3); INSERT INTO base_s VALUES (2), (2), (3), (3);
              INSERT INTO base_t VALUES (3), (4); INSERT INTO base_u VALUES (4), (1), (NULL)""")
    queries = {
        "pj": "SELECT r.i FROM (base_r r JOIN base_s s ON r.i = s.i)",
        "fj": "SELECT r.i AS ri, s.i AS si, t.i AS ti, u.i AS ui FROM (base_r r FULL JOIN base_s s ON r.i = s.i) "
              "FULL JOIN (base_t t FULL JOIN base_u u ON t.i = u.i) ON r.i = u.i",
        "cj": "SELECT r.i AS ri, s.i AS si, t.i AS ti FROM (base_r r JOIN base_s s ON r.i = s.i) CROSS JOIN base_t t",
    }
    for name, query in queries.items():
        dt.sql(f"CREATE DYNAMIC TABLE {name} TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS {query}")
        assert_same_rows(_rows(dt, f"SELECT * FROM {name}"), _rows(dt, query))
    assert sorted(_rows(dt, "SELECT * FROM pj")) == [(2,), (2,), (3,), (3,)]
    dt.sql("""INSERT INTO base_r VALUES (2), (NULL); UPDATE base_s SET i = 1 WHERE i = 3; DELETE FROM base_t WHERE i = 4;
              INSERT INTO base_u VALUES (2); DELETE FROM base_r WHERE i = 3""")
    for name, query in queries.items():
        [record] = dt.sql(f"ALTER DYNAMIC TABLE {name} REFRESH").collect()
        assert (record["state"], record["action"]) == ("SUCCEEDED", "INCREMENTAL"), record["error"]
        assert_same_rows(_rows(dt, f"SELECT * FROM {name}"), _rows(dt, query))


# No shrinking: each example creates a view, a dynamic table and a stream (seconds each); hypothesis prints the
# failing query and DML as generated.
NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)


# The default suite runs a fixed draw of two examples (derandomized: the same in every run; two keep the suite
# within its budget); the slow version draws new ones each time.
@pytest.mark.slow  # 57 s; its 30-example version is slow too, the stored-definition and issue-example tests stay
@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck), phases=NO_SHRINK, derandomize=True)
@given(query=join_queries(), steps=dml)
def test_views_dynamic_tables_streams_and_changes_of_nested_joins(base: Any, query: str, steps: list) -> None:
    _end_to_end(base, query, steps)


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), phases=NO_SHRINK)
@given(query=join_queries(), steps=dml)
def test_views_dynamic_tables_streams_and_changes_of_nested_joins_many(base: Any, query: str, steps: list) -> None:
    _end_to_end(base, query, steps)


def test_the_change_check_fails_on_wrong_change_sets() -> None:
    before, after = [(1,), (2,), (2,)], [(2,), (2,), (3,)]
    _check_changes(before, after, [(1, "DELETE", "a"), (3, "INSERT", "c")], "right")
    # a row deleted and another with the same values inserted: two changes, still right
    _check_changes(before, after, [(1, "DELETE", "a"), (3, "INSERT", "c"), (2, "DELETE", "b"), (2, "INSERT", "d")],
                   "identity swap")
    wrong = {
        "missing insert": [(1, "DELETE", "a")],
        "delete of a row not there": [(1, "DELETE", "a"), (3, "INSERT", "c"), (4, "DELETE", "x"), (4, "INSERT", "y")],
        "cancelling pair": [(1, "DELETE", "a"), (3, "INSERT", "c"), (2, "DELETE", "b"), (2, "INSERT", "b")],
    }
    for name, changes in wrong.items():
        with pytest.raises(AssertionError):
            _check_changes(before, after, changes, name)
