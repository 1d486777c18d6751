"""Issue 7: the real `dtables` command in a subprocess — output, --json, exit codes, file/line in errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

DTABLES = [sys.executable, "-m", "dtables.cli"]


def run(*args: str, cwd: Path, ok: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    result = subprocess.run([*DTABLES, *args], cwd=cwd, capture_output=True, text=True, timeout=600, env=env)
    if ok:
        assert result.returncode == 0, f"dtables {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    else:
        assert result.returncode != 0, f"dtables {' '.join(args)} should have failed:\n{result.stdout}"
    return result


def test_init_validate_and_dag_without_spark(tmp_path):
    run("init", "demo", cwd=tmp_path)
    project = tmp_path / "demo"
    assert (project / "dtables.yml").exists() and (project / "models" / "store_totals.sql").exists()
    assert "ok: 1 source table(s), 2 dynamic table(s)" in run("validate", cwd=project).stdout
    dag = run("dag", "--format", "mermaid", cwd=project).stdout
    assert "flowchart LR" in dag and "default.big_sales" in dag and "-->" in dag
    again = run("init", "demo", cwd=tmp_path, ok=False)
    assert "exists already" in again.stderr


def test_validate_reports_file_and_line_and_fails(tmp_path):
    run("init", "demo", cwd=tmp_path)
    project = tmp_path / "demo"
    (project / "models" / "broken.sql").write_text("-- target_lag: 1 hour\nSELECT nocol\nFROM sales\n")
    result = run("validate", cwd=project, ok=False)
    assert "broken.sql:2" in result.stderr and "nocol" in result.stderr


def _new_user_flow(tmp_path: Path) -> Path:
    """`dtables init demo && cd demo && dtables apply`, change rows, `dtables refresh`: what a new user does first."""
    run("init", "demo", cwd=tmp_path)
    project = tmp_path / "demo"
    applied = run("apply", cwd=project).stdout
    assert "applied 3 change(s)" in applied
    run("sql", "-e", "INSERT INTO sales VALUES (5, 'west', 99.00, DATE'2026-01-03');"
        "UPDATE sales SET amount = 50 WHERE sale_id = 2", cwd=project)
    refreshed = json.loads(run("refresh", "--json", cwd=project).stdout)
    assert {r["table"]: r["action"] for r in refreshed} == {"default.big_sales": "INCREMENTAL",
                                                           "default.store_totals": "INCREMENTAL"}
    return project


# 75 s of four Spark start-ups: `make test` runs the same flow through the CLI against a standalone cluster and over
# Spark Connect (tests/remote/sequences.cli_sequence), so the default suite leaves this local copy out
@pytest.mark.slow
def test_init_apply_change_and_refresh_incrementally(tmp_path):
    _new_user_flow(tmp_path)


@pytest.mark.slow  # eight Spark start-ups
def test_apply_refresh_plan_history_sql_end_to_end(tmp_path):
    project = _new_user_flow(tmp_path)
    totals = json.loads(run("sql", "--json", "-e", "SELECT store, sales, total FROM store_totals ORDER BY store",
                            cwd=project).stdout)
    assert [(t["store"], t["sales"], str(t["total"])) for t in totals] == [
        ("east", 1, "12.75"), ("north", 2, "65.00"), ("south", 1, "50.00"), ("west", 1, "99.00")]
    model = project / "models" / "big_sales.sql"
    model.write_text(model.read_text().replace(">= {{ var('min_amount') }}", "> 20"))
    plan = json.loads(run("plan", "--json", cwd=project).stdout)
    status = {p["name"]: p["status"] for p in plan}
    assert status["default.big_sales"] == "CHANGED" and status["default.store_totals"] == "UNCHANGED"
    history = json.loads(run("history", "--json", cwd=project).stdout)
    assert {h["action"] for h in history} >= {"FULL", "INCREMENTAL"}
    failed = run("sql", "-e", "SELECT * FROM nope", cwd=project, ok=False)
    assert "nope" in failed.stderr and "does not exist" in failed.stderr


def test_validate_refuses_bad_names_and_settings_naming_each_file(tmp_path):
    """Issue 22: names and settings SQL would refuse are refused by validate, before apply could stop half-way."""
    run("init", "demo", cwd=tmp_path)
    project = tmp_path / "demo"
    for stem in ("..x", "a b", "a;b", "café"):
        (project / "models" / f"{stem}.sql").write_text("SELECT 1 AS x\n")
    (project / "models" / "slow.sql").write_text("-- target_lag: soon\nSELECT 1 AS x\n")
    result = run("validate", cwd=project, ok=False)
    for stem in ("..x", "a b", "a;b", "café"):
        assert f"{stem}.sql: model name" in result.stderr, result.stderr
    assert "slow.sql:1: target_lag: invalid TARGET_LAG 'soon'" in result.stderr


@pytest.mark.slow  # four Spark start-ups (170 s); tests/dynamic/test_layout.py runs optimize() in the default suite
def test_optimize_compacts_dynamic_tables_and_named_tables(tmp_path):
    """Issue 19: `dtables optimize` runs Delta OPTIMIZE on every dynamic table (clustered on the row id), or on the
    tables named; a refresh after it is still incremental (two Spark start-ups besides)."""
    run("init", "demo", cwd=tmp_path)
    project = tmp_path / "demo"
    run("apply", cwd=project)
    run("sql", "-e", "INSERT INTO sales VALUES (5, 'west', 99.00, DATE'2026-01-03');"
        "INSERT INTO sales VALUES (6, 'east', 5.00, DATE'2026-01-04')", cwd=project)
    done = {r["table"]: r for r in json.loads(run("optimize", "--json", cwd=project).stdout)}
    assert set(done) == {"default.big_sales", "default.store_totals"}
    assert done["default.big_sales"]["clustered_by"] == "__dtables_row_id"
    sales = json.loads(run("optimize", "sales", "--json", cwd=project).stdout)
    assert [(s["table"], s["files_after"]) for s in sales] == [("default.sales", 1)]
    assert sales[0]["files_before"] > 1 and sales[0]["version"] is not None
    refreshed = json.loads(run("refresh", "--json", cwd=project).stdout)
    assert {r["action"] for r in refreshed} == {"INCREMENTAL"}
    run("optimize", "nope", cwd=project, ok=False)
