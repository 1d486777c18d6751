"""Every catalog statement is kept across sessions or refused before it changes anything (issue 22, break 1).

One warehouse per module: the first session creates the objects and runs every DDL form once; a second session,
opened after every Spark registration was dropped (as a new process starts), checks what each form left. Each form
is one parametrized check, so a form that is not kept fails on its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import dtables
from dtables.dynamic.errors import RefreshFailed
from dtables.errors import DtablesError, ObjectNotFound

SETUP = """
CREATE TABLE src AS SELECT * FROM VALUES (1, 'a'), (2, 'b') AS x(id, name);
CREATE STREAM s_src ON TABLE src;
CREATE DYNAMIC TABLE d_src TARGET_LAG = '1 hour' AS SELECT id, name FROM src;
CREATE VIEW v_src AS SELECT id FROM src;
CREATE TABLE keep AS SELECT * FROM VALUES (1), (2) AS x(id);
CREATE VIEW v_ren AS SELECT id FROM keep;
CREATE VIEW v_props AS SELECT id FROM keep;
CREATE VIEW v_query AS SELECT id FROM keep;
CREATE TABLE props (id INT, name STRING) TBLPROPERTIES ('gone' = '1', 'delta.columnMapping.mode' = 'name');
INSERT INTO props VALUES (1, 'a');
CREATE TABLE coll AS SELECT * FROM VALUES (1) AS x(id);
CREATE TABLE purged (id INT);
CREATE TABLE replaced (id INT);
CREATE DATABASE other;
CREATE TABLE other.inside (id INT)
"""

# (form, statement): run in order by the first session; a refused one must raise.
KEPT = [
    ("rename table", "ALTER TABLE src RENAME TO src2"),
    ("rename view", "ALTER VIEW v_ren RENAME TO v_ren2"),
    ("rename then create the old name", "ALTER TABLE coll RENAME TO coll2; CREATE TABLE coll (id INT)"),
    ("set tblproperties", "ALTER TABLE props SET TBLPROPERTIES ('kept' = 'yes')"),
    ("unset tblproperties", "ALTER TABLE props UNSET TBLPROPERTIES ('gone')"),
    ("add columns", "ALTER TABLE props ADD COLUMNS (extra INT)"),
    ("rename column", "ALTER TABLE props RENAME COLUMN name TO label"),
    ("alter column comment", "ALTER TABLE props ALTER COLUMN id COMMENT 'the id'"),
    ("comment on table", "COMMENT ON TABLE props IS 'hello'"),
    ("add constraint", "ALTER TABLE props ADD CONSTRAINT positive CHECK (id > 0)"),
    ("view set tblproperties", "ALTER VIEW v_props SET TBLPROPERTIES ('kept' = 'yes')"),
    ("alter view as", "ALTER VIEW v_query AS SELECT id * 10 AS id FROM keep"),
    ("set location", "ALTER TABLE ext SET LOCATION '{b}'"),
    ("create table if not exists", "CREATE TABLE IF NOT EXISTS ext_keep (id INT)"),
    ("create or replace table", "CREATE OR REPLACE TABLE ext_keep (id INT, note STRING)"),
    ("replace table", "REPLACE TABLE replaced (x INT)"),
    ("drop purge", "DROP TABLE purged PURGE"),
    ("comment on dynamic table", "COMMENT ON TABLE d_src IS 'dt comment'"),
]
REFUSED = [
    ("rename dynamic table", "ALTER TABLE d_src RENAME TO d_new", "renaming dynamic tables is not supported"),
    ("dynamic table columns", "ALTER TABLE d_src ADD COLUMNS (z INT)", "its columns are its query's"),
    ("move a managed table", "ALTER TABLE props SET LOCATION '{b}'", "dtables created it"),
    ("purge an external table", "DROP TABLE ext_keep PURGE", "does not delete data at a location it did not create"),
    ("view over a table", "CREATE OR REPLACE VIEW props AS SELECT 1 AS id", "props is a table, not a view"),
    ("rename onto a stream", "ALTER TABLE keep RENAME TO s_src", "a stream named default.s_src exists"),
    ("drop a database holding tables", "DROP DATABASE other CASCADE", "it holds other.inside"),
    ("database properties", "ALTER DATABASE other SET DBPROPERTIES ('a' = 'b')", "keeps no database properties"),
    ("partitions", "ALTER TABLE props ADD PARTITION (p = 1)", "partition"),
]


def _fresh(spark: Any, warehouse: Path, empty: Path) -> Any:
    """A session as a new process would open it: connecting to an empty warehouse first unregisters every table
    and view this Spark holds, so the second session knows only what the state store and the Delta logs keep."""
    dtables.connect(empty, spark=spark)
    return dtables.connect(warehouse, spark=spark)


@pytest.fixture(scope="module")
def world(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("ddl")
    warehouse, a, b, c = root / "wh", root / "ext_a", root / "ext_b", root / "ext_c"
    first = dtables.connect(warehouse, spark=spark)
    first.sql(SETUP)
    spark.createDataFrame([(7,)], "id INT").write.format("delta").save(str(b))
    first.sql(f"CREATE TABLE ext (id INT) USING DELTA LOCATION '{a}'; INSERT INTO ext VALUES (1);"
              f"CREATE TABLE ext_keep (id INT) USING DELTA LOCATION '{c}'; INSERT INTO ext_keep VALUES (5)")
    before = {n: first.catalog.lookup(n) for n in ("ext_keep", "purged", "props", "d_src")}
    errors: dict[str, Exception | None] = {}  # what each statement raised (each test judges its own form)
    for form, statement in [*KEPT, *((f, s) for f, s, _ in REFUSED)]:
        try:
            first.sql(statement.format(b=b))
            if form == "rename table":  # a change after the rename, for the stream that follows it
                first.sql("INSERT INTO src2 VALUES (3, 'c')")
            errors[form] = None
        except DtablesError as e:
            errors[form] = e
    return {"dt": _fresh(spark, warehouse, root / "empty"), "errors": errors, "before": before, "c": c, "b": b}


def _rows(dt: Any, sql: str) -> list[tuple]:
    return sorted(tuple(r) for r in dt.sql(sql).collect())


def _props(dt: Any, name: str) -> dict[str, str]:
    dt.table(name)  # SHOW statements do not register the objects they name
    return {r[0]: r[1] for r in dt.sql(f"SHOW TBLPROPERTIES {name}").collect()}


def _describe(dt: Any, name: str) -> dict[str, tuple]:
    return {r[0]: (r[1], r[2]) for r in dt.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()}


def _check_rename_table(w: dict[str, Any]) -> None:
    dt = w["dt"]
    assert _rows(dt, "SELECT * FROM src2") == [(1, "a"), (2, "b"), (3, "c")]
    with pytest.raises(ObjectNotFound):
        dt.sql("SELECT * FROM src")
    # The stream followed its source (Snowflake: a rename neither breaks a stream nor makes it stale).
    assert _rows(dt, "SELECT id, METADATA$ACTION FROM s_src") == [(3, "INSERT")]
    # The dynamic table reads `src` by name: its refresh fails, and says so.
    with pytest.raises(RefreshFailed, match="source default.src was renamed to default.src2"):
        dt.refresh("d_src")
    # So does a view: it fails the statements that name it (only those), and can still be dropped.
    with pytest.raises(DtablesError, match="view default.v_src cannot be used: .*`src`"):
        dt.sql("SELECT * FROM v_src")
    dt.sql("DROP VIEW v_src")
    assert dt.catalog.lookup("v_src") is None


def _check_rename_view(w: dict[str, Any]) -> None:
    assert _rows(w["dt"], "SELECT * FROM v_ren2") == [(1,), (2,)]
    with pytest.raises(ObjectNotFound):
        w["dt"].sql("SELECT * FROM v_ren")


def _check_rename_then_create(w: dict[str, Any]) -> None:
    dt = w["dt"]
    assert _rows(dt, "SELECT * FROM coll2") == [(1,)] and _rows(dt, "SELECT * FROM coll") == []
    assert dt.catalog.lookup("coll")["location"] != dt.catalog.lookup("coll2")["location"]


def _check_props(w: dict[str, Any]) -> None:
    props = _props(w["dt"], "props")
    assert props.get("kept") == "yes" and "gone" not in props


def _check_columns(w: dict[str, Any]) -> None:
    described = _describe(w["dt"], "props")
    assert [c for c in w["dt"].table("props").columns] == ["id", "label", "extra"]
    assert described["id"] == ("int", "the id")
    assert described["Comment"][0] == "hello"
    assert _props(w["dt"], "props").get("delta.constraints.positive") == "id > 0"


def _check_view_props(w: dict[str, Any]) -> None:
    assert _props(w["dt"], "v_props").get("kept") == "yes"


def _check_view_query(w: dict[str, Any]) -> None:
    assert _rows(w["dt"], "SELECT * FROM v_query") == [(10,), (20,)]


def _check_set_location(w: dict[str, Any]) -> None:
    assert _rows(w["dt"], "SELECT * FROM ext") == [(7,)]
    assert w["dt"].catalog.lookup("ext")["location"].rstrip("/").endswith(str(w["b"]))


def _check_replace_external(w: dict[str, Any]) -> None:
    obj = w["dt"].catalog.lookup("ext_keep")
    assert obj["location"] == w["before"]["ext_keep"]["location"] and not obj["managed"]
    assert w["dt"].table("ext_keep").columns == ["id", "note"]


def _check_replace_table(w: dict[str, Any]) -> None:
    assert w["dt"].table("replaced").columns == ["x"]


def _check_purge(w: dict[str, Any]) -> None:
    with pytest.raises(ObjectNotFound):
        w["dt"].sql("SELECT * FROM purged")
    assert not Path(w["before"]["purged"]["location"].removeprefix("file://")).exists()


def _check_dt_comment(w: dict[str, Any]) -> None:
    from dtables.dynamic import definition as defs

    assert defs.require(w["dt"].store, "d_src").comment == "dt comment"  # what SHOW DYNAMIC TABLES shows
    w["dt"].catalog.ensure_registered(["d_src"])
    assert w["dt"].spark.sql("DESCRIBE DETAIL default.d_src").first()["description"] == "dt comment"


CHECKS = {
    "rename table": _check_rename_table,
    "rename view": _check_rename_view,
    "rename then create the old name": _check_rename_then_create,
    "set tblproperties": _check_props,
    "unset tblproperties": _check_props,
    "add columns": _check_columns,
    "rename column": _check_columns,
    "alter column comment": _check_columns,
    "comment on table": _check_columns,
    "add constraint": _check_columns,
    "view set tblproperties": _check_view_props,
    "alter view as": _check_view_query,
    "set location": _check_set_location,
    "create table if not exists": _check_replace_external,
    "create or replace table": _check_replace_external,
    "replace table": _check_replace_table,
    "drop purge": _check_purge,
    "comment on dynamic table": _check_dt_comment,
}


@pytest.mark.parametrize("form", [f for f, _ in KEPT])
def test_ddl_form_is_kept_in_a_new_session(world: dict[str, Any], form: str) -> None:
    assert world["errors"][form] is None
    CHECKS[form](world)


@pytest.mark.parametrize(("form", "words"), [(f, w) for f, _, w in REFUSED])
def test_ddl_form_is_refused_and_changes_nothing(world: dict[str, Any], form: str, words: str) -> None:
    assert world["errors"][form] is not None, "the statement was not refused"
    assert words in str(world["errors"][form])
    dt = world["dt"]
    assert dt.catalog.lookup("d_src")["kind"] == "DYNAMIC_TABLE" and dt.catalog.lookup("d_new") is None
    assert dt.table("d_src").columns == ["id", "name"]
    assert dt.catalog.lookup("props") == {**world["before"]["props"]}
    assert _rows(dt, "SELECT * FROM keep") == [(1,), (2,)] and dt.catalog.lookup("keep")["kind"] == "TABLE"
    assert _rows(dt, "SELECT * FROM ext_keep") == [] and dt.catalog.lookup("other.inside") is not None
