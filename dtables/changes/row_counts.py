"""Rows a commit added and removed as users count them: from its operation metrics (rows a DELETE deleted, an UPDATE
updated, a MERGE inserted, updated and deleted, a write wrote), whatever the files did (a one-row UPDATE rewriting a
whole file, or marking the row in a deletion vector, is one row); a commit without them counts the rows of the files
it added and removed. Logs only, no Spark job: AUTO's cost model and the refresh's plan choices read them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dtables.changes.log import Commit, FileAction


def _records(files: list[FileAction]) -> int:
    return sum(f.num_records or 0 for f in files)


def _metric(metrics: Mapping[str, Any], key: str) -> int | None:
    value = metrics.get(key)
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def commit_rows(commit: Commit) -> tuple[int, int]:
    """(rows added, rows removed) by one commit, as its operation metrics count them where it has them."""
    adds = [f for f in commit.files if f.kind == "add" and f.data_change]
    removes = [f for f in commit.files if f.kind == "remove" and f.data_change]
    if not adds and not removes:
        return 0, 0
    m, op = commit.metrics or {}, (commit.operation or "").upper()
    if op == "DELETE" and (deleted := _metric(m, "numDeletedRows")) is not None:
        return 0, deleted
    if op == "UPDATE" and (updated := _metric(m, "numUpdatedRows")) is not None:
        return updated, updated
    if op == "MERGE" and (inserted := _metric(m, "numTargetRowsInserted")) is not None:
        updated, deleted = _metric(m, "numTargetRowsUpdated") or 0, _metric(m, "numTargetRowsDeleted") or 0
        return inserted + updated, updated + deleted
    if (written := _metric(m, "numOutputRows")) is not None:  # WRITE, STREAMING UPDATE, ... AS SELECT
        return written, _records(removes)  # an overwrite replaces the rows of the files it removed
    return _records(adds), _records(removes)
