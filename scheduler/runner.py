"""Executes a TickPlan through a ``Refresher`` callback, with bounded parallelism, retries and failure isolation.

The runner knows nothing about how a refresh works: the refresh executor (in ``dtables``) implements ``Refresher``.
Tables start as soon as their upstreams in the plan have succeeded (not batch by batch), on a thread pool of
``max_parallel`` workers shared by every ``run`` of this runner, so concurrent ticks respect one global limit.

Failure policy:
- a refresh whose outcome is FAILED with ``transient=False`` (a user error) is not retried;
- a transient failure is retried up to ``RetryPolicy.max_retries`` times with exponential backoff;
- a table whose upstream did not succeed in this tick is not refreshed: UPSTREAM_FAILED (or, if the upstream was
  cancelled or skipped, the same state as the upstream);
- after ``suspend_after`` consecutive failed *scheduled* refreshes the table is suspended, and so is everything
  downstream of it, with the reason recorded in ``FailureState``. Independent branches keep running.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from scheduler.dag import DAG
from scheduler.ticks import TickPlan
from scheduler.vocabulary import RefreshState, Trigger


@dataclass(frozen=True)
class RefreshOutcome:
    """What one refresh attempt did. ``transient`` marks failures worth retrying (lost executor, timeout, commit
    conflict), as opposed to user errors (bad SQL, type mismatch)."""

    state: str
    action: str = ""
    error: str | None = None
    transient: bool = False
    duration_s: float = 0.0


class Refresher(Protocol):
    def refresh(self, name: str, data_timestamp: datetime, trigger: str) -> RefreshOutcome:
        """Refresh ``name`` so that it equals its query over its sources as of ``data_timestamp``; write the
        history record; return the outcome. Should not raise: an exception counts as a non-transient failure."""
        ...


@dataclass(frozen=True)
class RetryPolicy:
    """Retries of transient failures: the n-th retry waits ``initial * multiplier**(n-1)``, capped."""

    max_retries: int = 3
    initial_backoff_s: float = 1.0
    multiplier: float = 2.0
    max_backoff_s: float = 60.0

    def backoff_s(self, retry: int) -> float:
        return float(min(self.max_backoff_s, self.initial_backoff_s * self.multiplier ** (retry - 1)))


@dataclass(frozen=True)
class TableRunResult:
    """The fate of one table in one tick. ``attempts`` is 0 when the refresher was never called."""

    name: str
    state: str
    action: str = ""
    error: str | None = None
    attempts: int = 0
    duration_s: float = 0.0


@dataclass(frozen=True)
class TickResult:
    """Every planned or skipped table of a tick, in plan order, and the tables this tick suspended."""

    data_timestamp: datetime
    trigger: str
    results: tuple[TableRunResult, ...]
    newly_suspended: tuple[str, ...] = ()

    def state_of(self, name: str) -> str:
        return next(r.state for r in self.results if r.name == name)

    @property
    def succeeded(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.results if r.state == RefreshState.SUCCEEDED)


@dataclass
class FailureState:
    """Consecutive failed scheduled refreshes and suspensions, per table. The caller persists it (``to_dict`` /
    ``from_dict``) between ticks and daemon restarts."""

    consecutive_failures: dict[str, int] = field(default_factory=dict)
    suspended: dict[str, str] = field(default_factory=dict)

    def resume(self, dag: DAG[str], name: str) -> list[str]:
        """Resume ``name`` and the downstream tables suspended because of it; returns the resumed names."""
        resumed = []
        marker = f"upstream {name} suspended"
        for table in dag.downstream_closure([name]):
            reason = self.suspended.get(table)
            if reason is not None and (table == name or marker in reason):
                del self.suspended[table]
                self.consecutive_failures.pop(table, None)
                resumed.append(table)
        return resumed

    def to_dict(self) -> dict[str, Any]:
        return {"consecutive_failures": dict(self.consecutive_failures), "suspended": dict(self.suspended)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FailureState:
        unknown = set(data) - {"consecutive_failures", "suspended"}
        if unknown:
            raise ValueError(f"unknown keys in scheduler failure state: {', '.join(sorted(unknown))}")
        return cls(
            consecutive_failures={str(k): int(v) for k, v in data.get("consecutive_failures", {}).items()},
            suspended={str(k): str(v) for k, v in data.get("suspended", {}).items()},
        )


class TickRunner:
    """Runs TickPlans. ``sleep`` is injectable so tests of backoff do not sleep."""

    def __init__(
        self,
        dag: DAG[str],
        refresher: Refresher,
        *,
        max_parallel: int = 4,
        retry: RetryPolicy = RetryPolicy(),
        suspend_after: int = 5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if max_parallel < 1:
            raise ValueError(f"max_parallel must be at least 1, got {max_parallel}")
        self.dag = dag
        self.refresher = refresher
        self.retry = retry
        self.suspend_after = suspend_after
        self.sleep = sleep
        self._pool = ThreadPoolExecutor(max_workers=max_parallel, thread_name_prefix="dtables-refresh")

    def close(self, wait_for_running: bool = True) -> None:
        self._pool.shutdown(wait=wait_for_running, cancel_futures=True)

    def run(self, plan: TickPlan, failures: FailureState, cancel: threading.Event | None = None) -> TickResult:
        """Execute ``plan``, updating ``failures`` in place. Once ``cancel`` is set no new refresh starts and the
        remaining ones are CANCELLED (running ones finish)."""
        cancel = cancel or threading.Event()
        order = list(plan.names)
        upstreams = {n: [u for u in self.dag.upstreams(n) if u in plan] for n in order}
        done: dict[str, TableRunResult] = {}
        running: dict[Future[TableRunResult], str] = {}
        newly_suspended: list[str] = []

        while len(done) < len(order):
            for name in order:
                if name in done or name in running.values():
                    continue
                if cancel.is_set():
                    done[name] = TableRunResult(name, RefreshState.CANCELLED, error="scheduler shutting down")
                    continue
                blocker = next((u for u in upstreams[name] if u in done and done[u].state != RefreshState.SUCCEEDED),
                               None)
                if blocker is not None:
                    done[name] = self._blocked(name, blocker, done[blocker])
                elif all(u in done for u in upstreams[name]):
                    fut = self._pool.submit(self._refresh_with_retries, name, plan, cancel)
                    running[fut] = name
            if not running:
                continue  # everything left was resolved without running (blocked or cancelled)
            finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for fut in finished:
                name = running.pop(fut)
                result = fut.result()
                done[name] = result
                newly_suspended += self._account(name, result, plan.trigger, failures)

        results = tuple(done[n] for n in order) + tuple(
            TableRunResult(s.name, RefreshState.SKIPPED, error=s.reason) for s in plan.skipped
        )
        return TickResult(plan.data_timestamp, plan.trigger, results, tuple(newly_suspended))

    # -- helpers ---------------------------------------------------------------------------------------------------
    def _refresh_with_retries(self, name: str, plan: TickPlan, cancel: threading.Event) -> TableRunResult:
        attempts, total_s = 0, 0.0
        while True:
            attempts += 1
            try:
                outcome = self.refresher.refresh(name, plan.data_timestamp, plan.trigger)
            except Exception as exc:  # noqa: BLE001 - a broken refresher must not take other tables down
                outcome = RefreshOutcome(RefreshState.FAILED, error=f"{type(exc).__name__}: {exc}",
                                         transient=False)
            total_s += outcome.duration_s
            retry = outcome.state == RefreshState.FAILED and outcome.transient and attempts <= self.retry.max_retries
            if not retry or cancel.is_set():
                return TableRunResult(name, outcome.state, outcome.action, outcome.error, attempts, total_s)
            self.sleep(self.retry.backoff_s(attempts))

    @staticmethod
    def _blocked(name: str, upstream: str, upstream_result: TableRunResult) -> TableRunResult:
        if upstream_result.state in (RefreshState.FAILED, RefreshState.UPSTREAM_FAILED):
            return TableRunResult(name, RefreshState.UPSTREAM_FAILED, error=f"upstream {upstream} failed in this tick")
        stopped = (RefreshState.CANCELLED, RefreshState.SKIPPED)
        state = upstream_result.state if upstream_result.state in stopped else RefreshState.UPSTREAM_FAILED
        return TableRunResult(name, state, error=f"upstream {upstream} ended {upstream_result.state}")

    def _account(self, name: str, result: TableRunResult, trigger: str, failures: FailureState) -> list[str]:
        """Update failure counts; suspend after too many consecutive scheduled failures. Returns new suspensions."""
        if result.state == RefreshState.SUCCEEDED:
            failures.consecutive_failures.pop(name, None)
            return []
        if result.state != RefreshState.FAILED or trigger != Trigger.SCHEDULED:
            return []
        count = failures.consecutive_failures.get(name, 0) + 1
        failures.consecutive_failures[name] = count
        if count < self.suspend_after or name in failures.suspended:
            return []
        newly = []
        for table in self.dag.downstream_closure([name]):
            if table in failures.suspended:
                continue
            if table == name:
                reason = f"FAILED: {count} consecutive failed refreshes; last error: {result.error}"
            else:
                reason = f"UPSTREAM_FAILED: upstream {name} suspended after {count} failures"
            failures.suspended[table] = reason
            newly.append(table)
        return newly
