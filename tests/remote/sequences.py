"""What a user does first, run against a Spark that is not the test run's local one (a standalone cluster, a
Spark Connect server): streams, a dynamic table, an ingestion channel and the CLI, each checked against
recomputation. tests/remote/test_cluster.py and test_connect.py run them, each in a pytest process of its own
(a process holds one classic SparkContext, and a Connect session switches PySpark into Connect mode for good).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from dtables.client import Client
from dtables.spark.servers import Cluster
from dtables.testing import assert_same_rows

# Each application (this test process, a CLI run, a Connect server) takes one core of the worker's two, so that
# one never waits for another to give its executor back.
APP_CONF = {"spark.cores.max": "1", "spark.executor.memory": "1g"}


def executor_apps(cluster: Cluster) -> list[Path]:
    """The applications that ran executors on the worker (its work folder has one folder per application)."""
    return sorted(p for p in cluster.work_dir.glob("app-*") if any(p.iterdir()))


def files_under(folder: str) -> list[str]:
    path = folder.removeprefix("file:")
    return [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs] if os.path.exists(path) else []


def rows(session: Any, sql: str) -> list[tuple]:
    return [tuple(r) for r in session.sql(sql).collect()]


def stream_sequence(session: Any) -> None:
    """A stream consumed by INSERT ... SELECT: the target gets each change once; the stream is empty afterwards."""
    session.sql("CREATE TABLE orders (id INT, amount INT)")
    session.sql("INSERT INTO orders VALUES (1, 10), (2, 20)")
    session.sql("CREATE STREAM orders_s ON TABLE orders")
    session.sql("INSERT INTO orders VALUES (3, 30), (3, 30), (4, NULL)")
    session.sql("UPDATE orders SET amount = 11 WHERE id = 1")
    session.sql("CREATE TABLE order_log (id INT, amount INT, action STRING, is_update BOOLEAN)")
    session.sql("INSERT INTO order_log SELECT id, amount, METADATA$ACTION, METADATA$ISUPDATE FROM orders_s")
    assert_same_rows(rows(session, "SELECT * FROM order_log"),
                     [(3, 30, "INSERT", False), (3, 30, "INSERT", False), (4, None, "INSERT", False),
                      (1, 10, "DELETE", True), (1, 11, "INSERT", True)])
    assert rows(session, "SELECT * FROM orders_s") == []
    session.sql("DELETE FROM orders WHERE id = 3")
    session.sql("INSERT INTO order_log SELECT id, amount, METADATA$ACTION, METADATA$ISUPDATE FROM orders_s")
    assert len(rows(session, "SELECT * FROM order_log WHERE action = 'DELETE' AND id = 3")) == 2


DT_QUERY = ("SELECT c.region, COUNT(*) AS n, SUM(s.amount) AS total FROM sales s JOIN customers c "
            "ON s.customer_id = c.id GROUP BY c.region")


def dynamic_table_sequence(session: Any) -> str:
    """A join + GROUP BY dynamic table refreshed INCREMENTAL after DML on both sides, equal to its query; then
    dropped. Returns the dynamic table's folder (gone after the drop)."""
    session.sql("CREATE TABLE customers (id INT, region STRING)")
    session.sql("INSERT INTO customers VALUES (1, 'north'), (2, 'south'), (3, NULL)")
    session.sql("CREATE TABLE sales (customer_id INT, amount DECIMAL(10, 2))")
    session.sql("INSERT INTO sales VALUES (1, 5.00), (1, 5.00), (2, 7.50), (3, NULL), (NULL, 1.00)")
    session.sql(f"CREATE DYNAMIC TABLE region_totals TARGET_LAG = '1 minute' REFRESH_MODE = INCREMENTAL "
                f"AS {DT_QUERY}")
    location = session.catalog.lookup("region_totals")["location"]
    for dml in ["INSERT INTO sales VALUES (2, 1.25), (3, 4.00)", "UPDATE sales SET amount = 6 WHERE customer_id = 1",
                "DELETE FROM sales WHERE amount = 7.50", "UPDATE customers SET region = 'east' WHERE id = 3"]:
        session.sql(dml)
        [record] = session.refresh("region_totals")
        assert (record.state, record.action) == ("SUCCEEDED", "INCREMENTAL"), (record.action, record.reason)
        assert_same_rows(rows(session, "SELECT * FROM region_totals"), rows(session, DT_QUERY))
    session.sql("DROP DYNAMIC TABLE region_totals")
    return str(location)


def ingest_sequence(session: Any) -> None:
    """A channel's rows committed with their offset token; a reopened channel resumes from it."""
    session.sql("CREATE TABLE readings (sensor INT NOT NULL, value DOUBLE)")
    with Client(session, max_client_lag=600) as client:
        channel = client.open_channel("c1", "readings")
        channel.insert_rows([{"sensor": 1, "value": 0.5}, {"sensor": 2, "value": None}], offset_token="2")
        channel.insert_rows([{"sensor": 1, "value": 0.75}], offset_token="3")
        channel.close()
        assert client.open_channel("c1", "readings").get_latest_committed_offset_token() == "3"
    assert_same_rows(rows(session, "SELECT * FROM readings"), [(1, 0.5), (2, None), (1, 0.75)])


def cli_sequence(folder: Path, spark: dict[str, Any]) -> Path:
    """`dtables init`, a profile with ``spark`` settings, `apply`, DML, `refresh` (INCREMENTAL), `history`."""
    run_cli(["init", "demo"], folder)
    project = folder / "demo"
    config = yaml.safe_load((project / "dtables.yml").read_text())
    config["profiles"] = {"remote": {"spark": spark}}
    (project / "dtables.yml").write_text(yaml.safe_dump(config))
    assert "applied 3 change(s)" in run_cli(["apply"], project)
    run_cli(["sql", "-e", "INSERT INTO sales VALUES (5, 'west', 99.00, DATE'2026-01-03');"
             "UPDATE sales SET amount = 50 WHERE sale_id = 2"], project)
    refreshed = json.loads(run_cli(["refresh", "--json"], project))
    assert {r["table"]: r["action"] for r in refreshed} == {"default.big_sales": "INCREMENTAL",
                                                           "default.store_totals": "INCREMENTAL"}
    history = json.loads(run_cli(["history", "--json"], project))
    assert {h["action"] for h in history} >= {"FULL", "INCREMENTAL"}
    totals = json.loads(run_cli(["sql", "--json", "-e", "SELECT store, sales, total FROM store_totals "
                                 "ORDER BY store"], project))
    assert [(t["store"], t["sales"], str(t["total"])) for t in totals] == [
        ("east", 1, "12.75"), ("north", 2, "65.00"), ("south", 1, "50.00"), ("west", 1, "99.00")]
    return project


def run_cli(args: list[str], cwd: Path) -> str:
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "DTABLES_PROFILE": "remote"}
    result = subprocess.run([sys.executable, "-m", "dtables.cli", *args], cwd=cwd, capture_output=True, text=True,
                            timeout=600, env=env)
    assert result.returncode == 0, f"dtables {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout
