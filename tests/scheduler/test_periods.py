from __future__ import annotations

import pytest

from scheduler.dag import DAG
from scheduler.errors import TargetLagError
from scheduler.periods import (
    DOWNSTREAM,
    TargetLag,
    canonical_period_s,
    compute_periods,
    expected_duration_s,
    parse_target_lag,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1 second", 1), ("30 seconds", 30), ("1 minute", 60), ("5 MINUTES", 300), ("2 hours", 7200),
     ("1 day", 86400), ("  3 days ", 259200)],
)
def test_parse_target_lag(text: str, seconds: float) -> None:
    assert parse_target_lag(text) == TargetLag(float(seconds))


def test_parse_downstream_and_render() -> None:
    assert parse_target_lag("downstream") == DOWNSTREAM
    assert parse_target_lag("downstream").is_downstream
    assert str(DOWNSTREAM) == "DOWNSTREAM"
    assert str(parse_target_lag("120 seconds")) == "2 minutes"
    assert str(parse_target_lag("1 hour")) == "1 hour"


@pytest.mark.parametrize("text", ["5", "five minutes", "5 min", "1.5 hours", "-1 minute", "", "5 weeks"])
def test_bad_lag_is_refused_with_the_accepted_forms(text: str) -> None:
    with pytest.raises(TargetLagError, match="seconds\\|minutes\\|hours\\|days"):
        parse_target_lag(text)


def test_zero_lag_is_below_the_minimum() -> None:
    with pytest.raises(TargetLagError, match="minimum target lag is 1 second"):
        parse_target_lag("0 seconds")


def test_expected_duration_is_a_high_percentile_of_recent_runs() -> None:
    assert expected_duration_s([]) == 0.0
    durations = [1.0] * 18 + [10.0, 50.0]
    assert expected_duration_s(durations, percentile=90) == 1.0
    assert expected_duration_s(durations, percentile=95) == 10.0
    assert expected_duration_s(durations, percentile=100) == 50.0
    # Only the last N count: an old outlier is forgotten.
    assert expected_duration_s([500.0] + [2.0] * 20, percentile=100, last_n=20) == 2.0


@pytest.mark.parametrize(
    ("lag", "overhead", "period", "ok"),
    [(60, 0, 48, True), (96, 0, 96, True), (95.9, 0, 48, True), (300, 20, 192, True), (3600, 0, 3072, True),
     (60, 13, 48, False), (10, 0, 48, False)],
)
def test_canonical_period(lag: float, overhead: float, period: float, ok: bool) -> None:
    assert canonical_period_s(lag, overhead, 48.0) == (period, ok)


def test_canonical_period_with_small_test_base() -> None:
    assert canonical_period_s(5, 0, 1.0) == (4.0, True)
    assert canonical_period_s(8, 0, 1.0) == (8.0, True)
    assert canonical_period_s(8, 0.5, 1.0) == (4.0, True)


def test_upstream_refreshes_at_least_as_often_as_its_readers() -> None:
    dag = DAG({"u": [], "d": ["u"], "slow": ["u"]})
    lags = {"u": parse_target_lag("1 hour"), "d": parse_target_lag("2 minutes"), "slow": parse_target_lag("1 day")}
    periods = compute_periods(dag, lags)
    assert periods["d"].effective_period_s == 96
    assert periods["u"].own_period_s == 3072
    assert periods["u"].effective_period_s == 96
    assert periods["u"].driven_by == "d"
    assert periods["slow"].effective_period_s == 49152
    assert "to stay aligned with d" in periods["u"].explain()


def test_downstream_lag_takes_the_minimum_of_its_readers_transitively() -> None:
    dag = DAG({"base": [], "mid": ["base"], "a": ["mid"], "b": ["mid"], "orphan": []})
    lags = {"base": DOWNSTREAM, "mid": DOWNSTREAM, "a": parse_target_lag("10 minutes"),
            "b": parse_target_lag("4 minutes"), "orphan": DOWNSTREAM}
    periods = compute_periods(dag, lags)
    assert periods["b"].effective_period_s == 192
    assert periods["mid"].effective_period_s == 192 and periods["mid"].driven_by == "b"
    assert periods["base"].effective_period_s == 192
    assert periods["orphan"].effective_period_s is None
    assert "no scheduled dynamic table reads it" in periods["orphan"].explain()


def test_suspended_readers_do_not_pull_periods_down() -> None:
    dag = DAG({"u": [], "d": ["u"]})
    lags = {"u": parse_target_lag("1 hour"), "d": parse_target_lag("1 minute")}
    assert compute_periods(dag, lags, ignore=["d"])["u"].effective_period_s == 3072


def test_expected_wait_is_the_longest_chain_of_upstream_durations() -> None:
    dag = DAG({"a": [], "b": ["a"], "c": [], "d": ["b", "c"]})
    lags = {n: parse_target_lag("10 minutes") for n in "abcd"}
    periods = compute_periods(dag, lags, {"a": 30, "b": 40, "c": 100, "d": 300}, tick_latency_s=5)
    assert periods["d"].expected_wait_s == 105  # max(30 + 40, 100) + 5
    # 600 - 105 - 300 = 195 -> 192
    assert periods["d"].own_period_s == 192
    assert periods["a"].effective_period_s == 192  # pulled down by d


def test_unreachable_lag_is_flagged_in_words() -> None:
    dag = DAG({"t": []})
    decision = compute_periods(dag, {"t": parse_target_lag("1 minute")}, {"t": 30.0})["t"]
    assert decision.effective_period_s == 48 and not decision.lag_achievable
    assert "cannot be met" in decision.explain()


def test_missing_lag_is_an_error() -> None:
    with pytest.raises(TargetLagError, match="no TARGET_LAG for b"):
        compute_periods(DAG({"a": [], "b": []}), {"a": DOWNSTREAM})
