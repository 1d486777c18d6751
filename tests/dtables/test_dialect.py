from __future__ import annotations

import pytest
from sqlglot import exp

from dtables.sql.dialect import parse_one, to_spark
from dtables.sql.expressions import SetChangeTracking
from dtables.sql.dialect import split_statements


@pytest.mark.parametrize("sql", [
    "SELECT a, b FROM t WHERE a > 1",
    "MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
    "SELECT * FROM t VERSION AS OF 3",
])
def test_plain_spark_sql_round_trips(sql):
    assert to_spark(parse_one(sql)) == sql


def test_metadata_columns_and_changes_clause_parse():
    tree = parse_one("SELECT METADATA$ACTION FROM t CHANGES(INFORMATION => DEFAULT) AT(VERSION => 1) END(VERSION => 2)")
    changes = tree.find(exp.Changes)
    assert changes.args["information"].name == "DEFAULT"
    assert changes.args["at_before"].args["kind"] == "VERSION"
    assert changes.args["end"].this == "END"
    assert "`METADATA$ACTION`" in to_spark(tree)


def test_set_change_tracking_statement():
    tree = parse_one("ALTER TABLE db.t SET CHANGE_TRACKING = TRUE")
    assert isinstance(tree, SetChangeTracking)
    assert tree.this.name == "t" and tree.args["enabled"].this is True
    assert isinstance(parse_one("ALTER TABLE t ADD COLUMNS (x INT)"), exp.Alter)


def test_split_statements_keeps_text_and_ignores_empty():
    assert split_statements("SELECT 1; ; SELECT ';' ;\nSELECT 2") == ["SELECT 1", "SELECT ';'", "SELECT 2"]


def test_create_dynamic_table_statement():
    from dtables.sql.expressions import CreateDynamicTable

    tree = parse_one("CREATE OR REPLACE DYNAMIC TABLE d (a COMMENT 'x', b) TARGET_LAG = '5 minutes' "
                     "REFRESH_MODE = INCREMENTAL INITIALIZE = ON_SCHEDULE COMMENT = 'hi' AS SELECT a, b FROM t")
    assert isinstance(tree, CreateDynamicTable)
    assert tree.args["target_lag"].name == "5 minutes"
    assert tree.args["refresh_mode"].name == "INCREMENTAL"
    assert tree.args["initialize"].name == "ON_SCHEDULE"
    assert tree.args["query"].sql() == "SELECT a, b FROM t"
    assert parse_one("CREATE DYNAMIC TABLE d TARGET_LAG = DOWNSTREAM AS SELECT 1").args["target_lag"].name == "DOWNSTREAM"


@pytest.mark.parametrize(("sql", "message"), [
    ("CREATE DYNAMIC TABLE d REFRESH_MODE = FAST AS SELECT 1", "REFRESH_MODE must be one of AUTO, INCREMENTAL, FULL"),
    ("CREATE DYNAMIC TABLE d AS SELECT 1", "needs TARGET_LAG"),
    ("CREATE DYNAMIC TABLE d TARGET_LAG = '1 minute' SPEED = 3 AS SELECT 1", "unknown dynamic table setting"),
])
def test_bad_dynamic_table_statements_name_the_problem(sql, message):
    from sqlglot.errors import ParseError

    with pytest.raises(ParseError, match=message):
        parse_one(sql)


@pytest.mark.parametrize(("sql", "kind"), [
    ("ALTER DYNAMIC TABLE d REFRESH", "AlterDynamicTable"),
    ("ALTER DYNAMIC TABLE d SET TARGET_LAG = '1 hour'", "AlterDynamicTable"),
    ("DROP DYNAMIC TABLE IF EXISTS d", "DropDynamicTable"),
    ("SHOW DYNAMIC TABLES LIKE 'a%'", "ShowDynamicTables"),
    ("DESCRIBE DYNAMIC TABLE d", "DescribeDynamicTable"),
])
def test_other_dynamic_table_statements(sql, kind):
    assert type(parse_one(sql)).__name__ == kind


@pytest.mark.parametrize("sql, spark", [
    ("SELECT * FROM t WHERE 5 > ANY(t.arr)", "SELECT * FROM t WHERE EXISTS(t.arr, x -> 5 > x)"),
    # an ANY in a nested SELECT is rewritten where that SELECT is printed (each SELECT looks at its own clauses)
    ("SELECT (SELECT 1 FROM u WHERE 3 = ANY(u.a)) AS x FROM (SELECT * FROM v WHERE 2 < ANY(v.b)) AS w",
     "SELECT (SELECT 1 FROM u WHERE EXISTS(u.a, x -> 3 = x)) AS x FROM (SELECT * FROM v WHERE EXISTS(v.b, x -> 2 < x))"
     " AS w"),
    ("SELECT a FROM t WHERE a LIKE ANY ('a%', 'b%')", "SELECT a FROM t WHERE a LIKE ANY ('a%', 'b%')"),
])
def test_any_over_an_array_prints_as_spark_exists(sql, spark):
    assert to_spark(parse_one(sql)) == spark
