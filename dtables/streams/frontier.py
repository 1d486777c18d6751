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
from typing import TYPE_CHECKING, Any

from dtables import changes as ch
from dtables.changes.interval import open_log

if TYPE_CHECKING:
    from dtables.session import Session

MAX_RETENTION_SETTING = "dtables.stream.max_retention"
DEFAULT_MAX_RETENTION = "14 days"
# Delta's defaults when a table does not set them.
_DEFAULT_LOG_RETENTION = dt.timedelta(days=30)
_DEFAULT_FILE_RETENTION = dt.timedelta(days=7)
_INTERVAL = re.compile(r"^\s*(?:interval\s+)?(\d+(?:\.\d+)?)\s*(second|minute|hour|day|week)s?\s*$", re.IGNORECASE)


def parse_duration(text: str) -> dt.timedelta:
    """``'interval 7 days'``, ``'14 days'``, ``'36 hours'`` -> timedelta (ValueError otherwise)."""
    m = _INTERVAL.match(text)
    if m is None:
        raise ValueError(f"{text!r} is not a duration like '14 days' or 'interval 36 hours'")
    return dt.timedelta(**{m.group(2).lower() + "s": float(m.group(1))})


def max_retention(spark: Any) -> dt.timedelta:
    """The most history a source keeps for its streams (``dtables.stream.max_retention``, 14 days by default)."""
    return parse_duration(spark.conf.get(MAX_RETENTION_SETTING, DEFAULT_MAX_RETENTION))


def latest_versions(spark: Any, tables: list[str]) -> dict[str, int]:
    """The latest committed version of each base table (log listings only, no Spark job)."""
    return {t: open_log(spark, t).latest_version for t in tables}


def commit_time(spark: Any, table: str, version: int) -> dt.datetime | None:
    ms = open_log(spark, table).commit_timestamps().get(version)
    return None if ms is None else dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)


@dataclass(frozen=True)
class Retention:
    """How long a table keeps removed data files and log entries (Delta table properties)."""

    files: dt.timedelta
    log: dt.timedelta

    @property
    def history(self) -> dt.timedelta:
        return min(self.files, self.log)


def retention_of(spark: Any, table: str) -> Retention:
    log = open_log(spark, table)
    conf = log.metadata_at(log.latest_version).configuration
    files = conf.get("delta.deletedFileRetentionDuration")
    logs = conf.get("delta.logRetentionDuration")
    return Retention(parse_duration(files) if files else _DEFAULT_FILE_RETENTION,
                     parse_duration(logs) if logs else _DEFAULT_LOG_RETENTION)


def _hours(delta: dt.timedelta) -> str:
    return f"interval {max(1, math.ceil(delta.total_seconds() / 3600))} hours"


def extend_retention(spark: Any, table: str) -> None:
    """Retention extension (paper 3.3): make the source keep at least the maximum extension of history, so that a
    stream consumed within that time never goes stale. Only raises a retention, never lowers one; one metadata
    commit on the source when it changes anything."""
    want = max_retention(spark)
    current = retention_of(spark, table)
    props = {}
    if current.files < want:
        props["delta.deletedFileRetentionDuration"] = _hours(want)
    if current.log < want:
        props["delta.logRetentionDuration"] = _hours(want)
    if props:
        rendered = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
        target = f"delta.`{open_log(spark, table).location}`"
        spark.sql(f"ALTER TABLE {target} SET TBLPROPERTIES ({rendered})")


def stale_reason(spark: Any, table: str, version: int) -> str | None:
    """Why changes of ``table`` after ``version`` can no longer be read (log or data files gone), or None."""
    try:
        interval = ch.resolve_interval(spark, table, at=ch.Bound.version(version))
        plan = ch.plan_changes(spark, interval, "DEFAULT")
        from dtables.changes.shapes import check_files_retained

        if plan.shape != "NO_DATA":
            check_files_retained(spark, plan)
    except ch.HistoryNotRetained as e:
        return str(e)
    except ch.VersionNotFound as e:
        return str(e)
    return None


def stale_after(spark: Any, frontier: Mapping[str, int], consumed_at: str) -> dt.datetime | None:
    """When the oldest part of the frontier falls out of its table's retained history."""
    times = []
    for table, version in frontier.items():
        at = commit_time(spark, table, version)
        if at is None:
            at = dt.datetime.fromisoformat(consumed_at.replace("Z", "+00:00"))
        times.append(at + retention_of(spark, table).history)
    return min(times) if times else None


def stream_bound(session: Session, name: str, statement: str) -> ch.Bound:
    """``AT(STREAM => 's')``: the stream's frontier as a bound. One base table: its version; several: the time the
    frontier last advanced (paper 3.3: a frontier used as a point in time is its last-updated timestamp)."""
    from dtables.catalog import normalize
    from dtables.errors import SqlError
    from dtables.streams import store as st

    stream = st.get(session.store, normalize(name))
    if stream is None:
        raise SqlError(f"AT(STREAM => '{name}'): there is no stream {normalize(name)}", statement)
    if len(stream.frontier) == 1:
        return ch.Bound.version(next(iter(stream.frontier.values())))
    return ch.Bound.timestamp(dt.datetime.fromisoformat(stream.consumed_at.replace("Z", "+00:00")))
