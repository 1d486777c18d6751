"""Target lag -> refresh period, with periods aligned across the DAG.

The rule (what ``compute_periods`` implements):

1. **Canonical periods.** Every period is ``base * 2**k`` (k >= 0) on a grid anchored at the Unix epoch; the base
   is 48 s by default (Snowflake's choice) and configurable (1 s or less in tests). Because each period divides
   every longer one, a grid point of a slow table is also a grid point of every faster table.
2. **Own period.** A table with lag ``L`` gets the largest ``base * 2**k`` with
   ``period + expected_wait + expected_duration <= L``: the worst lag is reached just before a refresh ends, one
   period after the previous data timestamp plus the time the refresh waits and runs. ``expected_duration`` is a
   high percentile of recent refresh durations (``expected_duration_s``); ``expected_wait`` is the longest chain
   of upstream expected durations (in one tick a table starts only after its upstreams finished), plus an optional
   tick latency. When even ``base`` is too long the period is ``base`` and the decision says the lag cannot be met.
3. **Alignment.** A table refreshed at data timestamp T needs every upstream at T, so an upstream refreshes at least
   as often as anything that reads it: ``effective = min(own, effective of each downstream)``. With canonical
   periods the minimum is again canonical, and every grid point of a downstream is a grid point of its upstreams,
   so a downstream and its upstreams due at T are refreshed together at T.
4. **DOWNSTREAM** has no own period: its effective period is the minimum of its downstreams' effective periods. If
   no scheduled table reads it (directly or through other DOWNSTREAM tables) it has no period and is refreshed only
   when asked to (manual refresh, or as an upstream of one).

Suspended tables can be passed as ``ignore``: they no longer pull their upstreams to a shorter period.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from scheduler.dag import DAG
from scheduler.errors import TargetLagError

DEFAULT_BASE_PERIOD_S = 48.0
MIN_TARGET_LAG_S = 1.0

_UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
_LAG_RE = re.compile(r"^\s*(\d+)\s+(second|minute|hour|day)s?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class TargetLag:
    """A parsed TARGET_LAG: ``seconds`` for a time lag, or ``None`` for DOWNSTREAM."""

    seconds: float | None

    @property
    def is_downstream(self) -> bool:
        return self.seconds is None

    def __str__(self) -> str:
        if self.seconds is None:
            return "DOWNSTREAM"
        for unit in ("day", "hour", "minute"):
            n, rest = divmod(self.seconds, _UNITS[unit])
            if rest == 0:
                return f"{int(n)} {unit}{'s' if n != 1 else ''}"
        return f"{self.seconds:g} second{'s' if self.seconds != 1 else ''}"


DOWNSTREAM = TargetLag(None)


def parse_target_lag(text: str) -> TargetLag:
    """Parse ``'<n> seconds|minutes|hours|days'`` (singular too, any case) or ``'DOWNSTREAM'``.

    >>> parse_target_lag('5 minutes').seconds
    300.0
    """
    if text.strip().upper() == "DOWNSTREAM":
        return DOWNSTREAM
    match = _LAG_RE.match(text)
    if not match:
        raise TargetLagError(
            f"invalid TARGET_LAG {text!r}: expected '<n> seconds|minutes|hours|days' (e.g. '5 minutes') "
            "or DOWNSTREAM"
        )
    seconds = float(int(match.group(1)) * _UNITS[match.group(2).lower()])
    if seconds < MIN_TARGET_LAG_S:
        raise TargetLagError(f"invalid TARGET_LAG {text!r}: the minimum target lag is 1 second")
    return TargetLag(seconds)


def expected_duration_s(durations_s: Sequence[float], percentile: float = 90.0, last_n: int = 20) -> float:
    """The ``percentile`` (nearest-rank) of the last ``last_n`` refresh durations, oldest first; 0 when none.

    A high percentile rather than the mean: one slow refresh a day should not break the lag every day.
    """
    recent = sorted(durations_s[-last_n:]) if last_n > 0 else []
    if not recent:
        return 0.0
    rank = max(1, math.ceil(percentile / 100.0 * len(recent)))
    return float(recent[rank - 1])


@dataclass(frozen=True)
class PeriodDecision:
    """Why a table refreshes as often as it does.

    ``own_period_s`` is what its own lag asks for (None for DOWNSTREAM); ``effective_period_s`` is what it gets
    after alignment (None: never scheduled on its own). ``driven_by`` names the table whose period set the
    effective one (the table itself when its own lag does). ``lag_achievable`` is False when even the base period
    plus expected wait and duration exceed the lag.
    """

    name: str
    target_lag: TargetLag
    own_period_s: float | None
    effective_period_s: float | None
    driven_by: str | None
    expected_wait_s: float
    expected_duration_s: float
    lag_achievable: bool

    def explain(self) -> str:
        """The decision in words, for ``dtables dag`` / ``status``."""
        if self.effective_period_s is None:
            return (
                f"{self.name}: TARGET_LAG = DOWNSTREAM and no scheduled dynamic table reads it: "
                "refreshed only manually or as an upstream of a manual refresh"
            )
        period = f"every {self.effective_period_s:g} s"
        if self.driven_by != self.name:
            why = f"to stay aligned with {self.driven_by}, which depends on it"
            if self.own_period_s is not None:
                why += f" (its own lag {self.target_lag} allows {self.own_period_s:g} s)"
        else:
            why = (
                f"largest canonical period with period + expected wait {self.expected_wait_s:g} s + expected "
                f"duration {self.expected_duration_s:g} s <= target lag {self.target_lag}"
            )
        text = f"{self.name}: {period}, {why}"
        if not self.lag_achievable:
            text += (
                f"; target lag {self.target_lag} cannot be met: expected wait + duration alone take "
                f"{self.expected_wait_s + self.expected_duration_s:g} s"
            )
        return text


def canonical_period_s(lag_s: float, overhead_s: float, base_period_s: float) -> tuple[float, bool]:
    """Largest ``base * 2**k`` with ``period + overhead <= lag``, and whether one exists (else ``base``)."""
    if lag_s - overhead_s < base_period_s:
        return base_period_s, False
    k = int(math.floor(math.log2((lag_s - overhead_s) / base_period_s)))
    # Guard the float log against landing one step off at exact powers of two.
    while base_period_s * 2 ** (k + 1) + overhead_s <= lag_s:
        k += 1
    while k > 0 and base_period_s * 2**k + overhead_s > lag_s:
        k -= 1
    return base_period_s * 2**k, True


def compute_periods(
    dag: DAG[str],
    target_lags: Mapping[str, TargetLag],
    expected_durations_s: Mapping[str, float] | None = None,
    *,
    base_period_s: float = DEFAULT_BASE_PERIOD_S,
    tick_latency_s: float = 0.0,
    ignore: Iterable[str] = (),
) -> dict[str, PeriodDecision]:
    """One PeriodDecision per DAG node, following the rule in the module docstring.

    ``target_lags`` must cover every node; missing ``expected_durations_s`` count as 0 (no history yet). Nodes in
    ``ignore`` (suspended) get their own decision but do not shorten their upstreams' periods.
    """
    if base_period_s <= 0:
        raise TargetLagError(f"the base period must be positive, got {base_period_s:g} s")
    missing = [n for n in dag.topological_order() if n not in target_lags]
    if missing:
        raise TargetLagError(f"no TARGET_LAG for {', '.join(missing)}")
    durations = dict(expected_durations_s or {})
    ignored = set(ignore)
    order = dag.topological_order()

    # Longest chain of upstream durations ending before each table starts (upstreams first, so one pass).
    wait: dict[str, float] = {}
    for name in order:
        wait[name] = tick_latency_s + max(
            (wait[u] - tick_latency_s + durations.get(u, 0.0) for u in dag.upstreams(name)), default=0.0
        )

    own: dict[str, tuple[float | None, bool]] = {}
    for name in order:
        lag = target_lags[name]
        if lag.seconds is None:
            own[name] = (None, True)
        else:
            own[name] = canonical_period_s(lag.seconds, wait[name] + durations.get(name, 0.0), base_period_s)

    # Downstreams first, so each table sees its readers' final effective periods.
    effective: dict[str, tuple[float | None, str | None]] = {}
    for name in reversed(order):
        best: tuple[float | None, str | None] = (own[name][0], name if own[name][0] is not None else None)
        for down in dag.downstreams(name):
            if down in ignored:
                continue
            period, driver = effective[down]
            if period is not None and (best[0] is None or period < best[0]):
                best = (period, driver)
        effective[name] = best

    return {
        name: PeriodDecision(
            name=name,
            target_lag=target_lags[name],
            own_period_s=own[name][0],
            effective_period_s=effective[name][0],
            driven_by=effective[name][1],
            expected_wait_s=wait[name],
            expected_duration_s=durations.get(name, 0.0),
            lag_achievable=own[name][1],
        )
        for name in order
    }
