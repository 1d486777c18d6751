"""Issue 21: dtables over Spark Connect (a Connect server with Delta, started from the pip install, whose own
master is the standalone cluster, so its tasks run on the worker's executor).

Run on its own: ``pytest -m connect tests/remote/test_connect.py`` (`make test` does, after the default suite).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import dtables
from dtables.errors import DtablesError, SqlError
from dtables.spark.fs import RemoteStorageError
from dtables.spark.servers import Cluster, Server, start_connect_server
from dtables.spark.sessions import cancel_jobs, is_connect, own_session
from tests.remote import sequences
from tests.remote.sequences import APP_CONF, executor_apps, files_under

pytestmark = pytest.mark.connect


@pytest.fixture(scope="module")
def server(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    started = start_connect_server(conf=APP_CONF, master=cluster.master_url,
                                   log_dir=tmp_path_factory.mktemp("connect"))
    yield started
    started.stop()


@pytest.fixture(scope="module")
def session(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    s = dtables.connect(tmp_path_factory.mktemp("wh") / "warehouse", remote=server.url)
    yield s
    s.close()


def test_a_connect_session_whose_tasks_run_on_the_cluster(session: Any, cluster: Cluster) -> None:
    assert is_connect(session.spark)
    assert session.sql("SELECT count(*) AS n FROM range(1000)").first().n == 1000
    assert executor_apps(cluster)  # the server's application runs its tasks on the worker


def test_streams(session: Any) -> None:
    sequences.stream_sequence(session)


def test_dynamic_table_refreshed_incrementally_and_dropped_leaves_no_files(session: Any) -> None:
    location = sequences.dynamic_table_sequence(session)
    assert files_under(location) == []


def test_ingestion_channel(session: Any) -> None:
    sequences.ingest_sequence(session)


def test_a_script_with_a_syntax_error_changes_nothing(session: Any) -> None:
    with pytest.raises(SqlError, match="syntax error"):
        session.sql("CREATE TABLE t1 (k INT); SELEC 1")
    assert session.catalog.lookup("t1") is None
    assert "t1" not in [r.tableName for r in session.spark.sql("SHOW TABLES").collect()]


def test_a_failed_create_leaves_no_folder(session: Any) -> None:
    session.sql("CREATE TABLE src (k INT)")
    session.sql("INSERT INTO src VALUES (1), (2)")
    # k / 0 fails in the initial refresh's write tasks, after the folder exists; Spark's words for it vary (the
    # task's error, or "Job aborted ... failed 4 times" after the cluster's retries), dtables' do not
    with pytest.raises(DtablesError, match="its initial refresh failed"):
        session.sql("CREATE DYNAMIC TABLE bad TARGET_LAG = '1 minute' AS SELECT k / 0 AS x FROM src")
    assert session.catalog.lookup("bad") is None
    assert files_under(session.catalog.managed_location("bad")) == []


def test_cancel_jobs_interrupts_work_on_a_session_of_its_own(session: Any) -> None:
    """The daemon's shutdown timeout cancels running refreshes; over Connect that is interruptAll on every clone."""
    failures: list[Exception] = []

    def long_query() -> None:
        with own_session(session.spark) as clone:
            try:  # minutes of work on one core
                clone.sql("SELECT sum(id) AS s FROM range(0, 100000000000, 1, 2)").collect()
            except Exception as e:  # noqa: BLE001 - the interruption is the expected outcome
                failures.append(e)

    worker = threading.Thread(target=long_query)
    worker.start()
    time.sleep(8)
    started = time.monotonic()
    cancel_jobs(session.spark)
    worker.join(120)
    assert not worker.is_alive() and failures, "the query was not interrupted"
    assert time.monotonic() - started < 60
    assert session.sql("SELECT 1 AS one").first().one == 1  # the session itself still works


def test_remote_storage_is_refused_with_a_clear_error(server: Server, tmp_path: Path) -> None:
    with pytest.raises(RemoteStorageError, match="Spark Connect"):
        dtables.connect("s3a://bucket/warehouse", remote=server.url, state_store=tmp_path / "state.sqlite")


def test_cli(server: Server, tmp_path: Path) -> None:
    sequences.cli_sequence(tmp_path, {"remote": server.url})
