"""Start a Spark standalone cluster (a master and a worker) or a Spark Connect server from the pip install.

For trying dtables against a real cluster or a Connect server on one machine, and for the test suite, which starts
them on free loopback ports and stops them by PID. A real deployment starts these with Spark's own scripts; the
commands built here are the same ones (``spark-class`` / ``spark-submit`` of the pyspark package), with Delta's
jars on the Connect server's classpath.

``python -m dtables.spark.servers cluster`` or ``... connect`` starts one and prints its URL; Ctrl-C stops it.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyspark

from dtables.errors import DtablesError
from dtables.spark.builder import CODEGEN_CACHE, local_file_system_settings
from dtables.spark.jars import delta_jars

CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
HOST = "127.0.0.1"


def spark_home() -> Path:
    return Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((HOST, port)) == 0


@dataclass
class Server:
    """One started JVM: what it is, the port it serves, its process and its log file."""

    name: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path
    url: str

    def wait_until_up(self, timeout_s: float = 180.0, ready: str | None = None) -> None:
        """Until the port accepts connections (and ``ready`` is in the log, when given); raise with the log's tail
        if the process exits or the time runs out."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise DtablesError(f"{self.name} exited with code {self.process.returncode}; its log:\n{self.tail()}")
            if _listening(self.port) and (ready is None or ready in self.log.read_text(errors="replace")):
                return
            time.sleep(0.5)
        raise DtablesError(f"{self.name} did not come up on port {self.port} within {timeout_s:.0f} s; "
                           f"its log:\n{self.tail()}")

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else "(no log)"

    def stop(self) -> None:
        """SIGTERM to the process group (spark-class forks the JVM), then SIGKILL if it lingers."""
        if self.process.poll() is not None:
            return
        for sig, wait_s in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.process.wait(wait_s)
                return
            except subprocess.TimeoutExpired:
                continue


@dataclass
class Cluster:
    """A standalone master and one worker; ``master_url`` is what ``spark.master`` takes."""

    master: Server
    worker: Server
    work_dir: Path

    @property
    def master_url(self) -> str:
        return self.master.url

    def stop(self) -> None:
        for server in (self.worker, self.master):
            server.stop()


def _environment(python: str | None) -> dict[str, str]:
    env = {**os.environ, "SPARK_HOME": str(spark_home())}
    # executors run this Python (the one with dtables' dependencies), not whatever `python3` is on PATH
    env["PYSPARK_PYTHON"] = python or sys.executable
    env.setdefault("SPARK_LOCAL_IP", HOST)
    return env


def _start(name: str, command: Sequence[str], port: int, url: str, log_dir: Path, python: str | None) -> Server:
    log = log_dir / f"{name}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(list(command), stdout=out, stderr=subprocess.STDOUT, env=_environment(python),
                                   start_new_session=True)  # its own process group, stopped as one
    return Server(name, port, process, log, url)


def _spark_class(main_class: str, *args: str) -> list[str]:
    return [str(spark_home() / "bin" / "spark-class"), main_class, *args]


def start_cluster(cores: int = 2, memory: str = "2g", log_dir: Path | None = None,
                  python: str | None = None) -> Cluster:
    """A master and a worker with ``cores`` and ``memory`` on free loopback ports, both up when this returns."""
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="dtables-cluster-"))
    port, ui = free_port(), free_port()
    master = _start("master", _spark_class(MASTER_CLASS, "--host", HOST, "--port", str(port), "--webui-port",
                                           str(ui)), port, f"spark://{HOST}:{port}", log_dir, python)
    try:
        master.wait_until_up(ready="I have been elected leader")
        worker_port, worker_ui = free_port(), free_port()
        work_dir = log_dir / "work"
        worker = _start("worker", _spark_class(WORKER_CLASS, "--host", HOST, "--port", str(worker_port),
                                               "--webui-port", str(worker_ui), "--cores", str(cores), "--memory",
                                               memory, "--work-dir", str(work_dir), master.url),
                        worker_port, master.url, log_dir, python)
        worker.wait_until_up(ready="Successfully registered with master")
    except BaseException:
        master.stop()
        raise
    return Cluster(master, worker, work_dir)


def connect_server_command(port: int, conf: dict[str, str] | None = None, master: str = "local[2]") -> list[str]:
    """``spark-submit`` of Spark's Connect server with Delta's jars and SQL extension, listening on ``port``."""
    settings = {
        "spark.connect.grpc.binding.port": str(port),
        "spark.connect.grpc.binding.address": HOST,
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        # a server on one machine: few shuffle and snapshot partitions, as dtables' local sessions have
        "spark.sql.shuffle.partitions": "4",
        "spark.databricks.delta.snapshotPartitions": "2",
        **CODEGEN_CACHE,
        **(local_file_system_settings() if master.startswith("local") else {}),
        **(conf or {}),
    }
    command = [str(spark_home() / "bin" / "spark-submit"), "--master", master, "--class", CONNECT_SERVER_CLASS,
               "--jars", ",".join(str(p) for p in delta_jars())]
    for key, value in settings.items():
        command += ["--conf", f"{key}={value}"]
    return command


def start_connect_server(conf: dict[str, str] | None = None, master: str = "local[2]", log_dir: Path | None = None,
                         python: str | None = None) -> Server:
    """A Spark Connect server with Delta on a free loopback port, up when this returns; ``url`` is ``sc://...``."""
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="dtables-connect-"))
    port = free_port()
    server = _start("connect-server", connect_server_command(port, conf, master), port, f"sc://{HOST}:{port}",
                    log_dir, python)
    try:
        server.wait_until_up()
    except BaseException:
        server.stop()
        raise
    return server


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dtables.spark.servers", description=__doc__)
    parser.add_argument("kind", choices=["cluster", "connect"])
    parser.add_argument("--cores", type=int, default=2, help="the worker's cores (cluster)")
    parser.add_argument("--memory", default="2g", help="the worker's memory (cluster)")
    args = parser.parse_args(argv)
    # stopped by a signal (kill, a supervisor), stop the JVMs too: they run in process groups of their own
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if args.kind == "cluster":
        cluster = start_cluster(args.cores, args.memory)
        print(f"master {cluster.master_url} (logs in {cluster.master.log.parent}); Ctrl-C stops it", flush=True)
        stop = cluster.stop
    else:
        server = start_connect_server()
        print(f"Spark Connect server {server.url} (log {server.log}); Ctrl-C stops it", flush=True)
        stop = server.stop
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 0
    finally:
        stop()


if __name__ == "__main__":
    raise SystemExit(main())
