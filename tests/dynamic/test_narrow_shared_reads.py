"""The rows a DELETE with deletion vectors removed are picked out of whole files once per interval and shared by
every dynamic table over the table (``changes.shared_reads``); the shared read holds only the columns those tables'
queries name (``dtables.dynamic.readers``), the others NULL, and each refresh still equals its query from scratch,
under random inserts, updates and deletes with NULLs and duplicates."""

from __future__ import annotations

import tempfile
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dtables.changes import shared_reads
from dtables.changes.sources import IntervalSources
from dtables.dynamic import definition as defs
from dtables.dynamic.readers import mentioned_columns, source_readers
from oracle import refreshes_match

# None of them reads a.note or a.pad; the EXISTS subquery's * reads no column
TABLES = {
    "g": "SELECT k, count(*) AS n, sum(v) AS s FROM a GROUP BY k",
    "j": "SELECT a.k, a.v, b.w FROM a JOIN b ON a.k = b.k",
    "e": "SELECT k, v FROM a WHERE EXISTS (SELECT * FROM b WHERE b.k = a.k AND b.w > 0)",
}


def test_the_columns_a_query_names() -> None:
    assert mentioned_columns(TABLES["e"]) == frozenset({"k", "v", "w", "a", "b"})
    assert mentioned_columns("SELECT count(*) AS n FROM a") == frozenset()
    assert mentioned_columns("SELECT x.k FROM a x JOIN b USING (k2)") == frozenset({"x", "k", "k2"})
    for every in ("SELECT * FROM a", "SELECT a.* FROM a", "SELECT to_json(struct(*)) AS j FROM a", "SELECT k FROM (SELECT * FROM a) t",
                  "SELECT k FROM a NATURAL JOIN b", "SELECT k FROM a NATURAL LEFT JOIN b"):
        assert mentioned_columns(every) is None, every


def test_a_reader_the_shared_columns_leave_short_reads_every_column(spark: Any) -> None:
    """A plan reading a column the other readers' set lacks (a reader the catalog does not show, e.g. through a
    view) does not take the narrowed read: its change read holds every column."""
    sources = IntervalSources(spark, {}, readers=lambda table: frozenset({"k", "v"}))
    sources._read = {"a": frozenset({"k", "V"})}
    assert sources._kept("a") == frozenset({"k", "v"})
    sources._read = {"a": frozenset({"k", "note"})}
    assert sources._kept("a") is None
    sources.readers = lambda table: None
    sources._read = {"a": frozenset({"k"})}
    assert sources._kept("a") is None


def _kept_columns() -> list[tuple[str, ...] | None]:
    """The column sets of the kept change reads (None: every column)."""
    return [key[-1] if isinstance(key[-1], tuple) else None for key in shared_reads._kept if key[0] == "read"]


def _setup(connect: Any) -> Any:
    session = connect(tempfile.mkdtemp(prefix="dt-narrow-") + "/wh")
    session.sql("CREATE TABLE a (k INT, v INT, note STRING, pad STRING)")
    session.sql("CREATE TABLE b (k INT, w INT)")
    session.sql("INSERT INTO a SELECT CAST(id % 7 AS INT), CAST(id % 5 AS INT), CAST(id AS STRING), "
                "repeat('x', 50) FROM range(200)")
    session.sql("INSERT INTO a VALUES (NULL, NULL, NULL, NULL), (1, 1, NULL, 'p'), (1, 1, NULL, 'p')")
    session.sql("INSERT INTO b VALUES (1, 5), (2, 6), (3, NULL), (NULL, 1), (4, 0)")
    for name, query in TABLES.items():
        session.sql(f"CREATE DYNAMIC TABLE {name} TARGET_LAG = '1 minute' REFRESH_MODE = INCREMENTAL AS {query}")
    return session


def test_a_scattered_delete_is_read_once_with_the_columns_its_readers_name(connect: Any) -> None:
    """Then a reader of every column (``SELECT *``) makes the next interval's shared read hold them all."""
    session = _setup(connect)
    shared_reads.forget_all(session.spark)
    try:
        session.sql("DELETE FROM a WHERE try_cast(note AS INT) % 10 = 3 OR note IS NULL")
        refreshes_match(session, sorted(TABLES))
        assert _kept_columns() == [("k", "v")]
        readers = source_readers(lambda: defs.load_all(session.store))
        assert readers("default.a") == frozenset({"a", "b", "k", "v", "w"})
        session.sql("CREATE DYNAMIC TABLE s TARGET_LAG = '1 minute' REFRESH_MODE = INCREMENTAL AS "
                    "SELECT * FROM a WHERE v > 1")
        shared_reads.forget_all(session.spark)
        session.sql("DELETE FROM a WHERE try_cast(note AS INT) % 10 = 7")
        refreshes_match(session, sorted([*TABLES, "s"]))
        assert _kept_columns() == [None]
    finally:
        shared_reads.forget_all(session.spark)


keys = st.one_of(st.none(), st.integers(0, 6))
dml = st.one_of(
    st.tuples(st.just("insert"), st.lists(st.tuples(keys, st.one_of(st.none(), st.integers(-1, 3))), min_size=1,
                                          max_size=3)),
    st.tuples(st.just("update"), st.integers(0, 6)),   # v moved, note too
    st.tuples(st.just("note"), st.integers(0, 6)),     # an unread column only
    st.tuples(st.just("delete"), st.integers(0, 9)),   # scattered over the file: rows picked by vector
    st.tuples(st.just("delete_b"), st.integers(0, 4)),
)


def _run(session: Any, op: tuple) -> None:
    kind = op[0]
    if kind == "insert":
        rows = ", ".join(f"({'NULL' if k is None else k}, {'NULL' if v is None else v}, 'n', 'p')" for k, v in op[1])
        session.sql(f"INSERT INTO a VALUES {rows}")
        return
    session.sql({"update": f"UPDATE a SET v = coalesce(v, 0) + 1, note = 'u' WHERE k = {op[1]}",
                 "note": f"UPDATE a SET note = 'w' WHERE k = {op[1]}",
                 "delete": f"DELETE FROM a WHERE try_cast(note AS INT) % 10 = {op[1]}",
                 "delete_b": f"DELETE FROM b WHERE k = {op[1]}"}[kind])


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(script=st.lists(st.lists(dml, min_size=1, max_size=3), min_size=1, max_size=2))
def test_random_changes_read_through_narrowed_shared_reads_match_recompute(connect: Any, script: list) -> None:
    session = _setup(connect)
    try:
        for ops in script:
            for op in ops:
                _run(session, op)
            refreshes_match(session, sorted(TABLES))
    finally:
        shared_reads.forget_all(session.spark)
