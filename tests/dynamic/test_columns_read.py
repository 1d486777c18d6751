"""Dynamic tables over a table with columns they do not read: an UPDATE of only such columns is no change to them
(the change reads compare the columns the plan reads, `differentiation.columns_read`), and every refresh still
equals the query from scratch, under random DML with NULLs and duplicates."""

from __future__ import annotations

import datetime as dt_
import tempfile
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from differentiation import ChangeStats
from dtables.changes import Interval
from dtables.dynamic import definition as defs
from dtables.spark.jobs import SparkWork
from dtables.dynamic.frontier import resolve_source
from dtables.dynamic.plan import decide
from dtables.dynamic.sources import RefreshSources
from dtables.testing import assert_same_rows
from oracle import oracle_rows, table_rows

TABLES = {
    "j": "SELECT a.k, a.v, b.w FROM a JOIN b ON a.k = b.k",  # reads no note
    "g": "SELECT k, count(*) AS n, sum(v) AS s, avg(v) AS m FROM a GROUP BY k",
    "c": "SELECT count(*) AS n FROM a",  # reads no column at all
    "d": "SELECT DISTINCT k FROM a",
    "x": "SELECT k, note FROM a WHERE v > 0",  # reads the note
    "e": "SELECT k, v FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.k = a.k AND b.note IS NULL)",
    # the note read by the outer scan only: an update of notes leaves the aggregate over a (k, v) unchanged
    "s": "SELECT a.k, a.note, t.total FROM a JOIN (SELECT k, sum(v) AS total FROM a GROUP BY k) t ON a.k = t.k",
    "q": "SELECT k, note FROM a WHERE v >= (SELECT avg(a2.v) FROM a a2 WHERE a2.k = a.k)",
}

keys = st.integers(0, 3)
dml = st.one_of(
    st.tuples(st.just("insert"), st.lists(st.tuples(keys, st.one_of(st.none(), st.integers(-1, 2))), min_size=1,
                                          max_size=3)),
    st.tuples(st.just("note"), st.sampled_from("ab"), keys),     # an unread column only
    st.tuples(st.just("back"), st.sampled_from("ab"), keys),     # a note set back to NULL
    st.tuples(st.just("value"), st.sampled_from("ab"), keys),    # a read column
    st.tuples(st.just("delete"), st.sampled_from("ab"), keys),
)
rounds = st.lists(st.lists(dml, min_size=1, max_size=4), min_size=1, max_size=3)


def _run(session: Any, op: tuple) -> None:
    kind = op[0]
    if kind == "insert":
        rows = ", ".join(f"({k}, {'NULL' if v is None else v}, NULL)" for k, v in op[1])
        session.sql(f"INSERT INTO a VALUES {rows}")
        return
    table, k = op[1], op[2]
    value = "v" if table == "a" else "w"
    statement = {"note": f"UPDATE {table} SET note = concat(coalesce(note, ''), 'x') WHERE k = {k}",
                 "back": f"UPDATE {table} SET note = NULL WHERE k = {k}",
                 "value": f"UPDATE {table} SET {value} = {value} + 1 WHERE k = {k}",
                 "delete": f"DELETE FROM {table} WHERE k = {k}"}[kind]
    session.sql(statement)


def check(connect: Any, script: list) -> None:
    session = connect(tempfile.mkdtemp(prefix="dt-columns-") + "/wh")
    session.sql("CREATE TABLE a (k INT, v INT, note STRING)")
    session.sql("CREATE TABLE b (k INT, w INT, note STRING)")
    session.sql("INSERT INTO a VALUES (0, 1, NULL), (1, 2, 'p'), (1, 2, 'p'), (2, NULL, 'q'), (3, 1, NULL)")
    session.sql("INSERT INTO b VALUES (1, 5, NULL), (2, 6, 'r'), (3, NULL, NULL)")
    for name, query in TABLES.items():
        session.sql(f"CREATE DYNAMIC TABLE {name} TARGET_LAG = '1 minute' REFRESH_MODE = INCREMENTAL AS {query}")
    for ops in script:
        for op in ops:
            _run(session, op)
        for record in session.refresh(sorted(TABLES)):
            assert record.state == "SUCCEEDED", record.error
            assert record.action in ("INCREMENTAL", "NO_DATA"), (record.name, record.action, record.reason)
            assert_same_rows(table_rows(session, record.name), oracle_rows(session, record.name))


def test_update_of_unread_columns_is_no_change(connect: Any) -> None:
    check(connect, [[("note", "a", 1), ("note", "b", 2)], [("value", "a", 1), ("note", "a", 3), ("back", "b", 2)]])


def test_change_read_of_a_refresh_leaves_out_updates_of_unread_columns(dt: Any) -> None:
    """The refresh's change read of a after a note-only UPDATE holds no row for a table that reads no note, and the
    DELETE and INSERT of the updated row for one that does."""
    dt.sql("CREATE TABLE a (k INT, v INT, note STRING)")
    dt.sql("INSERT INTO a VALUES (1, 2, NULL), (2, 3, NULL)")
    for name in ("g", "x"):
        dt.sql(f"CREATE DYNAMIC TABLE {name} TARGET_LAG = '1 minute' REFRESH_MODE = INCREMENTAL AS {TABLES[name]}")
    dt.sql("UPDATE a SET note = 'x' WHERE k = 1")
    at = dt_.datetime.now(dt_.timezone.utc)
    for name, rows in (("g", 0), ("x", 2)):
        d = defs.require(dt.store, name)
        sources = {s: resolve_source(dt, d.name, s, at) for s in d.sources}
        action = decide(d, sources, {"default.a": ChangeStats(inserts=True, deletes=True)}, at, ())
        refresh_sources = RefreshSources(dt.spark.newSession(), d.frontier, sources)
        refresh_sources.changes_query(action.derivative)
        [view] = [v for (_, kind), v in refresh_sources._views.items() if kind[0] == "changes"]
        assert refresh_sources.spark.table(view).count() == rows, name


@pytest.mark.slow
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(script=rounds)
def test_random_updates_of_read_and_unread_columns_match_recompute(connect: Any, script: list) -> None:
    check(connect, script)


def test_a_source_that_updated_only_unread_columns_is_planned_unchanged(dt: Any) -> None:
    """Known before planning (`dtables.changes.moved`): a refresh whose sources moved no column it reads is NO_DATA
    (FULL tables too), and a join plans only the source whose read columns moved."""
    dt.sql("CREATE TABLE a (k INT, v INT, note STRING)")
    dt.sql("CREATE TABLE b (k INT, w INT, note STRING)")
    dt.sql("INSERT INTO a VALUES (1, 2, NULL), (2, 3, NULL), (2, 3, NULL)")
    dt.sql("INSERT INTO b VALUES (1, 5, NULL), (2, 6, 'r')")
    for name in ("g", "j", "x"):
        dt.sql(f"CREATE DYNAMIC TABLE {name} TARGET_LAG = '1 minute' REFRESH_MODE = INCREMENTAL AS {TABLES[name]}")
    dt.sql(f"CREATE DYNAMIC TABLE gf TARGET_LAG = '1 minute' REFRESH_MODE = FULL AS {TABLES['g']}")
    dt.sql("UPDATE a SET note = 'x' WHERE k = 2")
    dt.sql("UPDATE b SET w = w + 1, note = 'y' WHERE k = 1")
    records = {r.name.split(".")[-1]: r for r in dt.refresh(["g", "gf", "j", "x"])}
    for name in ("g", "gf"):
        assert records[name].action == "NO_DATA", (name, records[name].reason)
        assert "default.a: updated only columns the query does not read" in records[name].reason
    assert records["j"].action == "INCREMENTAL", records["j"].reason
    assert "default.b (" in records["j"].reason and "default.a (" not in records["j"].reason, records["j"].reason
    assert records["x"].action == "INCREMENTAL" and "does not read" not in records["x"].reason
    for name in ("g", "gf", "j", "x"):
        assert_same_rows(table_rows(dt, name), oracle_rows(dt, name))


def test_a_change_read_pairs_no_rows_where_every_update_moved_a_compared_column(dt: Any) -> None:
    """Pairing an UPDATE's DELETE and INSERT by row id (a window over the change rows) leaves out rows that agree on
    the compared columns; where the moved-columns job found that every updated row moved one of them, the change
    read skips it. The refresh still equals the query from scratch."""
    from dtables.changes.moved import moved_columns
    from dtables.changes.reader import DELTA_ON_DRIVER

    dt.sql("CREATE TABLE a (k INT, v INT, note STRING)")
    dt.sql("INSERT INTO a VALUES (1, 2, NULL), (2, 3, NULL), (2, NULL, 'p'), (3, 1, NULL)")
    dt.sql(f"CREATE DYNAMIC TABLE g TARGET_LAG = '1 minute' REFRESH_MODE = INCREMENTAL AS {TABLES['g']}")

    def windows(update: str) -> int:
        dt.sql(update)
        at = dt_.datetime.now(dt_.timezone.utc)
        d = defs.require(dt.store, "g")
        sources = {s: resolve_source(dt, d.name, s, at) for s in d.sources}
        src = sources["default.a"]
        moved_columns(dt.spark, Interval("default.a", d.frontier["default.a"], src.version, src.location),
                      src.identity)
        action = decide(d, sources, {"default.a": ChangeStats(inserts=True, deletes=True)}, at, ())
        spark = dt.spark.newSession()
        # Spark's read, whose plan shows the pairing; the driver's own (``driver_delta``) pairs held rows in Arrow
        spark.conf.set(DELTA_ON_DRIVER, "false")
        refresh_sources = RefreshSources(spark, d.frontier, sources)
        refresh_sources.changes_query(action.derivative)
        [view] = [v for (_, kind), v in refresh_sources._views.items() if kind[0] == "changes"]
        plan = refresh_sources.spark.table(view)._jdf.queryExecution().optimizedPlan().toString()
        [record] = dt.refresh(["g"])
        assert record.action == "INCREMENTAL", record.reason
        assert_same_rows(table_rows(dt, "g"), oracle_rows(dt, "g"))
        return plan.count("Window ")

    assert windows("UPDATE a SET v = coalesce(v, 0) + 1 WHERE k = 2") == 0  # both rows' v moved
    assert windows("UPDATE a SET v = CASE WHEN k = 1 THEN v ELSE 7 END WHERE k IN (1, 3)") > 0  # k = 1's did not


def test_a_part_of_the_query_that_reads_no_moved_column_is_planned_unchanged(dt: Any) -> None:
    """An UPDATE of notes is a change to the self-join's outer read of ``a`` (it outputs the note), not to its
    aggregate of ``a``'s values: the refresh records which columns moved, builds no term over the aggregate's
    change, and equals the query from scratch."""
    from differentiation.delta_nodes import ChangeRead
    from dtables.dynamic.unread import drop_unread_updates

    dt.sql("CREATE TABLE a (k INT, v INT, note STRING)")
    dt.sql("INSERT INTO a VALUES (1, 2, NULL), (1, 2, NULL), (2, 3, 'p'), (3, NULL, NULL)")
    dt.sql(f"CREATE DYNAMIC TABLE s TARGET_LAG = '1 minute' REFRESH_MODE = INCREMENTAL AS {TABLES['s']}")
    dt.sql("UPDATE a SET note = 'x' WHERE k = 1")
    at = dt_.datetime.now(dt_.timezone.utc)
    d = defs.require(dt.store, "s")
    sources = {n: resolve_source(dt, d.name, n, at) for n in d.sources}
    stats = {"default.a": ChangeStats(inserts=True, deletes=True)}
    assert drop_unread_updates(dt.spark, d, sources, stats) == ()
    assert stats["default.a"].moved == frozenset({"note"})
    action = decide(d, sources, stats, at, ())
    assert action.derivative is not None
    reads = [n for n in action.derivative.plan.walk() if isinstance(n, ChangeRead)]
    assert len(reads) == 1, action.derivative.plan.to_text()  # the outer read's term only
    [record] = dt.refresh(["s"])
    assert record.action == "INCREMENTAL", record.reason
    assert_same_rows(table_rows(dt, "s"), oracle_rows(dt, "s"))


@pytest.mark.parametrize("driver_rows", [10_000, -1], ids=["on the driver", "in a Spark job"])
def test_moved_columns_compare_each_updated_row_at_both_ends(dt: Any, driver_rows: int) -> None:
    from dtables.changes import resolve_interval
    from dtables.changes.interval import Bound
    from dtables.changes.moved import moved_columns

    dt.spark.conf.set("spark.dtables.changes.driverRowsMax", str(driver_rows))
    dt.sql("CREATE TABLE m (k INT, v INT, note STRING, tags MAP<STRING, INT>)")
    dt.sql("INSERT INTO m VALUES (1, NULL, 'a', map('x', 1)), (2, 2, NULL, NULL), (2, 2, NULL, NULL)")

    def moved(statements: list[str]) -> Any:
        start = dt.spark.sql("DESCRIBE HISTORY m").agg({"version": "max"}).collect()[0][0]
        for s in statements:
            dt.sql(s)
        interval = resolve_interval(dt.spark, "m", at=Bound.version(start))
        return moved_columns(dt.spark, interval, f"m-{start}")

    # Spark cannot compare maps: the map column of an updated row counts as moved
    same = moved(["UPDATE m SET v = v, note = note WHERE k = 2"])
    assert (same.rows, same.columns, same.always) == (False, frozenset({"tags"}), frozenset({"tags"}))
    assert not same.touch({"k", "v", "note"}) and same.touch({"tags"})
    nulls = moved(["UPDATE m SET v = 7 WHERE k = 1", "UPDATE m SET note = NULL WHERE k = 1"])
    assert (nulls.rows, nulls.columns) == (False, frozenset({"v", "note", "tags"}))
    assert nulls.always == frozenset({"v", "note", "tags"})  # one row updated: it moved all three
    assert nulls.touch({"v"}) and not nulls.touch({"k"})
    back = moved(["UPDATE m SET v = 8 WHERE k = 2", "UPDATE m SET v = 2 WHERE k = 2"])  # moved, then moved back
    assert (back.rows, back.columns) == (False, frozenset({"tags"}))
    some = moved(["UPDATE m SET v = CASE WHEN k = 1 THEN v ELSE 5 END"])  # k = 1 updated, its v as it was
    assert (some.columns, some.always) == (frozenset({"v", "tags"}), frozenset({"tags"}))
    outright = moved(["DELETE FROM m WHERE k = 1", "INSERT INTO m VALUES (3, 3, 'c', NULL)"])
    assert outright.rows and outright.touch(set())
    both = moved(["DELETE FROM m WHERE k = 3", "UPDATE m SET note = 'n' WHERE k = 2"])
    assert both.rows and both.touch(set())


def test_moved_columns_of_intervals_that_insert_or_delete_rows_come_from_the_log(dt: Any, monkeypatch: Any) -> None:
    """An interval of DELETEs (which under copy-on-write remove and add files, as an UPDATE does) and appends holds
    no updated row, and one whose log counts a row inserted or deleted outright beside its UPDATEs has "rows moved"
    whatever the updates did: either is answered without the Spark job that pairs rows by id. An interval whose
    commits only update in place (UPDATE, a MERGE that inserts and deletes nothing) needs the job."""
    from dtables.changes import moved as moved_module
    from dtables.changes import resolve_interval
    from dtables.changes.interval import Bound

    dt.sql("CREATE TABLE md (k INT, v INT)")
    dt.sql("INSERT INTO md SELECT CAST(id AS INT), CAST(id AS INT) FROM range(20)")

    def version() -> int:
        return dt.spark.sql("DESCRIBE HISTORY md").agg({"version": "max"}).collect()[0][0]

    def moved(start: int) -> Any:
        return moved_module.moved_columns(dt.spark, resolve_interval(dt.spark, "md", at=Bound.version(start)),
                                          f"md-{start}-{version()}")

    def no_job(spark: Any, interval: Any) -> Any:
        raise AssertionError("read the change rows")

    start = version()
    dt.sql("DELETE FROM md WHERE k = 3")
    dt.sql("INSERT INTO md VALUES (30, 30)")
    with monkeypatch.context() as m:
        m.setattr(moved_module, "_read", no_job)
        assert moved(start).rows and moved(start).touch({"v"})
        dt.sql("UPDATE md SET v = 0 WHERE k = 4")  # an UPDATE beside the delete and the append: rows moved anyway
        assert moved(start).rows
        in_place = version()
        dt.sql("UPDATE md SET v = 1 WHERE k = 5")
        dt.sql("MERGE INTO md USING (SELECT 6 AS k) s ON md.k = s.k WHEN MATCHED THEN UPDATE SET v = 2")
        with pytest.raises(AssertionError, match="read the change rows"):
            moved(in_place)
    found = moved(in_place)  # the UPDATE and the MERGE that only updated, read by the job
    assert not found.rows and found.columns == frozenset({"v"})
    with monkeypatch.context() as m:
        m.setattr(moved_module, "_read", no_job)
        dt.sql("MERGE INTO md USING (SELECT 40 AS k) s ON md.k = s.k WHEN MATCHED THEN UPDATE SET v = 2 "
               "WHEN NOT MATCHED THEN INSERT (k, v) VALUES (s.k, 40)")
        assert moved(in_place).rows  # the MERGE inserted a row
    after = moved(start)  # every kind at once, from the log: the same answer the job gives
    monkeypatch.setattr(moved_module, "_rows_moved_by_log", lambda spark, interval: False)
    assert after.rows == moved_module.moved_columns(
        dt.spark, resolve_interval(dt.spark, "md", at=Bound.version(start)), "md-job").rows


def test_moved_columns_match_read_columns_whatever_their_case() -> None:
    """Spark resolves names without regard to case (spark.sql.caseSensitive is false): a reader of `amount` sees
    a move of the table's `Amount`."""
    from dtables.changes.moved import MovedColumns

    moved = MovedColumns(rows=False, columns=frozenset({"Amount"}))
    assert moved.touch({"amount"}) and moved.touch({"AMOUNT", "k"}) and not moved.touch({"k", "note"})


def test_dynamic_tables_over_columns_named_in_upper_case(dt: Any) -> None:
    """A table's `Amount` is the query's `amount` and `Amount` alike (Spark resolves names without regard to case);
    its updates are changes to a query summing it, updates of `Note` are not."""
    dt.sql("CREATE TABLE c (K INT, Amount INT, Note STRING)")
    dt.sql("CREATE TABLE d (K INT, Label STRING)")
    dt.sql("INSERT INTO c VALUES (1, 2, NULL), (2, 3, NULL), (2, 3, NULL), (3, NULL, 'n')")
    dt.sql("INSERT INTO d VALUES (1, 'one'), (2, 'two')")
    queries = {"cs": "SELECT k, sum(amount) AS s, count(*) AS n FROM c GROUP BY k",
               "cu": "SELECT K, Amount FROM c WHERE Amount > 0",
               "cj": "SELECT c.K, d.Label, c.AMOUNT FROM c JOIN d ON c.k = d.K"}
    for name, query in queries.items():
        dt.sql(f"CREATE DYNAMIC TABLE {name} TARGET_LAG = '1 minute' REFRESH_MODE = INCREMENTAL AS {query}")
    for statement, action in (("UPDATE c SET AMOUNT = amount + 10 WHERE k = 1", "INCREMENTAL"),
                              ("UPDATE c SET note = 'x' WHERE k = 2", "NO_DATA"),
                              ("INSERT INTO c VALUES (1, 5, NULL), (4, 1, NULL)", "INCREMENTAL"),
                              ("DELETE FROM c WHERE K = 2", "INCREMENTAL")):
        dt.sql(statement)
        for record in dt.refresh(sorted(queries)):
            assert record.state == "SUCCEEDED", record.error
            assert record.action == action, (statement, record.name, record.reason)
            assert_same_rows(table_rows(dt, record.name), oracle_rows(dt, record.name))


# Change rows as a held read holds them: an id with its DELETE and INSERT (the row at both ends), ids with one row or
# three (rows inserted or deleted outright, counted as `rows`), rows without an id, NULLs and repeated values.
_FLAT = "k INT, v DOUBLE, note STRING, at TIMESTAMP, price DECIMAL(10, 2), __action STRING, __row_id STRING"
_values = st.tuples(st.one_of(st.none(), st.integers(0, 2)), st.one_of(st.none(), st.sampled_from([0.5, -1.0])),
                    st.one_of(st.none(), st.sampled_from(["a", "b"])),
                    st.one_of(st.none(), st.sampled_from([dt_.datetime(2026, 3, 29, 1, 30),
                                                          dt_.datetime(2026, 3, 29, 2, 30)])),
                    st.one_of(st.none(), st.sampled_from(["1.25", "2.50"])))
_ids = st.lists(st.tuples(st.sampled_from(["pair", "pair", "pair", "one", "three"]), _values, _values),
                min_size=1, max_size=8)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ids=_ids, unkeyed=st.booleans())
def test_moved_columns_as_arrow_columns_agree_with_spark(dt: Any, ids: list, unkeyed: bool) -> None:
    """A held read of many rows is compared as Arrow columns (``moved._moved_table``): it answers as Python rows
    do (the way it replaces) and as the Spark aggregate over the same rows (whose ``columns`` also count ids that
    are no pair, which only matters where ``rows`` is false)."""
    import decimal

    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from dtables.changes import moved as moved_module

    rows = []
    for i, (kind, start, end) in enumerate(ids):
        values = [start] if kind == "one" else [start, end] if kind == "pair" else [start, end, end]
        actions = ["DELETE", "INSERT", "INSERT"] if kind != "one" else ["INSERT"]
        rows += [(*v[:4], decimal.Decimal(v[4]) if v[4] else None, a, f"id{i}") for v, a in zip(values, actions)]
    if unkeyed:
        rows.append((1, None, "a", None, None, "INSERT", None))
    df = dt.spark.createDataFrame(rows, T._parse_datatype_string(_FLAT))
    arrow = moved_module._moved_table(df.schema, df.toArrow())
    micros = df.withColumn("at", F.unix_micros("at"))
    assert arrow == moved_module._moved_rows(df.schema, micros.collect())
    spark = moved_module._moved(df)
    assert (arrow.rows, arrow.always) == (spark.rows, spark.always)
    assert arrow.rows or arrow.columns == spark.columns


def test_moved_columns_of_a_held_read_of_many_rows_are_compared_as_arrow(dt: Any, monkeypatch: Any) -> None:
    """The way a refresh takes where the change data is not read on the driver (``change_data``; here switched off
    with the picked rows'): an UPDATE's held read of at least ``ARROW_ROWS_MIN`` rows of flat columns goes through
    ``_moved_table``, and says which columns moved."""
    from dtables.changes import moved as moved_module
    from dtables.changes import picked_rows, resolve_interval
    from dtables.changes.interval import Bound

    calls, original = [], moved_module._moved_table
    monkeypatch.setattr(moved_module, "_moved_table", lambda *a: calls.append(1) or original(*a))
    dt.spark.conf.set(picked_rows.PICK_ON_DRIVER, "false")
    dt.sql("CREATE TABLE ma (k INT, v DOUBLE, note STRING)")
    dt.sql("INSERT INTO ma SELECT CAST(id AS INT), CAST(id AS DOUBLE), 'n' FROM range(1500)")
    start = dt.spark.sql("DESCRIBE HISTORY ma").agg({"version": "max"}).collect()[0][0]
    dt.sql("UPDATE ma SET v = v + 1 WHERE k < 1000")  # 2,000 change rows: held, as Arrow
    interval = resolve_interval(dt.spark, "ma", at=Bound.version(start))
    with SparkWork(dt.spark, "moved") as work:
        moved = moved_module.moved_columns(dt.spark, interval, "ma")
    assert calls == [1]
    dt.spark.conf.unset(picked_rows.PICK_ON_DRIVER)
    assert work.cost.jobs == 1  # the held read's: its rows came to the driver as Arrow, compared without another
    assert (moved.rows, moved.columns, moved.always) == (False, frozenset({"v"}), frozenset({"v"}))
