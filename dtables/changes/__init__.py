"""Change reads of Delta tables: what changed in a table between two versions (paper sections 2.1, 3.2.2-3.2.4).

Public API (the SQL ``CHANGES(...) AT(...) END(...)`` clause and ``session.changes`` are built on it)::

    interval = resolve_interval(spark, "people", at=Bound.version(1))          # (1, latest]
    read = read_changes(spark, interval, "DEFAULT")                            # or "APPEND_ONLY"
    read.df, read.shape, read.plan.to_text()
    change_stats(spark, interval)   # ChangeStats(inserts, deletes): log only, no Spark job
    redundant_delta(spark, interval), snapshot(spark, "people", 3)             # for the differentiation engine

How changes are found (the row-identity choice). Tables carry Delta row tracking: every row has a stable id
(``_metadata.row_id``) that updates, MERGE and copy-on-write rewrites preserve, and a row commit version. A change
read walks the JSON commits of the interval to find the data files it removed and added, nets them out (a file
added and removed inside the interval is never read), and scans only the net-removed files (rows as at the start:
DELETE candidates) and the net-added files (rows as at the end: INSERT candidates), directly from parquet, with
``row_id = coalesce(materialized id, baseRowId + row_index)`` computed from the log's add/remove actions. Rows are
consolidated by one full outer join on the id (MINIMIZE shape) only when the interval both removed and added
files; otherwise the scan result is the answer (ADDED_ONLY / REMOVED_ONLY), and an interval that touched no file
is NO_DATA without a Spark job.

Why not the alternatives (measured: bench/README.md, "Measurements behind design choices"):
- Delta's Change Data Feed (``table_changes``): fast, but its rows carry no row id (``_metadata.row_id`` is not
  available on it), so updates across commits cannot be paired and ROW_ID cannot be stable.
- Spark 4.2's ``SELECT * FROM t CHANGES FROM VERSION a TO VERSION b``: parses, but Delta's catalog answers
  UNSUPPORTED_FEATURE.CHANGE_DATA_CAPTURE.
- Delta time-travel scans filtered on ``_metadata.file_path``: correct ids, but Delta's file index does not prune
  on that filter (a one-file filter took as long as the full scan), so every read costs two full snapshots. It is
  kept as the fallback for tables with deletion vectors or column mapping.
- Chosen approach: a MINIMIZE read, several times faster than the naive EXCEPT ALL of two snapshots (both ways).

Cost: proportional to the rows of the files the interval touched, not to the rows that changed. With
copy-on-write a scattered 0.1% update rewrites most files, and the read then scans those files twice (still a
fraction of the naive way, which shuffles both whole snapshots); clustered changes touch few files and cost little.

Change reads of DEFAULT format go further where the interval both removed and added files: they run commit by
commit (``commits``). A commit that wrote change data (``cdc``: UPDATE, DELETE, MERGE) is read from those files
alone, deletes and update pre- and postimages with their row ids, so a copy-on-write UPDATE reads none of the files
it rewrote; appends are read from their files, deletes without change data (deletion vectors, whole partitions)
for the rows they removed. A commit none of these fits makes the read fall back to the data files, and the plan
(EXPLAIN) names it.

Deletion vectors (on by default for tables dtables creates, ``spark.dtables.deletionVectors``): a data file's rows
then depend on the version, so a direct parquet read leaves out the rows the file's vector marks at that end of the
interval, and a file whose vector grew is read for the newly marked rows only, by row index
(``deletion_vectors``, ``shapes.RowFilter``). Only a file re-added without data change whose earlier vector the
interval does not show falls back to Delta time-travel scans (correct, unpruned).
"""

from __future__ import annotations

from differentiation.vocabulary import ChangeStats, Shape
from dtables.changes.errors import (
    HistoryNotRetained,
    InvalidInterval,
    NotADeltaTable,
    TrackingDisabled,
    VersionNotFound,
)
from dtables.changes.interval import Bound, Interval, resolve_interval, resolve_location
from dtables.changes.reader import (
    ACTION,
    COMMIT_TIMESTAMP,
    COMMIT_VERSION,
    DELTA_ACTION,
    DELTA_ROW_ID,
    ISUPDATE,
    METADATA_COLUMNS,
    ROW_ID,
    ChangeRead,
    explain_changes,
    read_changes,
    redundant_delta,
    snapshot,
)
from dtables.changes.shapes import ChangePlan, FileScan, change_stats, plan_changes

# Properties dtables sets on every table it creates so that changes can be read exactly and cheaply.
TRACKED_TABLE_PROPERTIES = {
    "delta.enableChangeDataFeed": "true",
    "delta.enableRowTracking": "true",
    "delta.enableDeletionVectors": "false",
}

__all__ = [
    "ACTION",
    "COMMIT_TIMESTAMP",
    "COMMIT_VERSION",
    "DELTA_ACTION",
    "DELTA_ROW_ID",
    "ISUPDATE",
    "METADATA_COLUMNS",
    "ROW_ID",
    "TRACKED_TABLE_PROPERTIES",
    "Bound",
    "ChangePlan",
    "ChangeRead",
    "ChangeStats",
    "FileScan",
    "HistoryNotRetained",
    "Interval",
    "InvalidInterval",
    "NotADeltaTable",
    "Shape",
    "TrackingDisabled",
    "VersionNotFound",
    "change_stats",
    "explain_changes",
    "plan_changes",
    "read_changes",
    "redundant_delta",
    "resolve_interval",
    "resolve_location",
    "snapshot",
]
