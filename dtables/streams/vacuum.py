"""VACUUM that never removes what a live frontier still needs (paper 3.3, retention extension).

Delta's VACUUM deletes the data files that commits removed longer ago than the retention it is given. A stream or
dynamic table whose frontier stands at version ``v`` of the table reads, next time, the files that commits after
``v`` removed (the "before" side of its changes, and its snapshot at ``v``). So the retention is raised to cover
the first commit after the oldest frontier (``retention.Holder``), plus an hour of margin (a removal is stamped
when the statement ran, slightly before its commit):

- a stream counts up to ``dtables.stream.max_retention`` (14 days by default): one whose unconsumed changes are
  older than that is past its STALE_AFTER and may go stale, as Snowflake's MAX_DATA_EXTENSION_TIME_IN_DAYS allows;
- a dynamic table always counts: VACUUM must never force its next refresh from INCREMENTAL into an error.

Without a RETAIN the retention asked for is the table's own ``delta.deletedFileRetentionDuration`` (as in Delta).
Delta's own safety check (``spark.databricks.delta.retentionDurationCheck.enabled``) applies as the session set it.
What to do is a :class:`VacuumPlan` built first (no Spark job), run second.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import Any

from dtables import changes as ch
from dtables.catalog import normalize
from dtables.catalog.warehouse import Warehouse
from dtables.changes.interval import PATH_IDENTIFIER
from dtables.changes.log import DeltaLog
from dtables.errors import ChangeTrackingError, ObjectNotFound
from dtables.streams.frontier import max_retention, retention_of, table_log
from dtables.streams.retention import DYNAMIC_TABLE, STREAM, Holder, holders, same_place

MARGIN_HOURS = 1.0


@dataclass(frozen=True)
class Keep:
    """One holder's claim on the table's removed files, and whether VACUUM honours it."""

    holder: Holder
    hours: float  # hours of removed files it needs kept (0: nothing removed after its frontier yet)
    honoured: bool  # False: a stream whose changes are older than the maximum extension (allowed to go stale)

    def reason(self, now: dt.datetime) -> str:
        what = self.holder.describe(now)
        if not self.honoured:
            return f"{what}: older than dtables.stream.max_retention, not kept (the stream may go stale)"
        return f"{what}: needs {self.hours:g} h"


@dataclass(frozen=True)
class VacuumPlan:
    table: str  # as the user named it
    location: str
    requested_hours: float  # RETAIN n HOURS, or the table's deletedFileRetentionDuration
    retain_hours: float  # what VACUUM will be told
    keeps: tuple[Keep, ...]
    planned_at: dt.datetime

    @property
    def raised(self) -> bool:
        return self.retain_hours > self.requested_hours

    def reasons(self) -> list[str]:
        return [k.reason(self.planned_at) for k in self.keeps]


def _locate(warehouse: Warehouse, table: str) -> tuple[str, str | None]:
    """(location, catalog name or None for a ``delta.`path```) of a Delta table, or ObjectNotFound."""
    m = PATH_IDENTIFIER.match(table)
    if m:
        location, name = m.group("path").rstrip("/"), None
    else:
        name = normalize(table)
        obj = warehouse.catalog.lookup(name)
        if obj is not None and obj["kind"] == "VIEW":
            raise ObjectNotFound(f"cannot vacuum {name}: it is a view, not a table")
        try:
            warehouse.catalog.ensure_registered([name])
            location = str(obj["location"]) if obj is not None else ch.resolve_location(warehouse.spark, name)
        except ChangeTrackingError as e:
            raise ObjectNotFound(f"cannot vacuum {name}: there is no such table in this warehouse") from e
    if not DeltaLog(warehouse.spark, location, name or table).exists:
        raise ObjectNotFound(f"cannot vacuum {name or table}: there is no Delta table at {location}")
    return location, name


def _location_of(warehouse: Warehouse, table: str) -> str | None:
    try:
        return table_log(warehouse, table).location
    except ChangeTrackingError:
        return None


def plan_vacuum(warehouse: Warehouse, table: str, retain_hours: float | None = None) -> VacuumPlan:
    """What ``VACUUM table [RETAIN retain_hours HOURS]`` must keep, and the retention that keeps it."""
    location, _ = _locate(warehouse, table)
    requested = float(retain_hours) if retain_hours is not None else \
        retention_of(DeltaLog(warehouse.spark, location)).files.total_seconds() / 3600
    cap = max_retention(warehouse.spark).total_seconds() / 3600
    now = dt.datetime.now(dt.timezone.utc)
    places: dict[str, str | None] = {}
    keeps = []
    for holder in holders(warehouse):
        if holder.table not in places:
            places[holder.table] = _location_of(warehouse, holder.table)
        place = places[holder.table]
        if place is None or not same_place(place, location):
            continue
        hours = 0.0 if holder.at_risk_since is None else math.ceil(holder.hours_needed(now) + MARGIN_HOURS)
        honoured = holder.kind == DYNAMIC_TABLE or hours <= cap
        keeps.append(Keep(holder, hours, honoured))
    needed = [k.hours for k in keeps if k.honoured]
    retain = max([requested, *needed])
    keeps.sort(key=lambda k: (k.holder.kind != STREAM, -k.hours, k.holder.name))
    return VacuumPlan(table, location, requested, retain, tuple(keeps), now)


def run_vacuum(warehouse: Warehouse, plan: VacuumPlan, dry_run: bool = False) -> Any:
    """Delta's VACUUM with the plan's retention; returns Delta's result (with DRY RUN: the files it would delete)."""
    return warehouse.spark.sql(f"VACUUM delta.`{plan.location}` RETAIN {plan.retain_hours:g} HOURS"
                             f"{' DRY RUN' if dry_run else ''}")


def vacuum(warehouse: Warehouse, table: str, retain: float | None = None, dry_run: bool = False) -> Any:
    """``VACUUM table [RETAIN retain HOURS] [DRY RUN]``, keeping what every live frontier still needs."""
    return run_vacuum(warehouse, plan_vacuum(warehouse, table, retain), dry_run)
