"""The scheduler daemon: one tick every base period on APScheduler, one daemon per warehouse.

Each tick plans with the tables still refreshing from earlier ticks marked running (so they are SKIPPED, and the
next refresh covers their whole interval) and hands the plan to the runner on its own thread; ticks therefore
never wait for each other, while the runner's shared pool bounds the parallelism of all ticks together.

The caller supplies what lives above the scheduler: ``load_states`` (last data timestamps from the refresh history)
and ``on_result`` (persist the ``FailureState``, write SKIPPED/UPSTREAM_FAILED/CANCELLED history records).
"""

from __future__ import annotations

import fcntl
import os
import signal
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import IO

from apscheduler.schedulers.blocking import BlockingScheduler
from apscheduler.triggers.interval import IntervalTrigger

from scheduler.errors import DaemonLockedError
from scheduler.runner import FailureState, TickResult, TickRunner
from scheduler.ticks import TableState, TickPlan, TickPlanner, next_grid_point

LOCK_FILE = "scheduler.lock"


class DaemonLock:
    """An exclusive ``fcntl`` lock on ``<directory>/scheduler.lock`` holding the owner's PID; released on close or
    process death (the kernel drops the lock, so a crashed daemon never blocks the next one)."""

    def __init__(self, directory: Path | str) -> None:
        self.path = Path(directory) / LOCK_FILE
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        # owner-only, as dtables' state folder (the lock is usually the first thing in it when a daemon starts)
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle = os.fdopen(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600), "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as e:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise DaemonLockedError(
                f"another dtables daemon (pid {holder}) is already running for this warehouse; lock file {self.path}"
            ) from e
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._file = handle

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None

    def __enter__(self) -> DaemonLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class Daemon:
    """Runs ticks until stopped (SIGTERM/SIGINT or ``stop()``), or a single tick with ``run(once=True)``."""

    def __init__(
        self,
        planner: TickPlanner,
        runner: TickRunner,
        *,
        lock_dir: Path | str,
        load_states: Callable[[], Mapping[str, TableState]],
        failures: FailureState | None = None,
        on_result: Callable[[TickResult, FailureState], None] = lambda result, failures: None,
        shutdown_timeout_s: float = 60.0,
    ) -> None:
        self.planner = planner
        self.runner = runner
        self.lock = DaemonLock(lock_dir)
        self.load_states = load_states
        self.failures = failures or FailureState()
        self.on_result = on_result
        self.shutdown_timeout_s = shutdown_timeout_s
        self._cancel = threading.Event()
        self._guard = threading.Lock()  # protects _running, _threads and the FailureState hand-off
        self._running: set[str] = set()
        self._threads: list[threading.Thread] = []
        self._scheduler: BlockingScheduler | None = None
        self._stop_requested = threading.Event()

    # -- public ----------------------------------------------------------------------------------------------------
    def run(self, once: bool = False) -> None:
        """Hold the lock and tick (once, or every base period until stopped); returns after running refreshes
        finished or were cancelled at the shutdown timeout."""
        with self.lock:
            if once:
                self.tick()
                self._drain()
                return
            self._scheduler = BlockingScheduler(timezone="UTC")
            base = self.planner.base_period_s
            self._scheduler.add_job(
                self.tick,
                IntervalTrigger(seconds=base, start_date=next_grid_point(self.planner.clock.now(), base)),
                max_instances=1,
                coalesce=True,
                misfire_grace_time=max(1, int(base)),
                id="dtables-tick",
            )
            if threading.current_thread() is threading.main_thread():
                for sig in (signal.SIGTERM, signal.SIGINT):
                    signal.signal(sig, self._on_signal)
            if not self._stop_requested.is_set():
                self._scheduler.start()
            self._drain()

    def stop(self) -> None:
        """Stop ticking; running refreshes get ``shutdown_timeout_s`` to finish. Safe from any thread."""
        self._stop_requested.set()
        if self._scheduler is not None and self._scheduler.running:
            self._scheduler.shutdown(wait=False)

    def tick(self) -> None:
        """Plan one tick and start its refreshes on a background thread."""
        if self._stop_requested.is_set():
            return
        with self._guard:
            states = dict(self.load_states())
            for name in self.planner.dag.nodes:
                state = states.get(name, TableState())
                states[name] = replace(
                    state,
                    running=state.running or name in self._running,
                    suspended_reason=self.failures.suspended.get(name, state.suspended_reason),
                )
            plan = self.planner.plan_tick(states)
            if not plan.names and not plan.skipped:
                return
            self._running |= set(plan.names)
            thread = threading.Thread(target=self._execute, args=(plan,), name="dtables-tick", daemon=True)
            self._threads.append(thread)
        thread.start()

    # -- helpers ---------------------------------------------------------------------------------------------------
    def _execute(self, plan: TickPlan) -> None:
        try:
            result = self.runner.run(plan, self.failures, cancel=self._cancel)
            with self._guard:
                self.on_result(result, self.failures)
        finally:
            with self._guard:
                self._running -= set(plan.names)

    def _drain(self) -> None:
        """Wait for in-flight ticks; past the timeout, cancel what has not started and wait for what has."""
        with self._guard:
            threads = list(self._threads)
        deadline = threading.Event()
        timer = threading.Timer(self.shutdown_timeout_s, deadline.set)
        timer.start()
        try:
            for thread in threads:
                while thread.is_alive() and not deadline.is_set():
                    thread.join(timeout=0.05)
            if any(t.is_alive() for t in threads):
                self._cancel.set()
                for thread in threads:
                    thread.join()
        finally:
            timer.cancel()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stop()
