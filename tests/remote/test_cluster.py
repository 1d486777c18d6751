"""Issue 21: dtables on a standalone Spark cluster (a master and a worker from the pip install).

Run on its own: ``pytest -m cluster tests/remote/test_cluster.py`` (`make test` does, after the default suite).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import dtables
from dtables.spark.servers import Cluster
from tests.remote import sequences
from tests.remote.sequences import APP_CONF, executor_apps

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def session(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    s = dtables.connect(tmp_path_factory.mktemp("wh") / "warehouse", master=cluster.master_url, spark_conf=APP_CONF)
    yield s
    s.close()


def test_tasks_run_on_the_workers_executor_with_cluster_defaults(session: Any, cluster: Cluster) -> None:
    spark = session.spark
    folders = spark.sparkContext.parallelize(range(2), 2).map(lambda _: os.getcwd()).collect()
    assert all(Path(f).is_relative_to(cluster.work_dir) for f in folders), folders
    assert spark.conf.get("spark.sql.shuffle.partitions") == "32"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.conf.get("spark.ui.showConsoleProgress") == "false"


def test_streams(session: Any) -> None:
    sequences.stream_sequence(session)


def test_dynamic_table_refreshed_incrementally_and_dropped(session: Any) -> None:
    location = sequences.dynamic_table_sequence(session)
    assert not os.path.exists(location.removeprefix("file:"))


def test_ingestion_channel(session: Any) -> None:
    sequences.ingest_sequence(session)


def test_cli(cluster: Cluster, tmp_path: Path) -> None:
    before = executor_apps(cluster)
    # numbers in dtables.yml's spark.conf are accepted as they are (YAML reads 4 as a number)
    conf: dict[str, Any] = {**APP_CONF, "spark.sql.shuffle.partitions": 4}
    sequences.cli_sequence(tmp_path, {"master": cluster.master_url, "conf": conf})
    assert len(executor_apps(cluster)) > len(before)  # the CLI's applications ran executors on the worker
