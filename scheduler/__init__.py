"""When and at which data timestamp dynamic tables refresh: the DAG, lag -> period, tick plans, the runner, lag
metrics and the daemon. Never imports ``dtables``: the refresh executor plugs in through ``runner.Refresher``."""

from __future__ import annotations

from scheduler.dag import DAG
from scheduler.errors import CycleError, DaemonLockedError, SchedulerError, TargetLagError, UnknownTableError
from scheduler.lag import LagMetrics, RefreshRecord, lag_metrics
from scheduler.periods import (
    DOWNSTREAM,
    PeriodDecision,
    TargetLag,
    compute_periods,
    expected_duration_s,
    parse_target_lag,
)
from scheduler.runner import FailureState, RefreshOutcome, Refresher, RetryPolicy, TickResult, TickRunner
from scheduler.ticks import Clock, ManualClock, SystemClock, TableState, TickPlan, TickPlanner
from scheduler.vocabulary import RefreshState, SchedulingState, Trigger

__all__ = [
    "DAG", "CycleError", "DaemonLockedError", "SchedulerError", "TargetLagError", "UnknownTableError",
    "LagMetrics", "RefreshRecord", "lag_metrics",
    "DOWNSTREAM", "PeriodDecision", "TargetLag", "compute_periods", "expected_duration_s", "parse_target_lag",
    "FailureState", "RefreshOutcome", "Refresher", "RetryPolicy", "TickResult", "TickRunner",
    "Clock", "ManualClock", "SystemClock", "TableState", "TickPlan", "TickPlanner",
    "RefreshState", "SchedulingState", "Trigger",
]
