"""Spark Declarative Pipelines (`spark-pipelines run`, shipped with pyspark) maintaining the same queries.

A pipeline project is written next to the warehouse: `spark-pipeline.yml` and one `CREATE MATERIALIZED VIEW` SQL
file per query, reading the very Delta tables dtables maintains (by path: the pipeline has its own catalog). Each
run is the command a user would type, in a fresh process, with a persistent Hive catalog
(`spark.sql.catalogImplementation=hive`, a Derby metastore in the project folder) so that the second run finds
the views of the first. Open-source pipelines recompute a materialized view on every run: this is the
"what people run today" baseline.

Flows run one at a time (`spark.sql.pipelines.execution.maxConcurrentFlows=1`) so each query's time is its own:
the time from a flow's PLANNING event to its COMPLETED event, as the lines reach us (the CLI prints whole seconds).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import sqlglot
from sqlglot import exp

from bench.tpch.schema import TABLES
from bench.tpch.workload import Query
from dtables.spark.builder import DELTA_CONF, LOCAL_DEFAULTS, local_file_system_settings
from dtables.spark.jars import delta_jars

_FLOW = re.compile(r"Flow (?:\S+\.)?(q\d\d) (?:is|has) (\w+)")


@dataclass
class PipelineRun:
    seconds: float  # the whole command, JVM start included
    flows: dict[str, float] = field(default_factory=dict)  # query name -> flow seconds
    failed: dict[str, str] = field(default_factory=dict)  # query name -> last lines before its failure
    returncode: int = 0
    log: Path | None = None
    error: str = ""


def _over_paths(query: Query, locations: dict[str, str]) -> str:
    """The query with every TPC-H table replaced by `delta.`<its location>``."""
    tree = sqlglot.parse_one(query.dynamic, read="spark")
    for table in tree.find_all(exp.Table):
        if not table.args.get("db") and table.name in TABLES:
            table.set("this", exp.to_identifier(locations[table.name], quoted=True))
            table.set("db", exp.to_identifier("delta"))
    return tree.sql(dialect="spark", pretty=True)


def write_project(folder: Path, queries: list[Query], locations: dict[str, str],
                  shuffle_partitions: int | None = None) -> Path:
    """Write the pipeline project; returns its spec file. ``shuffle_partitions`` as the dtables sessions use."""
    conf = {**SQL_CONF, **({"spark.sql.shuffle.partitions": str(shuffle_partitions)} if shuffle_partitions else {})}
    (folder / "transformations").mkdir(parents=True, exist_ok=True)
    spec = folder / "spark-pipeline.yml"
    spec.write_text(
        "name: tpch\n"
        f"storage: {(folder / 'storage').as_uri()}\n"
        "libraries:\n"
        "  - glob:\n"
        "      include: transformations/**\n"
        "configuration:\n" + "".join(f'  {k}: "{v}"\n' for k, v in conf.items()))
    for q in queries:
        (folder / "transformations" / f"{q.name}.sql").write_text(
            f"-- TPC-H {q.name} (the dynamic-table variant: same rows)\n"
            f"CREATE MATERIALIZED VIEW {q.name} AS\n{_over_paths(q, locations)};\n")
    return spec


# Session settings, in the spec's `configuration` (the same values dtables' local sessions use).
SQL_CONF = {
    "spark.sql.shuffle.partitions": LOCAL_DEFAULTS["spark.sql.shuffle.partitions"],
    "spark.sql.session.timeZone": "UTC",
    "spark.databricks.delta.snapshotPartitions": LOCAL_DEFAULTS["spark.databricks.delta.snapshotPartitions"],
    "spark.sql.pipelines.execution.maxConcurrentFlows": "1",
}


def _spark_defaults(folder: Path, driver_memory: str) -> Path:
    """A Spark conf folder whose spark-defaults.conf holds what the pipeline's Spark needs; returns the folder.

    Not `--conf` on the command line: spark-submit hands its settings to the Python CLI in groups of 10
    (PYSPARK_REMOTE_INIT_CONF_<i>) and pyspark 4.2 keeps only the last group when it starts the local Connect
    server (pyspark/sql/connect/session.py: `init_opts = json.loads(...)` in a loop), so once spark-submit holds
    more than ten settings some are silently lost, e.g. the class path (ClassNotFoundException:
    io.delta.sql.DeltaSparkSessionExtension). spark-defaults.conf is read by both spark-submit launches (the CLI's
    and the local server's), as it is on a user's installation (SPARK_CONF_DIR).
    """
    conf = {
        **DELTA_CONF,
        # The local file system without process starts, as dtables' own sessions have (a fair baseline); Delta on
        # the driver's class path: `--jars` comes too late for the SQL extension of the Connect server.
        **local_file_system_settings(os.pathsep.join(str(p) for p in delta_jars())),
        "spark.sql.catalogImplementation": "hive",
        # The local Connect server is the driver and does all the work: the memory the dtables session has.
        "spark.driver.memory": driver_memory,
    }
    conf_dir = folder / "conf"
    conf_dir.mkdir(exist_ok=True)
    (conf_dir / "spark-defaults.conf").write_text("".join(f"{k} {v}\n" for k, v in conf.items()))
    return conf_dir


def _command(spec: Path) -> list[str]:
    # Session settings go in the spec's `configuration`; the views land in <project>/spark-warehouse (the working
    # directory). spark-pipelines starts its own local Spark Connect server (`--remote local`), which refuses
    # `--master`: the server takes every core of the machine (local[*]), 2 here, as the dtables sessions do.
    return [str(Path(sys.executable).parent / "spark-pipelines"), "run", "--spec", str(spec)]


def run(spec: Path, label: str, driver_memory: str = LOCAL_DEFAULTS["spark.driver.memory"]) -> PipelineRun:
    """`spark-pipelines run` once, as a user would; per-flow times from its event lines."""
    folder = spec.parent
    log = folder / f"run-{label}.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "SPARK_CONF_DIR": str(_spark_defaults(folder, driver_memory)),
           "PYSPARK_PYTHON": sys.executable,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    started: dict[str, float] = {}
    result = PipelineRun(0.0, log=log)
    tail: list[str] = []
    start = time.perf_counter()
    with log.open("w") as out, subprocess.Popen(_command(spec), cwd=folder, env=env,
                                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            now = time.perf_counter()
            out.write(line)
            tail = (tail + [line.rstrip()])[-30:]
            m = _FLOW.search(line)
            if m is None:
                continue
            name, state = m.groups()
            if state == "PLANNING":
                started[name] = now
            elif state == "COMPLETED" and name in started:
                result.flows[name] = now - started[name]
            elif state == "FAILED":
                result.failed[name] = line.strip()
        result.returncode = proc.wait()
    result.seconds = time.perf_counter() - start
    if result.returncode != 0:
        errors = [t for t in tail if "Exception" in t or "Error" in t]
        result.error = (errors[-1] if errors else "\n".join(tail[-5:]))[:2000]
    return result
