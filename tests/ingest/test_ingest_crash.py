"""Real processes killed (SIGKILL) while loading a numbered sequence; restarted from the committed offset token,
the table ends with every number exactly once.

Default suite: the ``dtables ingest`` command, fed through standard input, killed once mid-stream, rerun on the
whole file (resumes; stops at a bad line under ON_ERROR = ABORT with exit 1); the fixed file is then loaded in
process through the same channel (one Spark start less) and completes.
Slow suite: a Python producer killed at random moments many times.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from dtables.ingest import store as cs
from dtables.client import Client
from dtables.ingest.loader import load
from dtables.state import StateStore

DTABLES = [sys.executable, "-m", "dtables.cli"]
ENV = {**os.environ, "PYTHONWARNINGS": "ignore", "DTABLES_SPARK_MASTER": "local[1]"}
STARTUP = 300  # seconds a child may take to start Spark on a loaded machine


def _token(warehouse: Path, table: str, channel: str) -> str | None:
    store_file = warehouse / "_dtables" / "state.sqlite"
    if not store_file.exists():
        return None
    state = cs.get(StateStore(store_file), table, channel)
    return state.offset_token if state is not None else None


def _assert_each_number_once(session: Any, total: int) -> None:
    counts = session.sql("SELECT n, count(*) AS c FROM seq GROUP BY n").collect()
    duplicated = sorted(r.n for r in counts if r.c > 1)
    missing = sorted(set(range(1, total + 1)) - {r.n for r in counts})
    assert not duplicated and not missing and len(counts) == total, (duplicated[:10], missing[:10])


@pytest.mark.slow  # three `dtables ingest` processes, each starting Spark
def test_ingest_command_killed_then_rerun_loads_each_line_once(connect: Any, warehouse: Path, tmp_path: Path) -> None:
    session = connect()
    session.sql("CREATE TABLE seq (n BIGINT NOT NULL)")
    total, bad_line = 3000, 2600
    lines = [json.dumps({"n": n}) + "\n" for n in range(1, total + 1)]
    args = ["ingest", "seq", "--channel", "loader", "--warehouse", str(warehouse), "--batch-rows", "50",
            "--max-client-lag", "200 ms", "--json"]

    # 1: fed slowly through standard input, killed at a random moment after its first commit
    child = subprocess.Popen([*DTABLES, *args, "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=ENV, text=True)
    assert child.stdin is not None
    deadline = time.monotonic() + STARTUP
    fed = 0
    while _token(warehouse, "default.seq", "loader") is None and time.monotonic() < deadline:
        if fed < total // 2:
            child.stdin.write("".join(lines[fed:fed + 20]))
            child.stdin.flush()
            fed += 20
        time.sleep(0.05)
    assert _token(warehouse, "default.seq", "loader") is not None, "the loader never committed"
    for _ in range(random.randint(0, 10)):  # a few more lines, then the kill
        child.stdin.write("".join(lines[fed:fed + 20]))
        child.stdin.flush()
        fed += 20
        time.sleep(0.03)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    killed_at = int(_token(warehouse, "default.seq", "loader") or 0)
    assert 0 < killed_at <= fed

    # 2: the whole file, with a bad line: resumes after the committed line, loads up to the bad one, exits 1
    data = tmp_path / "seq.jsonl"
    data.write_text("".join(lines[:bad_line - 1]) + '{"n": "oops"}\n' + "".join(lines[bad_line:]))
    second = subprocess.run([*DTABLES, *args, str(data)], capture_output=True, text=True, env=ENV, timeout=600)
    assert second.returncode == 1, second.stderr[-3000:]
    assert f"record {bad_line}, column n: 'oops' is not a number" in second.stderr
    summary = json.loads(second.stdout.strip().splitlines()[-1])
    resumed = int(summary["resumed_after"])  # the log may hold a commit the killed process did not record
    assert resumed >= killed_at and summary["skipped"] == resumed
    assert summary["aborted"] and summary["committed_offset_token"] == str(bad_line - 1)

    # 3: the fixed file, loaded by this process through the same channel, completes
    data.write_text("".join(lines))
    with Client(session, max_client_lag=600) as client:
        channel = client.open_channel("loader", "seq")
        with data.open() as stream:
            rest = load(channel, stream, batch_rows=1000)
        channel.close()
    assert (rest.skipped, rest.inserted) == (bad_line - 1, total - bad_line + 1)
    assert channel.get_latest_committed_offset_token() == str(total)
    _assert_each_number_once(session, total)


PRODUCER = textwrap.dedent("""
    import random, sys, time
    import dtables
    from dtables.client import Client

    warehouse, total = sys.argv[1], int(sys.argv[2])
    client = Client(dtables.connect(warehouse, master="local[1]"), max_client_lag=0.2)
    channel = client.open_channel("numbers", "seq")
    token = channel.get_latest_committed_offset_token()
    n = int(token) + 1 if token else 1
    print("resuming at", n, flush=True)
    while n <= total:
        last = min(total, n + random.randint(0, 150))
        channel.insert_rows([{"n": i} for i in range(n, last + 1)], offset_token=str(last))
        n = last + 1
        time.sleep(random.uniform(0, 0.01))
    client.close()
    print("done", flush=True)
""")


@pytest.mark.slow
def test_producer_killed_repeatedly_loads_each_number_once(connect: Any, warehouse: Path) -> None:
    session = connect()
    session.sql("CREATE TABLE seq (n BIGINT NOT NULL)")
    total, kills, rng = 30000, 6, random.Random()
    for attempt in range(kills + 1):
        child = subprocess.Popen([sys.executable, "-c", PRODUCER, str(warehouse), str(total)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, text=True)
        assert child.stdout is not None
        assert child.stdout.readline().startswith("resuming at"), child.stderr.read()[-3000:] if child.stderr else ""
        if attempt == kills:
            out, errors = child.communicate(timeout=900)
            assert child.returncode == 0 and "done" in out, errors[-3000:]
            break
        time.sleep(rng.uniform(0.2, 4.0))  # anywhere: buffering, committing, between commit and store update
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    assert _token(warehouse, "default.seq", "numbers") == str(total)
    _assert_each_number_once(session, total)
