"""AUTO's cost model (dtables/dynamic/cost.py) on synthetic measurements: each rule, the thresholds, no history."""

from __future__ import annotations

import pytest

from dtables.dynamic.cost import (
    CostInputs,
    CostSettings,
    Measured,
    SourceChange,
    choose,
    estimate_full,
    estimate_incremental,
    fit_incremental,
)
from dtables.dynamic.vocabulary import Action

MB = 1024 * 1024
BIG = 1024 * MB  # sources above the size under which AUTO never switches


def lineitem(rows_added: int = 0, rows_removed: int = 0, *, rows: int | None = 1_000_000, size: int | None = BIG,
             change_bytes: int = 0) -> SourceChange:
    return SourceChange("default.lineitem", rows_added, rows_removed, change_bytes, 0, rows, size)


def test_half_of_a_source_changed_chooses_full_even_without_history() -> None:
    d = choose(CostInputs((lineitem(rows_removed=520_000, rows_added=520_000), SourceChange("default.orders", bytes=BIG))))
    assert (d.choice, d.reason) == (Action.FULL, "FULL: 52% of default.lineitem changed")
    assert (d.estimate_incremental_s, d.estimate_full_s) == (None, None)


@pytest.mark.parametrize("changed, choice", [(499_999, Action.INCREMENTAL), (500_000, Action.FULL)])
def test_fraction_threshold(changed: int, choice: Action) -> None:
    assert choose(CostInputs((lineitem(rows_added=changed),))).choice == choice  # 1M rows now: half of after


def test_threshold_is_a_setting() -> None:
    inputs = CostInputs((lineitem(rows_removed=100_000),))  # 10% of the rows before went
    assert choose(inputs).choice == Action.INCREMENTAL
    d = choose(inputs, CostSettings(full_fraction=0.05))
    assert (d.choice, d.reason) == (Action.FULL, "FULL: 9% of default.lineitem changed")  # of the 1.1M before


def test_fraction_by_bytes_when_rows_are_unknown() -> None:
    d = choose(CostInputs((SourceChange("default.t", bytes_added=600 * MB, bytes=BIG),)))
    assert (d.choice, d.reason) == (Action.FULL, "FULL: 59% of default.t changed")
    assert SourceChange("default.t", bytes_added=1).fraction() is None  # size unknown: no ratio, no FULL
    d = choose(CostInputs((SourceChange("default.t", rows_added=10**9),)))
    assert (d.choice, d.reason) == (Action.INCREMENTAL, "INCREMENTAL: the size of default.t is unknown (no Delta "
                                                        "checksum)")


def test_no_history_stays_incremental_and_says_so() -> None:
    d = choose(CostInputs((lineitem(rows_added=1000),)))
    assert d.choice == Action.INCREMENTAL
    assert d.reason == "INCREMENTAL: no incremental refresh measured yet; 0% of default.lineitem changed"


def test_small_sources_never_switch() -> None:
    inputs = CostInputs((lineitem(rows_added=900, rows=1000, size=MB),), last_full=Measured(1.0, MB),
                        incrementals=(Measured(30.0, 10),))
    d = choose(inputs)
    assert d.choice == Action.INCREMENTAL and "under the 16.0 MB below which AUTO does not switch" in d.reason
    assert d.estimate_full_s == 1.0 and d.estimate_incremental_s is not None  # still estimated, for the record
    assert choose(inputs, CostSettings(min_source_bytes=0)).choice == Action.FULL


def test_full_estimate_scales_with_sources_and_table() -> None:
    inputs = CostInputs((lineitem(size=300 * MB),), table_bytes=100 * MB, last_full=Measured(10.0, 200 * MB))
    assert estimate_full(inputs) == pytest.approx(20.0)
    assert estimate_full(CostInputs((lineitem(size=None),), last_full=Measured(10.0, 200 * MB))) == 10.0
    assert estimate_full(CostInputs((lineitem(),))) is None


def test_incremental_fit_fixed_plus_rate() -> None:
    points = (Measured(3.0, 200 * MB), Measured(2.0, 100 * MB), Measured(1.0, 0))
    fixed, rate = fit_incremental(points, None) or (0, 0)
    assert fixed == pytest.approx(1.0) and rate * MB == pytest.approx(0.01)
    inputs = CostInputs((lineitem(change_bytes=400 * MB),), incrementals=points)
    assert estimate_incremental(inputs) == pytest.approx(5.0)


def test_incremental_fit_clips_to_non_negative() -> None:
    assert fit_incremental((Measured(2.0, 10), Measured(1.0, 20)), None) == (1.5, 0.0)  # bigger was faster
    fixed, rate = fit_incremental((Measured(1.0, 100), Measured(3.0, 200)), None) or (1, 1)  # line crosses below 0
    assert fixed == 0.0 and rate == pytest.approx(700 / 50_000)
    assert fit_incremental((), 1.0) is None and fit_incremental((Measured(1.0, None),), 1.0) is None


def test_one_incremental_point_borrows_the_full_rate() -> None:
    # FULL: 10 s for 1000 MB, i.e. 0.01 s per MB; the one incremental refresh took 2 s for 100 MB: 1 s fixed
    inputs = CostInputs((lineitem(change_bytes=300 * MB),), last_full=Measured(10.0, 1000 * MB),
                        incrementals=(Measured(2.0, 100 * MB),))
    assert estimate_incremental(inputs) == pytest.approx(4.0)


def test_estimates_decide_with_a_margin_for_incremental() -> None:
    def decide(inc_seconds: float) -> tuple[Action, str]:
        d = choose(CostInputs((lineitem(rows_added=10, size=BIG),), last_full=Measured(10.0, BIG),
                              incrementals=(Measured(inc_seconds, 0),) * 2))
        return d.choice, d.reason

    assert decide(0.8) == (Action.INCREMENTAL, "INCREMENTAL: est. 0.8 s against FULL 10.0 s")
    assert decide(10.9)[0] == Action.INCREMENTAL  # FULL not 10% cheaper: stays INCREMENTAL
    assert decide(12.0) == (Action.FULL, "FULL: est. 10.0 s against INCREMENTAL 12.0 s")


def test_incremental_without_a_measured_full() -> None:
    d = choose(CostInputs((lineitem(rows_added=10),), incrementals=(Measured(1.0, 0),)))
    assert d.choice == Action.INCREMENTAL and d.estimate_full_s is None
    assert d.reason.startswith("INCREMENTAL: est. 1.0 s, no full refresh measured")


def test_unchanged_sources_do_not_count() -> None:
    quiet = SourceChange("default.small", rows=10, bytes=BIG)
    assert quiet.fraction() == 0.0 and not quiet.changed
    assert choose(CostInputs((quiet, lineitem(rows_added=1)))).choice == Action.INCREMENTAL


def test_history_rows_written_before_the_cost_columns_stay_readable(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import datetime as dt

    from dtables.dynamic import history
    from dtables.state import StateStore
    from dtables.state.migrations import MIGRATIONS

    path = tmp_path / "s.sqlite"
    old = StateStore(path, MIGRATIONS[:8])  # a store from before migration 9
    at = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    history.start(old, "default.t", "r1", "MANUAL", at, {"default.s": 1})
    old.execute("UPDATE refresh_history SET state = 'SUCCEEDED', action = 'INCREMENTAL', write_kind = 'MERGE', "
                "ended_at = started_at WHERE refresh_id = 'r1'")
    store = StateStore(path)
    [record] = history.records(store, "default.t")
    assert (record.action, record.cost_choice, record.estimate_full_s, record.change_bytes) == (
        "INCREMENTAL", None, None, None)
    history.update(store, "r1", cost_choice="FULL", estimate_full_s=1.5, change_bytes=10)
    assert history.recent(store, "default.t", "change_bytes IS NOT NULL", 5)[0].estimate_full_s == 1.5


def test_before_its_first_incremental_refresh_a_table_borrows_the_warehouses() -> None:
    # no incremental refresh of its own: other tables' took 4-6 s, FULL is estimated at 2 s, so FULL, and it says why
    full = Measured(2.0, BIG)
    inputs = CostInputs((lineitem(rows_added=10, size=BIG),), last_full=full, borrowed=(4.0, 5.0, 6.0))
    d = choose(inputs)
    assert d.choice == Action.FULL and d.estimate_incremental_s == pytest.approx(5.0, rel=0.01)
    assert d.reason == "FULL: est. 2.0 s against INCREMENTAL 5.0 s (other tables' incremental refreshes: none of its own yet)"
    # its own refreshes, once there, are what counts
    own = choose(CostInputs((lineitem(rows_added=10, size=BIG),), last_full=full, incrementals=(Measured(1.0, 0),),
                            borrowed=(4.0, 5.0, 6.0)))
    assert own.choice == Action.INCREMENTAL and "other tables" not in own.reason
    # nothing measured anywhere: INCREMENTAL, as before
    assert choose(CostInputs((lineitem(rows_added=10, size=BIG),), last_full=full)).choice == Action.INCREMENTAL


def test_a_borrowed_estimate_near_full_is_tried_once() -> None:
    # other tables' median 3.0 s against FULL 2.0 s: within 2x, so INCREMENTAL once, to measure its own
    full = Measured(2.0, BIG)
    first = CostInputs((lineitem(rows_added=10, size=BIG),), last_full=full, borrowed=(2.5, 3.0, 3.5))
    d = choose(first)
    assert d.choice == Action.INCREMENTAL
    assert d.reason == ("INCREMENTAL: est. 3.0 s (other tables' incremental refreshes: none of its own yet) against "
                        "FULL 2.0 s, within 2x: refreshed incrementally once to measure its own")
    assert choose(first, CostSettings(explore=0)).choice == Action.FULL  # exploring turned off
    # once measured twice, its own refreshes decide: 3.0 s of its own against FULL 2.0 s is FULL
    own = CostInputs((lineitem(rows_added=10, size=BIG),), last_full=full, incrementals=(Measured(3.0, 0),) * 2,
                     borrowed=(2.5, 3.0, 3.5))
    assert choose(own).choice == Action.FULL


def test_a_slope_is_fitted_only_to_change_sizes_far_enough_apart() -> None:
    # TPC-H Q9's incremental refreshes at SF 1 (change bytes, seconds): changes within 11% of each other, whose
    # timings' noise fits a steep line; the update batch's 702,793 bytes then looked like a 4 s refresh
    points = (Measured(1.75, 261_662), Measured(0.98, 237_514), Measured(1.72, 263_321), Measured(1.47, 237_241))
    full = Measured(2.22, 312_101_807)
    fixed, rate = fit_incremental(points, full.seconds / full.bytes) or (0, 0)  # type: ignore[operator]
    assert rate == pytest.approx(full.seconds / full.bytes)  # FULL's seconds per byte, not the noise's
    assert fixed == pytest.approx(1.48, abs=0.01)
    d = choose(CostInputs((lineitem(rows_added=6_000, change_bytes=702_793, size=BIG),), last_full=full,
                          incrementals=points))
    assert d.choice == Action.INCREMENTAL and d.estimate_incremental_s == pytest.approx(1.48, abs=0.01)
    # twice as far apart, the sizes do set the slope
    fixed, rate = fit_incremental((Measured(1.0, 100_000), Measured(2.0, 200_000)), None) or (0, 0)
    assert (fixed, rate) == (pytest.approx(0.0), pytest.approx(1e-5))


def test_full_is_estimated_from_the_fastest_of_the_last_full_computations(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import datetime as dt

    from dtables.dynamic import history
    from dtables.dynamic.measure import past_refreshes
    from dtables.state import StateStore

    store = StateStore(tmp_path / "s.sqlite")
    at = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    # oldest first: (seconds, source bytes) of four full computations; the per-byte fastest of the newest three wins
    for i, (seconds, source_bytes) in enumerate([(0.5, 100), (1.4, 100), (3.0, 150), (1.9, 100)]):
        rid = f"f{i}"
        history.start(store, "default.t", rid, "MANUAL", at, {})
        start = at + dt.timedelta(minutes=i)
        history.update(store, rid, state="SUCCEEDED", action="FULL", write_kind="OVERWRITE", source_bytes=source_bytes,
                       started_at=start, ended_at=start + dt.timedelta(seconds=seconds))
    last_full, incrementals = past_refreshes(store, None, "default.t", None)
    assert last_full == Measured(1.4, 100) and incrementals == ()  # 0.5 s was four refreshes ago
    assert estimate_full(CostInputs((lineitem(size=200),), last_full=last_full)) == pytest.approx(2.8)


def test_a_full_measured_only_at_create_is_measured_warm_once() -> None:
    # TPC-H Q13 at SF 1: FULL 2.74 s at CREATE, its own incremental refreshes 2.55 s; FULL warm took 1.6 s
    cold = Measured(2.74, BIG, at_creation=True)
    own = (Measured(2.55, 0),)
    d = choose(CostInputs((lineitem(rows_added=10, size=BIG),), last_full=cold, incrementals=own))
    assert d.choice == Action.FULL
    assert d.reason == ("FULL: est. 2.7 s at CREATE against INCREMENTAL 2.5 s, within 2x: refreshed in full once to "
                        "measure it warm")
    # once a later full computation is measured, the estimates decide as always
    warm = Measured(2.74, BIG)
    assert choose(CostInputs((lineitem(rows_added=10, size=BIG),), last_full=warm, incrementals=own)).choice == \
        Action.INCREMENTAL
    # FULL more than twice INCREMENTAL's estimate (Q1: 7.4 s against 0.7 s) is not worth measuring again
    far = choose(CostInputs((lineitem(rows_added=10, size=BIG),), last_full=Measured(7.44, BIG, at_creation=True),
                            incrementals=(Measured(0.72, 0),)))
    assert far.choice == Action.INCREMENTAL and far.reason == "INCREMENTAL: est. 0.7 s against FULL 7.4 s"
    # nor before the table has an incremental refresh of its own, nor with exploring turned off
    borrowed = CostInputs((lineitem(rows_added=10, size=BIG),), last_full=cold, borrowed=(2.55,))
    assert choose(borrowed).choice == Action.INCREMENTAL
    assert choose(CostInputs((lineitem(rows_added=10, size=BIG),), last_full=cold, incrementals=own),
                  CostSettings(explore=0)).choice == Action.INCREMENTAL


def test_a_full_is_marked_as_measured_at_create_until_a_later_one(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import datetime as dt

    from dtables.dynamic import history
    from dtables.dynamic.measure import past_refreshes
    from dtables.state import StateStore

    store = StateStore(tmp_path / "s.sqlite")
    at = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)

    def full(i: int, trigger: str, seconds: float) -> None:
        history.start(store, "default.t", f"f{i}", trigger, at, {})
        start = at + dt.timedelta(minutes=i)
        history.update(store, f"f{i}", state="SUCCEEDED", action="FULL", write_kind="OVERWRITE", source_bytes=100,
                       started_at=start, ended_at=start + dt.timedelta(seconds=seconds))

    full(0, "CREATION", 2.0)
    assert past_refreshes(store, None, "default.t", None)[0] == Measured(2.0, 100, at_creation=True)
    full(1, "SCHEDULED", 3.0)  # slower: the estimate stays CREATE's, but FULL has been measured since
    assert past_refreshes(store, None, "default.t", None)[0] == Measured(2.0, 100, at_creation=False)


def test_an_incremental_estimate_from_one_refresh_of_a_change_this_size_is_measured_again() -> None:
    # TPC-H Q08 at SF 1: refreshed incrementally after RF1 and RF2 (about 250 KB of change, 0.9-1.1 s) and once
    # after the update batch (686 KB), cold, in 1.96 s; a warm FULL took 1.6 s. FULL adds no incremental point, so
    # that one refresh chose FULL for every later update batch, where its INCREMENTAL twin took 0.96-1.14 s.
    full = Measured(1.6, BIG)
    rf = (Measured(0.95, 250_000), Measured(1.05, 240_000), Measured(1.0, 255_000))
    update = lineitem(rows_added=6_000, change_bytes=686_000, size=BIG)
    once = choose(CostInputs((update,), last_full=full, incrementals=(Measured(1.96, 686_000),) + rf))
    assert once.choice == Action.INCREMENTAL
    assert once.reason == ("INCREMENTAL: est. 2.0 s from one incremental refresh of a change this size, against FULL "
                           "1.6 s, within 2x: refreshed incrementally once more to measure it again")
    assert choose(CostInputs((update,), last_full=full, incrementals=(Measured(1.96, 686_000),) + rf),
                  CostSettings(explore=0)).choice == Action.FULL  # exploring turned off
    # measured again, warm: both points of that size decide, and INCREMENTAL stays
    again = choose(CostInputs((update,), last_full=full,
                              incrementals=(Measured(1.0, 690_000), Measured(1.96, 686_000)) + rf))
    assert again.choice == Action.INCREMENTAL and "once more" not in again.reason
    # measured again, as slow: FULL, for good
    slow = choose(CostInputs((update,), last_full=full,
                             incrementals=(Measured(2.0, 690_000), Measured(1.96, 686_000)) + rf))
    assert slow.choice == Action.FULL
    # a change of a size never refreshed incrementally is extrapolated, not explored; nor one far beyond FULL
    bigger = lineitem(rows_added=20_000, change_bytes=2_000_000, size=BIG)
    assert choose(CostInputs((bigger,), last_full=full, incrementals=(Measured(1.96, 686_000),) + rf)).choice == \
        Action.FULL
    assert choose(CostInputs((update,), last_full=full, incrementals=(Measured(4.0, 686_000),) + rf)).choice == \
        Action.FULL
