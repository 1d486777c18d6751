"""The daemon of one warehouse: ``scheduler.Daemon`` wired to the state store and the refresh executor.

At every tick ``WarehouseDaemon`` re-reads the definitions (a table created, altered, resumed or dropped while the
daemon runs is picked up at the next tick), recomputes the periods from the measured refresh durations, and lets
the scheduler plan and run the tick with trigger SCHEDULED. After each tick it writes the history records of the
tables the tick did not refresh, persists the failure state and applies suspensions (``dtables.daemon.failures``).
A restarted daemon needs nothing else: data timestamps, durations and failure counts all come from the store.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from dtables.catalog.warehouse import Warehouse
from dtables.daemon.failures import FailureStore, record_not_refreshed, record_suspensions
from dtables.daemon.refresher import ScheduledRefresher
from dtables.daemon.schedule import Snapshot, choose_base_period_s, load_snapshot, table_states
from dtables.dynamic import definition as defs
from dtables.spark.sessions import cancel_jobs
from scheduler.daemon import Daemon
from scheduler.periods import parse_target_lag
from scheduler.runner import FailureState, RetryPolicy, TableRunResult, TickResult, TickRunner
from scheduler.ticks import Clock, SystemClock, TableState, TickPlan, TickPlanner, grid_floor
from scheduler.vocabulary import RefreshState

log = logging.getLogger("dtables.daemon")


@dataclass(frozen=True)
class DaemonOptions:
    """How the daemon runs. ``base_period_s`` None: chosen from the shortest target lag (``choose_base_period_s``)."""

    max_parallel: int = 2
    suspend_after: int = 5
    base_period_s: float | None = None
    shutdown_timeout_s: float = 60.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)


def warehouse_base_period_s(warehouse: Warehouse) -> float:
    """The base period the daemon uses for this warehouse's current definitions."""
    return choose_base_period_s({d.name: parse_target_lag(d.target_lag) for d in defs.load_all(warehouse.store)})


class _PlannerRecordingReasons(TickPlanner):
    """A tick planner that leaves each planned refresh's reason where the refresher's log line finds it."""

    def __init__(self, snapshot: Snapshot, base_period_s: float, clock: Clock,
                 reasons: dict[tuple[str, dt.datetime], str]) -> None:
        super().__init__(snapshot.dag, snapshot.periods_s, base_period_s=base_period_s, clock=clock)
        self.reasons = reasons

    def plan_tick(self, states: Mapping[str, TableState], now: dt.datetime | None = None) -> TickPlan:
        plan = super().plan_tick(states, now)
        for planned in plan.refreshes:
            self.reasons[(planned.name, plan.data_timestamp)] = planned.reason
        if plan.names or plan.skipped:
            log.debug("%s", plan.to_text())
        return plan


class WarehouseDaemon(Daemon):
    """``scheduler.Daemon`` over a dtables session; ``run(once=True)`` is one tick (cron), ``run()`` ticks until
    SIGTERM / Ctrl-C / ``stop()``."""

    def __init__(self, warehouse: Warehouse, options: DaemonOptions = DaemonOptions(),
                 clock: Clock | None = None) -> None:
        self.warehouse = warehouse
        self.options = options
        self.failure_store = FailureStore(warehouse.store)
        self.base_period_s = options.base_period_s or warehouse_base_period_s(warehouse)
        self.results: list[TickResult] = []  # every finished tick, oldest first
        reasons: dict[tuple[str, dt.datetime], str] = {}
        self.refresher = ScheduledRefresher(warehouse, reasons)
        failures = self.failure_store.load()
        self.snapshot = load_snapshot(warehouse.store, base_period_s=self.base_period_s, suspended=failures.suspended)
        clock = clock or SystemClock()
        planner = _PlannerRecordingReasons(self.snapshot, self.base_period_s, clock, reasons)
        runner = TickRunner(self.snapshot.dag, self.refresher, max_parallel=options.max_parallel,
                            retry=options.retry, suspend_after=options.suspend_after)
        super().__init__(planner, runner, lock_dir=warehouse.store.path.parent, load_states=self._load_states,
                         failures=failures, on_result=self._on_result, shutdown_timeout_s=options.shutdown_timeout_s)
        self._shutdown_timer: threading.Timer | None = None
        self._skipped_at: dict[str, dt.datetime] = {}  # the period grid point of each table's last SKIPPED record

    # -- the Daemon's hooks ----------------------------------------------------------------------------------------
    def run(self, once: bool = False) -> None:
        log.info("dtables daemon for %s: %d dynamic table(s), base period %g s%s", self.warehouse.uri,
                 len(self.snapshot.dag), self.base_period_s, " (one tick)" if once else "")
        for decision in self.snapshot.decisions.values():
            log.info("  %s", decision.explain())
        try:
            super().run(once=once)
        finally:
            if self._shutdown_timer is not None:
                self._shutdown_timer.cancel()
            self.runner.close(wait_for_running=True)
        log.info("dtables daemon stopped")

    def tick(self) -> None:
        """Re-read the definitions and durations, rebuild the planner, then plan and start the tick."""
        if self._stop_requested.is_set():
            return
        try:
            self._reload()
        except Exception:  # noqa: BLE001 - a broken store read must not end the daemon; the next tick retries
            log.exception("cannot read the dynamic-table definitions; skipping this tick")
            return
        super().tick()

    def stop(self) -> None:
        """Stop ticking; refreshes still running after ``shutdown_timeout_s`` have their Spark jobs cancelled."""
        first = not self._stop_requested.is_set()
        super().stop()
        if first:
            log.info("stopping: running refreshes get %g s to finish", self.shutdown_timeout_s)
            self._shutdown_timer = threading.Timer(self.shutdown_timeout_s, self._cancel_running)
            self._shutdown_timer.daemon = True
            self._shutdown_timer.start()

    # -- helpers ---------------------------------------------------------------------------------------------------
    def _reload(self) -> None:
        snapshot = load_snapshot(self.warehouse.store, base_period_s=self.base_period_s,
                                 suspended=self.failures.suspended)
        if snapshot.shape != self.snapshot.shape:
            log.info("dynamic tables changed: %d table(s) now", len(snapshot.dag))
            for decision in snapshot.decisions.values():
                log.info("  %s", decision.explain())
            self.runner.dag = snapshot.dag
        wanted = choose_base_period_s(snapshot.lags)
        if wanted < self.base_period_s and self.options.base_period_s is None:
            log.warning("a target lag now asks for a %g s base period (the daemon runs on %g s): restart the "
                        "daemon to use it", wanted, self.base_period_s)
        self.snapshot = snapshot
        old = self.planner
        assert isinstance(old, _PlannerRecordingReasons)
        self.planner = _PlannerRecordingReasons(snapshot, self.base_period_s, old.clock, old.reasons)

    def _load_states(self) -> dict[str, TableState]:
        """Called by ``Daemon.tick`` under its lock: apply RESUMEs, then the planner's view of every table."""
        resumed = self.failure_store.sync_resumed(self.failures, self.snapshot.dag, self.snapshot.definitions)
        if resumed:
            log.info("resumed: %s", ", ".join(resumed))
            self._reload()  # resumed tables are scheduled (and pull their upstreams) again
        return table_states(self.warehouse.store, self.snapshot, self.failure_store)

    def _on_result(self, result: TickResult, failures: FailureState) -> None:
        """Called by the daemon after each tick, under its lock: history records, failure state, suspensions."""
        try:
            store = self.warehouse.store
            unrun = [r for r in result.results if r.attempts == 0 and self._worth_recording(r, result)]
            ids = record_not_refreshed(store, result, unrun)
            for r in unrun:
                log.info("%s %s at %s: %s", r.state, r.name, defs.to_iso(result.data_timestamp), r.error)
            for r in result.results:
                key = (r.name, result.data_timestamp)
                self.refresher.reasons.pop(key, None)
                rid = self.refresher.refresh_ids.pop(key, None)
                if rid is not None:
                    ids.setdefault(r.name, rid)
            self.failure_store.save(failures, result.newly_suspended)
            record_suspensions(store, result, failures, ids)
            for name in result.newly_suspended:
                log.warning("suspended %s: %s", name, failures.suspended.get(name))
            self.results.append(result)
        except Exception:  # noqa: BLE001 - keep the daemon alive; the next tick recomputes from the store
            log.exception("cannot record the result of the tick at %s", defs.to_iso(result.data_timestamp))

    def _worth_recording(self, r: TableRunResult, result: TickResult) -> bool:
        """One SKIPPED record per period of the table, not one per tick: the planner finds a table whose refresh
        is still running due again at every tick until it ends."""
        if r.state != RefreshState.SKIPPED:
            return True
        point = grid_floor(result.data_timestamp, self.snapshot.periods_s.get(r.name) or self.base_period_s)
        if self._skipped_at.get(r.name) == point:
            return False
        self._skipped_at[r.name] = point
        return True

    def _cancel_running(self) -> None:
        """Past the shutdown timeout: refreshes that fail from here on are recorded CANCELLED, and their Spark
        jobs are cancelled (a job cancelled before its commit leaves the table at its old version)."""
        log.warning("shutdown timeout of %g s reached: cancelling running refreshes", self.shutdown_timeout_s)
        self.refresher.cancelling.set()
        try:
            cancel_jobs(self.warehouse.spark)
        except Exception:  # noqa: BLE001 - cancelling is best effort: a job that runs on fails its refresh later
            log.debug("cannot cancel Spark jobs", exc_info=True)
