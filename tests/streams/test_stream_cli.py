"""The `dtables streams` and `dtables vacuum` verbs, run as real subprocesses on a project folder: --json output,
a non-zero exit on a bad table name, and a vacuum of every table that keeps what stream and dynamic table frontiers
need while removing what nothing needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dtables.testing import assert_same_rows

SAFETY_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
PROJECT = """\
name: streams_cli
warehouse: warehouse
spark:
  master: local[1]
  conf:
    spark.databricks.delta.retentionDurationCheck.enabled: "false"
"""


def _dtables(project: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "dtables.cli", *args, "--project", str(project)],
                            capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert (result.returncode == 0) == ok, f"dtables {' '.join(args)} exited {result.returncode}:\n" \
                                           f"{result.stdout}\n{result.stderr[-3000:]}"
    return result


@pytest.mark.slow  # three CLI processes, each starting Spark: ~45 s on an idle 2-core machine
def test_streams_and_vacuum_verbs(connect: Any, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "dtables.yml").write_text(PROJECT)
    dt = connect(project / "warehouse")
    dt.spark.conf.set(SAFETY_CHECK, "false")  # as the project's dtables.yml says, for the checks made in here
    try:
        _streams_and_vacuum_verbs(dt, project)
    finally:
        dt.spark.conf.unset(SAFETY_CHECK)


def _streams_and_vacuum_verbs(dt: Any, project: Path) -> None:
    dt.sql("CREATE TABLE src (id INT, v STRING)")
    dt.sql("CREATE TABLE other (id INT)")
    dt.sql("INSERT INTO src VALUES (1, 'a'), (2, 'b')")
    dt.sql("INSERT INTO other VALUES (1)")
    dt.sql("CREATE STREAM s ON TABLE src COMMENT = 'for the CLI'")
    dt.sql("CREATE DYNAMIC TABLE big TARGET_LAG = '1 hour' AS SELECT id, v FROM src WHERE id > 1")
    dt.sql("UPDATE src SET v = 'B' WHERE id = 2")  # the stream and the dynamic table need the removed file
    dt.sql("UPDATE other SET id = 2")  # nothing needs this one's removed file
    frontier = dt.sql("DESCRIBE STREAM s").collect()[0]["frontier"]

    [listed] = json.loads(_dtables(project, "streams", "--json").stdout)
    assert (listed["name"], listed["source"], listed["mode"], listed["frontier"], listed["stale"]) == \
        ("default.s", "default.src", "DEFAULT", json.loads(frontier), False)
    assert listed["stale_after"] and listed["last_consumed"]

    failed = _dtables(project, "vacuum", "other", "nope", "--retain-hours", "0", ok=False)
    assert "cannot vacuum default.nope: there is no such table" in failed.stderr
    other_files = dt.sql("VACUUM other RETAIN 0 HOURS DRY RUN").collect()  # still there: nothing ran
    assert any(r["path"].endswith(".parquet") for r in other_files)

    report = {r["table"]: r for r in json.loads(_dtables(project, "vacuum", "--retain-hours", "0", "--json").stdout)}
    assert set(report) == {"default.src", "default.other", "default.big"}
    src = report["default.src"]
    assert src["requested_hours"] == 0 and src["retain_hours"] >= 1
    assert any(r.startswith("stream default.s at version") for r in src["kept_for"])
    assert any(r.startswith("dynamic table default.big at version") for r in src["kept_for"])
    assert report["default.other"]["retain_hours"] == 0 and report["default.other"]["kept_for"] == []

    assert not any(r["path"].endswith(".parquet") for r in dt.sql("VACUUM other RETAIN 0 HOURS DRY RUN").collect())
    assert_same_rows([tuple(r) for r in dt.sql("SELECT id, v, METADATA$ACTION FROM s").collect()],
                     [(2, "b", "DELETE"), (2, "B", "INSERT")])  # the stream's removed file survived
    [record] = dt.refresh("big")
    assert (record.action, record.state) == ("INCREMENTAL", "SUCCEEDED"), record.error
    assert [tuple(r) for r in dt.sql("SELECT id, v FROM big").collect()] == [(2, "B")]
