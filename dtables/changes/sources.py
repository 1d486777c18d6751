"""differentiation's ``Sources`` over change reads: the relations a rendered change plan reads, as temp views.

One implementation for every caller (CHANGES on views, streams on views, dynamic-table refreshes): given the
resolved ``Interval`` of each base table, the snapshots at its two ends and its redundant delta are registered on
demand as temporary views of ``spark`` (each once per instance; registering a view of a lazy DataFrame runs no
Spark job). Refreshes pass their own cloned session, so concurrent refreshes never see each other's views.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

import differentiation as diff
from dtables.changes.interval import Interval
from dtables.changes.reader import redundant_delta, snapshot
from dtables.changes.shapes import change_stats

_view_names = itertools.count()


class IntervalSources:
    """Snapshots at each interval's start and end version, and redundant deltas between them."""

    def __init__(self, spark: Any, intervals: Mapping[str, Interval]):
        self.spark = spark
        self.intervals = intervals
        self._views: dict[tuple[str, str], str] = {}

    def _view(self, table: str, kind: str, build: Callable[[], Any]) -> str:
        key = (table, kind)
        if key not in self._views:
            name = f"__dtables_src_{next(_view_names)}"
            build().createOrReplaceTempView(name)
            self._views[key] = name
        return f"`{self._views[key]}`"

    def snapshot(self, table: str, when: str) -> str:
        i = self.intervals[table]
        version = i.start_version if when == "start" else i.end_version
        return self._view(table, when, lambda: snapshot(self.spark, i.table, version, location=i.location or None))

    def changes(self, table: str) -> str:
        return self._view(table, "changes", lambda: redundant_delta(self.spark, self.intervals[table]))


def differentiation_stats(spark: Any, interval: Interval) -> diff.ChangeStats:
    """The kinds of changes of ``interval`` (from the log, no Spark job) in the form ``differentiate`` takes."""
    kinds = change_stats(spark, interval)
    return diff.ChangeStats(inserts=kinds.inserts, deletes=kinds.deletes)
