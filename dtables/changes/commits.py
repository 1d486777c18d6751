"""Planning a change read commit by commit, from Delta's change data where the commits wrote it.

Delta's Change Data Feed contract: a commit with ``cdc`` actions has all its row changes in those files (``delete``,
``update_preimage``, ``update_postimage``, ``insert``); a commit without them changed exactly the rows of the data
files it added and removed. Row tracking names every row *state* by (row id, row commit version): a state is born
by the commit whose version it carries (an insert, or an update's postimage) and dies at most once (deleted, or
replaced by a later update). Over an interval ``(start, end]`` the minimum delta is then

- DELETE side: the states that die inside the interval and carry a version at most ``start`` (they were there);
- INSERT side: the states born inside the interval that do not die inside it (they are there at the end);

and a row id on both sides is an update (``reader._minimize``). Where the states come from, per commit:

- with change data (UPDATE, DELETE, MERGE with Change Data Feed on): deaths are its ``delete`` and
  ``update_preimage`` rows, births its ``update_postimage`` rows; its data files are not read. Delta writes no
  row id for the ``insert`` rows of a MERGE (their ids are ``baseRowId + row index`` of the data file that holds
  them), so a MERGE that inserted rows has its added files read for the rows they introduced (``__fresh``);
- without change data, adding files only (INSERT, append, insert-only MERGE): births are the rows of its files;
- without change data, removing files or growing their deletion vectors only (a DELETE with deletion vectors, a
  DELETE of whole partitions, TRUNCATE): deaths are the rows it removed or newly marked, read by row index;
- anything else (files removed *and* added without change data: copy-on-write without the feed, an overwrite, a
  RESTORE; change data without trusted row ids; column mapping): the read falls back to the data files of the
  whole interval (``shapes``), and the plan says which commit and why.

A state born inside the interval and copied unchanged by a later copy-on-write commit is read from the file that
first held it (files never change), so no copy is read and no file a commit with change data added is read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote

from dtables.changes.file_scans import FileScan, RowFilter
from dtables.changes.interval import Interval
from dtables.changes.log import Commit, DeltaLog, FileAction, TableMetadata

_DELTA_SPARK = re.compile(r"\bDelta-Lake/(\d+)\.")


def ids_in_change_data(commit: Commit) -> bool:
    """Whether the commit's change data rows carry row ids: Delta Spark 4 writes them (checked by the tests);
    change data of other or older writers is not trusted to, and the data files are read instead."""
    m = _DELTA_SPARK.search(commit.engine or "")
    return m is not None and int(m.group(1)) >= 4


@dataclass(frozen=True)
class GoneRows:
    """Rows that commits without change data deleted: ``scan`` reads them (a whole removed file, or just the rows
    a grown deletion vector newly marks), ``versions`` maps each file name to the commit that deleted them."""

    scan: FileScan
    versions: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class CommitReads:
    """A change read assembled per commit (module docstring): what each kind of commit contributes.

    ``change_files``: every change data file of the interval with the commit that wrote it. ``new_rows``: data
    files whose rows the scan marks fresh are births (files of appends, and of MERGEs that inserted rows).
    ``gone``: rows deleted by commits without change data, in groups of distinct files. ``notes``: one line per
    kind of commit for EXPLAIN. ``deaths_born_by_start``: every file the interval's commits removed rows from was
    added by its start version, so every state that died inside the interval was there at the start and no state
    born inside it died (``_deaths_born_by_start``)."""

    change_files: tuple[tuple[FileAction, int], ...]
    new_rows: FileScan | None
    gone: tuple[GoneRows, ...]
    notes: tuple[str, ...]
    deaths_born_by_start: bool = False

    @property
    def scans(self) -> tuple[FileScan, ...]:
        return ((self.new_rows,) if self.new_rows else ()) + tuple(g.scan for g in self.gone)


def _may_insert(commit: Commit) -> bool:
    """Whether a commit with change data may have inserted rows (whose ids its change data lacks)."""
    if commit.operation in ("UPDATE", "DELETE"):
        return False
    inserted = (commit.metrics or {}).get("numTargetRowsInserted")
    return not (commit.operation == "MERGE" and inserted is not None and str(inserted) == "0")


def _deaths_born_by_start(removed: list[FileAction], start: int) -> bool:
    """Whether every file in ``removed`` (removed, or re-added with a grown deletion vector) was added by ``start``.

    A state born inside the interval is written into a file added by the commit that wrote it (or copied into a
    younger one), so it can die only through a file added after the start; if no such file lost rows, no state born
    inside the interval died, and the read needs no row-by-row comparison of deaths with births. A file's
    ``defaultRowCommitVersion`` is the first version that added its path (row-tracking spec); unknown is not by the
    start."""
    return all(r.default_row_commit_version is not None and r.default_row_commit_version <= start
               for r in removed)


def _versions(versions: list[int]) -> str:
    return ", ".join(str(v) for v in versions[:8]) + (f" and {len(versions) - 8} more" if len(versions) > 8 else "")


def plan_commit_reads(log: DeltaLog, interval: Interval, metadata: TableMetadata, *, direct: bool
                      ) -> tuple[CommitReads | None, tuple[str, ...]]:
    """The per-commit read of ``interval``, or None and the reasons (one per commit that prevents it) why the
    data files of the interval must be read instead. Reads only the log."""
    if not direct:
        return None, ("column mapping (or a forced Delta scan): change data and data files are read through Delta",)
    if not metadata.materialized_row_id_column or not metadata.materialized_row_commit_version_column:
        return None, ("the table has no materialized row ids (row tracking is off)",)
    change_files: list[tuple[FileAction, int]] = []
    new_rows: list[FileAction] = []
    new_filters: list[RowFilter] = []
    gone: list[dict[str, tuple[FileAction, RowFilter | None, int]]] = []
    reasons: list[str] = []
    with_change_data: list[int] = []
    appends: list[int] = []
    merges: list[int] = []
    deletes: list[int] = []
    removed: list[FileAction] = []
    for version in range(interval.start_version + 1, interval.end_version + 1):
        commit = log.commit(version)
        what = f"version {version} ({commit.operation or 'unknown operation'})"
        removes = [a for a in commit.files if a.kind == "remove" and a.data_change]
        removed += removes
        adds = [a for a in commit.files if a.kind == "add" and a.data_change]
        if commit.change_files:
            if not ids_in_change_data(commit):
                reasons.append(f"{what}: its change data was written by {commit.engine or 'an unknown writer'}, "
                               f"whose rows may lack row ids")
                continue
            change_files += [(f, version) for f in commit.change_files]
            with_change_data.append(version)
            # The files it wrote, not those it re-added with a grown deletion vector (whose rows are older).
            written = [a for a in adds if a.path not in {r.path for r in removes}]
            if written and _may_insert(commit):
                merges.append(version)
                new_rows += written
                new_filters += [RowFilter(a.path, a.deletion_vector) for a in written if a.deletion_vector]
            continue
        if not removes and not adds:
            continue  # no data change (OPTIMIZE, statistics, metadata): every row keeps its state
        if commit.operation == "RESTORE":
            reasons.append(f"{what}: brings back rows without change data")
            continue
        readded = {a.path: a for a in adds}
        fresh = [a for a in adds if a.path not in {r.path for r in removes}]
        if removes and fresh:
            reasons.append(f"{what}: removed and added data files without writing change data (an overwrite, or "
                           f"DML while the Change Data Feed was off)")
            continue
        if any(a.base_row_id is None for a in [*removes, *adds]):
            reasons.append(f"{what}: wrote data files without row ids")
            continue
        if fresh:
            appends.append(version)
            new_rows += fresh
            new_filters += [RowFilter(a.path, a.deletion_vector) for a in fresh if a.deletion_vector]
            continue
        deletes.append(version)
        entries: dict[str, tuple[FileAction, RowFilter | None, int]] = {}
        for r in removes:
            after = readded.get(r.path)
            if after is not None:  # the same file with a grown vector: the rows it newly marks
                entries[r.path] = (r, RowFilter(r.path, r.deletion_vector, after.deletion_vector, selective=True),
                                   version)
            else:  # the whole file, without the rows its vector already marked
                entries[r.path] = (r, RowFilter(r.path, r.deletion_vector) if r.deletion_vector else None, version)
        group = next((g for g in gone if not g.keys() & entries.keys()), None)
        if group is None:
            gone.append(entries)
        else:
            group.update(entries)
    if reasons:
        return None, tuple(reasons)
    if any(f.base_row_id is None for f in new_rows):
        return None, ("data files of the interval without row ids",)
    notes = []
    if with_change_data:
        notes.append(f"change data of version(s) {_versions(with_change_data)}: {len(change_files)} file(s) hold "
                     f"their deletes and updates (pre- and postimages); no data file these commits wrote is read")
    if merges:
        notes.append(f"MERGE at version(s) {_versions(merges)} inserted rows, which change data lists without row "
                     f"ids: the files they added are read for the rows they introduced")
    if appends:
        notes.append(f"appends at version(s) {_versions(appends)}: the files they added are read")
    if deletes:
        notes.append(f"deletes without change data at version(s) {_versions(deletes)}: only the rows they removed "
                     f"are read (whole files, or the rows their deletion vectors newly mark)")
    born_by_start = _deaths_born_by_start(removed, interval.start_version)
    if not born_by_start and interval.end_version > interval.start_version + 1:
        notes.append("rows removed from files added inside the interval: deaths are matched with births row by row")
    return CommitReads(
        change_files=tuple(change_files),
        new_rows=FileScan(tuple(new_rows), interval.end_version, True, tuple(new_filters)) if new_rows else None,
        gone=tuple(
            GoneRows(
                FileScan(tuple(a for a, _, _ in g.values()), interval.start_version, True,
                         tuple(f for _, f, _ in g.values() if f is not None)),
                tuple(sorted((unquote(a.file_name), v) for a, _, v in g.values())),
            )
            for g in gone
        ),
        notes=tuple(notes),
        deaths_born_by_start=born_by_start,
    ), ()
