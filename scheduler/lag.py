"""Lag metrics of one table from its refresh history.

The lag at time t is ``t - d(t)``, where ``d(t)`` is the largest data timestamp among successful refreshes that
ended at or before t. Between refresh ends the lag grows linearly; at the end ``e`` of a successful refresh with data
timestamp ``x > d`` it drops to ``e - x`` (a sawtooth). Metrics integrate this function exactly over the window.

Time in the window before the table's first successful refresh has no lag value: it is left out of the mean and
max, reported as ``uncovered_s``, and counted as *not* within the target lag (the table had no data).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from scheduler.vocabulary import RefreshState


@dataclass(frozen=True)
class RefreshRecord:
    """The fields of a refresh-history record the lag depends on."""

    data_timestamp: datetime
    end_time: datetime
    state: str


@dataclass(frozen=True)
class LagMetrics:
    """Lag over ``[window_start, window_end]``. ``current_lag_s`` is None before the first successful refresh;
    ``mean_lag_s``/``max_lag_s`` are None when no part of the window is covered; ``within_target_share`` is None
    without a time target lag (DOWNSTREAM)."""

    window_start: datetime
    window_end: datetime
    current_lag_s: float | None
    mean_lag_s: float | None
    max_lag_s: float | None
    within_target_share: float | None
    uncovered_s: float
    refreshes_in_window: int


def lag_metrics(
    history: Iterable[RefreshRecord],
    *,
    window_start: datetime,
    now: datetime,
    target_lag_s: float | None,
) -> LagMetrics:
    """Integrate the lag sawtooth of ``history`` (any order, any states) over ``[window_start, now]``.

    Records ending after ``now`` are ignored (not yet visible); records before the window set the starting data
    timestamp.
    """
    if now <= window_start:
        raise ValueError(f"empty window: {window_start.isoformat()} .. {now.isoformat()}")
    successes = sorted(
        (r for r in history if r.state == RefreshState.SUCCEEDED and r.end_time <= now), key=lambda r: r.end_time
    )
    latest: datetime | None = None  # d(t) as the sweep advances
    segments: list[tuple[datetime, datetime, datetime | None]] = []  # (from, to, d on that piece)
    cursor = window_start
    in_window = 0
    for record in successes:
        if record.end_time > window_start:
            in_window += 1
            if record.end_time > cursor:
                segments.append((cursor, record.end_time, latest))
                cursor = record.end_time
        if latest is None or record.data_timestamp > latest:
            latest = record.data_timestamp
    segments.append((cursor, now, latest))

    total_s = (now - window_start).total_seconds()
    covered_s = uncovered_s = area = within_s = 0.0
    max_lag: float | None = None
    for start, end, data_ts in segments:
        length = (end - start).total_seconds()
        if data_ts is None:
            uncovered_s += length
            continue
        lag_at_start = (start - data_ts).total_seconds()
        lag_at_end = (end - data_ts).total_seconds()
        covered_s += length
        area += (lag_at_start + lag_at_end) / 2 * length
        max_lag = lag_at_end if max_lag is None else max(max_lag, lag_at_end)
        if target_lag_s is not None:
            # Lag rises with slope 1, so the in-target part is a prefix of the piece.
            within_s += min(length, max(0.0, target_lag_s - lag_at_start))

    return LagMetrics(
        window_start=window_start,
        window_end=now,
        current_lag_s=None if latest is None else (now - latest).total_seconds(),
        mean_lag_s=area / covered_s if covered_s > 0 else None,
        max_lag_s=max_lag,
        within_target_share=None if target_lag_s is None else within_s / total_s,
        uncovered_s=uncovered_s,
        refreshes_in_window=in_window,
    )
