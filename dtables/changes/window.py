"""The commits at the ends of an interval that change no row, and the narrower interval with the same changes.

A compaction (``OPTIMIZE``, the daemon's or a user's), a statistics re-add or a row-id backfill rewrites files
without changing a row: every action has ``dataChange = false`` and row tracking keeps each row's id and commit
version. The change reads (``shapes.plan_changes``) compare the files at the two ends of an interval, so such a
commit at either end makes every file it compacted look deleted and every file it wrote look inserted: the whole
table read twice to find that few rows changed. Reading from after the leading ones and up to before the trailing
ones gives the same changes over the same contents. Log reads only, no Spark job.
"""

from __future__ import annotations

from dataclasses import replace

from dtables.changes.interval import Interval
from dtables.changes.log import DeltaLog


def past_unchanged(log: DeltaLog, version: int, until: int | None = None) -> int:
    """The last version from ``version`` on (up to ``until``, default the latest) reached by commits that change no
    row and no column (a property set counts as unchanged, a schema change does not): the same contents."""
    schema = log.metadata_at(version).schema_json
    while version < (log.latest_version if until is None else until):
        commit = log.commit(version + 1)
        if any(f.data_change for f in commit.files) or commit.change_files or (
                commit.metadata is not None and log.metadata_at(version + 1).schema_json != schema):
            break
        version += 1
    return version


def before_unchanged(log: DeltaLog, version: int, since: int) -> int:
    """The first version back from ``version`` (not before ``since``) after which only commits that change no row
    and no metadata follow. A commit with metadata stays in: the end is never moved before a property change such
    as change tracking turned on, from where on the table's readers read by row id."""
    while version > since:
        commit = log.commit(version)
        if any(f.data_change for f in commit.files) or commit.change_files or commit.metadata is not None:
            break
        version -= 1
    return version


def changed_window(log: DeltaLog, start: int, end: int) -> tuple[int, int]:
    """``(start, end]`` without the commits at either end that change no row: the same changes. When the commits
    after ``start`` are no longer in the log it is returned as it is (its read reports the history that is gone)."""
    if start >= end or not log.has_commit(start + 1):
        return start, end
    start = past_unchanged(log, start, end)
    return start, before_unchanged(log, end, start)


def narrowed(log: DeltaLog, interval: Interval) -> Interval:
    """``interval`` without the commits at either end that change no row (see ``changed_window``)."""
    start, end = changed_window(log, interval.start_version, interval.end_version)
    if (start, end) == (interval.start_version, interval.end_version):
        return interval
    return replace(interval, start_version=start, end_version=end)
