"""Writers that rely on Delta's idempotent transactions, run at once on threads (issue 16).

Delta skips a write whose ``txnAppId``/``txnVersion`` is already in the log *without an error*. Every dtables writer
therefore has to make sure that (a) a retry under the same version carries exactly what the first attempt carried,
(b) a new incarnation (a recreated stream) never reuses an old app id, and (c) a commit found in the log is
recognised as its own by what it wrote, not by its version alone. Each test asserts every row exactly once and every
token or frontier true to what landed; the deterministic ones failed on the code before the fix.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from typing import Any

import pytest

from dtables.changes.storage import FileEntry, _local_entry
from dtables.dynamic import executor, history
from dtables.ingest import commits
from dtables.ingest import store as cs
from dtables.client import Client
from dtables.testing import assert_same_rows
from scheduler.vocabulary import RefreshState

COLUMNS = "id BIGINT NOT NULL, channel STRING"


def _feed(channel: Any, name: str, start: int, count: int, batch: int, errors: list[BaseException]) -> None:
    try:
        for i in range(start, start + count, batch):
            chunk = [{"id": k, "channel": name} for k in range(i, min(i + batch, start + count))]
            channel.insert_rows(chunk, offset_token=str(chunk[-1]["id"]))
    except BaseException as e:  # noqa: BLE001 - reported by the test
        errors.append(e)


def _ingest_concurrently(dt: Any, table: str, channels: int, per_channel: int, batch: int) -> None:
    """``channels`` producer threads, one channel each, on one table; then every row exactly once and each channel's
    committed token the id of its last row, in the store and in the log."""
    dt.sql(f"CREATE TABLE {table} ({COLUMNS})")
    errors: list[BaseException] = []
    with Client(dt, max_client_lag=0.05, max_buffer_rows=batch * 3) as client:
        handles = [client.open_channel(f"p{k}", table) for k in range(channels)]
        threads = [threading.Thread(target=_feed, args=(handles[k], f"p{k}", k * per_channel, per_channel, batch,
                                                         errors)) for k in range(channels)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for h in handles:
            h.close()
    assert errors == []
    counts = dt.sql(f"SELECT count(*) AS n, count(DISTINCT id) AS d FROM {table}").first()
    assert (counts["n"], counts["d"]) == (channels * per_channel, channels * per_channel)
    location = dt.catalog.lookup(table)["location"]
    for k in range(channels):
        last = str((k + 1) * per_channel - 1)
        state = cs.get(dt.store, f"default.{table}", f"p{k}")
        assert state is not None and state.offset_token == last and state.rows_committed == per_channel
        in_log = commits.read_app(dt.spark, location, state.app_id, -1).newest_rows
        assert in_log is not None and in_log.meta.token == last and in_log.meta.rows_total == per_channel


def test_a_log_listing_skips_files_that_vanish_while_it_is_read(tmp_path: Any) -> None:
    # Delta renames its temporary commit files while other writers list _delta_log; a name listed and gone before
    # it is looked at once failed a channel's commit check, which then retried with more rows than it first sent.
    (tmp_path / ".00000000000000000001.json.tmp").write_text("{}")
    (tmp_path / "00000000000000000000.json").write_text("{}")
    entries = sorted(os.scandir(tmp_path), key=lambda e: e.name)
    os.remove(tmp_path / ".00000000000000000001.json.tmp")
    listed = [_local_entry(e) for e in entries]
    assert listed[0] is None and isinstance(listed[1], FileEntry) and listed[1].name == "00000000000000000000.json"


def test_a_retry_after_an_unknown_outcome_sends_the_same_batch(dt: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The commit lands but reading the log back fails; rows inserted meanwhile must not ride on the retry of that
    sequence (Delta would skip it as already applied and they would be lost while the token moved on)."""
    dt.sql(f"CREATE TABLE t ({COLUMNS})")
    with Client(dt, max_client_lag=600) as client:
        ch = client.open_channel("c", "t")
        ch.insert_rows([{"id": i, "channel": "c"} for i in range(3)], offset_token="2")
        real_read_app = commits.read_app
        calls = {"n": 0}

        def failing_once(*args: Any, **kwargs: Any) -> Any:
            calls["n"] += 1
            if calls["n"] == 1:
                raise FileNotFoundError("_delta_log/.00000000000000000002.json.tmp")
            return real_read_app(*args, **kwargs)

        monkeypatch.setattr(commits, "read_app", failing_once)
        ch.background_commit()  # lands in Delta, then the check fails: the outcome is unknown to the handle
        assert dt.sql("SELECT count(*) FROM t").first()[0] == 3
        ch.insert_rows([{"id": i, "channel": "c"} for i in range(3, 8)], offset_token="7")
        ch.close()
    assert_same_rows([tuple(r) for r in dt.sql("SELECT id FROM t").collect()], [(i,) for i in range(8)])
    state = cs.get(dt.store, "default.t", "c")
    assert state.offset_token == "7" and state.rows_committed == 8


def test_a_commit_of_the_same_sequence_with_other_rows_is_not_taken_as_ours(dt: Any) -> None:
    dt.sql(f"CREATE TABLE t ({COLUMNS})")
    with Client(dt, max_client_lag=600) as client:
        ch = client.open_channel("c", "t")
        state = cs.get(dt.store, "default.t", "c")
        # Someone else's commit under this handle's next sequence (as a confused retry would leave it).
        other = commits.ChannelCommit("default.t", "c", state.app_id, commits.txn_version(state.epoch, 1), "ROWS",
                                      "0", 1, 1)
        commits.write(dt.spark, ch._target.location, ch._target.schema, [(0, "c")], other)
        ch.insert_rows([{"id": i, "channel": "c"} for i in range(5)], offset_token="4")
        with pytest.raises(Exception, match="holds 1 row"):
            ch.flush()
        assert cs.get(dt.store, "default.t", "c").offset_token is None  # the token did not move
        with pytest.raises(Exception, match="holds 1 row"):
            ch.insert_rows([{"id": 9, "channel": "c"}])
        client._forget(ch)


def test_concurrent_channels_on_one_table_keep_every_row(dt: Any) -> None:
    for repetition in range(2):
        _ingest_concurrently(dt, f"t{repetition}", channels=4, per_channel=2000, batch=250)


@pytest.mark.slow
def test_concurrent_channels_on_one_table_keep_every_row_many_times(dt: Any) -> None:
    for repetition in range(25):
        _ingest_concurrently(dt, f"t{repetition}", channels=4, per_channel=50_000, batch=1000)


# -- streams -----------------------------------------------------------------------------------------------------------


def test_a_recreated_stream_does_not_reuse_the_old_streams_writes(dt: Any) -> None:
    # Its consume sequence starts again at 1: under the old app id Delta skipped the write as already applied and
    # the frontier moved over the change.
    dt.sql("CREATE TABLE src (i INT); CREATE TABLE tgt (i INT); CREATE STREAM st ON TABLE src")
    dt.sql("INSERT INTO src VALUES (1); INSERT INTO tgt SELECT i FROM st")
    dt.sql("DROP STREAM st; CREATE STREAM st ON TABLE src")
    dt.sql("INSERT INTO src VALUES (2); INSERT INTO tgt SELECT i FROM st")
    assert_same_rows([tuple(r) for r in dt.sql("SELECT i FROM tgt").collect()], [(1,), (2,)])


def _consume_repeatedly(dt: Any, times: int, errors: list[BaseException]) -> None:
    try:
        for _ in range(times):
            dt.sql("INSERT INTO tgt SELECT i FROM st")
    except BaseException as e:  # noqa: BLE001 - reported by the test
        errors.append(e)


def _write_repeatedly(dt: Any, start: int, times: int, errors: list[BaseException]) -> None:
    try:
        for k in range(times):
            dt.sql(f"INSERT INTO src VALUES ({start + 2 * k}), ({start + 2 * k + 1})")
    except BaseException as e:  # noqa: BLE001 - reported by the test
        errors.append(e)


def _two_workers_and_a_writer(dt: Any, worker: Any, rounds: int) -> None:
    """Two threads running ``worker`` ``rounds`` times while a third writes two rows to ``src`` as often."""
    errors: list[BaseException] = []
    threads = [threading.Thread(target=worker, args=(dt, rounds, errors)) for _ in range(2)]
    threads.append(threading.Thread(target=_write_repeatedly, args=(dt, 0, rounds, errors)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@pytest.mark.parametrize("rounds", [pytest.param(4, id="fast"), pytest.param(25, id="long", marks=pytest.mark.slow)])
def test_concurrent_stream_consumers_take_each_change_once(dt: Any, rounds: int) -> None:
    dt.sql("CREATE TABLE src (i INT); CREATE TABLE tgt (i INT); CREATE STREAM st ON TABLE src")
    _two_workers_and_a_writer(dt, _consume_repeatedly, rounds)
    dt.sql("INSERT INTO tgt SELECT i FROM st")  # what the consumers left
    assert_same_rows([tuple(r) for r in dt.sql("SELECT i FROM tgt").collect()], [(i,) for i in range(2 * rounds)])


# -- dynamic-table refreshes -------------------------------------------------------------------------------------------


def _refresh_repeatedly(dt: Any, times: int, errors: list[BaseException]) -> None:
    try:
        for _ in range(times):
            [record] = executor.refresh(dt, ["agg"])
            # The other thread may have refreshed to a later data timestamp meanwhile: this one is then CANCELLED
            # (a refresh never moves a table back in time); anything else must succeed.
            assert record.state == "SUCCEEDED" or (record.state == "CANCELLED" and "back in time" in record.error), \
                record.error
    except BaseException as e:  # noqa: BLE001 - reported by the test
        errors.append(e)


QUERY = "SELECT i % 3 AS k, count(*) AS n, sum(i) AS total FROM src GROUP BY i % 3"


@pytest.mark.parametrize("rounds", [pytest.param(3, id="fast"), pytest.param(15, id="long", marks=pytest.mark.slow)])
def test_concurrent_refreshes_of_one_table_equal_the_query(dt: Any, rounds: int) -> None:
    dt.sql("CREATE TABLE src (i INT); INSERT INTO src VALUES (100), (101)")
    dt.sql(f"CREATE DYNAMIC TABLE agg TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS {QUERY}")
    _two_workers_and_a_writer(dt, _refresh_repeatedly, rounds)
    executor.refresh(dt, ["agg"])
    assert_same_rows([tuple(r) for r in dt.sql("SELECT * FROM agg").collect()],
                     [tuple(r) for r in dt.sql(QUERY).collect()])
    written = [r.target_version for r in history.records(dt.store, "default.agg", states=(RefreshState.SUCCEEDED,))
               if r.action != "NO_DATA"]
    assert len(written) == len(set(written))  # no two refreshes claim one commit


@pytest.mark.slow  # long-running; `make test-all` runs it
def test_a_refresh_whose_write_delta_skipped_fails_instead_of_moving_the_frontier(
        dt: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    dt.sql("CREATE TABLE src (i INT); INSERT INTO src VALUES (1), (2)")
    dt.sql(f"CREATE DYNAMIC TABLE agg TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS {QUERY}")
    dt.sql("INSERT INTO src VALUES (3), (4)")
    executor.refresh(dt, ["agg"])
    dt.sql("INSERT INTO src VALUES (5)")
    real_reconcile = executor.reconcile

    def stale(session: Any, name: str) -> Any:  # a store that lags the log by one refresh, as a confused writer's
        d = real_reconcile(session, name)
        return dataclasses.replace(d, refresh_seq=d.refresh_seq - 1)

    monkeypatch.setattr(executor, "reconcile", stale)
    [record] = executor.refresh(dt, ["agg"])
    assert record.state == "FAILED" and "not by this one" in (record.error or "")
    monkeypatch.undo()
    [record] = executor.refresh(dt, ["agg"])
    assert record.state == "SUCCEEDED" and record.action == "INCREMENTAL"
    assert_same_rows([tuple(r) for r in dt.sql("SELECT * FROM agg").collect()],
                     [tuple(r) for r in dt.sql(QUERY).collect()])
