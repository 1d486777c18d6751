from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.dag import DAG
from scheduler.periods import DOWNSTREAM, TargetLag, compute_periods
from scheduler.ticks import EPOCH, ManualClock, TableState, TickPlan, TickPlanner, grid_floor, next_grid_point

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)  # a multiple of every canonical period with base 1 s up to 2**10


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def planner(nodes: dict[str, list[str]], lags: dict[str, TargetLag], clock: ManualClock) -> TickPlanner:
    dag = DAG(nodes)
    periods = compute_periods(dag, lags, base_period_s=1.0)
    return TickPlanner(dag, {n: p.effective_period_s for n, p in periods.items()}, base_period_s=1.0, clock=clock)


def batches(plan: TickPlan) -> list[list[str]]:
    return [[r.name for r in batch] for batch in plan.batches]


def test_grid_arithmetic_is_exact_for_sub_second_periods() -> None:
    assert grid_floor(at(1.19), 0.2) == at(1.0)
    assert grid_floor(at(1.2), 0.2) == at(1.2)
    assert next_grid_point(at(1.2), 0.2) == at(1.4)
    assert grid_floor(EPOCH + timedelta(seconds=100), 48) == EPOCH + timedelta(seconds=96)
    with pytest.raises(ValueError, match="naive"):
        grid_floor(datetime(2024, 1, 1), 1.0)


def test_mixed_lags_refresh_together_at_one_aligned_data_timestamp() -> None:
    clock = ManualClock(at(0.3))
    # fast (lag 3 s -> period 2) reads up (lag 20 s -> own 16, pulled to 2); slow (lag 9 s -> period 8) reads up.
    p = planner({"up": [], "fast": ["up"], "slow": ["up"]},
                {"up": TargetLag(20), "fast": TargetLag(3), "slow": TargetLag(9)}, clock)
    assert p.periods == {"up": 2.0, "fast": 2.0, "slow": 8.0}
    states: dict[str, TableState] = {}

    def tick() -> TickPlan:
        plan = p.plan_tick(states)
        for name in plan.names:
            states[name] = TableState(last_data_timestamp=plan.data_timestamp)
        return plan

    first = tick()
    assert first.data_timestamp == at(0) and batches(first) == [["up"], ["fast", "slow"]]
    clock.set(at(1.7))
    assert tick().names == ()  # no period grid point crossed since 0
    clock.set(at(2.5))
    second = tick()
    assert second.data_timestamp == at(2) and batches(second) == [["up"], ["fast"]]
    clock.set(at(8.01))
    third = tick()
    assert third.data_timestamp == at(8) and batches(third) == [["up"], ["fast", "slow"]]
    assert {states[n].last_data_timestamp for n in ("up", "fast", "slow")} == {at(8)}


def test_a_due_reader_brings_its_stale_upstreams_to_the_same_timestamp() -> None:
    clock = ManualClock(at(33.4))
    p = planner({"up": [], "d": ["up"]}, {"up": TargetLag(40), "d": TargetLag(40)}, clock)
    assert p.periods == {"up": 32.0, "d": 32.0}
    # up got a manual refresh after its grid point 32 (so it is not due), but not at this tick's timestamp 33:
    # d is due and needs up at 33, so up comes along.
    plan = p.plan_tick({"d": TableState(at(0)), "up": TableState(at(32.5))})
    assert plan.data_timestamp == at(33)
    assert batches(plan) == [["up"], ["d"]]
    assert plan.refreshes[0].reason == "upstream of d, needed at this data timestamp"


def test_an_upstream_already_at_the_timestamp_is_not_refreshed_again() -> None:
    clock = ManualClock(at(33.4))
    p = planner({"up": [], "d": ["up"]}, {"up": TargetLag(100), "d": TargetLag(40)}, clock)
    plan = p.plan_tick({"d": TableState(at(0)), "up": TableState(at(33))})
    assert batches(plan) == [["d"]]


def test_downstream_lag_refreshes_only_with_its_readers_and_never_alone() -> None:
    clock = ManualClock(at(0))
    p = planner({"src": [], "reader": ["src"], "unread": []},
                {"src": DOWNSTREAM, "reader": TargetLag(5), "unread": DOWNSTREAM}, clock)
    assert p.periods == {"src": 4.0, "reader": 4.0, "unread": None}
    plan = p.plan_tick({"unread": TableState(None)})
    assert batches(plan) == [["src"], ["reader"]]
    assert "unread" not in plan
    manual = p.plan_manual(["unread"], {}, now=at(0.5))
    assert manual.names == ("unread",) and manual.data_timestamp == at(0.5) and manual.trigger == "MANUAL"


def test_running_refresh_is_skipped_with_its_readers() -> None:
    clock = ManualClock(at(4))
    p = planner({"a": [], "b": ["a"], "c": ["b"], "other": []}, {n: TargetLag(2) for n in "abc"} | {"other": TargetLag(2)}, clock)
    plan = p.plan_tick({"a": TableState(at(0), running=True)})
    assert batches(plan) == [["other"]]
    assert [(s.name, s.state) for s in plan.skipped] == [("a", "SKIPPED"), ("b", "SKIPPED"), ("c", "SKIPPED")]
    assert "next refresh covers the whole interval" in plan.skipped[0].reason
    assert plan.skipped[1].reason == "upstream a cannot refresh in this tick"


def test_suspended_table_and_its_downstreams_are_excluded() -> None:
    clock = ManualClock(at(4))
    p = planner({"a": [], "b": ["a"], "c": ["b"], "other": []}, {n: TargetLag(2) for n in ["a", "b", "c", "other"]}, clock)
    plan = p.plan_tick({"b": TableState(at(0), suspended_reason="by user")})
    assert batches(plan) == [["a", "other"]]
    assert [(e.name, e.reason) for e in plan.excluded] == [
        ("b", "suspended: by user"), ("c", "upstream b is suspended")]
    text = plan.to_text()
    assert "SUSPENDED: c (upstream b is suspended)" in text


def test_an_upstream_ahead_of_the_tick_delays_its_reader() -> None:
    clock = ManualClock(at(4.2))
    p = planner({"u": [], "d": ["u"]}, {"u": TargetLag(100), "d": TargetLag(2)}, clock)
    # u got a manual refresh at 4.1, after the grid point 4 of this tick: d cannot read u at 4.
    plan = p.plan_tick({"u": TableState(at(4.1)), "d": TableState(at(2))})
    assert plan.names == () and "later data timestamp" in plan.skipped[0].reason


# -- property: aligned data timestamps and upstream-first order over random DAGs and lags ---------------------------
@st.composite
def dags_with_lags(draw: st.DrawFn) -> tuple[dict[str, list[str]], dict[str, TargetLag], dict[str, float | None]]:
    n = draw(st.integers(1, 8))
    names = [f"t{i}" for i in range(n)]
    nodes = {name: [u for u in names[:i] if draw(st.booleans())] for i, name in enumerate(names)}
    lags = {name: draw(st.one_of(st.just(DOWNSTREAM), st.integers(1, 40).map(float).map(TargetLag)))
            for name in names}
    lasts = {name: draw(st.one_of(st.none(), st.integers(0, 60).map(float))) for name in names}
    return nodes, lags, lasts


@settings(max_examples=150, deadline=None)
@given(dags_with_lags(), st.integers(0, 80_000).map(lambda ms: ms / 1000))
def test_plans_refresh_upstreams_first_at_the_shared_timestamp(case, now_s: float) -> None:  # type: ignore[no-untyped-def]
    nodes, lags, lasts = case
    clock = ManualClock(at(now_s))
    p = planner(nodes, lags, clock)
    states = {n: TableState(None if s is None or s > now_s else at(s)) for n, s in lasts.items()}
    plan = p.plan_tick(states)
    assert plan.data_timestamp == grid_floor(at(now_s), 1.0)
    position = {name: i for i, batch in enumerate(plan.batches) for name in [r.name for r in batch]}
    for name in plan.names:
        for up in nodes[name]:
            last = states[up].last_data_timestamp
            # every upstream is either refreshed earlier in this tick or already at the tick's timestamp
            assert (up in position and position[up] < position[name]) or last == plan.data_timestamp
    for name in nodes:
        # Nothing runs or is suspended here, so every due table is planned (at the tick's one timestamp), and a
        # table that is not due is planned only as an upstream of a planned table.
        if p.is_due(name, states[name], at(now_s)):
            assert name in plan
        elif name in plan:
            assert any(name in nodes[reader] for reader in plan.names)
