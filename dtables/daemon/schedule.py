"""What the scheduler needs to know about a warehouse, read from the state store at each tick.

``load_snapshot`` turns the stored dynamic-table definitions into a ``scheduler.DAG``, parsed target lags and the
period decisions of ``scheduler.periods.compute_periods`` (using the measured durations of recent refreshes), and
``table_states`` gives the tick planner each table's last data timestamp, whether a refresh of it is running (in
this process or another: its refresh lock is held) and why it is suspended. Reading is cheap (three SQLite queries
and one lock probe per table, no Spark), so the daemon re-reads at every tick and sees tables created, altered,
suspended or resumed while it runs.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dtables.catalog import normalize
from dtables.dynamic import definition as defs
from dtables.dynamic import history
from dtables.dynamic.definition import Definition, from_iso
from dtables.state import StateStore, locks
from scheduler.dag import DAG
from scheduler.periods import (
    DEFAULT_BASE_PERIOD_S,
    PeriodDecision,
    TargetLag,
    compute_periods,
    expected_duration_s,
    parse_target_lag,
)
from scheduler.ticks import TableState
from scheduler.vocabulary import RefreshState, SchedulingState, Trigger

if TYPE_CHECKING:
    from dtables.daemon.failures import FailureStore

# How many recent successful refreshes per table feed the expected duration, and how far back to look for them.
DURATION_SAMPLES = 20
DURATION_LOOKBACK = dt.timedelta(days=1)
MIN_BASE_PERIOD_S = 0.25


def choose_base_period_s(lags: Mapping[str, TargetLag], default_s: float = DEFAULT_BASE_PERIOD_S) -> float:
    """Snowflake's 48 s grid, halved until it is at most half the shortest time target lag of the warehouse.

    Halving keeps every period ``48 s * 2**k`` (k may be negative), so the alignment rule of
    ``scheduler.periods`` still holds, and a project with a 5-second lag gets a 1.5 s grid instead of a lag that
    can never be met. The grid is also the tick interval and the granularity of data timestamps.
    """
    shortest = min((lag.seconds for lag in lags.values() if lag.seconds is not None), default=None)
    base = default_s
    while shortest is not None and base > shortest / 2 and base / 2 >= MIN_BASE_PERIOD_S:
        base /= 2
    return base


@dataclass(frozen=True)
class Snapshot:
    """The definitions of one tick and what the scheduler derives from them."""

    definitions: Mapping[str, Definition]
    dag: DAG[str]
    lags: Mapping[str, TargetLag]
    durations_s: Mapping[str, float]
    decisions: Mapping[str, PeriodDecision]

    @property
    def periods_s(self) -> dict[str, float | None]:
        return {n: d.effective_period_s for n, d in self.decisions.items()}

    @property
    def shape(self) -> tuple[tuple[str, tuple[str, ...], str], ...]:
        """Names, upstreams and lags: when this changes the daemon rebuilds its DAG."""
        return tuple((n, tuple(self.dag.upstreams(n)), str(self.lags[n])) for n in self.dag.topological_order())


def _durations(store: StateStore, now: dt.datetime) -> dict[str, list[float]]:
    """Durations of each table's last successful non-CREATION refreshes, oldest first (one query for all)."""
    rows = store.query(
        "SELECT name, started_at, ended_at FROM ("
        "  SELECT name, started_at, ended_at,"
        "         ROW_NUMBER() OVER (PARTITION BY name ORDER BY started_at DESC) AS recent"
        "  FROM refresh_history"
        "  WHERE state = ? AND trigger != ? AND ended_at IS NOT NULL AND started_at >= ?)"
        " WHERE recent <= ? ORDER BY name, started_at",
        (RefreshState.SUCCEEDED, Trigger.CREATION, defs.to_iso(now - DURATION_LOOKBACK), DURATION_SAMPLES))
    out: dict[str, list[float]] = {}
    for name, started, ended in rows:
        out.setdefault(name, []).append((from_iso(ended) - from_iso(started)).total_seconds())  # type: ignore[operator]
    return out


def load_snapshot(store: StateStore, *, base_period_s: float, suspended: Mapping[str, str] = {},
                  now: dt.datetime | None = None) -> Snapshot:
    """Definitions, DAG, lags, measured durations and period decisions. Suspended tables (``suspended``, plus
    those whose stored state is SUSPENDED) do not pull their upstreams to shorter periods."""
    now = now or defs.now_utc()
    found = {d.name: d for d in defs.load_all(store)}
    dag = DAG({n: [s for s in d.sources if s in found] for n, d in found.items()})
    lags = {n: parse_target_lag(d.target_lag) for n, d in found.items()}
    durations = {n: expected_duration_s(ds, last_n=DURATION_SAMPLES) for n, ds in _durations(store, now).items()
                 if n in found}
    ignore = set(suspended) | {n for n, d in found.items() if d.state == SchedulingState.SUSPENDED}
    decisions = compute_periods(dag, lags, durations, base_period_s=base_period_s, ignore=ignore)
    return Snapshot(found, dag, lags, durations, decisions)


def refresh_lock_path(store: StateStore, name: str) -> str:
    """The file ``dtables.dynamic.executor.table_lock`` locks while a refresh of ``name`` runs (same rule)."""
    return str(locks.lock_path(store, normalize(name)))


def refresh_running(store: StateStore, name: str) -> bool:
    """Whether some thread or process holds ``name``'s refresh lock right now (a non-blocking probe)."""
    return locks.is_held(locks.lock_path(store, normalize(name)))


USER_SUSPENDED = "suspended with ALTER DYNAMIC TABLE ... SUSPEND"


def table_states(store: StateStore, snapshot: Snapshot, failures: FailureStore | None = None) -> dict[str, TableState]:
    """The planner's view of every table: last data timestamp, running, suspension reason."""
    reasons = failures.suspension_reasons() if failures is not None else {}
    out = {}
    for name, d in snapshot.definitions.items():
        reason = None
        if d.state == SchedulingState.SUSPENDED:
            reason = reasons.get(name, USER_SUSPENDED)
        out[name] = TableState(last_data_timestamp=d.data_timestamp, running=refresh_running(store, name),
                               suspended_reason=reason)
    return out


def last_finished(store: StateStore, name: str) -> history.RefreshRecord | None:
    """The table's latest refresh record that is not EXECUTING."""
    done = [r for r in history.records(store, name) if r.state != RefreshState.EXECUTING]
    return done[-1] if done else None
