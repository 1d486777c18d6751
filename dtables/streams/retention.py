"""Who still needs a table's history, and the retention extension that keeps it for them (paper 3.3).

A *holder* is a live stream or dynamic table whose frontier stands at version ``v`` of a table: its next read needs
the log commits after ``v``, the metadata at ``v`` and the data files that commits after ``v`` removed. Nothing of
that is at risk until the first commit after ``v``; from then on VACUUM (removed files older than
``delta.deletedFileRetentionDuration``) and log cleanup (commits older than ``delta.logRetentionDuration``) can
take it. So a holder needs ``now - commit time of v+1`` of history (``frontier.at_risk_since``).

Retention extension. While a table has a live stream whose history is not already older than the maximum
extension (``dtables.stream.max_retention``, a Spark setting, ``spark.conf`` in ``dtables.yml``; 14 days by
default), dtables raises both retention properties of the table to that maximum, remembering the values it replaced
in ``dtables.stream.base*`` table properties; when no stream needs it any more (the last one dropped, or every
remaining one beyond the maximum), it puts the remembered values back. A property already at or above the maximum
is left alone. :func:`track_retention` runs whenever a stream is created, consumed or dropped, under a lock per
table, and commits to the table (one metadata commit) only when something changes. So a stream stays readable
for ``max(own retention, maximum)`` after the first change it has not consumed, and STALE_AFTER says exactly that.

Dynamic tables are holders too (``dynamic_tables.frontier``): frontier-aware VACUUM keeps what their next
incremental refresh reads (``dtables.streams.vacuum``), but they do not extend the table properties: they refresh
within their target lag.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlparse

from dtables.catalog import normalize
from dtables.catalog.warehouse import Warehouse
from dtables.dynamic import definition as defs
from dtables.errors import ChangeTrackingError
from dtables.state import locks
from dtables.state import streams as st
from dtables.streams.frontier import (
    DEFAULT_FILE_RETENTION,
    DEFAULT_LOG_RETENTION,
    at_risk_since,
    hours_text,
    max_retention,
    parse_duration,
    table_log,
)

LOG_RETENTION, FILE_RETENTION = "delta.logRetentionDuration", "delta.deletedFileRetentionDuration"
# Where the value an extension replaced is kept (UNSET: the table had not set the property).
BASE_PROPERTIES = {LOG_RETENTION: "dtables.stream.baseLogRetentionDuration",
                   FILE_RETENTION: "dtables.stream.baseDeletedFileRetentionDuration"}
DEFAULTS = {LOG_RETENTION: DEFAULT_LOG_RETENTION, FILE_RETENTION: DEFAULT_FILE_RETENTION}
UNSET = "unset"
_log = logging.getLogger(__name__)
STREAM, DYNAMIC_TABLE = "stream", "dynamic table"


@dataclass(frozen=True)
class Holder:
    """A stream or dynamic table that will read the history of ``table`` after ``version``."""

    kind: str  # STREAM | DYNAMIC_TABLE
    name: str
    table: str
    version: int
    at_risk_since: dt.datetime | None  # commit time of the first version after `version`; None: none yet

    def hours_needed(self, now: dt.datetime) -> float:
        """Hours of removed files to keep for this holder (0 while nothing after its frontier was committed)."""
        if self.at_risk_since is None:
            return 0.0
        return max(0.0, (now - self.at_risk_since).total_seconds() / 3600)

    def describe(self, now: dt.datetime) -> str:
        since = "no change since" if self.at_risk_since is None else \
            f"changes since {self.at_risk_since:%Y-%m-%d %H:%M:%S} UTC ({self.hours_needed(now):.1f} h ago)"
        return f"{self.kind} {self.name} at version {self.version} ({since})"


def same_place(a: str, b: str) -> bool:
    """Whether two storage locations name the same folder (``file:/x``, ``file:///x`` and ``/x`` are equal)."""
    def canonical(location: str) -> str:
        parsed = urlparse(location)
        path = parsed.path if parsed.scheme in ("", "file") else location
        return path.rstrip("/")
    return canonical(a) == canonical(b)


def holders(warehouse: Warehouse, tables: Iterable[str] | None = None, *, kinds: tuple[str, ...] = (STREAM,
            DYNAMIC_TABLE)) -> list[Holder]:
    """Every live frontier on ``tables`` (normalized names; None: all tables), streams first."""
    wanted = None if tables is None else {normalize(t) for t in tables}
    found: list[tuple[str, str, str, int]] = []
    if STREAM in kinds:
        found += [(STREAM, s.name, t, v) for s in st.all_streams(warehouse.store) for t, v in s.frontier.items()]
    if DYNAMIC_TABLE in kinds:
        found += [(DYNAMIC_TABLE, d.name, t, v) for d in defs.load_all(warehouse.store) for t, v in d.frontier.items()]
    out = []
    for kind, name, table, version in found:
        if wanted is not None and table not in wanted:
            continue
        try:
            risk = at_risk_since(table_log(warehouse, table), version)
        except ChangeTrackingError:
            continue  # the table is gone: nothing to keep for this holder
        out.append(Holder(kind, name, table, version, risk))
    return out


# -- the retention extension ----------------------------------------------------------------------------------------


def track_retention(warehouse: Warehouse, tables: Iterable[str], *, adding: bool = False) -> None:
    """Extend or restore the retention of each table to what its live streams need (see the module docstring).
    ``adding``: a stream is about to be created on them. Best effort: it never fails the statement that triggered
    it (which has committed by then)."""
    for table in sorted({normalize(t) for t in tables}):
        # serialise deciders: the last one sees every change
        with locks.streams(warehouse.store, [f"retention-{table}"]):
            try:
                _track(warehouse, table, adding)
            except ChangeTrackingError:
                continue  # the table is gone
            except Exception as e:  # noqa: BLE001 - e.g. a concurrent commit; the next stream event retries
                _log.warning("retention of %s not adjusted for its streams (retried at the next stream event): %s",
                             table, str(e).splitlines()[0] if str(e) else type(e).__name__)


def _track(warehouse: Warehouse, table: str, adding: bool) -> None:
    now = dt.datetime.now(dt.timezone.utc)
    cap = max_retention(warehouse.spark)
    needed = adding or any(h.at_risk_since is None or now - h.at_risk_since < cap
                 for h in holders(warehouse, [table], kinds=(STREAM,)))
    log = table_log(warehouse, table)
    conf = log.metadata_at(log.latest_version).configuration
    raise_: dict[str, str] = {}
    lower: list[tuple[str, str, str | None]] = []  # ("SET", key, value) | ("UNSET", key, None), in order
    forget: list[str] = []
    for key, base_key in sorted(BASE_PROPERTIES.items(), key=lambda kv: kv[0] != FILE_RETENTION):
        base_text = conf.get(base_key, conf.get(key, UNSET))
        base = DEFAULTS[key] if base_text == UNSET else parse_duration(base_text)
        if needed and cap > base:
            if conf.get(key) != hours_text(cap):
                raise_[key] = hours_text(cap)
            if base_key not in conf:
                raise_[base_key] = base_text
        elif base_key in conf:  # give back what the extension replaced
            lower.append(("UNSET", key, None) if base_text == UNSET else ("SET", key, base_text))
            forget.append(base_key)
    # Delta wants deletedFileRetention <= logRetention after every commit: raise both at once, lower the file
    # retention before the log retention.
    ops = [("SET", k, v) for k, v in sorted(raise_.items())] + lower + [("UNSET", k, None) for k in forget]
    target = f"delta.`{log.location}`"
    while ops:
        kind = ops[0][0]
        batch = []
        while ops and ops[0][0] == kind:
            batch.append(ops.pop(0))
        if kind == "SET":
            rendered = ", ".join(f"'{k}' = '{v}'" for _, k, v in batch)
            warehouse.spark.sql(f"ALTER TABLE {target} SET TBLPROPERTIES ({rendered})")
        else:
            rendered = ", ".join(f"'{k}'" for _, k, _ in batch)
            warehouse.spark.sql(f"ALTER TABLE {target} UNSET TBLPROPERTIES IF EXISTS ({rendered})")
