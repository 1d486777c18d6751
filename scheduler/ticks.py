"""The tick planner: at a tick, which tables refresh, at which data timestamp, in which order.

Data timestamps live on a grid anchored at the Unix epoch. A tick at time ``now`` refreshes to
``T = floor(now / base) * base``, one timestamp shared by every table of the tick, so tables reading each other
stay snapshot-consistent. A table is *due* when the latest point of its own period's grid (``floor(now / period) *
period``) is later than its last data timestamp. Due tables bring along their upstreams that are not yet at ``T``.

A plan is data (a frozen ``TickPlan``); ``scheduler.runner`` executes it. All datetimes are timezone-aware.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Protocol

from scheduler.dag import DAG
from scheduler.vocabulary import RefreshState, SchedulingState, Trigger

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICRO = timedelta(microseconds=1)


# -- clocks ---------------------------------------------------------------------------------------------------------
class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware."""
        ...


class SystemClock:
    """Wall-clock time in UTC."""

    def now(self) -> datetime:
        return datetime.now(timezone.utc)


class ManualClock:
    """A clock that moves only when told to (tests)."""

    def __init__(self, start: datetime = EPOCH) -> None:
        _require_aware(start)
        self._now = start

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> datetime:
        self._now += timedelta(seconds=seconds)
        return self._now

    def set(self, when: datetime) -> None:
        _require_aware(when)
        self._now = when


# -- grid arithmetic (integer microseconds, so sub-second test periods stay exact) ----------------------------------
def _require_aware(when: datetime) -> None:
    if when.tzinfo is None:
        raise ValueError(f"naive datetime {when.isoformat()}: the scheduler needs timezone-aware datetimes")


def _micros(when: datetime) -> int:
    _require_aware(when)
    return (when - EPOCH) // _MICRO


def _period_micros(period_s: float) -> int:
    micros = round(period_s * 1_000_000)
    if micros <= 0:
        raise ValueError(f"period must be positive, got {period_s!r} s")
    return micros


def grid_floor(when: datetime, period_s: float) -> datetime:
    """The latest point of the ``period_s`` grid at or before ``when``."""
    step = _period_micros(period_s)
    return EPOCH + _MICRO * (_micros(when) // step * step)


def next_grid_point(after: datetime, period_s: float) -> datetime:
    """The first point of the ``period_s`` grid strictly after ``after``."""
    step = _period_micros(period_s)
    return EPOCH + _MICRO * ((_micros(after) // step + 1) * step)


# -- inputs and the plan --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TableState:
    """What the planner needs to know about one table. ``suspended_reason`` is None unless suspended."""

    last_data_timestamp: datetime | None = None
    running: bool = False
    suspended_reason: str | None = None

    @property
    def suspended(self) -> bool:
        return self.suspended_reason is not None


@dataclass(frozen=True)
class PlannedRefresh:
    """One refresh the runner will perform, with the reason it is in the plan."""

    name: str
    reason: str


@dataclass(frozen=True)
class NotRefreshed:
    """A table left out of a tick: ``state`` is SKIPPED (a previous refresh is still running, or an upstream's is)
    or SUSPENDED (it or an upstream is suspended)."""

    name: str
    state: str
    reason: str


@dataclass(frozen=True)
class TickPlan:
    """What one tick does. ``batches`` are dependency-ordered: a table's upstreams in this plan sit in earlier
    batches, tables of one batch are independent of each other."""

    tick_time: datetime
    data_timestamp: datetime
    trigger: str
    batches: tuple[tuple[PlannedRefresh, ...], ...]
    skipped: tuple[NotRefreshed, ...] = ()
    excluded: tuple[NotRefreshed, ...] = ()
    _index: dict[str, PlannedRefresh] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._index.update({r.name: r for batch in self.batches for r in batch})

    @property
    def refreshes(self) -> tuple[PlannedRefresh, ...]:
        return tuple(r for batch in self.batches for r in batch)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.refreshes)

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def to_text(self) -> str:
        """A readable, deterministic account of the plan."""
        lines = [f"tick {self.tick_time.isoformat()} -> data timestamp {self.data_timestamp.isoformat()}"]
        for i, batch in enumerate(self.batches, 1):
            for r in batch:
                lines.append(f"  batch {i}: {r.name} ({r.reason})")
        for n in self.skipped + self.excluded:
            lines.append(f"  {n.state}: {n.name} ({n.reason})")
        if len(lines) == 1:
            lines.append("  nothing to refresh")
        return "\n".join(lines)


# -- the planner ----------------------------------------------------------------------------------------------------
class TickPlanner:
    """Plans ticks over one DAG with fixed effective periods (``None``: never due on its own, e.g. an unread
    DOWNSTREAM table). Rebuild the planner when definitions or periods change."""

    def __init__(
        self,
        dag: DAG[str],
        effective_periods_s: Mapping[str, float | None],
        *,
        base_period_s: float,
        clock: Clock | None = None,
    ) -> None:
        self.dag = dag
        self.periods = {name: effective_periods_s.get(name) for name in dag.topological_order()}
        self.base_period_s = base_period_s
        self.clock: Clock = clock or SystemClock()

    def data_timestamp(self, now: datetime | None = None) -> datetime:
        """The data timestamp of a scheduled tick at ``now``: ``now`` floored to the base grid."""
        return grid_floor(now or self.clock.now(), self.base_period_s)

    def is_due(self, name: str, state: TableState, now: datetime) -> bool:
        period = self.periods[name]
        if period is None:
            return False
        last = state.last_data_timestamp
        return last is None or last < grid_floor(now, period)

    def plan_tick(self, states: Mapping[str, TableState], now: datetime | None = None) -> TickPlan:
        """The scheduled refreshes of a tick at ``now`` (default: the clock). Tables absent from ``states`` have
        never been refreshed."""
        now = now or self.clock.now()
        target = self.data_timestamp(now)
        state = {name: states.get(name, TableState()) for name in self.dag.topological_order()}
        excluded = self._excluded(state)

        due = [n for n in self.dag.topological_order() if n not in excluded and self.is_due(n, state[n], now)]
        reasons: dict[str, str] = {}
        for name in due:
            last = state[name].last_data_timestamp
            since = f"since {last.isoformat()}" if last else "never refreshed"
            reasons[name] = f"due: {self.periods[name]:g} s period, {since}"
        # Upstreams of due tables that are not at the target yet must refresh to the same data timestamp.
        for name in self.dag.upstream_closure(due):
            last = state[name].last_data_timestamp
            if name not in reasons and (last is None or last < target):
                reader = next(d for d in due if name in self.dag.upstream_closure([d]))
                reasons[name] = f"upstream of {reader}, needed at this data timestamp"
        return self._assemble(now, target, Trigger.SCHEDULED, reasons, state, excluded)

    def plan_manual(
        self, names: Iterable[str], states: Mapping[str, TableState], now: datetime | None = None
    ) -> TickPlan:
        """Refresh ``names`` and all their upstreams to one data timestamp, ``now`` itself (a manual refresh wants
        the freshest data, not the last grid point). Suspension does not stop a manual refresh; a running one
        does (SKIPPED, with its downstreams)."""
        now = now or self.clock.now()
        wanted = list(names)
        state = {name: states.get(name, TableState()) for name in self.dag.topological_order()}
        reasons = {}
        for name in self.dag.upstream_closure(wanted):
            reasons[name] = "requested" if name in wanted else "upstream of a requested table"
        return self._assemble(now, now, Trigger.MANUAL, reasons, state, {})

    # -- helpers ---------------------------------------------------------------------------------------------------
    def _excluded(self, state: Mapping[str, TableState]) -> dict[str, NotRefreshed]:
        suspended = [n for n in self.dag.topological_order() if state[n].suspended]
        excluded: dict[str, NotRefreshed] = {}
        for name in self.dag.downstream_closure(suspended):
            if state[name].suspended:
                reason = f"suspended: {state[name].suspended_reason}"
            else:
                cause = next(s for s in suspended if s in self.dag.upstream_closure([name]))
                reason = f"upstream {cause} is suspended"
            excluded[name] = NotRefreshed(name, SchedulingState.SUSPENDED, reason)
        return excluded

    def _assemble(
        self,
        now: datetime,
        target: datetime,
        trigger: str,
        reasons: Mapping[str, str],
        state: Mapping[str, TableState],
        excluded: Mapping[str, NotRefreshed],
    ) -> TickPlan:
        """Drop what cannot run at ``target`` (a refresh still running, or an upstream that is), then batch."""
        skipped: dict[str, NotRefreshed] = {}
        for name in self.dag.topological_order(reasons):
            if state[name].running:
                skipped[name] = NotRefreshed(
                    name, RefreshState.SKIPPED,
                    "previous refresh still running; the next refresh covers the whole interval",
                )
                continue
            for up in self.dag.upstreams(name):
                up_last = state[up].last_data_timestamp
                if up in skipped:
                    skipped[name] = NotRefreshed(name, RefreshState.SKIPPED,
                                                 f"upstream {up} cannot refresh in this tick")
                    break
                if up not in reasons and up_last is not None and up_last > target:
                    skipped[name] = NotRefreshed(
                        name,
                        RefreshState.SKIPPED,
                        f"upstream {up} is at a later data timestamp ({up_last.isoformat()}); the next tick aligns",
                    )
                    break
        planned = [n for n in reasons if n not in skipped]
        batches = tuple(
            tuple(PlannedRefresh(n, reasons[n]) for n in batch) for batch in self.dag.generations(planned)
        )
        return TickPlan(
            tick_time=now,
            data_timestamp=target,
            trigger=trigger,
            batches=batches,
            skipped=tuple(skipped[n] for n in self.dag.topological_order(skipped)),
            excluded=tuple(excluded[n] for n in self.dag.topological_order(excluded)),
        )
