from __future__ import annotations

import os
import threading
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from scheduler.dag import DAG
from scheduler.daemon import Daemon, DaemonLock
from scheduler.errors import DaemonLockedError
from scheduler.runner import FailureState, RefreshOutcome, TickResult, TickRunner
from scheduler.ticks import EPOCH, SystemClock, TableState, TickPlanner
from scheduler.vocabulary import RefreshState

BASE = 0.2


class RecordingRefresher:
    def __init__(self) -> None:
        self.calls: list[tuple[str, datetime]] = []
        self.lock = threading.Lock()

    def refresh(self, name: str, data_timestamp: datetime, trigger: str) -> RefreshOutcome:
        with self.lock:
            self.calls.append((name, data_timestamp))
        return RefreshOutcome(RefreshState.SUCCEEDED, action="NO_DATA")


def make_daemon(tmp_path: Path, refresher: RecordingRefresher, **kw: object) -> tuple[Daemon, list[TickResult]]:
    dag = DAG({"up": [], "down": ["up"]})
    planner = TickPlanner(dag, {"up": BASE, "down": BASE}, base_period_s=BASE, clock=SystemClock())
    states: dict[str, TableState] = {}
    results: list[TickResult] = []

    def on_result(result: TickResult, failures: FailureState) -> None:
        results.append(result)
        for name in result.succeeded:
            states[name] = TableState(last_data_timestamp=result.data_timestamp)

    daemon = Daemon(planner, TickRunner(dag, refresher, max_parallel=2), lock_dir=tmp_path,
                    load_states=lambda: dict(states), on_result=on_result, **kw)  # type: ignore[arg-type]
    return daemon, results


def test_second_daemon_refuses_to_start_and_names_the_holder(tmp_path: Path) -> None:
    with DaemonLock(tmp_path):
        with pytest.raises(DaemonLockedError, match=f"pid {os.getpid()}"):
            DaemonLock(tmp_path).acquire()
    # Released: a new daemon may start.
    with DaemonLock(tmp_path) as lock:
        assert lock.path.read_text() == str(os.getpid())


def test_once_runs_one_tick_and_waits_for_it(tmp_path: Path) -> None:
    refresher = RecordingRefresher()
    daemon, results = make_daemon(tmp_path, refresher)
    daemon.run(once=True)
    assert [c[0] for c in refresher.calls] == ["up", "down"]
    assert len({c[1] for c in refresher.calls}) == 1
    assert results[0].succeeded == ("up", "down")


def test_daemon_ticks_on_the_base_grid_until_stopped(tmp_path: Path) -> None:
    refresher = RecordingRefresher()
    daemon, results = make_daemon(tmp_path, refresher)
    threading.Timer(1.1, daemon.stop).start()
    runner = threading.Thread(target=daemon.run)
    runner.start()
    runner.join(timeout=5)
    assert not runner.is_alive()
    timestamps = sorted({ts for _, ts in refresher.calls})
    assert len(timestamps) >= 3
    step = timedelta(seconds=BASE)
    assert all((ts - EPOCH) % step == timedelta(0) for ts in timestamps)
    # Every tick refreshed both tables to the same timestamp, upstream first.
    for ts in timestamps:
        assert [n for n, t in refresher.calls if t == ts] == ["up", "down"]
    # The lock is released after shutdown.
    DaemonLock(tmp_path).acquire()


def test_shutdown_timeout_cancels_refreshes_not_started(tmp_path: Path) -> None:
    release = threading.Event()

    class SlowUp(RecordingRefresher):
        def refresh(self, name: str, data_timestamp: datetime, trigger: str) -> RefreshOutcome:
            if name == "up":
                release.wait(2)
            return super().refresh(name, data_timestamp, trigger)

    refresher = SlowUp()
    daemon, results = make_daemon(tmp_path, refresher, shutdown_timeout_s=0.1)
    daemon.tick()
    threading.Timer(0.3, release.set).start()
    daemon._drain()  # what run() does at shutdown
    assert results[0].state_of("up") == RefreshState.SUCCEEDED
    assert results[0].state_of("down") == "CANCELLED"
