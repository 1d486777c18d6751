"""Change intervals: which table, and which versions ``(start, end]`` a change read covers.

``AT(...)`` / ``BEFORE(...)`` / ``END(...)`` bounds become an :class:`Interval` of table versions. The state of the
table at ``start_version`` is the "before" side, at ``end_version`` the "after" side, and the changes are those of
commits ``start_version + 1 .. end_version``. Resolution checks everything that can be checked from the log alone,
so a bad interval fails here with a clear message and never half-way through a Spark job.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from dtables.changes.errors import (
    HistoryNotRetained,
    InvalidInterval,
    NotADeltaTable,
    TrackingDisabled,
    VersionNotFound,
)
from dtables.changes.log import DeltaLog

PATH_IDENTIFIER = re.compile(r"^\s*delta\s*\.\s*`(?P<path>[^`]+)`\s*$", re.IGNORECASE)

ENABLE_TRACKING_FIX = (
    "ALTER TABLE {table} SET TBLPROPERTIES ('delta.enableRowTracking' = 'true', "
    "'delta.enableChangeDataFeed' = 'true') (dtables: ALTER TABLE {table} SET CHANGE_TRACKING = TRUE)"
)


@dataclass(frozen=True)
class Bound:
    """One end of a change interval, as written in ``AT(...)``, ``BEFORE(...)`` or ``END(...)``.

    ``Bound.version(n)``: table version ``n``. ``Bound.timestamp(ts)``: the latest version committed at or before
    ``ts`` (naive datetimes are UTC). ``Bound.offset(-seconds)``: a timestamp relative to now. A ``STREAM`` bound is
    resolved by the session to ``Bound.version(frontier)`` before it gets here.
    """

    kind: Literal["version", "timestamp", "offset"]
    value: int | float | dt.datetime

    @staticmethod
    def version(n: int) -> Bound:
        return Bound("version", int(n))

    @staticmethod
    def timestamp(ts: dt.datetime | str) -> Bound:
        if isinstance(ts, str):
            ts = dt.datetime.fromisoformat(ts)
        return Bound("timestamp", ts)

    @staticmethod
    def offset(seconds: float) -> Bound:
        return Bound("offset", float(seconds))

    def as_timestamp_ms(self, now: dt.datetime | None = None) -> int:
        """Epoch milliseconds of a timestamp or offset bound."""
        if self.kind == "offset":
            base = now or dt.datetime.now(dt.timezone.utc)
            return int((base.timestamp() + float(self.value)) * 1000)  # type: ignore[arg-type]
        ts = self.value
        assert isinstance(ts, dt.datetime)
        if ts.tzinfo is None:
            ts = ts.replace(tzinfo=dt.timezone.utc)
        return int(ts.timestamp() * 1000)

    def __str__(self) -> str:
        if self.kind == "version":
            return f"VERSION => {self.value}"
        if self.kind == "offset":
            return f"OFFSET => {self.value:g}"
        return f"TIMESTAMP => '{self.value}'"


@dataclass(frozen=True)
class Interval:
    """Changes of ``table`` made by commits ``start_version + 1 .. end_version`` (empty when they are equal).

    ``location`` is the table's storage location as resolved when the interval was built; it is carried so that
    reading the interval does not resolve the name again, and is not part of the interval's identity.
    """

    table: str
    start_version: int
    end_version: int
    location: str = field(default="", compare=False)

    @property
    def is_empty(self) -> bool:
        return self.start_version == self.end_version

    def __str__(self) -> str:
        return f"{self.table} ({self.start_version}, {self.end_version}]"


def resolve_location(spark: Any, table: str) -> str:
    """Storage location of a Delta table given as a catalog name or as ``delta.`path```.

    A catalog name costs one ``DESCRIBE DETAIL`` (metadata only); a path identifier costs nothing.
    """
    m = PATH_IDENTIFIER.match(table)
    if m:
        return m.group("path").rstrip("/")
    try:
        detail = spark.sql(f"DESCRIBE DETAIL {table}").select("format", "location").first()
    except Exception as e:  # the analyzer error is long and Java-flavoured; keep its first line only
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise NotADeltaTable(f"cannot read changes of {table}: {first_line}") from e
    if detail is None or (detail["format"] or "").lower() != "delta":
        raise NotADeltaTable(
            f"cannot read changes of {table}: it is not a Delta table (format {detail and detail['format']}); "
            f"changes are only tracked on Delta tables"
        )
    return str(detail["location"]).rstrip("/")


def open_log(spark: Any, interval_or_table: Interval | str) -> DeltaLog:
    """The DeltaLog of an interval's table (reusing its resolved location) or of a table name."""
    if isinstance(interval_or_table, Interval):
        location = interval_or_table.location or resolve_location(spark, interval_or_table.table)
        return DeltaLog(spark, location, interval_or_table.table)
    return DeltaLog(spark, resolve_location(spark, interval_or_table), interval_or_table)


def resolve_interval(
    spark: Any,
    table: str,
    *,
    at: Bound | None = None,
    before: Bound | None = None,
    end: Bound | None = None,
    now: dt.datetime | None = None,
) -> Interval:
    """Turn ``AT``/``BEFORE`` and optional ``END`` bounds into an :class:`Interval` of versions, checked.

    ``at=Bound.version(n)``: start from the state at version ``n`` (changes of commits after ``n``).
    ``before=Bound.version(n)``: start from the state just before ``n`` (so commit ``n`` is included).
    Timestamp/offset bounds pick the latest version committed at (``at``, ``end``) or strictly before
    (``before``) that time. ``end`` defaults to the latest version and is inclusive.

    Raises (all ``ChangeTrackingError``): InvalidInterval (no start bound, both bounds, start after end, time before
    the table existed), VersionNotFound, HistoryNotRetained (commits of the interval cleaned from the log),
    TrackingDisabled (row tracking off at the start or switched off inside the interval).
    """
    if (at is None) == (before is None):
        raise InvalidInterval(
            f"changes of {table}: give exactly one of AT(...) or BEFORE(...) to say where the interval starts"
        )
    log = open_log(spark, table)
    if not log.exists:
        raise NotADeltaTable(f"cannot read changes of {table}: no Delta log at {log.location}")
    latest = log.latest_version
    timestamps: dict[int, int] | None = None

    def version_of(bound: Bound, clause: str, strictly_before: bool) -> int:
        nonlocal timestamps
        if bound.kind == "version":
            v = int(bound.value)  # type: ignore[arg-type]
            if v < 0 or v > latest:
                raise VersionNotFound(
                    f"changes of {table}: {clause}({bound}) names version {v}, but the table has versions "
                    f"0 to {latest}; use a version in that range"
                )
            return v - 1 if strictly_before else v
        if timestamps is None:
            timestamps = log.commit_timestamps()
        target = bound.as_timestamp_ms(now)
        eligible = [v for v, ts in timestamps.items() if (ts < target if strictly_before else ts <= target)]
        if not eligible:
            earliest = min(timestamps) if timestamps else latest
            first_ts = _iso(timestamps[earliest]) if timestamps else "unknown"
            retained = earliest > 0
            cls = HistoryNotRetained if retained else InvalidInterval
            reason = (
                f"the earliest retained version is {earliest}, committed at {first_ts}"
                if retained
                else f"the table was created at {first_ts} (version 0)"
            )
            raise cls(
                f"changes of {table}: {clause}({bound}) is before any version of the table that can be read: "
                f"{reason}; use a later time"
            )
        v = max(eligible)
        return v

    start = version_of(at, "AT", False) if at is not None else version_of(before, "BEFORE", True)  # type: ignore[arg-type]
    end_version = latest if end is None else version_of(end, "END", False)
    if start < 0:
        raise InvalidInterval(
            f"changes of {table}: BEFORE({before}) starts before version 0, the table's creation; "
            f"use AT(VERSION => 0) to read the changes since creation"
        )
    if start > end_version:
        raise InvalidInterval(
            f"changes of {table}: the interval starts at version {start} but ends at version {end_version}; "
            f"the start must not be after the end"
        )
    interval = Interval(table, start, end_version, log.location)
    check_interval(log, interval)
    return interval


def check_interval(log: DeltaLog, interval: Interval) -> None:
    """Raise unless the log still holds every commit of the interval and row tracking covers all of it."""
    table = interval.table
    missing = [v for v in range(interval.start_version + 1, interval.end_version + 1) if not log.has_commit(v)]
    if missing:
        raise HistoryNotRetained(
            f"changes of {table} from version {interval.start_version} to {interval.end_version} are no longer "
            f"retained: the log lost commit(s) {missing[0]}..{missing[-1]} (earliest retained commit: "
            f"{log.earliest_commit_version}). Read from version {log.earliest_commit_version} or later; a stream "
            f"this old is stale and must be recreated"
        )
    meta = log.metadata_at(interval.start_version)
    if not meta.row_tracking:
        raise TrackingDisabled(
            f"change tracking was off on {table} at version {interval.start_version}, the start of the interval "
            f"(row tracking: {'on' if meta.row_tracking else 'off'}, change data feed: "
            f"{'on' if meta.change_data_feed else 'off'}); changes can only be read from a version at which it "
            f"was on. Turn it on with {ENABLE_TRACKING_FIX.format(table=table)} and read from a later version"
        )
    for v in range(interval.start_version + 1, interval.end_version + 1):
        commit = log.commit(v)
        if commit.metadata is not None or commit.protocol is not None:
            if not log.metadata_at(v).row_tracking:
                raise TrackingDisabled(
                    f"change tracking was turned off on {table} at version {v}, inside the interval "
                    f"({interval.start_version}, {interval.end_version}]; read an interval that ends before "
                    f"version {v}, or turn it on again with {ENABLE_TRACKING_FIX.format(table=table)} and read "
                    f"from then on"
                )


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
