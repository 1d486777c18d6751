"""differentiation's ``Sources`` over change reads: the relations a rendered change plan reads, as temp views.

One implementation for every caller (CHANGES on views, streams on views, dynamic-table refreshes): given the
resolved ``Interval`` of each base table, the snapshots at its two ends and its redundant delta are registered on
demand as temporary views of ``spark`` (each once per instance; registering a view of a lazy DataFrame runs no
Spark job). Refreshes pass their own cloned session, so concurrent refreshes never see each other's views.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Callable, Mapping
from typing import Any

from sqlglot import exp

import differentiation as diff
from differentiation.sql import col
from differentiation.vocabulary import ACTION, DELETE, INSERT
from dtables.catalog import quote_column
from dtables.changes.interval import Interval, open_log
from dtables.changes.keys import (
    DEFAULT_MIN_BYTES,
    KEY_PRUNING,
    MAX_FRACTION,
    MAX_KEPT_FRACTION,
    MIN_BYTES,
    file_filter,
    probe_keys,
    settled_keys,
    stats_filter,
)
from dtables.changes.log import DeltaLog, FileAction
from dtables.changes.moved import known_moved_columns
from dtables.changes.reader import (
    compared_columns, direct_snapshots, held_rows, redundant_delta, snapshot, snapshot_ends,
)
from dtables.changes.row_counts import commit_rows
from dtables.changes.scan import appended_columns, table_schema
from dtables.changes.shared_reads import driver_rows_max, held_once, plan_once
from dtables.changes.shapes import change_stats
from dtables.sql.dialect import to_spark

_view_names = itertools.count()

# Changes of at most this many rows (added plus removed, over every interval, by the commits' metrics) broadcast the
# key sets that restrict snapshots; 0 never does. Bigger changes leave the join to Spark: a key set of millions of
# values is better shuffled than copied to every task.
BROADCAST_KEYS_MAX_ROWS = "spark.dtables.refresh.broadcastKeysMaxRows"
DEFAULT_BROADCAST_KEYS_MAX_ROWS = 1_000_000
# With such small changes, true reads a table a change plan reads restricted at both ends of the interval once for
# both (differentiation/ends.py). Off by default: on TPC-H SF 1 RF2 it saved no time in sum (bench/README.md), the
# shared read's shuffle costing about what the second scan did.
SHARE_ENDS = "spark.dtables.refresh.shareEnds"
HOLD_RESTRICTED = "spark.dtables.refresh.holdRestrictedReads"
_INTEGRAL = frozenset({"tinyint", "smallint", "int", "bigint"})
# With such small changes, false reads a table the plan reads restricted under several aliases (TPC-H Q21's three
# lineitems) once per alias, as before differentiation/shared_reads.py (to compare).
SHARE_ALIASES = "spark.dtables.refresh.shareAliases"
# With such small changes a join term's table smaller than this (its files at the version read) is read whole, not
# restricted to the change's keys first (differentiation.prune.restrict_terms): Spark broadcasts a table that small
# as it is (under its 10 MB autoBroadcastJoinThreshold), and the restriction cost a Spark job of its own (the
# change's distinct keys shuffled, then broadcast). 8 MB measured better than 1 MB on TPC-H SF 1 RF1, where it also
# reads `part` (6 MB) whole: Q14 2.1 s against 2.35 s.
RESTRICT_MIN_BYTES = "spark.dtables.refresh.restrictTermsMinBytes"
DEFAULT_RESTRICT_MIN_BYTES = 8 << 20
# Keys a change settles (`KeyFilter.from_change`) are read from the change only in snapshots at least this large:
# the settled keys are found again in small jobs of their own, which cost more than a scan of TPC-H SF 1's orders
# (54 MB: Q03, Q12 0.2-0.3 s slower) and less than one of its lineitem (195 MB: Q21 4.4 -> 2.7 s).
SETTLED_MIN_BYTES = "spark.dtables.refresh.settledKeysMinBytes"
DEFAULT_SETTLED_MIN_BYTES = 100 * 1024 * 1024


class IntervalSources:
    """Snapshots at each interval's start and end version, and redundant deltas between them."""

    def __init__(self, spark: Any, intervals: Mapping[str, Interval], settings: Any = None,
                 identities: Mapping[str, str] | None = None,
                 readers: Callable[[str], frozenset[str] | None] | None = None):
        self.spark = spark
        # per table, the columns every reader of it known to the caller may read (None: any), so that reads they
        # share (``redundant_delta``'s ``kept``) materialize no other column
        self.readers = readers
        self.intervals = intervals
        self.identities = identities or {}  # per table, its incarnation (``moved.moved_columns``), where known
        self.settings = settings or spark  # where dtables' settings are read (a refresh's clone has its own)
        self._views: dict[tuple[str, object], str] = {}
        self._frames: dict[tuple[str, object], Any] = {}  # the DataFrame behind each view
        self._logs: dict[str, DeltaLog] = {}
        self._read: dict[str, frozenset[str]] = {}  # per table, the columns the plan reads (its change reads compare)
        self._appended_files: dict[str, tuple[FileAction, ...] | None] = {}  # per table: `_appended`
        self._sizes: dict[tuple[str, str], int | None] = {}  # per table and end: `_bytes`
        self.pruning: list[dict[str, Any]] = []  # snapshot reads narrowed by keys (files: 0 of 0 = Delta's scan)

    def _view(self, table: str, kind: object, build: Callable[[], Any]) -> str:
        key = (table, kind)
        if key not in self._views:
            name = f"__dtables_src_{next(_view_names)}"
            built = build()
            built.createOrReplaceTempView(name)
            self._views[key] = name
            self._frames[key] = built
        return quote_column(self._views[key])

    def snapshot(self, table: str, when: str, keys: tuple[diff.KeyFilter, ...] = ()) -> str:
        i = self.intervals[table]
        version = i.start_version if when == "start" else i.end_version
        settling = next((k for k in keys if k.from_change is not None), None)
        if settling is not None:
            return self._view(table, (when, keys), lambda: self._settled_snapshot(table, when, keys, settling))
        if keys:  # its files depend on the keys (and are counted into self.pruning as they are chosen)
            keep = self._counted(table, when, keys, file_filter(keys, self._types(table)))
            return self._view(table, (when, keys), lambda: snapshot(self.spark, i.table, version,
                                                                    location=i.location or None, keep=keep))
        return self._view(table, when, lambda: self._shared(table, ("snapshot", version), lambda: snapshot(
            self.spark, i.table, version, location=i.location or None)))

    def _settled_snapshot(self, table: str, when: str, keys: tuple[diff.KeyFilter, ...],
                          settling: diff.KeyFilter) -> Any:
        """The snapshot restricted to ``keys`` where ``settling`` names keys whose rows at ``when`` are all in the
        table's own change (``KeyFilter.settled_by``; TPC-H RF2: the lines of the deleted orders at I0 are the
        lines RF2 deleted): the rows of the other keys from the files their own keys leave, less any row of a
        settled key, and the settled keys' rows from the change, the rows of the action that made them at this
        end less those of the other where the interval had both (a row inserted and deleted inside it). Other
        filters read their settled keys from the snapshot (one change part per read)."""
        assert settling.from_change is not None
        i = self.intervals[table]
        own = dataclasses.replace(settling, from_change=None, settled_by=())
        filters = tuple(own if k is settling else k.whole() for k in keys)
        keep = self._counted(table, when, keys, file_filter(filters, self._types(table)))
        part = self._view(table, ("settled", when, keys), lambda: snapshot(
            self.spark, i.table, i.start_version if when == "start" else i.end_version, location=i.location or None,
            keep=keep))
        changes = self.changes(table)
        names = set(self.spark.table(changes).columns)
        columns = [c for c in self.spark.table(part).columns if c in names]
        found = exp.select("k").from_(settled_keys(settling.settled_by, when, self.changes).subquery("f0")).where(
            exp.Not(this=exp.Is(this=col("k"), expression=exp.Null())))
        column = col(settling.column)

        def rows(action: str) -> exp.Select:
            return (exp.select(*(col(c) for c in columns))
                    .from_(exp.maybe_parse(changes, into=exp.Table, dialect="spark"))
                    .where(exp.and_(exp.EQ(this=col(ACTION), expression=exp.Literal.string(action)),
                                    settling.from_change.condition(column),  # type: ignore[union-attr]
                                    exp.In(this=column.copy(), query=found.copy().subquery()))))

        made, undone = (INSERT, DELETE) if when == "end" else (DELETE, INSERT)
        kinds = change_stats(self.spark, i)
        changed: exp.Query = rows(made)
        if kinds.inserts if undone == INSERT else kinds.deletes:
            changed = exp.Except(this=changed, expression=rows(undone), distinct=False)
        if own.values or own.ranges or own.nulls:  # keys left to read from the snapshot, less the settled
            kept = (exp.select(*(col(c, "s") for c in columns))
                    .from_(exp.maybe_parse(part, into=exp.Table, dialect="spark").as_("s"))
                    .join(found.subquery("f"), on=exp.EQ(this=col(settling.column, "s"), expression=col("k", "f")),
                          join_type="left anti"))
            changed = exp.Union(this=kept, expression=exp.select("*").from_(changed.subquery("c")), distinct=False)
        return self.spark.sql(to_spark(changed))

    def ends(self, table: str, keys: tuple[diff.KeyFilter, ...] = ()) -> str:
        i = self.intervals[table]
        keys = tuple(k.whole() for k in keys)  # one read of both ends: settled keys read from the snapshot
        if keys:
            keep = self._counted(table, "both", keys, file_filter(keys, self._types(table)))
            return self._view(table, ("both", keys), lambda: snapshot_ends(
                self.spark, i.table, i.start_version, i.end_version, location=i.location or None, keep=keep))
        return self._view(table, "both", lambda: self._shared(
            table, ("ends", i.start_version, i.end_version), lambda: snapshot_ends(
                self.spark, i.table, i.start_version, i.end_version, location=i.location or None)))

    def _shared(self, table: str, what: tuple[Any, ...], build: Callable[[], Any]) -> Any:
        """``build()``, built once per application for every refresh that reads the same versions
        (``shared_reads.plan_once``)."""
        i = self.intervals[table]
        log = self._log(table)
        key = (i.location or i.table, log.metadata_at(i.end_version).table_id, *what, direct_snapshots(self.spark))
        return plan_once(self.spark, key, build)

    def _counted(self, table: str, when: str, keys: tuple[diff.KeyFilter, ...],
                 keep: Callable[[FileAction], bool]) -> Callable[[FileAction], bool]:
        """``keep``, counting into ``self.pruning`` the files it is asked about and those it keeps."""
        entry: dict[str, Any] = {"table": table, "at": when, "keys": [k.label() for k in keys], "files": 0, "of": 0}
        self.pruning.append(entry)

        def counting(f: FileAction) -> bool:
            kept = keep(f)
            entry["of"] += 1
            entry["files"] += int(kept)
            return kept

        return counting

    def _types(self, table: str) -> dict[str, str]:
        i = self.intervals[table]
        meta = self._log(table).metadata_at(i.end_version)
        return {f.name: f.dataType.simpleString() for f in table_schema(meta).fields}

    def _log(self, table: str) -> DeltaLog:
        if table not in self._logs:
            i = self.intervals[table]
            self._logs[table] = open_log(self.spark, i)
        return self._logs[table]

    def _bytes(self, table: str, when: str) -> int | None:
        """The table's size at one end of its interval, from the checksum read once (each join term asks)."""
        if (table, when) not in self._sizes:
            i = self.intervals[table]
            self._sizes[(table, when)] = self._log(table).size_at(i.start_version if when == "start" else i.end_version)
        return self._sizes[(table, when)]

    def changes_query(self, derivative: diff.Derivative, *, broadcast_state: bool = True) -> Any:
        """The change set of ``derivative`` over these intervals as a sqlglot query, its join terms pruned by the
        keys of the change reads (one probe job when some term is worth it). ``broadcast_state``: a small change's
        sums are broadcast into the scan of the stored aggregate state (``differentiation.changes_query``); False
        where that state is a few groups."""
        return diff.changes_query(derivative, self, **self.options(derivative), broadcast_state=broadcast_state)

    def options(self, derivative: diff.Derivative) -> dict[str, Any]:
        """The keys and compile options of a change plan over these intervals (one probe job where worth it)."""
        self._read = diff.columns_read(derivative.source)
        small = self.small_change()
        share = small and str(self.settings.conf.get(SHARE_ENDS, "false")).lower() == "true"
        aliases = str(self.settings.conf.get(SHARE_ALIASES, "true")).lower() != "false"
        return {"keys": self.key_filters(diff.key_probes(derivative)), "broadcast_keys": small, "share_ends": share,
                "share_aliases": aliases, "whole": self._read_whole}

    def _read_whole(self, leaf: diff.Snapshot) -> bool:
        """Whether a join term reads ``leaf``'s table whole rather than restricted to the change's keys."""
        least = int(self.settings.conf.get(RESTRICT_MIN_BYTES, str(DEFAULT_RESTRICT_MIN_BYTES)))
        size = self._bytes(leaf.scan.table, leaf.when)
        return size is not None and size < least

    def small_change(self) -> bool:
        """Whether the intervals changed at most ``spark.dtables.refresh.broadcastKeysMaxRows`` rows (logs only)."""
        value = self.settings.conf.get(BROADCAST_KEYS_MAX_ROWS, None)
        try:
            most = int(value) if value is not None else DEFAULT_BROADCAST_KEYS_MAX_ROWS
        except ValueError as e:
            raise ValueError(f"{BROADCAST_KEYS_MAX_ROWS} must be a number of rows, not {value!r}") from e
        if most <= 0:
            return False
        rows = 0
        for table, i in self.intervals.items():
            log = self._log(table)
            for version in range(i.start_version + 1, i.end_version + 1):
                rows += sum(commit_rows(log.commit(version)))
                if rows > most:
                    return False
        return True

    def key_filters(self, sites: tuple[diff.PruneSite, ...]) -> dict[diff.KeyProbe, diff.KeyFilter]:
        """The keys of the change reads each prunable join term needs (`differentiation.key_probes`), read in one
        Spark job, for the terms whose snapshot is big enough (``spark.dtables.refresh.keyPruningMinBytes``); none
        with ``spark.dtables.refresh.keyPruning=false``. A probe whose keys leave more than half of every snapshot
        it would narrow to be read (keys scattered over the whole key range) is dropped: its filter would cost
        more to evaluate than it saves."""
        if not sites or str(self.settings.conf.get(KEY_PRUNING, "true")).lower() == "false":
            return {}
        min_bytes = int(self.settings.conf.get(MIN_BYTES, str(DEFAULT_MIN_BYTES)))
        # Keys of appended rows are bounded by their files' statistics, with no job; the others are probed. The probe
        # reads the key columns of the change reads only; caching the whole change reads for the query that follows
        # was measured slower (TPC-H update batch: every column of the rewritten files materialized).
        found: dict[diff.KeyProbe, diff.KeyFilter] = {}
        for site in sites:
            if site.probe in found or not self._worth_probing(site, min_bytes):
                continue
            appended = {t: self._appended(t) for t, _ in site.probe.reads}
            if not all(files is not None for files in appended.values()):
                continue
            bounded = stats_filter(site.probe, {t: files or () for t, files in appended.items()})
            # keys proved absent at the end are keys a referenced table lost: none, where it only appended
            none_absent = site.probe.at == "end" and all(self._appended(t) is not None for t, _ in site.probe.absent)
            # else the bounds serve (a superset of the keys) where they already skip every file: the probe's job
            # could find no fewer to read (TPC-H RF1: new lines' orders are past the old lines' at I0); with keys
            # the change may settle, the probe reads them from the change instead of the files
            exact = (none_absent or not site.probe.absent) and not site.probe.settled
            if bounded is not None and (exact or all(self._narrows(s, bounded, 0.0)
                                                     for s in sites if s.probe == site.probe)):
                found[site.probe] = bounded
        found.update(probe_keys(self.spark, [s for s in sites if s.probe not in found], self.changes, self._bytes,
                                min_bytes, self.change_keys))
        found = self._settled_where_worth_it(sites, found)
        fraction = float(self.settings.conf.get(MAX_FRACTION, str(MAX_KEPT_FRACTION)))
        return {s.probe: found[s.probe] for s in sites
                if s.probe in found and (fraction >= 1 or self._narrows(s, found[s.probe], fraction))}

    def _settled_where_worth_it(self, sites: tuple[diff.PruneSite, ...],
                                found: dict[diff.KeyProbe, diff.KeyFilter]) -> dict[diff.KeyProbe, diff.KeyFilter]:
        """``found``, with the keys a change settles read from the snapshot after all where every snapshot the
        probe narrows is smaller than ``spark.dtables.refresh.settledKeysMinBytes``: reading rows from the change
        costs a few small jobs of its own (the settled keys found again from the referenced tables' changes),
        more than a scan of a small table (TPC-H SF 1: worth it for lineitem, not for orders)."""
        least = int(self.settings.conf.get(SETTLED_MIN_BYTES, str(DEFAULT_SETTLED_MIN_BYTES)))
        out = dict(found)
        for probe, keys in found.items():
            if keys.from_change is None:
                continue
            sizes = [self._bytes(s.table, s.when) for s in sites if s.probe == probe]
            if all(size is not None and size < least for size in sizes):
                out[probe] = keys.whole()
        return out

    def _worth_probing(self, site: diff.PruneSite, min_bytes: int) -> bool:
        size = self._bytes(site.table, site.when)
        return size is None or size >= min_bytes

    def _appended(self, table: str) -> tuple[FileAction, ...] | None:
        """The data files the table's interval appended, when it only appended (no row removed or replaced, no
        change data): their rows are its change read. None otherwise, or with column mapping (statistics are kept
        under physical column names)."""
        if table not in self._appended_files:
            self._appended_files[table] = self._only_appended(table)
        return self._appended_files[table]

    def _only_appended(self, table: str) -> tuple[FileAction, ...] | None:
        i = self.intervals[table]
        log = self._log(table)
        if log.metadata_at(i.end_version).column_mapping != "none":
            return None
        files: list[FileAction] = []
        for version in range(i.start_version + 1, i.end_version + 1):
            commit = log.commit(version)
            if commit.change_files:
                return None
            for f in commit.files:
                if f.kind == "remove" and f.data_change or f.kind == "cdc":
                    return None
                if f.kind == "add" and f.data_change:
                    files.append(f)
        return tuple(files)

    def _narrows(self, site: diff.PruneSite, keys: diff.KeyFilter, fraction: float) -> bool:
        """Whether ``keys`` leave at most ``fraction`` of the site's snapshot bytes to read, by the files'
        statistics (True when the checksum lists no files: Delta's scan then skips files by the filter itself)."""
        i = self.intervals[site.table]
        files = self._log(site.table).files_at(i.start_version if site.when == "start" else i.end_version)
        if files is None:
            return True
        keep = file_filter([dataclasses.replace(keys, column=site.column)], self._types(site.table))
        total = sum(f.size or 0 for f in files)
        return total > 0 and sum(f.size or 0 for f in files if keep(f)) <= fraction * total


    def changes(self, table: str) -> str:
        """The table's redundant delta; an update of columns the plan does not read is no change to it."""
        return self._view(*self._changes(table), lambda: redundant_delta(
            self.spark, self.intervals[table], read_once=True, compared=self._compared(table), kept=self._kept(table)))

    def _changes(self, table: str) -> tuple[str, object]:
        return table, ("changes", self._compared(table), self._kept(table))

    def change_keys(self, table: str, columns: list[str]) -> list[tuple[Any, ...]] | None:
        """Rows of ``columns`` and the action of the table's change read (``changes``; a superset of its rows) where
        the driver has them without a Spark job (``keys.HeldKeys``): the files an interval only appended, read by
        pyarrow, or rows the driver holds (``reader.held_rows``); else None."""
        appended = self._appended(table)
        if appended is not None:
            log = self._log(table)
            read = appended_columns(self.spark, log.location, log.metadata_at(self.intervals[table].end_version),
                                    appended, columns)
            return None if read is None else [(*r, INSERT) for r in zip(*(read.column(c).to_pylist()
                                                                          for c in range(len(columns))))]
        self.changes(table)
        local = held_rows(self._frames[self._changes(table)])
        if local is None:
            return None
        present = {c.lower(): c for c in local.columns}
        if any(c.lower() not in present for c in (*columns, ACTION)):
            return None
        return [tuple(r) for r in local.select(*[quote_column(present[c.lower()]) for c in (*columns, ACTION)])
                .collect()]

    def _compared(self, table: str) -> frozenset[str] | None:
        """The columns whose change makes an update a change of ``table`` to this plan (None: any)."""
        compared = self._read.get(table)
        if compared is not None and self._every_update_moved(table, compared):
            return None  # no updated row agrees with itself on the compared columns: nothing to leave out
        return compared

    def held(self, read: diff.HeldRead, query: Callable[[], Any]) -> str | None:
        """The rows of a snapshot restricted to the keys of change reads (``differentiation.Sources.held``), held
        by the driver once per application for every refresh that reads the same (``shared_reads.held_once``):
        after a batch, each query joining orders with lineitem read lineitem restricted to the changed orders'
        keys, a scan of every file of it when the keys are scattered. Only with
        ``spark.dtables.refresh.holdRestrictedReads=true``: off by default, since a read whose second asker is its
        last reader costs that refresh a job for nothing, which on TPC-H's inserts and updates outweighed what the
        later readers saved (bench/README.md). None too where the read has more rows than the driver holds of a
        change (``spark.dtables.changes.driverRowsMax``)."""
        if str(self.settings.conf.get(HOLD_RESTRICTED, "false")).lower() != "true":
            return None
        key = self._held_key(read)
        most = driver_rows_max(self.settings)
        if key is None or self._surely_more(read, most):
            return None
        rows = held_once(self.spark, key, lambda: self.spark.sql(to_spark(query(), copy=False)), most)
        return None if rows is None else self._view(read.table, ("held", read), lambda: rows)

    def _held_key(self, read: diff.HeldRead) -> tuple[Any, ...] | None:
        """What decides the rows of ``read`` over these intervals: the table and version read, the tables and
        intervals whose changes give the keys, and which updates are changes to this plan."""
        def table_key(table: str) -> tuple[Any, ...]:
            i = self.intervals[table]
            return i.location or i.table, self._log(table).metadata_at(i.end_version).table_id

        if any(k.table not in self.intervals for k in read.keys):
            return None
        i = self.intervals[read.table]
        version = i.start_version if read.when == "start" else i.end_version
        def change_key(table: str) -> tuple[Any, ...]:
            j = self.intervals[table]
            compared = compared_columns(self.spark, j, self._compared(table))
            return *table_key(table), j.start_version, j.end_version, compared

        keys = tuple((*change_key(k.table), k.column, k.append_only) for k in read.keys)
        return (*table_key(read.table), version, read.filters, read.column, keys, direct_snapshots(self.spark))

    def _surely_more(self, read: diff.HeldRead, most: int) -> bool:
        """Whether the log says ``read`` holds more than ``most`` rows, so that a job collecting it would be work
        thrown away: it has at most as many keys as its change reads have rows, and an integer column whose files'
        statistics span ``n`` values in ``r`` rows has at least ``r / n`` rows per value on average (TPC-H's
        lineitem restricted to the suppliers of a few thousand changed lines: 600 rows a supplier, most of the
        table; by the changed orders: 4 lines an order)."""
        if self._types(read.table).get(read.column) not in _INTEGRAL:
            return False
        i = self.intervals[read.table]
        files = self._log(read.table).files_at(i.start_version if read.when == "start" else i.end_version)
        if not files:
            return False
        low = high = None
        rows = 0
        for f in files:
            stats = json.loads(f.stats) if f.stats else {}
            lo, hi = (stats.get("minValues") or {}).get(read.column), (stats.get("maxValues") or {}).get(read.column)
            if lo is None or hi is None or f.num_records is None:
                return False
            low, high = min(lo, low if low is not None else lo), max(hi, high if high is not None else hi)
            rows += f.num_records
        if low is None or high is None:
            return False
        keys = sum(self._changed_rows(table) for table in {r.table for r in read.keys})
        return keys * rows > most * (int(high) - int(low) + 1)

    def _changed_rows(self, table: str) -> int:
        """The rows the commits of ``table``'s interval inserted and deleted (from the log)."""
        i = self.intervals[table]
        log = self._log(table)
        return sum(sum(commit_rows(log.commit(v))) for v in range(i.start_version + 1, i.end_version + 1))

    def _kept(self, table: str) -> frozenset[str] | None:
        """The columns a shared change read of ``table`` materializes (None: all): those its readers may read,
        where they include every column this plan reads."""
        own = self._read.get(table)
        kept = self.readers(table) if self.readers is not None and own is not None else None
        if kept is None or own is None or not {c.lower() for c in own} <= {c.lower() for c in kept}:
            return None
        return kept

    def _every_update_moved(self, table: str, compared: frozenset[str]) -> bool:
        """Whether, as this application already found (``moved.moved_columns``, which planning computes for the
        sources that updated rows), every row the interval updated moved one of the ``compared`` columns."""
        identity = self.identities.get(table)
        moved = None if identity is None else known_moved_columns(self.spark, self.intervals[table], identity)
        return moved is not None and not {c.lower() for c in moved.always}.isdisjoint(c.lower() for c in compared)


def differentiation_stats(spark: Any, interval: Interval) -> diff.ChangeStats:
    """The kinds of changes of ``interval`` (from the log, no Spark job) in the form ``differentiate`` takes."""
    return change_stats(spark, interval)
