"""Change tracking of a dynamic table's storage, turned on when something first reads its changes.

A table with row tracking pays at every commit: Delta assigns the new files' row ids from the table's high-water
mark, which Delta 4.4 reads from the snapshot's domain metadata, and so rebuilds the snapshot's whole state in a
Spark job ("Compute snapshot for version") at each commit (about 1 s of a one-row refresh on 2 cores; an APPEND of
one row took 1.6-1.9 s with it and 0.6 s without, bench/README.md). A dynamic table's own refreshes never read its
changes, only a downstream dynamic table or a stream does; so, as in Snowflake, where creating a downstream
dynamic table or a stream turns change tracking on, a dynamic table's storage is created without it
(``spark.dtables.dynamicTables.changeTracking = auto``, the default) and gets it (row tracking and Change Data Feed,
one commit that Delta's own ALTER TABLE makes) when a dynamic table or a stream over it is created, or before a
downstream refresh that finds it off. ``true`` keeps every dynamic table tracked from its creation, as before.
"""

from __future__ import annotations

from collections.abc import Iterable

from dtables.catalog import set_change_tracking
from dtables.catalog.warehouse import Warehouse
from dtables.changes.log import DeltaLog
from dtables.dynamic import definition as defs
from dtables.state import streams as stream_state

TRACKING_SETTING = "spark.dtables.dynamicTables.changeTracking"


def tracked_from_creation(session: Warehouse, name: str) -> bool:
    """Whether the storage of dynamic table ``name``, about to be created, gets change tracking at once: when the
    setting says so, or when a dynamic table or a stream already reads it (CREATE OR REPLACE of an upstream)."""
    if str(session.spark.conf.get(TRACKING_SETTING, "auto")).strip().lower() == "true":
        return True
    readers = [d for d in defs.load_all(session.store) if name in d.sources]
    return bool(readers) or any(name in s.frontier for s in stream_state.all_streams(session.store))


def ensure_tracked(session: Warehouse, tables: Iterable[str]) -> list[str]:
    """Turn change tracking on for each dynamic table of ``tables`` whose storage has it off; the names it did."""
    turned_on = []
    for name in tables:
        obj = session.catalog.lookup(name)
        if obj is None or obj["kind"] != "DYNAMIC_TABLE":
            continue  # a plain table's tracking is its owner's to turn on (ALTER TABLE ... SET CHANGE_TRACKING)
        log = DeltaLog(session.spark, obj["location"], name)
        if not log.exists or log.metadata_at(log.latest_version).row_tracking:
            continue
        set_change_tracking(session.spark, f"delta.`{obj['location']}`")
        turned_on.append(name)
    return turned_on


__all__ = ["TRACKING_SETTING", "ensure_tracked", "tracked_from_creation"]
