"""Two real processes consume one stream at the same time, one with single statements and one with transactions,
while a third writes the source: every change reaches the target exactly once, each consumption is one interval,
and a loser gets a clear conflict error or the next interval."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from dtables.testing import assert_same_rows

CHILD = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    import dtables
    from dtables.streams import StreamConflict

    warehouse, tag, statement, rounds, gate = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), Path(sys.argv[5])
    session = dtables.connect(warehouse, master="local[1]")
    session.sql("SELECT 1").collect()  # Spark is up
    (gate / f"ready-{tag}").touch()
    while not (gate / "go").exists():
        time.sleep(0.05)
    done, conflicts = 0, []
    for _ in range(rounds):
        try:
            session.sql(statement.replace("TAG", tag))
            done += 1
        except StreamConflict as e:
            conflicts.append(str(e))
    print(json.dumps({"done": done, "conflicts": conflicts}))
""")

SINGLE = "INSERT INTO tgt SELECT id, v, 'TAG' FROM s"
TRANSACTION = "BEGIN; INSERT INTO tgt SELECT id, v, 'TAG' FROM s; COMMIT"


def _start(warehouse: Path, tag: str, statement: str, rounds: int, gate: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", CHILD, str(warehouse), tag, statement, str(rounds), str(gate)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONWARNINGS": "ignore"})


@pytest.mark.slow
def test_two_processes_racing_for_one_stream_never_process_the_same_changes(dt: Any, warehouse: Path,
                                                                            tmp_path: Path) -> None:
    dt.sql("CREATE TABLE src (id INT, v STRING)")
    dt.sql("CREATE TABLE tgt (id INT, v STRING, consumer STRING)")
    dt.sql("CREATE STREAM s ON TABLE src")
    dt.sql("INSERT INTO src VALUES (0, 'start')")
    gate = tmp_path / "gate"
    gate.mkdir()
    children = [_start(warehouse, "single", SINGLE, 4, gate), _start(warehouse, "txn", TRANSACTION, 4, gate)]
    deadline = time.time() + 600
    while not all((gate / f"ready-{t}").exists() for t in ("single", "txn")):
        assert time.time() < deadline and all(c.poll() is None for c in children), \
            [c.communicate()[1][-3000:] for c in children if c.poll() is not None]
        time.sleep(0.1)
    (gate / "go").touch()
    expected = [(0, "start")]
    for i in range(1, 5):  # the source keeps changing while they consume
        dt.sql(f"INSERT INTO src VALUES ({i}, 'v{i}')")
        expected.append((i, f"v{i}"))
    outcomes = []
    for child in children:
        out, err = child.communicate(timeout=600)
        assert child.returncode == 0, err[-3000:]
        outcomes.append(json.loads(out.strip().splitlines()[-1]))
    for conflict in (c for o in outcomes for c in o["conflicts"]):
        assert "stream default.s was consumed by another" in conflict and "run it again" in conflict

    dt.sql("INSERT INTO tgt SELECT id, v, 'parent' FROM s")  # whatever is left
    assert_same_rows([(r["id"], r["v"]) for r in dt.sql("SELECT id, v FROM tgt").collect()], expected)  # once each
    consumptions = sum(o["done"] for o in outcomes) + 1
    assert dt.sql("DESCRIBE STREAM s").collect()[0]["consume_sequence"] == consumptions
    # Every consumption that wrote rows carries its own new frontier in its commit: no two share an interval.
    writes = dt.sql("DESCRIBE HISTORY tgt").where("operation = 'WRITE' AND userMetadata IS NOT NULL").collect()
    ends = [json.loads(r["userMetadata"])["dtables_stream"]["frontiers"]["default.s"]["default.src"]
            for r in writes if r["operationMetrics"].get("numOutputRows", "0") != "0"]
    assert len(ends) == len(set(ends))
