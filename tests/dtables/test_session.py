"""Issue 2: sessions, persistent catalog, change tracking, scripts and readable errors."""

from __future__ import annotations

import pytest

import dtables
from dtables.errors import ObjectNotFound, SqlError


def props(dt, table: str) -> dict[str, str]:
    return {r["key"]: r["value"] for r in dt.sql(f"SHOW TBLPROPERTIES {table}").collect()}


def test_script_runs_every_statement_and_returns_the_last(dt):
    df = dt.sql("""
        CREATE TABLE people (id INT, name STRING);
        INSERT INTO people VALUES (1, 'Jeff'), (2, 'Donny');
        UPDATE people SET name = 'Jeffrey' WHERE id = 1;
        DELETE FROM people WHERE id = 2;
        SELECT id, name FROM people ORDER BY id
    """)
    assert [tuple(r) for r in df.collect()] == [(1, "Jeffrey")]


def test_semicolons_inside_strings_do_not_split(dt):
    dt.sql("CREATE TABLE t (s STRING); INSERT INTO t VALUES ('a;b')")
    assert dt.sql("SELECT s FROM t").collect()[0][0] == "a;b"


def test_merge_truncate_and_views_work_as_in_spark(dt):
    dt.sql("""
        CREATE TABLE target (id INT, v STRING);
        CREATE TABLE src (id INT, v STRING);
        INSERT INTO target VALUES (1, 'a'), (2, 'b');
        INSERT INTO src VALUES (2, 'B'), (3, 'C');
        MERGE INTO target USING src ON target.id = src.id
          WHEN MATCHED THEN UPDATE SET v = src.v WHEN NOT MATCHED THEN INSERT *;
        CREATE VIEW upper_v AS SELECT id FROM target WHERE v = upper(v)
    """)
    assert sorted(tuple(r) for r in dt.sql("SELECT * FROM target").collect()) == [(1, "a"), (2, "B"), (3, "C")]
    assert sorted(r[0] for r in dt.sql("SELECT * FROM upper_v").collect()) == [2, 3]
    dt.sql("TRUNCATE TABLE target")
    assert dt.sql("SELECT count(*) FROM target").collect()[0][0] == 0


def test_reconnecting_sees_tables_and_views(connect, warehouse, spark):
    first = connect()
    first.sql("CREATE TABLE people (id INT, name STRING); INSERT INTO people VALUES (1, 'Jeff');"
              "CREATE VIEW names AS SELECT name FROM people")
    # Another warehouse in between: its session must not see (or keep) the first one's objects.
    other = connect(warehouse.parent / "other")
    with pytest.raises(ObjectNotFound):
        other.sql("SELECT * FROM people")
    again = dtables.connect(warehouse, spark=spark)
    assert [tuple(r) for r in again.sql("SELECT * FROM names").collect()] == [("Jeff",)]
    assert [tuple(r) for r in again.table("people").collect()] == [(1, "Jeff")]


def test_new_tables_are_delta_with_change_tracking(dt):
    dt.sql("CREATE TABLE t (id INT)")
    p = props(dt, "t")
    assert p["delta.enableChangeDataFeed"] == "true"
    assert p["delta.enableRowTracking"] == "true"
    assert dt.sql("DESCRIBE DETAIL t").collect()[0]["format"] == "delta"


def test_ctas_is_change_tracked_too(dt):
    dt.sql("CREATE TABLE t AS SELECT 1 AS id")
    assert props(dt, "t")["delta.enableChangeDataFeed"] == "true"


def test_alter_turns_change_tracking_on_for_an_existing_delta_table(dt, tmp_path, spark):
    path = (tmp_path / "external").as_uri()
    spark.sql(f"CREATE TABLE delta.`{path}` (id INT) USING DELTA")
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (1)")
    dt.sql(f"CREATE TABLE ext USING DELTA LOCATION '{path}'")
    assert props(dt, "ext").get("delta.enableChangeDataFeed") != "true"
    dt.sql("ALTER TABLE ext SET CHANGE_TRACKING = TRUE")
    p = props(dt, "ext")
    assert p["delta.enableChangeDataFeed"] == "true"
    assert p["delta.enableRowTracking"] == "true"
    assert dt.sql("SELECT id FROM ext").collect()[0][0] == 1


def test_non_delta_format_is_refused(dt):
    with pytest.raises(SqlError, match="dtables tables are Delta tables; remove USING parquet"):
        dt.sql("CREATE TABLE p (id INT) USING parquet")


def test_drop_table_removes_it_from_the_catalog(connect):
    dt = connect()
    dt.sql("CREATE TABLE t (id INT); DROP TABLE t")
    with pytest.raises(ObjectNotFound):
        connect().sql("SELECT * FROM t")
    dt.sql("CREATE TABLE t (id INT)")  # the name and location are free again


@pytest.mark.parametrize(
    ("statement", "error", "words"),
    [
        ("SELEC * FROM people", SqlError, ["syntax error", "SELEC"]),
        ("SELECT * FROM nope", ObjectNotFound, ["`nope`", "does not exist", "SELECT * FROM nope"]),
        ("SELECT nocol FROM people", SqlError, ["column `nocol` does not exist", "`id`", "SELECT nocol"]),
        ("INSERT INTO people VALUES ('abc', 'x')", SqlError, ["type mismatch", "'abc'", "INSERT INTO people"]),
    ],
)
def test_errors_name_statement_object_and_problem(dt, statement, error, words):
    dt.sql("CREATE TABLE people (id INT, name STRING); INSERT INTO people VALUES (1, 'Jeff')")
    with pytest.raises(error) as info:
        dt.sql(statement)
    message = str(info.value)
    for w in words:
        assert w in message
    assert "\tat org.apache" not in message and "Traceback" not in message
    # the warehouse is unchanged
    assert [tuple(r) for r in dt.sql("SELECT * FROM people").collect()] == [(1, "Jeff")]


def test_syntax_error_anywhere_in_a_script_runs_nothing(dt):
    dt.sql("CREATE TABLE t (id INT)")
    with pytest.raises(SqlError, match="syntax error"):
        dt.sql("INSERT INTO t VALUES (1); INSERT INTO t VALUES (2); SELEC 3")
    assert dt.sql("SELECT count(*) FROM t").collect()[0][0] == 0


def test_failed_ctas_leaves_no_table(dt):
    with pytest.raises(SqlError):
        dt.sql("CREATE TABLE bad AS SELECT CAST('x' AS INT) AS id")
    with pytest.raises(ObjectNotFound):
        dt.sql("SELECT * FROM bad")
    dt.sql("CREATE TABLE bad AS SELECT 1 AS id")
    assert dt.sql("SELECT id FROM bad").collect()[0][0] == 1


def test_empty_script_is_an_error(dt):
    with pytest.raises(SqlError, match="no SQL statement"):
        dt.sql("  ;  ")
