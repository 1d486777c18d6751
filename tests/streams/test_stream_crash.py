"""Fault injection: a real separate process is killed (SIGKILL) at each step of a consumption after its data
write; after a restart the target holds every change exactly once and the stream is consumed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from dtables.testing import assert_same_rows

CHILD = textwrap.dedent("""
    import sys, dtables
    session = dtables.connect(sys.argv[1], master="local[1]")
    session.sql(sys.argv[2])
    sys.exit(0)
""")

SINGLE = "INSERT INTO tgt SELECT id, v FROM s"
TRANSACTION = "BEGIN; INSERT INTO tgt SELECT id, v FROM s; INSERT INTO tgt2 SELECT id, v FROM s; COMMIT"


def _run_child(warehouse: Any, sql: str, crash_at: str) -> int:
    env = {**os.environ, "DTABLES_STREAM_CRASH_AT": crash_at}
    result = subprocess.run([sys.executable, "-c", CHILD, str(warehouse), sql], env=env, timeout=600,
                          capture_output=True, text=True)
    if result.returncode not in (-9, 0):
        raise AssertionError(result.stderr[-3000:])
    return result.returncode


# Each case starts a Spark process of its own, so all run with -m slow. The default suite's short fault soak
# (tests/soak) kills a transaction consumer right after a commit of one of its two targets: the same riskiest
# moments (data committed, frontier not; a transaction half written), reached by a real kill from outside.
@pytest.mark.slow
@pytest.mark.parametrize("crash_at, sql", [
    ("after_pending", SINGLE),  # before the write: nothing applied
    ("after_write", SINGLE),  # data committed, frontier not recorded
    ("after_advance", SINGLE),  # everything recorded, dies before returning
    ("between_writes", TRANSACTION),  # a transaction: first target written, second not
    ("after_write", TRANSACTION),
])
def test_killed_consumer_applies_each_change_once(connect: Any, warehouse: Any, crash_at: str, sql: str) -> None:
    dt = connect()
    dt.sql("CREATE TABLE src (id INT, v STRING)")
    dt.sql("CREATE TABLE tgt (id INT, v STRING)")
    dt.sql("CREATE TABLE tgt2 (id INT, v STRING)")
    dt.sql("CREATE STREAM s ON TABLE src")
    dt.sql("INSERT INTO src VALUES (1, 'a'), (2, 'b')")

    assert _run_child(warehouse, sql, crash_at) == -9  # really killed at the point

    restarted = connect()
    dt.sql("INSERT INTO src VALUES (3, 'c')")
    restarted.sql(sql)  # recovers the crashed consumption first, then consumes what came after
    restarted.sql(sql)  # nothing left: must not apply anything again
    expected = [(1, "a"), (2, "b"), (3, "c")]
    assert_same_rows(restarted.sql("SELECT * FROM tgt").collect(), expected)
    if sql == TRANSACTION:
        assert_same_rows(restarted.sql("SELECT * FROM tgt2").collect(), expected)
    assert restarted.sql("SELECT * FROM s").collect() == []
