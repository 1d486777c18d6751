"""``dtables status``: per dynamic table its period, freshness, lag over a window and failures, from the state store
alone (no Spark), plus whether a daemon holds the warehouse's lock."""

from __future__ import annotations

import datetime as dt
import fcntl
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dtables.daemon.failures import FailureStore
from dtables.daemon.schedule import USER_SUSPENDED, choose_base_period_s, load_snapshot
from dtables.dynamic import definition as defs
from dtables.dynamic import history
from dtables.state import StateStore
from scheduler.daemon import LOCK_FILE
from scheduler.lag import RefreshRecord, lag_metrics
from scheduler.periods import parse_target_lag
from scheduler.vocabulary import RefreshState, SchedulingState


@dataclass(frozen=True)
class TableStatus:
    """One row of ``dtables status``. Lags in seconds; ``within_target_share`` in [0, 1] over the window."""

    name: str
    target_lag: str
    period_s: float | None
    period_reason: str
    state: str
    data_timestamp: str | None
    current_lag_s: float | None
    mean_lag_s: float | None
    max_lag_s: float | None
    within_target_share: float | None
    window_start: str
    refreshes_in_window: int
    last_refresh_state: str | None
    last_refresh_action: str | None
    last_refresh_at: str | None
    last_error: str | None
    consecutive_failures: int
    suspended_reason: str | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def daemon_holder(state_dir: Path) -> int | None:
    """The pid of the daemon holding this warehouse's lock, or None when no daemon runs."""
    path = state_dir / LOCK_FILE
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        text = path.read_text().strip()
        return int(text) if text.isdigit() else -1
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _lag_input(records: list[history.RefreshRecord]) -> list[RefreshRecord]:
    return [RefreshRecord(r.data_timestamp, r.ended_at, r.state) for r in records if r.ended_at is not None]


def table_status(store: StateStore, *, window: dt.timedelta = dt.timedelta(hours=1),
                 base_period_s: float | None = None, now: dt.datetime | None = None) -> list[TableStatus]:
    """Status of every dynamic table. The lag window is the last ``window``, or since the table was created if
    that is later (time before the first refresh counts as not within the target lag)."""
    now = now or defs.now_utc()
    failures = FailureStore(store).load()
    if base_period_s is None:
        base_period_s = choose_base_period_s({d.name: parse_target_lag(d.target_lag) for d in defs.load_all(store)})
    snapshot = load_snapshot(store, base_period_s=base_period_s, suspended=failures.suspended, now=now)
    out = []
    for name in snapshot.dag.topological_order():
        d = snapshot.definitions[name]
        lag = snapshot.lags[name]
        decision = snapshot.decisions[name]
        records = history.records(store, name)
        finished = [r for r in records if r.state != RefreshState.EXECUTING]
        last = finished[-1] if finished else None
        created = defs.from_iso(d.created_at.replace("Z", "+00:00")) if d.created_at else None
        start = max(now - window, created) if created is not None and created < now else now - window
        metrics = lag_metrics(_lag_input(records), window_start=start, now=now, target_lag_s=lag.seconds)
        suspended = None
        if d.state == SchedulingState.SUSPENDED:
            suspended = failures.suspended.get(name, USER_SUSPENDED)
        out.append(TableStatus(
            name=name, target_lag=str(lag), period_s=decision.effective_period_s,
            period_reason=decision.explain(), state=d.state, data_timestamp=defs.to_iso(d.data_timestamp),
            current_lag_s=_round(metrics.current_lag_s), mean_lag_s=_round(metrics.mean_lag_s),
            max_lag_s=_round(metrics.max_lag_s),
            within_target_share=None if metrics.within_target_share is None else round(metrics.within_target_share, 4),
            window_start=defs.to_iso(start) or "", refreshes_in_window=metrics.refreshes_in_window,
            last_refresh_state=last.state if last else None, last_refresh_action=last.action if last else None,
            last_refresh_at=defs.to_iso(last.ended_at) if last else None,
            last_error=last.error if last and last.state != RefreshState.SUCCEEDED else None,
            consecutive_failures=failures.consecutive_failures.get(name, 0), suspended_reason=suspended))
    return out


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
