from __future__ import annotations

import pytest
from sqlglot import exp

from dtables.sql.dialect import SetChangeTracking, parse_one, to_spark
from dtables.sql.executor import split_statements


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
