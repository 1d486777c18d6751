"""The daemon's persisted failure state against what happens outside the daemon (no Spark: the state store only)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from types import SimpleNamespace

from dtables.daemon.failures import FailureStore
from dtables.dynamic import definition as defs
from dtables.dynamic import history
from dtables.state import StateStore
from scheduler.dag import DAG
from scheduler.runner import FailureState
from scheduler.vocabulary import RefreshState, SchedulingState

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def _record(store: StateStore, name: str, trigger: str, state: str, minute: int) -> None:
    rid = history.new_refresh_id()
    history.start(store, name, rid, trigger, T0 + dt.timedelta(minutes=minute), None)
    history.update(store, rid, state=state, started_at=defs.to_iso(T0 + dt.timedelta(minutes=minute)))


def _sync(store: StateStore, failures: FailureState) -> FailureState:
    dag = DAG({"default.a": [], "default.b": []})
    active = SimpleNamespace(state=SchedulingState.ACTIVE)
    FailureStore(store).sync_resumed(failures, dag, {"default.a": active, "default.b": active})
    return FailureStore(store).load()


def test_a_successful_manual_refresh_resets_the_failure_count(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.db")
    for name in ("default.a", "default.b"):
        _record(store, name, "SCHEDULED", RefreshState.FAILED, 1)
        _record(store, name, "SCHEDULED", RefreshState.FAILED, 2)
    _record(store, "default.a", "MANUAL", RefreshState.SUCCEEDED, 3)  # the user fixed a and refreshed it by hand
    _record(store, "default.b", "MANUAL", RefreshState.FAILED, 3)  # b still fails
    failures = FailureState(consecutive_failures={"default.a": 2, "default.b": 2})
    FailureStore(store).save(failures)

    assert _sync(store, failures).consecutive_failures == {"default.b": 2}
    assert failures.consecutive_failures == {"default.b": 2}  # the daemon's own copy too


def test_a_manual_success_older_than_the_scheduled_failures_changes_nothing(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.db")
    _record(store, "default.a", "MANUAL", RefreshState.SUCCEEDED, 1)
    _record(store, "default.a", "SCHEDULED", RefreshState.FAILED, 2)
    failures = FailureState(consecutive_failures={"default.a": 1})
    FailureStore(store).save(failures)

    assert _sync(store, failures).consecutive_failures == {"default.a": 1}
