"""Frontiers: where a stream stands in each base table of its source, and whether that history still exists.

A frontier maps every base table of the source (the table itself, or the tables a view reads) to the Delta
version up to which changes were consumed. Versions are totally ordered per table only, so a frontier keeps one
version per table (paper 3.3) plus the wall-clock time it last advanced (``consumed_at``).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from differentiation.vocabulary import ChangeFormat, Shape
from dtables import changes as ch
from dtables.catalog import normalize
from dtables.catalog.warehouse import Warehouse
from dtables.changes.interval import open_log
from dtables.changes.log import DeltaLog
from dtables.changes.shapes import check_files_retained
from dtables.errors import UsageError

MAX_RETENTION_SETTING = "dtables.stream.max_retention"
DEFAULT_MAX_RETENTION = "14 days"
# Delta's defaults when a table does not set them.
DEFAULT_LOG_RETENTION = dt.timedelta(days=30)
DEFAULT_FILE_RETENTION = dt.timedelta(days=7)
_INTERVAL = re.compile(r"^\s*(?:interval\s+)?(\d+(?:\.\d+)?)\s*(second|minute|hour|day|week)s?\s*$", re.IGNORECASE)


def parse_duration(text: str) -> dt.timedelta:
    """``'interval 7 days'``, ``'14 days'``, ``'36 hours'`` -> timedelta (UsageError, a ValueError, otherwise)."""
    m = _INTERVAL.match(text)
    if m is None:
        raise UsageError(f"{text!r} is not a duration like '14 days' or 'interval 36 hours'")
    return dt.timedelta(**{m.group(2).lower() + "s": float(m.group(1))})


def max_retention(spark: Any) -> dt.timedelta:
    """The most history a source keeps for its streams (``dtables.stream.max_retention``, 14 days by default)."""
    return parse_duration(spark.conf.get(MAX_RETENTION_SETTING, DEFAULT_MAX_RETENTION))


def table_log(warehouse: Warehouse, table: str) -> DeltaLog:
    """The Delta log of a table, found through the catalog (no Spark query) when dtables knows the table."""
    obj = warehouse.catalog.lookup(table)
    if obj is not None and obj.get("location"):
        return DeltaLog(warehouse.spark, str(obj["location"]), normalize(table))
    return open_log(warehouse.spark, table)


def latest_versions(warehouse: Warehouse, tables: list[str]) -> dict[str, int]:
    """The latest committed version of each base table (log listings only, no Spark job)."""
    return {t: table_log(warehouse, t).latest_version for t in tables}


@dataclass(frozen=True)
class Retention:
    """How long a table keeps removed data files and log entries (Delta table properties)."""

    files: dt.timedelta
    log: dt.timedelta

    @property
    def history(self) -> dt.timedelta:
        return min(self.files, self.log)


def retention_of(log: DeltaLog) -> Retention:
    conf = log.metadata_at(log.latest_version).configuration
    files = conf.get("delta.deletedFileRetentionDuration")
    logs = conf.get("delta.logRetentionDuration")
    return Retention(parse_duration(files) if files else DEFAULT_FILE_RETENTION,
                     parse_duration(logs) if logs else DEFAULT_LOG_RETENTION)


def hours_text(delta: dt.timedelta) -> str:
    """A retention property value: whole hours, rounded up (Delta parses ``interval N hours``)."""
    return f"interval {max(1, math.ceil(delta.total_seconds() / 3600))} hours"


def at_risk_since(log: DeltaLog, version: int) -> dt.datetime | None:
    """Commit time of the first retained version of the table after ``version``, or None when there is none.

    What a frontier at ``version`` still needs (later commits, files they removed) exists from that moment on, so
    retention counts from it: a frontier with no change after it can lose nothing yet."""
    later = [ms for v, ms in log.commit_timestamps().items() if v > version]
    return dt.datetime.fromtimestamp(min(later) / 1000, dt.timezone.utc) if later else None


def stale_reason(spark: Any, table: str, version: int) -> str | None:
    """Why changes of ``table`` after ``version`` can no longer be read (log or data files gone), or None."""
    try:
        interval = ch.resolve_interval(spark, table, at=ch.Bound.version(version))
        plan = ch.plan_changes(spark, interval, ChangeFormat.DEFAULT)
        if plan.shape != Shape.NO_DATA:
            check_files_retained(spark, plan)
    except ch.HistoryNotRetained as e:
        return str(e)
    except ch.VersionNotFound as e:
        return str(e)
    return None


def stale_after(warehouse: Warehouse, frontier: Mapping[str, int]) -> dt.datetime:
    """When the stream may go stale if not consumed: for each base table, the first commit after its frontier
    version (now, when there is none yet) plus the history the table retains (both retention properties, as the
    retention extension set them); the earliest of those."""
    now = dt.datetime.now(dt.timezone.utc)
    times = []
    for table, version in frontier.items():
        log = table_log(warehouse, table)
        times.append((at_risk_since(log, version) or now) + retention_of(log).history)
    return min(times) if times else now
