"""AUTO's cost model: before each refresh of an AUTO table that can be maintained incrementally, INCREMENTAL or FULL.

``choose`` is a pure function of plain measurements (``CostInputs``: what the Delta logs say changed per source, the
sizes of the sources and of the table, and the table's own measured refreshes) to a ``CostDecision``. The executor
gathers the inputs (``dtables.dynamic.measure``) and records the decision in the refresh history. Rules, in order:

1. sources smaller in total than ``min_source_bytes``, or of unknown size (no Delta checksum): INCREMENTAL (small
   refreshes both cost their fixed overhead, their timings are noise, and flipping between the two would only make
   the table's behaviour harder to follow);
2. a change touching at least ``full_fraction`` of one source's rows: FULL ("FULL: 52% of default.lineitem
   changed"): each join term of the derivative then reads about as much as the query itself;
3. both estimates known: FULL when ``FULL * (1 + margin) < INCREMENTAL``, else INCREMENTAL; but while the
   INCREMENTAL estimate is borrowed from other tables (below) and at most ``explore`` times FULL's, INCREMENTAL,
   once: a borrowed median says little of this table (TPC-H Q6 at SF 10 borrowed 6.9 s against FULL's 4.7 s and
   never refreshed incrementally, which took it 1.7-3.3 s), and one refresh measures its own. Likewise, while
   FULL's estimate rests only on the refresh at CREATE and is at most ``explore`` times INCREMENTAL's own, FULL,
   once: CREATE runs the table's plans for the first time, before Spark's code for them is generated and compiled
   (TPC-H at SF 1: 1.3 to 2.8 times the same FULL later; Q13's 2.7 s at CREATE kept it INCREMENTAL at 1.9-2.2 s
   where a warm FULL took 1.6 s), so a table whose FULL is cheaper warm would otherwise never find out. And
   INCREMENTAL likewise: where FULL would win against an estimate resting on a single incremental refresh of a
   change of about this size (within ``SLOPE_SPAN``) and at most ``explore`` times FULL's, INCREMENTAL once more: a
   FULL adds no incremental point, so one slow refresh (the first of its size, cold: TPC-H Q08's 1.96 s where its
   twin took 0.96-1.14 s) would otherwise decide every later change of that size;
4. otherwise (no incremental refresh measured in the warehouse yet, or no measured FULL): INCREMENTAL.

Estimates (seconds):
- FULL = ``t_full * bytes_now / bytes_then``: a recent full computation (the initial refresh, a REINITIALIZE or a
  FULL this model chose; the fastest per byte of the last few, ``dtables.dynamic.measure``) scaled by the bytes a
  recompute reads and writes (sources plus the table);
- INCREMENTAL = ``fixed + rate * change_bytes``, fitted by least squares (non-negative) to the table's recent
  incremental refreshes ``(change_bytes, seconds)``; where their change sizes span less than a factor of
  ``SLOPE_SPAN`` (or are all one), ``rate`` is the FULL's seconds per byte and ``fixed`` what the measured refreshes
  took beyond that: over so narrow a span the timings' noise, not the size, sets a fitted slope. Before the table's
  first incremental refresh, ``fixed`` is the median time of the warehouse's other recent incremental refreshes (most of
  an incremental refresh's time at small changes is the engine's fixed cost, the same for every table), so the
  first change after CREATE is not refreshed INCREMENTAL blindly.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from dtables.dynamic.vocabulary import Action

FULL_FRACTION = 0.5  # spark.dtables.refresh.costModel.fullFraction
MIN_SOURCE_BYTES = 16 * 1024 * 1024  # spark.dtables.refresh.costModel.minSourceBytes
MARGIN = 0.1  # FULL must be estimated this much cheaper: near a tie, the table stays INCREMENTAL
EXPLORE = 2.0  # spark.dtables.refresh.costModel.explore: a borrowed estimate up to this times FULL's is tried once
# A slope is fitted only to change sizes at least this far apart: TPC-H Q9 at SF 1, refreshed incrementally after
# changes of 232 to 257 KiB in 1.0 to 1.8 s, was estimated 4.2 s for the update batch's 686 KiB against FULL's
# 2.2 s, and refreshed FULL; incrementally that batch took 1.5 s.
SLOPE_SPAN = 2.0


@dataclass(frozen=True)
class SourceChange:
    """One source of the refresh: rows (logical, from the commits' operation metrics where they have them) and bytes
    (of the data files the interval added and removed) that changed, and its size at the new version (None:
    unknown)."""

    name: str
    rows_added: int = 0
    rows_removed: int = 0
    bytes_added: int = 0
    bytes_removed: int = 0
    rows: int | None = None
    bytes: int | None = None

    @property
    def changed(self) -> bool:
        return bool(self.rows_added or self.rows_removed or self.bytes_added or self.bytes_removed)

    @property
    def change_bytes(self) -> int:
        return self.bytes_added + self.bytes_removed

    def fraction(self) -> float | None:
        """The share of the source's rows the change touched: max(added, removed) over the larger of the row counts
        before and after; by bytes when the row count is unknown. None when the source's size is unknown."""
        if not self.changed:
            return 0.0
        if self.rows is not None:
            before = self.rows - self.rows_added + self.rows_removed
            return max(self.rows_added, self.rows_removed) / max(self.rows, before, 1)
        if self.bytes is not None:
            return max(self.bytes_added, self.bytes_removed) / max(self.bytes, 1)
        return None


@dataclass(frozen=True)
class Measured:
    """One past refresh of the table: its wall seconds and the bytes it scales with (change bytes for an
    INCREMENTAL, source plus table bytes for a FULL; None: unknown)."""

    seconds: float
    bytes: int | None = None
    at_creation: bool = False  # a FULL estimated from the refresh at CREATE alone (no later full computation)


@dataclass(frozen=True)
class CostInputs:
    sources: tuple[SourceChange, ...]
    table_bytes: int | None = None
    last_full: Measured | None = None
    incrementals: tuple[Measured, ...] = ()  # newest first
    borrowed: tuple[float, ...] = ()  # seconds of other tables' newest incremental refreshes (the prior)

    @property
    def change_bytes(self) -> int:
        return sum(s.change_bytes for s in self.sources)

    @property
    def source_bytes(self) -> int | None:
        sizes = [s.bytes for s in self.sources]
        return None if any(b is None for b in sizes) else sum(b for b in sizes if b is not None)


@dataclass(frozen=True)
class CostSettings:
    full_fraction: float = FULL_FRACTION
    min_source_bytes: int = MIN_SOURCE_BYTES
    margin: float = MARGIN
    explore: float = EXPLORE


@dataclass(frozen=True)
class CostDecision:
    choice: Action  # INCREMENTAL or FULL
    estimate_incremental_s: float | None
    estimate_full_s: float | None
    reason: str


def estimate_full(inputs: CostInputs) -> float | None:
    """The last full computation's seconds, scaled by the bytes a recompute reads and writes now against then."""
    full = inputs.last_full
    if full is None:
        return None
    now = inputs.source_bytes
    if now is None or not full.bytes:
        return full.seconds
    return full.seconds * (now + (inputs.table_bytes or 0)) / full.bytes


def fit_incremental(points: Sequence[Measured], full_rate: float | None) -> tuple[float, float] | None:
    """(fixed seconds, seconds per change byte) of the incremental refreshes ``points``; None without any."""
    usable = [(float(p.bytes), p.seconds) for p in points if p.bytes is not None]
    if not usable:
        return None
    n = len(usable)
    mean_b = sum(b for b, _ in usable) / n
    mean_t = sum(t for _, t in usable) / n
    spread = sum((b - mean_b) ** 2 for b, _ in usable)
    sizes = [b for b, _ in usable]
    if spread > 0 and max(sizes) >= SLOPE_SPAN * min(sizes):
        rate = sum((b - mean_b) * (t - mean_t) for b, t in usable) / spread
        fixed = mean_t - rate * mean_b
        if rate < 0:  # bigger changes were not slower: all fixed cost
            return mean_t, 0.0
        if fixed < 0:  # through the origin
            return 0.0, sum(b * t for b, t in usable) / sum(b * b for b, _ in usable)
        return fixed, rate
    rate = full_rate or 0.0
    return max(0.0, mean_t - rate * mean_b), rate


def estimate_incremental(inputs: CostInputs) -> float | None:
    full = inputs.last_full
    full_rate = full.seconds / full.bytes if full is not None and full.bytes else None
    fitted = fit_incremental(inputs.incrementals, full_rate)
    if fitted is None:
        if not inputs.borrowed:
            return None
        fitted = statistics.median(inputs.borrowed), full_rate or 0.0
    fixed, rate = fitted
    return fixed + rate * inputs.change_bytes


def _near(points: Sequence[Measured], change_bytes: int) -> list[Measured]:
    """The incremental refreshes whose change was within ``SLOPE_SPAN`` times ``change_bytes`` either way."""
    def near(b: int) -> bool:
        if not b or not change_bytes:
            return b == change_bytes
        return max(b, change_bytes) <= SLOPE_SPAN * min(b, change_bytes)

    return [p for p in points if p.bytes is not None and near(p.bytes)]


def _seconds(s: float) -> str:
    return f"{s:.1f} s" if s < 100 else f"{s:.0f} s"


def _size(n: int) -> str:
    value = float(n)
    for unit in ("bytes", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TB"  # pragma: no cover - the loop returns at GB


def choose(inputs: CostInputs, settings: CostSettings = CostSettings()) -> CostDecision:
    """INCREMENTAL or FULL for one refresh, with both estimates and the reason in words (see the module doc)."""
    inc, full = estimate_incremental(inputs), estimate_full(inputs)

    def decision(choice: Action, reason: str) -> CostDecision:
        return CostDecision(choice, inc, full, reason)

    total = inputs.source_bytes
    if total is None:  # without a checksum there is nothing to scale by: no switching on guesses
        unknown = next(s.name for s in inputs.sources if s.bytes is None)
        return decision(Action.INCREMENTAL, f"INCREMENTAL: the size of {unknown} is unknown (no Delta checksum)")
    if total < settings.min_source_bytes:
        return decision(Action.INCREMENTAL, f"INCREMENTAL: the sources hold {_size(total)}, under the "
                                            f"{_size(settings.min_source_bytes)} below which AUTO does not switch")
    fractions = [(f, s.name) for s in inputs.sources if s.changed and (f := s.fraction()) is not None]
    top = max(fractions, default=None)
    if top is not None and top[0] >= settings.full_fraction:
        return decision(Action.FULL, f"FULL: {top[0]:.0%} of {top[1]} changed")
    if inc is not None and full is not None:
        prior = "" if inputs.incrementals else " (other tables' incremental refreshes: none of its own yet)"
        once_at_size = len(_near(inputs.incrementals, inputs.change_bytes)) == 1 and inc <= full * settings.explore
        if full * (1 + settings.margin) < inc and once_at_size:
            return decision(Action.INCREMENTAL,
                            f"INCREMENTAL: est. {_seconds(inc)} from one incremental refresh of a change this size, "
                            f"against FULL {_seconds(full)}, within {settings.explore:g}x: refreshed incrementally "
                            "once more to measure it again")
        if full * (1 + settings.margin) < inc and (inputs.incrementals or inc > full * settings.explore):
            return decision(Action.FULL, f"FULL: est. {_seconds(full)} against INCREMENTAL {_seconds(inc)}{prior}")
        if full * (1 + settings.margin) < inc:
            return decision(Action.INCREMENTAL,
                            f"INCREMENTAL: est. {_seconds(inc)}{prior} against FULL {_seconds(full)}, within "
                            f"{settings.explore:g}x: refreshed incrementally once to measure its own")
        cold = inputs.last_full is not None and inputs.last_full.at_creation
        if cold and inputs.incrementals and full <= inc * settings.explore:
            return decision(Action.FULL, f"FULL: est. {_seconds(full)} at CREATE against INCREMENTAL "
                                         f"{_seconds(inc)}, within {settings.explore:g}x: refreshed in full once to "
                                         "measure it warm")
        return decision(Action.INCREMENTAL,
                        f"INCREMENTAL: est. {_seconds(inc)}{prior} against FULL {_seconds(full)}")
    changed = f"; {top[0]:.0%} of {top[1]} changed" if top is not None else ""
    if inc is None:
        return decision(Action.INCREMENTAL, f"INCREMENTAL: no incremental refresh measured yet{changed}")
    return decision(Action.INCREMENTAL, f"INCREMENTAL: est. {_seconds(inc)}, no full refresh measured{changed}")
