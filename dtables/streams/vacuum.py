"""VACUUM that never removes a data file a live stream's frontier still needs (paper 3.3, retention extension).

Files removed by commits after a frontier are the "before" side of the stream's next read. Delta's VACUUM deletes
files removed longer ago than its retention, so retaining at least ``now - commit time of the oldest frontier``
keeps them, up to ``dtables.stream.max_retention``: a stream older than that is allowed to go stale.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import TYPE_CHECKING, Any

from dtables.catalog import normalize
from dtables.changes.interval import open_log
from dtables.streams import store as st
from dtables.streams.frontier import commit_time, max_retention

if TYPE_CHECKING:
    from dtables.session import Session


def retain_hours(session: Session, table: str, requested_hours: float | None = None) -> float:
    """Hours of removed files to keep: the request (Delta's default 168 when None), raised to cover the oldest
    frontier on ``table`` that is younger than the maximum extension."""
    hours = 168.0 if requested_hours is None else float(requested_hours)
    cap = max_retention(session.spark).total_seconds() / 3600
    now = dt.datetime.now(dt.timezone.utc)
    for stream in st.all_streams(session.store):
        version = stream.frontier.get(normalize(table))
        if version is None:
            continue
        at = commit_time(session.spark, normalize(table), version)
        if at is None:
            continue
        needed = math.ceil((now - at).total_seconds() / 3600) + 1
        hours = max(hours, min(needed, cap))
    return hours


def vacuum(session: Session, table: str, retain: float | None = None) -> Any:
    """``VACUUM table RETAIN n HOURS`` with ``n`` from :func:`retain_hours`; returns Delta's result."""
    session.catalog.ensure_registered([table])
    hours = retain_hours(session, table, retain)
    clone = session.spark.newSession()  # the safety-check switch below must not leak into the user's session
    if hours < 168:
        clone.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    location = open_log(session.spark, normalize(table)).location
    return clone.sql(f"VACUUM delta.`{location}` RETAIN {hours:g} HOURS")
