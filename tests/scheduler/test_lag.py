from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from scheduler.lag import RefreshRecord, lag_metrics

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_sawtooth_on_a_hand_computed_history() -> None:
    # Window [0, 100], target lag 30 s.
    history = [
        RefreshRecord(at(-20), at(-10), "SUCCEEDED"),  # before the window: lag at 0 is 20
        RefreshRecord(at(40), at(50), "SUCCEEDED"),  # lag drops to 10 at 50
        RefreshRecord(at(60), at(65), "FAILED"),  # ignored
        RefreshRecord(at(80), at(90), "SUCCEEDED"),  # lag drops to 10 at 90
        RefreshRecord(at(95), at(120), "SUCCEEDED"),  # ends after now: not visible yet
    ]
    m = lag_metrics(history, window_start=at(0), now=at(100), target_lag_s=30)
    # Pieces: [0,50] lag 20->70, [50,90] lag 10->50, [90,100] lag 10->20.
    area = (20 + 70) / 2 * 50 + (10 + 50) / 2 * 40 + (10 + 20) / 2 * 10
    assert m.mean_lag_s == pytest.approx(area / 100)
    assert m.max_lag_s == 70
    assert m.current_lag_s == 20
    # Within 30 s: [0,10] (20->30), [50,70] (10->30), [90,100] -> 10 + 20 + 10 = 40 of 100.
    assert m.within_target_share == pytest.approx(0.4)
    assert m.uncovered_s == 0 and m.refreshes_in_window == 2


def test_time_before_the_first_refresh_is_uncovered_and_not_within_target() -> None:
    history = [RefreshRecord(at(10), at(20), "SUCCEEDED")]
    m = lag_metrics(history, window_start=at(0), now=at(40), target_lag_s=15)
    assert m.uncovered_s == 20
    assert m.mean_lag_s == pytest.approx((10 + 30) / 2)
    assert m.within_target_share == pytest.approx(5 / 40)  # lag 10 -> 15 over [20, 25]


def test_an_older_data_timestamp_finishing_later_does_not_lower_freshness() -> None:
    history = [RefreshRecord(at(50), at(55), "SUCCEEDED"), RefreshRecord(at(30), at(60), "SUCCEEDED")]
    m = lag_metrics(history, window_start=at(55), now=at(70), target_lag_s=None)
    assert m.current_lag_s == 20 and m.max_lag_s == 20 and m.within_target_share is None


def test_never_refreshed_table() -> None:
    m = lag_metrics([], window_start=at(0), now=at(10), target_lag_s=5)
    assert (m.current_lag_s, m.mean_lag_s, m.max_lag_s, m.within_target_share) == (None, None, None, 0.0)
    with pytest.raises(ValueError, match="empty window"):
        lag_metrics([], window_start=at(10), now=at(10), target_lag_s=5)
