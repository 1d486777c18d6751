from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

from scheduler.dag import DAG
from scheduler.runner import FailureState, RefreshOutcome, RetryPolicy, TickRunner
from scheduler.ticks import ManualClock, TableState, TickPlan, TickPlanner
from scheduler.vocabulary import RefreshState

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
NODES = {"bad": [], "child": ["bad"], "grandchild": ["child"], "good": [], "good_child": ["good"]}


class ScriptedRefresher:
    """Returns outcomes from a per-table script (the last entry repeats); records every call."""

    def __init__(self, script: dict[str, list[RefreshOutcome]] | None = None) -> None:
        self.script = script or {}
        self.calls: list[tuple[str, datetime, str]] = []
        self._lock = threading.Lock()

    def refresh(self, name: str, data_timestamp: datetime, trigger: str) -> RefreshOutcome:
        with self._lock:
            self.calls.append((name, data_timestamp, trigger))
            outcomes = self.script.get(name, [RefreshOutcome(RefreshState.SUCCEEDED, action="INCREMENTAL", duration_s=1.0)])
            return outcomes.pop(0) if len(outcomes) > 1 else outcomes[0]


def tick_plan(dag: DAG[str], seconds: float, failures: FailureState) -> TickPlan:
    planner = TickPlanner(dag, {n: 1.0 for n in dag.nodes}, base_period_s=1.0, clock=ManualClock(T0))
    states = {n: TableState(suspended_reason=r) for n, r in failures.suspended.items()}
    return planner.plan_tick(states, now=T0 + timedelta(seconds=seconds))


def runner(dag: DAG[str], refresher: ScriptedRefresher, sleeps: list[float], **kw: object) -> TickRunner:
    sleep: Callable[[float], None] = sleeps.append
    return TickRunner(dag, refresher, max_parallel=3, sleep=sleep, **kw)  # type: ignore[arg-type]


def test_failing_table_is_suspended_after_n_failures_while_its_neighbour_keeps_refreshing() -> None:
    dag = DAG(NODES)
    refresher = ScriptedRefresher({"bad": [RefreshOutcome(RefreshState.FAILED, error="division by zero", transient=False)]})
    sleeps: list[float] = []
    run = runner(dag, refresher, sleeps, suspend_after=3)
    failures = FailureState()
    for second in range(3):
        result = run.run(tick_plan(dag, second, failures), failures)
        assert result.state_of("bad") == RefreshState.FAILED
        assert result.state_of("child") == "UPSTREAM_FAILED"
        assert result.state_of("grandchild") == "UPSTREAM_FAILED"
        assert result.state_of("good") == result.state_of("good_child") == RefreshState.SUCCEEDED
    assert sleeps == []  # user errors are not retried
    assert [c[0] for c in refresher.calls].count("bad") == 3
    assert result.newly_suspended == ("bad", "child", "grandchild")
    assert failures.suspended["bad"] == "FAILED: 3 consecutive failed refreshes; last error: division by zero"
    assert failures.suspended["grandchild"] == "UPSTREAM_FAILED: upstream bad suspended after 3 failures"
    # Upstream failures do not count as the downstream's own failures.
    assert failures.consecutive_failures == {"bad": 3}

    refresher.calls.clear()
    fourth = run.run(tick_plan(dag, 3, failures), failures)
    assert sorted(c[0] for c in refresher.calls) == ["good", "good_child"]
    assert fourth.succeeded == ("good", "good_child")

    # Resuming brings back the table and the tables suspended because of it; state survives a round trip.
    restored = FailureState.from_dict(failures.to_dict())
    assert restored == failures
    assert restored.resume(dag, "bad") == ["bad", "child", "grandchild"]
    assert restored.suspended == {} and restored.consecutive_failures == {}
    run.close()


def test_success_resets_the_failure_count() -> None:
    dag = DAG({"t": []})
    refresher = ScriptedRefresher({"t": [RefreshOutcome(RefreshState.FAILED, error="x"), RefreshOutcome(RefreshState.FAILED, error="x"),
                                         RefreshOutcome(RefreshState.SUCCEEDED), RefreshOutcome(RefreshState.FAILED, error="x")]})
    run = runner(dag, refresher, [], suspend_after=3)
    failures = FailureState()
    for second in range(4):
        run.run(tick_plan(dag, second, failures), failures)
    assert failures.consecutive_failures == {"t": 1} and failures.suspended == {}
    run.close()


def test_transient_failures_are_retried_with_exponential_backoff() -> None:
    dag = DAG({"t": [], "r": ["t"]})
    flaky = RefreshOutcome(RefreshState.FAILED, error="executor lost", transient=True, duration_s=2.0)
    refresher = ScriptedRefresher({"t": [flaky, flaky, flaky, RefreshOutcome(RefreshState.SUCCEEDED, duration_s=1.0)]})
    sleeps: list[float] = []
    run = runner(dag, refresher, sleeps, retry=RetryPolicy(max_retries=3, initial_backoff_s=0.5))
    failures = FailureState()
    result = run.run(tick_plan(dag, 0, failures), failures)
    assert sleeps == [0.5, 1.0, 2.0]
    t = result.results[0]
    assert (t.name, t.state, t.attempts, t.duration_s) == ("t", RefreshState.SUCCEEDED, 4, 7.0)
    assert result.state_of("r") == RefreshState.SUCCEEDED
    assert failures.consecutive_failures == {}
    run.close()


def test_retries_are_bounded_and_count_as_one_failure() -> None:
    dag = DAG({"t": []})
    refresher = ScriptedRefresher({"t": [RefreshOutcome(RefreshState.FAILED, error="timeout", transient=True)]})
    sleeps: list[float] = []
    run = runner(dag, refresher, sleeps, retry=RetryPolicy(max_retries=2, initial_backoff_s=1, max_backoff_s=1.5))
    failures = FailureState()
    result = run.run(tick_plan(dag, 0, failures), failures)
    assert result.results[0].attempts == 3 and sleeps == [1.0, 1.5]
    assert failures.consecutive_failures == {"t": 1}
    run.close()


def test_a_raising_refresher_is_a_failure_not_a_crash() -> None:
    class Broken:
        def refresh(self, name: str, data_timestamp: datetime, trigger: str) -> RefreshOutcome:
            if name == "a":
                raise RuntimeError("boom")
            return RefreshOutcome(RefreshState.SUCCEEDED)

    dag = DAG({"a": [], "b": []})
    run = TickRunner(dag, Broken(), sleep=lambda s: None)
    result = run.run(tick_plan(dag, 0, FailureState()), FailureState())
    assert result.results[0].error == "RuntimeError: boom"
    assert result.state_of("b") == RefreshState.SUCCEEDED
    run.close()


def test_parallelism_is_bounded_and_dependencies_wait() -> None:
    dag = DAG({f"leaf{i}": [] for i in range(6)} | {"top": [f"leaf{i}" for i in range(6)]})
    active, peak, finished = 0, 0, set()
    lock = threading.Lock()
    barrier_ok = []

    class Counting:
        def refresh(self, name: str, data_timestamp: datetime, trigger: str) -> RefreshOutcome:
            nonlocal active, peak
            with lock:
                active += 1
                peak = max(peak, active)
                if name == "top":
                    barrier_ok.append(len(finished) == 6)
            threading.Event().wait(0.01)  # long enough for the pool to fill up
            with lock:
                active -= 1
                finished.add(name)
            return RefreshOutcome(RefreshState.SUCCEEDED)

    run = TickRunner(dag, Counting(), max_parallel=2)
    result = run.run(tick_plan(dag, 0, FailureState()), FailureState())
    assert len(result.succeeded) == 7 and peak == 2 and barrier_ok == [True]
    run.close()


def test_cancel_stops_new_refreshes() -> None:
    dag = DAG({"a": [], "b": ["a"]})
    cancel = threading.Event()

    class CancelAfterA:
        def refresh(self, name: str, data_timestamp: datetime, trigger: str) -> RefreshOutcome:
            cancel.set()
            return RefreshOutcome(RefreshState.SUCCEEDED)

    run = TickRunner(dag, CancelAfterA())
    result = run.run(tick_plan(dag, 0, FailureState()), FailureState(), cancel=cancel)
    assert result.state_of("a") == RefreshState.SUCCEEDED and result.state_of("b") == "CANCELLED"
    run.close()
