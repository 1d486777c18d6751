"""Planning a change read from the log alone: which data files to scan, and the plan shape (paper, 4.2).

A commit replaces whole data files: an INSERT adds files, a copy-on-write UPDATE/DELETE/MERGE removes the files it
touched and adds rewritten ones. Over an interval ``(start, end]`` only the *net* file changes matter:

- files present at ``start`` and gone at ``end`` hold the rows that may have been deleted or updated (the
  "removed" side, read as the table was at ``start``);
- files present at ``end`` and absent at ``start`` hold the rows that may have been inserted or updated (the
  "added" side, read at ``end``);
- files added and removed inside the interval are never read: every row they held was either inserted and
  deleted inside the interval (no net change) or copied on into a later file that is read.

The plan shape then follows from the sides: NO_DATA (neither, no Spark job at all), ADDED_ONLY (only added files:
every row is an INSERT, no consolidation), REMOVED_ONLY (only removed files: every row a DELETE), MINIMIZE (both:
rows are consolidated by row id, see ``reader``). APPEND_ONLY reads the files first added inside the interval and
keeps the rows they introduced, so its shape is ADDED_ONLY or NO_DATA.

A plan is a frozen record built before anything runs (``plan_changes``) and executed by ``reader``; tests and
EXPLAIN inspect it without Spark.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from differentiation.vocabulary import ChangeFormat, ChangeStats, Shape
from dtables.changes.deletion_vectors import DeletionVectorDescriptor
from dtables.changes.errors import HistoryNotRetained, InvalidInterval
from dtables.changes.file_scans import FileScan, RowFilter
from dtables.changes.interval import Interval, open_log
from dtables.changes.commits import CommitReads, plan_commit_reads
from dtables.changes.log import DeltaLog, FileAction, TableMetadata
from dtables.changes.storage import Storage, join



@dataclass(frozen=True)
class ChangePlan:
    """Everything a change read will do, decided before any Spark job runs."""

    interval: Interval
    information: ChangeFormat
    shape: Shape
    metadata: TableMetadata = field(compare=False)
    removed: FileScan | None = None  # read at the interval start: DELETE candidates
    added: FileScan | None = None  # read at the interval end: INSERT candidates
    inserted: tuple[FileScan, ...] = ()  # APPEND_ONLY: files first added inside the interval
    removed_at: tuple[tuple[str, int], ...] = ()  # file name -> first commit of the interval that removed it
    # (for a change data file: the commit that wrote it)
    commit_timestamps_ms: tuple[tuple[int, int], ...] = ()  # version -> commit timestamp (epoch ms)
    # How the interval is read commit by commit, from change data where its commits wrote it (``commits``), when
    # that is possible for a MINIMIZE interval; else None and ``fallback`` says which commits prevent it and why.
    commit_reads: CommitReads | None = None
    fallback: tuple[str, ...] = ()

    @property
    def stats(self) -> ChangeStats:
        return ChangeStats(
            inserts=self.added is not None or bool(self.inserted),
            deletes=self.removed is not None,
            added_files=len(self.added.files) if self.added else sum(len(s.files) for s in self.inserted),
            removed_files=len(self.removed.files) if self.removed else 0,
        )

    def to_text(self) -> str:
        """Deterministic, human-readable form used by EXPLAIN and error messages."""

        def side(name: str, scan: FileScan | None) -> str:
            if scan is None:
                return f"  {name}: none"
            how = "parquet files directly" if scan.direct else f"Delta scan at version {scan.version}"
            rows = scan.estimated_rows
            text = f"  {name}: {len(scan.files)} file(s), {'?' if rows is None else rows} row(s), via {how}"
            selective = sum(r.selective for r in scan.row_filters)
            minus = sum(not r.selective for r in scan.row_filters)
            if selective:
                text += f"; {selective} of them only for the rows their deletion vectors newly mark"
            if minus:
                text += f"; {minus} without the rows their deletion vectors mark"
            return text

        lines = [
            f"CHANGES(INFORMATION => {self.information}) of {self.interval}",
            f"  shape: {self.shape}",
        ]
        if self.information == ChangeFormat.APPEND_ONLY:
            for scan in self.inserted:
                lines.append(side("inserted", scan))
        else:
            lines += [side("removed (at start)", self.removed), side("added (at end)", self.added)]
            if self.commit_reads is not None:
                lines.append("  read commit by commit instead of the two sides above:")
                lines += [f"    {note}" for note in self.commit_reads.notes]
                if self.commit_reads.new_rows is not None:
                    lines.append("  " + side("new rows", self.commit_reads.new_rows))
                for gone in self.commit_reads.gone:
                    lines.append("  " + side("deleted rows", gone.scan))
            elif self.fallback:
                lines.append("  change data not used, the data files of both sides are read:")
                lines += [f"    {reason}" for reason in self.fallback]
        return "\n".join(lines)


@dataclass
class _FileHistory:
    """What the interval did to one data file path (mutable only while the log is being walked)."""

    first: FileAction
    first_version: int
    last: FileAction
    removed_at: int | None = None
    has_deletion_vector: bool = False
    actions: int = 0


def _walk(log: DeltaLog, interval: Interval) -> dict[str, _FileHistory]:
    history: dict[str, _FileHistory] = {}
    for version in range(interval.start_version + 1, interval.end_version + 1):
        commit = log.commit(version)
        # Removes before adds: a deletion-vector update removes and re-adds the same path in one commit, and the
        # file must count as present at the start.
        ordered = [a for a in commit.files if a.kind == "remove"] + [a for a in commit.files if a.kind == "add"]
        for action in ordered:
            h = history.get(action.path)
            if h is None:
                h = history[action.path] = _FileHistory(first=action, first_version=version, last=action)
            h.last = action
            h.actions += 1
            h.has_deletion_vector |= action.has_deletion_vector
            if action.kind == "remove" and h.removed_at is None:
                h.removed_at = version
    return history


def _vector_changes(start: DeletionVectorDescriptor | None, end: DeletionVectorDescriptor | None
                    ) -> tuple[bool, bool]:
    """For a file present at both ends of the interval: whether its end vector may mark rows its start vector did
    not (rows deleted in place), and whether its start vector may mark rows its end vector does not (rows brought
    back, by a RESTORE). Vectors only grow under DELETE / UPDATE / MERGE, so a grown cardinality means new
    deletions only; the sets themselves are decoded when the rows are read."""
    if start == end:
        return False, False
    if start is None or end is None:
        return end is not None, start is not None
    return end.cardinality >= start.cardinality, end.cardinality <= start.cardinality


def _present_at_start(spark: Any, log: DeltaLog, interval: Interval, uncertain: list[str]) -> set[str]:
    """Which of ``uncertain`` paths (first seen as a non-data-change add, e.g. OPTIMIZE output or a statistics
    re-add) were in the table at the start. Rare, so a listing of the start snapshot's files is acceptable."""
    if not uncertain:
        return set()
    files = (
        spark.read.format("delta").option("versionAsOf", interval.start_version).load(log.location).inputFiles()
    )
    names = {unquote(f.rsplit("/", 1)[-1]) for f in files}
    return {p for p in uncertain if unquote(p.rsplit("/", 1)[-1]) in names}


def plan_changes(
    spark: Any, interval: Interval, information: str = ChangeFormat.DEFAULT, *, force_delta_scan: bool = False
) -> ChangePlan:
    """Decide how to read the changes of ``interval``: the files of each side, how to scan them, the shape.

    Reads only the Delta log (plus, rarely, the file list of the start snapshot, see ``_present_at_start``).
    ``force_delta_scan`` plans Delta time-travel scans even where direct parquet reads would do (for checks).
    """
    if information.upper() not in tuple(ChangeFormat):
        raise InvalidInterval(
            f"changes of {interval.table}: INFORMATION => {information.upper()} is not a change format; "
            f"use DEFAULT or APPEND_ONLY"
        )
    information = ChangeFormat(information.upper())
    log = open_log(spark, interval)
    end_meta = log.metadata_at(interval.end_version)
    timestamps = log.commit_timestamps()
    commit_ts = tuple(
        (v, timestamps[v]) for v in range(interval.start_version + 1, interval.end_version + 1) if v in timestamps
    )
    base = dict(interval=interval, information=information, metadata=end_meta, commit_timestamps_ms=commit_ts)
    if interval.is_empty:
        return ChangePlan(shape=Shape.NO_DATA, **base)  # type: ignore[arg-type]
    history = _walk(log, interval)
    # Parquet content equals the table rows only without column mapping; deletion vectors are handled per side.
    direct_ok = end_meta.column_mapping == "none" and not force_delta_scan

    if information == ChangeFormat.APPEND_ONLY:
        by_version: dict[tuple[int, bool], list[FileAction]] = {}
        for h in history.values():
            if h.first.kind == "add" and h.first.data_change:
                direct = direct_ok and not h.first.has_deletion_vector and h.first.base_row_id is not None
                by_version.setdefault((h.first_version, direct), []).append(h.first)
        # Direct scans do not depend on the version: merge them into one scan.
        direct_files = tuple(f for (v, d), fs in sorted(by_version.items()) if d for f in fs)
        scans = [FileScan(direct_files, interval.end_version, True)] if direct_files else []
        scans += [FileScan(tuple(fs), v, False) for (v, d), fs in sorted(by_version.items()) if not d]
        return ChangePlan(
            shape=Shape.ADDED_ONLY if scans else Shape.NO_DATA, inserted=tuple(scans), **base  # type: ignore[arg-type]
        )

    uncertain = [p for p, h in history.items() if h.first.kind == "add" and not h.first.data_change]
    maybe_present = _present_at_start(spark, log, interval, uncertain)
    removed: list[FileAction] = []
    added: list[FileAction] = []
    removed_filters: list[RowFilter] = []
    added_filters: list[RowFilter] = []
    removed_at: list[tuple[str, int]] = []
    ends = {p: (h.first.kind == "remove" or p in maybe_present, h.last.kind == "add") for p, h in history.items()}
    # Deletion vectors are applied by row index in direct scans when every file read has row ids and the vector
    # each had at the start is known (a file first seen re-added without data change may have had another one).
    by_row_index = direct_ok and not any(p in maybe_present and h.has_deletion_vector for p, h in history.items()) \
        and all((not s or h.first.base_row_id is not None) and (not e or h.last.base_row_id is not None)
                for (s, e), h in zip(ends.values(), history.values()))
    deletion_vectors = False
    for path, h in history.items():
        at_start, at_end = ends[path]
        start_dv = h.first.deletion_vector if h.first.kind == "remove" else None
        end_dv = h.last.deletion_vector if at_end else None
        if at_start and at_end and not h.has_deletion_vector:
            continue  # same immutable file at both ends: same rows, nothing changed
        if at_start and at_end and by_row_index:
            # The same file at both ends: only the rows its deletion vector changed are changes.
            newly, revived = _vector_changes(start_dv, end_dv)
            if newly:
                removed.append(h.first)
                removed_filters.append(RowFilter(h.first.path, start_dv, end_dv, selective=True))
                removed_at.append((unquote(h.first.file_name), h.removed_at or interval.end_version))
            if revived:
                added.append(h.last)
                added_filters.append(RowFilter(h.last.path, end_dv, start_dv, selective=True))
            continue
        deletion_vectors |= h.has_deletion_vector
        if at_start:
            removed.append(h.first)
            if by_row_index and start_dv is not None:
                removed_filters.append(RowFilter(h.first.path, start_dv))
            removed_at.append((unquote(h.first.file_name), h.removed_at or interval.end_version))
        if at_end:
            added.append(h.last)
            if by_row_index and end_dv is not None:
                added_filters.append(RowFilter(h.last.path, end_dv))
    vectors_ok = by_row_index or not deletion_vectors
    direct_removed = direct_ok and vectors_ok and all(f.base_row_id is not None for f in removed)
    direct_added = direct_ok and vectors_ok and all(f.base_row_id is not None for f in added)
    commit_reads: CommitReads | None = None
    fallback: tuple[str, ...] = ()
    if removed and added:
        commit_reads, fallback = plan_commit_reads(log, interval, end_meta, direct=direct_ok)
        if commit_reads is not None:
            # A change data row was deleted (or replaced) by the commit that wrote its file.
            removed_at += [(unquote(f.file_name), v) for f, v in commit_reads.change_files]
    removed_scan = FileScan(tuple(removed), interval.start_version, direct_removed, tuple(removed_filters)) \
        if removed else None
    added_scan = FileScan(tuple(added), interval.end_version, direct_added, tuple(added_filters)) if added else None
    shape = (
        Shape.MINIMIZE
        if removed and added
        else Shape.ADDED_ONLY
        if added
        else Shape.REMOVED_ONLY
        if removed
        else Shape.NO_DATA
    )
    return ChangePlan(
        shape=shape,
        removed=removed_scan,
        added=added_scan,
        removed_at=tuple(sorted(removed_at)),
        commit_reads=commit_reads,
        fallback=fallback,
        **base,  # type: ignore[arg-type]
    )


def check_files_retained(spark: Any, plan: ChangePlan, *, commit_reads: bool = False) -> None:
    """Raise HistoryNotRetained when a data file the plan reads was deleted (VACUUM) since it was removed;
    ``commit_reads``: the read runs commit by commit (``plan.commit_reads``), not from the two sides."""
    storage = Storage(spark, plan.interval.location)
    reads = plan.commit_reads if commit_reads else None
    scans = [s for s in ((*reads.scans,) if reads else (plan.removed, plan.added, *plan.inserted)) if s is not None]
    vectors = [d for scan in scans for r in scan.row_filters for d in (r.minus, r.only) if d is not None]
    for d in vectors:  # a vector file VACUUM removed: the rows it marks can no longer be told apart
        location = d.location(plan.interval.location)
        if location is not None and not storage.exists(location):
            raise HistoryNotRetained(
                f"changes of {plan.interval}: deletion vector file {location} is gone (VACUUM removed it after its "
                f"retention period); changes that old can no longer be read. Read a later interval, a stream this "
                f"old is stale and must be recreated; keep files longer with delta.deletedFileRetentionDuration"
            )
    for f in [f for scan in scans for f in scan.files] + [f for f, _ in (reads.change_files if reads else ())]:
        if not storage.exists(join(plan.interval.location, unquote(f.path))):
            raise HistoryNotRetained(
                f"changes of {plan.interval}: data file {f.path} that held the table's rows is gone "
                f"(VACUUM removed it after its retention period); changes that old can no longer be read. "
                f"Read a later interval, a stream this old is stale and must be recreated; keep files longer "
                f"with delta.deletedFileRetentionDuration"
            )


def change_stats(spark: Any, interval: Interval) -> ChangeStats:
    """Whether the interval inserted and/or deleted rows (at file granularity), from the Delta log only."""
    return plan_changes(spark, interval, ChangeFormat.DEFAULT).stats
