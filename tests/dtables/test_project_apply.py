"""Issue 22: `apply` checks everything before it changes anything, says how far it got when a statement fails, and a
rerun after the fix carries on; SQL refuses the target lags project files refuse (the shared Spark session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dtables.project import ProjectError
from dtables.project.connect import connect_project
from dtables.project.deploy import NEW, UNCHANGED, apply_plan, plan_project
from dtables.project.validate import validate_project


def _project(folder: Path, b_query: str) -> Path:
    (folder / "sources").mkdir(parents=True)
    (folder / "models").mkdir()
    (folder / "seeds").mkdir()
    (folder / "dtables.yml").write_text("name: p\nwarehouse: warehouse\ndefaults:\n  target_lag: 1 hour\n")
    (folder / "sources" / "src.sql").write_text("CREATE TABLE src (s STRING);\n")
    (folder / "seeds" / "src.csv").write_text("s\n1\nabc\n")
    (folder / "models" / "a.sql").write_text("SELECT s FROM {{ ref('src') }}\n")
    (folder / "models" / "b.sql").write_text(b_query)
    return folder


def _plan(spark, folder: Path):
    session = connect_project(folder, spark=spark)
    project = validate_project(folder)
    return session, project, plan_project(session, project)


@pytest.mark.slow  # long-running; `make test-all` runs it
def test_apply_that_fails_while_writing_names_what_it_made_and_resumes(spark, tmp_path):
    # b's first refresh fails at run time (ANSI cast of 'abc'): CREATE leaves nothing of b behind
    folder = _project(tmp_path / "p", "-- refresh_mode: full\nSELECT CAST(s AS INT) AS i FROM {{ ref('src') }}\n")
    session, project, plan = _plan(spark, folder)
    with pytest.raises(ProjectError) as stopped:
        apply_plan(session, project, plan)
    message = str(stopped.value)
    assert "apply stopped at dynamic table default.b" in message
    assert "made before it: source default.src (new), dynamic table default.a (new)" in message
    assert "run apply again" in message

    (folder / "models" / "b.sql").write_text("-- refresh_mode: full\nSELECT try_cast(s AS INT) AS i FROM "
                                             "{{ ref('src') }}\n")
    session, project, plan = _plan(spark, folder)
    assert {c.name: c.status for c in plan} == {"default.src": UNCHANGED, "default.a": UNCHANGED,
                                                "default.b": NEW}
    assert [c.name for c in apply_plan(session, project, plan)] == ["default.b"]
    assert sorted(r.i for r in session.sql("SELECT i FROM b").collect() if r.i is not None) == [1]
    assert session.sql("SELECT count(*) AS n FROM a").first().n == 2  # seeded once, not twice


def test_apply_changes_nothing_when_a_planned_change_cannot_work(spark, tmp_path):
    folder = _project(tmp_path / "p", "-- refresh_mode: INCREMENTAL\nSELECT s, row_number() OVER (ORDER BY s) AS n "
                                      "FROM {{ ref('src') }}\n")
    session = connect_project(folder, spark=spark)
    session.sql("CREATE TABLE src (s STRING)")  # with src's columns known, the plan can judge b
    session, project, plan = _plan(spark, folder)
    assert {c.name: c.refresh for c in plan if c.kind == "dynamic table"}["default.b"] == "ERROR"
    with pytest.raises(ProjectError, match=r"nothing applied: .*b.sql: dynamic table default.b: REFRESH_MODE = "
                                           r"INCREMENTAL is not possible"):
        apply_plan(session, project, plan)
    assert session.catalog.lookup("default.a") is None  # a came before b in the plan and was not made


@pytest.mark.parametrize("lag", ["soon", "-5 minutes", "0 seconds", "1000 years"])
def test_sql_refuses_the_target_lags_project_files_refuse(dt, lag):
    from dtables.dynamic import DynamicTableError

    with pytest.raises(DynamicTableError, match="invalid TARGET_LAG"):
        dt.sql(f"CREATE DYNAMIC TABLE d TARGET_LAG = '{lag}' AS SELECT 1 AS x")


def test_a_stored_query_printed_before_reserved_words_were_quoted_is_unchanged(spark, tmp_path):
    from dtables.dynamic import definition as defs

    folder = _project(tmp_path / "p", "SELECT s AS `user`, s AS `time` FROM {{ ref('src') }}\n")
    session, project, plan = _plan(spark, folder)
    apply_plan(session, project, plan)
    stored = defs.require(session.store, "default.b").query
    assert "`user`" in stored and "`time`" in stored, stored
    # as a version that left reserved words unquoted stored it: the same query, not a change that recomputes b
    defs.set_fields(session.store, "default.b", query=stored.replace("`user`", "user").replace("`time`", "time"))
    session, project, plan = _plan(spark, folder)
    assert {c.name: c.status for c in plan}["default.b"] == UNCHANGED
    (folder / "models" / "b.sql").write_text("SELECT s AS `user` FROM {{ ref('src') }}\n")
    session, project, plan = _plan(spark, folder)
    assert {c.name: c.status for c in plan}["default.b"] == "CHANGED"
