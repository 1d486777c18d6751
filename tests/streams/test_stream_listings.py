"""Exact expected outputs: the paper's Listing 9 (section 2.3) and Singdata's seed examples (seed 002).

The seed's table DDL says `name VARCHAR`; Spark requires a length for VARCHAR, so the tables here say STRING. Every
stream statement (CREATE TABLE STREAM, ALTER ... SET PROPERTIES, the MERGEs) is the seed's text.
"""

from __future__ import annotations

from typing import Any

import pytest

from dtables.testing import assert_same_rows


def _rows(dt: Any, sql: str) -> list[tuple]:
    return [tuple(r) for r in dt.sql(sql).collect()]


def test_paper_listing_9_transactional_consumption(dt: Any) -> None:
    dt.sql("CREATE TABLE people (id INT, name STRING)")
    dt.sql("INSERT INTO people VALUES (1, 'Jeff'), (2, 'Donny')")  # Listing 1
    dt.sql("CREATE STREAM people_stream ON TABLE people SHOW_INITIAL_ROWS=true")
    dt.sql("CREATE TABLE people_changes(name varchar(100), action varchar(10), isUpdate varchar(10))")
    consume = "INSERT INTO people_changes SELECT name, $ACTION, $ISUPDATE FROM people_stream"
    # Spark renders booleans as 'true'/'false'; the paper prints them upper-case.
    changes = "SELECT name, action, upper(isUpdate) FROM people_changes"

    dt.sql(consume)
    assert_same_rows(_rows(dt, changes), [("Jeff", "INSERT", "FALSE"), ("Donny", "INSERT", "FALSE")])
    dt.sql("TRUNCATE TABLE people_changes")

    dt.sql("INSERT INTO people VALUES (3, 'Walter'), (4, 'Maud'), (5, 'Uli')")  # Listing 2, 12:01
    dt.sql(consume)
    assert_same_rows(_rows(dt, changes),
                     [("Walter", "INSERT", "FALSE"), ("Maud", "INSERT", "FALSE"), ("Uli", "INSERT", "FALSE")])
    dt.sql("TRUNCATE TABLE people_changes")

    dt.sql("UPDATE people SET name = 'Jeffrey' WHERE id = 1")  # 12:03
    dt.sql("UPDATE people SET name = 'Maude' WHERE id = 4")
    dt.sql("BEGIN")  # 12:03
    dt.sql("DELETE FROM people WHERE id IN (2, 5)")  # 12:04, after the transaction began
    dt.sql(consume)  # 12:06
    dt.sql("COMMIT")  # 12:09
    assert_same_rows(_rows(dt, changes), [("Jeff", "DELETE", "TRUE"), ("Jeffrey", "INSERT", "TRUE"),
                                          ("Maud", "DELETE", "TRUE"), ("Maude", "INSERT", "TRUE")])
    # The DELETE of 12:04 was not consumed: the stream still shows it.
    assert_same_rows(_rows(dt, "SELECT name, METADATA$ACTION FROM people_stream"),
                     [("Donny", "DELETE"), ("Uli", "DELETE")])


def _versions(dt: Any, table: str) -> dict[str, Any]:
    history = dt.sql(f"DESCRIBE HISTORY {table}").select("version", "operation", "timestamp").collect()
    return {r["operation"]: (r["version"], r["timestamp"]) for r in history}


def test_singdata_append_only_stream(dt: Any) -> None:
    dt.sql("CREATE TABLE test_table (id INT, name STRING, age INT)")
    dt.sql("ALTER table test_table set PROPERTIES ('change_tracking' = 'true')")
    dt.sql("CREATE TABLE stream test_stream ON TABLE test_table WITH PROPERTIES ('TABLE_STREAM_MODE' = 'APPEND_ONLY')")
    dt.sql("INSERT INTO test_table VALUES (1, 'Alice', 20), (2, 'Bob', 25), (3, 'Charlie', 30), (4, 'David', 35), "
           "(5, 'Eve', 40)")
    insert_version, insert_time = _versions(dt, "test_table")["WRITE"]
    inserted = [("INSERT", insert_version, insert_time, i, n, a) for i, n, a in
                [(1, "Alice", 20), (2, "Bob", 25), (3, "Charlie", 30), (4, "David", 35), (5, "Eve", 40)]]
    assert dt.sql("SELECT * FROM test_stream").columns == [
        "__change_type", "__commit_version", "__commit_timestamp", "id", "name", "age"]
    assert_same_rows(_rows(dt, "SELECT * FROM test_stream"), inserted)
    for mutation in ("UPDATE test_table SET age = age + 5 WHERE id = 1 OR id = 3",
                     "DELETE FROM test_table WHERE id = 2 OR id = 4", "DELETE FROM test_table"):
        dt.sql(mutation)
        assert_same_rows(_rows(dt, "SELECT * FROM test_stream"), inserted)


MERGE = """MERGE INTO test_table_offset_consume target USING test_table_offset_stream source_stream
ON target.id = source_stream.id WHEN MATCHED
AND source_stream.__change_type = 'UPDATE_AFTER' THEN update set target.age = source_stream.age WHEN MATCHED
AND source_stream.__change_type = 'DELETE' THEN DELETE WHEN NOT MATCHED
AND source_stream.__change_type = 'INSERT' THEN
INSERT VALUES (target.id, target.name, target.age)"""


@pytest.mark.slow  # long-running; `make test-all` runs it
def test_singdata_standard_stream_with_two_merge_consumptions(dt: Any) -> None:
    dt.sql("CREATE TABLE test_table_offset (id INT, name STRING, age INT)")
    dt.sql("ALTER TABLE test_table_offset set PROPERTIES ('change_tracking' = 'true')")
    dt.sql("CREATE table stream test_table_offset_stream ON TABLE test_table_offset "
           "WITH PROPERTIES ('TABLE_STREAM_MODE' = 'STANDARD')")
    dt.sql("INSERT INTO test_table_offset VALUES (1, 'Alice', 20), (2, 'Bob', 25), (3, 'Charlie', 30), "
           "(4, 'David', 35), (5, 'Eve', 40)")
    insert_version, insert_time = _versions(dt, "test_table_offset")["WRITE"]
    dt.sql("CREATE TABLE test_table_offset_consume (id INT, name STRING, age INT)")
    dt.sql("INSERT INTO test_table_offset_consume SELECT id,name,age FROM test_table_offset_stream")
    assert _rows(dt, "SELECT * FROM test_table_offset_stream") == []

    dt.sql("UPDATE test_table_offset SET age = age + 5 WHERE id = 1 OR id = 3")
    update_version, update_time = _versions(dt, "test_table_offset")["UPDATE"]
    assert_same_rows(_rows(dt, "SELECT * FROM test_table_offset_stream"), [
        ("UPDATE_BEFORE", insert_version, insert_time, 1, "Alice", 20),
        ("UPDATE_AFTER", update_version, update_time, 1, "Alice", 25),
        ("UPDATE_BEFORE", insert_version, insert_time, 3, "Charlie", 30),
        ("UPDATE_AFTER", update_version, update_time, 3, "Charlie", 35)])
    dt.sql(MERGE)
    assert_same_rows(_rows(dt, "SELECT * FROM test_table_offset_consume"), [
        (1, "Alice", 25), (3, "Charlie", 35), (2, "Bob", 25), (4, "David", 35), (5, "Eve", 40)])
    assert _rows(dt, "SELECT * FROM test_table_offset_stream") == []

    dt.sql("DELETE FROM test_table_offset WHERE id = 2 OR id = 4")
    assert_same_rows(_rows(dt, "SELECT * FROM test_table_offset_stream"), [
        ("DELETE", insert_version, insert_time, 2, "Bob", 25),
        ("DELETE", insert_version, insert_time, 4, "David", 35)])
    dt.sql(MERGE)
    assert_same_rows(_rows(dt, "SELECT * FROM test_table_offset_consume"),
                     [(1, "Alice", 25), (3, "Charlie", 35), (5, "Eve", 40)])
    assert _rows(dt, "SELECT * FROM test_table_offset_stream") == []
