"""A refresh killed at named points (a real process exit) leaves each table at the old or the new state, and the
next refresh repairs the store and history from the Delta log without applying anything twice."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from dtables.testing import assert_same_rows
from oracle import oracle_rows, table_rows

from dtables.dynamic import definition as defs
from dtables.dynamic import history
from scheduler.vocabulary import RefreshState

REPO = Path(__file__).resolve().parents[2]

REFRESH_IN_A_NEW_PROCESS = """
import sys
import dtables
session = dtables.connect(sys.argv[1], master="local[1]")
session.refresh(["totals"], raise_on_failure=False)
"""


def _refresh_and_crash(warehouse: Path, point: str) -> int:
    env = {**os.environ, "DTABLES_FAULT": point, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", REFRESH_IN_A_NEW_PROCESS, str(warehouse)], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    return done.returncode


@pytest.mark.slow
def test_refresh_killed_at_each_point_recovers(dt: Any, warehouse: Path) -> None:
    dt.sql("CREATE TABLE orders (id INT, cust INT, amount DOUBLE)")
    dt.sql("INSERT INTO orders VALUES (1, 1, 10.0), (2, 2, 20.0), (3, 1, 5.0)")
    dt.sql("CREATE DYNAMIC TABLE enriched TARGET_LAG = DOWNSTREAM AS SELECT id, cust, amount FROM orders")
    dt.sql("CREATE DYNAMIC TABLE totals TARGET_LAG = '1 minute' AS "
           "SELECT cust, count(*) AS n, sum(amount) AS total FROM enriched GROUP BY cust")
    expect = {"before_write": RefreshState.CANCELLED, "after_write": RefreshState.SUCCEEDED,
              "after_store": RefreshState.SUCCEEDED}
    for i, (point, state) in enumerate(expect.items()):
        dt.sql(f"INSERT INTO orders VALUES ({10 + i}, 1, 1.5)")
        dt.sql(f"UPDATE orders SET amount = amount + 1 WHERE id = {1 + i}")
        seq_before = defs.require(dt.store, "enriched").refresh_seq
        assert _refresh_and_crash(warehouse, point) == 17, point
        crashed = history.records(dt.store, "enriched")[-1]
        assert crashed.state == RefreshState.EXECUTING  # the process died mid-refresh
        records = dt.refresh(["totals"])  # the next refresh reconciles first
        crashed = history.get(dt.store, crashed.refresh_id)
        assert crashed is not None and crashed.state == state, (point, crashed)
        if state == RefreshState.SUCCEEDED:
            assert "recovered" in (crashed.reason or "") or point == "after_store"
            assert crashed.target_version is not None
            # the crashed refresh already applied the changes: the rerun finds nothing to do for `enriched`
            assert records[0].action == "NO_DATA"
            assert defs.require(dt.store, "enriched").refresh_seq == seq_before + 1
        else:
            assert "interrupted" in (crashed.error or "")
            assert records[0].action == "INCREMENTAL"
        for name in ("enriched", "totals"):
            assert_same_rows(table_rows(dt, name), oracle_rows(dt, name))
        # exactly one commit per applied refresh: every refresh commit carries a distinct sequence
        location = dt.catalog.lookup("enriched")["location"]
        metas = [r["userMetadata"] for r in dt.spark.sql(f"DESCRIBE HISTORY delta.`{location}`").collect()
                 if r["userMetadata"]]
        assert len(metas) == len(set(metas))
