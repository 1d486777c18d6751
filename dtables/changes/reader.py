"""Executing change reads: the CHANGES result (minimum delta or append-only), the redundant delta for the
differentiation engine, and snapshots with the same row ids.

Consolidation (MINIMIZE shape). Row-tracking ids are unique within a snapshot, so the removed side (rows of the
net-removed files, as at the interval start) holds each id at most once, and so does the added side (rows of the
net-added files, as at the end). One full outer join on the id classifies every row:

- both sides, equal values   -> unchanged (copied by copy-on-write, or updated back): nothing;
- both sides, values differ  -> UPDATE: DELETE(old) + INSERT(new), ISUPDATE true, same ROW_ID;
- removed side only          -> DELETE;   added side only -> INSERT (inserted, possibly updated later: one INSERT).

ADDED_ONLY and REMOVED_ONLY skip the join (paper 4.2); NO_DATA returns an empty frame without a Spark job. Where
the plan reads the interval commit by commit (``commits``: change data where the commits wrote it, appends' files,
the rows deletes without change data removed), the two sides of the join come from there (``commit_sides``)
instead of from the net removed and added files: no copy and no file a commit with change data wrote is read.

Commit metadata of a change row. INSERT: ``METADATA$COMMIT_VERSION`` is the row's row-commit version, i.e. the
commit that produced this row state (its insert or its last update). DELETE of an updated row: the version of its
INSERT half (the update that replaced it). DELETE of a deleted row: the commit that deleted it when its row came
from Delta's change data files or was read commit by commit (the usual case, see ``commit_sides``); otherwise
the first commit of the interval that removed the data file holding the row at the interval start (with
copy-on-write that commit may have rewritten the file and kept the row, deleting it only later, so this is the
earliest commit that could have deleted it).
``METADATA$COMMIT_TIMESTAMP`` is that commit's timestamp (Delta's time-travel timestamp of the version).

ROW_ID is ``md5(<Delta table id> ':' <row-tracking id>)``: opaque, stable across updates (Delta preserves the
row-tracking id of updated and copied rows), unique within the table and distinct between tables.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T
from sqlglot import exp

# The change-set column names are differentiation's, under the names this package has always exported: ACTION,
# ISUPDATE and ROW_ID the METADATA$ columns users see, DELTA_ACTION and DELTA_ROW_ID the hidden columns of
# differentiation's change sets and snapshots.
from differentiation.vocabulary import ACTION as DELTA_ACTION
from differentiation.vocabulary import DELETE, INSERT, ChangeFormat, Shape
from differentiation.vocabulary import METADATA_ACTION as ACTION
from differentiation.vocabulary import METADATA_ISUPDATE as ISUPDATE
from differentiation.vocabulary import METADATA_ROW_ID as ROW_ID
from differentiation.vocabulary import ROW_ID as DELTA_ROW_ID
from dtables.catalog import quote_column
from dtables.changes.commit_sides import GONE_AT, delta_rows, gone_and_alive, row_id_sql
from dtables.changes.errors import TrackingDisabled, VersionNotFound
from dtables.changes.interval import ENABLE_TRACKING_FIX, Interval, open_log, resolve_location
from dtables.changes.log import DeltaLog, FileAction, TableMetadata
from dtables.changes import change_data
from dtables.changes.driver_delta import applies as delta_on_driver_applies, delta_on_driver
from dtables.changes.pairs import unchanged_ids
from dtables.changes.shared_reads import (driver_rows_max, first_ask, held_arrow, held_local, held_source,
                                          held_table, marked_held)
from dtables.changes.shared_reads import plan_once
from dtables.changes.shared_reads import read_once as read_once_shared
from dtables.changes.scan import (
    AT_END,
    AT_START,
    FILE,
    FRESH,
    RCV,
    RID,
    column,
    picked_count,
    picked_on_driver,
    scan_ends,
    scan_files,
    table_schema,
    without_marked_rows,
)
from dtables.changes.shapes import ChangePlan, FileScan, RowFilter, check_files_retained, plan_changes
from dtables.changes.storage import join
from dtables.sql.dialect import to_spark

COMMIT_VERSION = "METADATA$COMMIT_VERSION"
COMMIT_TIMESTAMP = "METADATA$COMMIT_TIMESTAMP"
METADATA_COLUMNS = (ACTION, ISUPDATE, ROW_ID, COMMIT_VERSION, COMMIT_TIMESTAMP)


@dataclass(frozen=True)
class ChangeRead:
    """The result of a change read: ``df`` (table columns in order, then the ``METADATA$`` columns), the plan
    shape it ran with, the interval, and the full plan (``plan.to_text()`` is what EXPLAIN shows)."""

    df: DataFrame
    shape: Shape
    interval: Interval
    plan: ChangePlan


def row_id_string(table_id: str, row_id: exp.Expr) -> Column:
    """The opaque ``METADATA$ROW_ID`` / ``__row_id`` of the row-tracking id ``row_id`` (``commit_sides.row_id_sql``,
    the one definition, as a Column)."""
    return F.expr(to_spark(row_id_sql(table_id, row_id)))


def _commit_timestamp(plan: ChangePlan, version: Column) -> Column:
    pairs = [
        x
        for v, ms in plan.commit_timestamps_ms
        for x in (F.lit(v).cast("long"), F.lit(dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)))
    ]
    mapping = F.create_map(*pairs) if pairs else F.create_map().cast(T.MapType(T.LongType(), T.TimestampType()))
    return F.try_element_at(mapping, version)


def _removed_at(plan: ChangePlan) -> Column:
    pairs = [x for name, v in plan.removed_at for x in (F.lit(name), F.lit(v).cast("long"))]
    mapping = F.create_map(*pairs) if pairs else F.create_map().cast(T.MapType(T.StringType(), T.LongType()))
    return F.try_element_at(mapping, F.col(FILE))


def _output_schema(metadata: TableMetadata) -> T.StructType:
    return T.StructType(
        table_schema(metadata).fields
        + [
            T.StructField(ACTION, T.StringType(), False),
            T.StructField(ISUPDATE, T.BooleanType(), False),
            T.StructField(ROW_ID, T.StringType(), False),
            T.StructField(COMMIT_VERSION, T.LongType(), True),
            T.StructField(COMMIT_TIMESTAMP, T.TimestampType(), True),
        ]
    )


def _finish(plan: ChangePlan, df: DataFrame, columns: list[str]) -> DataFrame:
    """From (table columns, action, is_update, __rid, version) to the public CHANGES columns."""
    return df.select(
        *[F.col(quote_column(c)) for c in columns],
        F.col(ACTION),
        F.col(ISUPDATE),
        row_id_string(plan.metadata.table_id, column(RID)).alias(ROW_ID),
        F.col(COMMIT_VERSION),
        _commit_timestamp(plan, F.col(COMMIT_VERSION)).alias(COMMIT_TIMESTAMP),
    )


def _minimize(plan: ChangePlan, removed: DataFrame, added: DataFrame, columns: list[str],
              removed_version: Column | None = None) -> DataFrame:
    row = lambda: F.struct(*[F.col(quote_column(c)) for c in columns])  # noqa: E731
    version = _removed_at(plan) if removed_version is None else removed_version
    old = removed.select(row().alias("o_row"), F.col(RID).alias("o_rid"), version.alias("o_ver"))
    new = added.select(row().alias("n_row"), F.col(RID).alias("n_rid"), F.col(RCV).alias("n_ver"))
    joined = old.join(new, F.col("o_rid") == F.col("n_rid"), "full_outer")
    both = F.col("o_rid").isNotNull() & F.col("n_rid").isNotNull()
    unchanged = both & F.col("o_row").eqNullSafe(F.col("n_row"))
    change = lambda r, action, rid, ver: F.struct(  # noqa: E731
        F.col(r).alias("row"),
        F.lit(action).alias(ACTION),
        both.alias(ISUPDATE),
        F.col(rid).alias(RID),
        ver.alias(COMMIT_VERSION),
    )
    delete = F.when(F.col("o_rid").isNotNull() & ~unchanged, change("o_row", DELETE, "o_rid",
                                                                    F.coalesce(F.col("n_ver"), F.col("o_ver"))))
    insert = F.when(F.col("n_rid").isNotNull() & ~unchanged, change("n_row", INSERT, "n_rid", F.col("n_ver")))
    # One pass over the join result (not a union of two selects, which would run the join twice).
    exploded = joined.select(F.explode(F.array(delete, insert)).alias("c")).where(F.col("c").isNotNull())
    return exploded.select(
        *[F.col("c.row").getField(c).alias(c) for c in columns],
        F.col("c").getField(ACTION).alias(ACTION),
        F.col("c").getField(ISUPDATE).alias(ISUPDATE),
        F.col("c").getField(RID).alias(RID),
        F.col("c").getField(COMMIT_VERSION).alias(COMMIT_VERSION),
    )


def _side(df: DataFrame, columns: list[str], action: str, version: Column) -> DataFrame:
    return df.select(
        *[F.col(quote_column(c)) for c in columns],
        F.lit(action).alias(ACTION),
        F.lit(False).alias(ISUPDATE),
        F.col(RID),
        version.cast("long").alias(COMMIT_VERSION),
    )


def execute_plan(spark: Any, plan: ChangePlan) -> DataFrame:
    """The CHANGES DataFrame of a plan (lazy: building it runs no Spark job)."""
    schema = _output_schema(plan.metadata)
    columns = _columns(plan)
    if plan.shape == Shape.NO_DATA:
        return spark.createDataFrame([], schema)
    check_files_retained(spark, plan, commit_reads=_by_commit(spark, plan))
    location = plan.interval.location
    if plan.information == ChangeFormat.APPEND_ONLY:
        parts = [
            scan_files(spark, location, plan.metadata, scan).where(F.col(FRESH)) for scan in plan.inserted
        ]
        inserted = parts[0]
        for part in parts[1:]:
            inserted = inserted.unionByName(part)
        return _finish(plan, _side(inserted, columns, INSERT, F.col(RCV)), columns)
    if _by_commit(spark, plan):
        gone, new = gone_and_alive(spark, plan)
        return _finish(plan, _minimize(plan, gone, new, columns, F.col(GONE_AT)), columns)
    removed = scan_files(spark, location, plan.metadata, plan.removed) if plan.removed else None
    added = scan_files(spark, location, plan.metadata, plan.added) if plan.added else None
    if plan.shape == Shape.ADDED_ONLY:
        assert added is not None
        return _finish(plan, _side(added, columns, INSERT, F.col(RCV)), columns)
    if plan.shape == Shape.REMOVED_ONLY:
        assert removed is not None
        return _finish(plan, _side(removed, columns, DELETE, _removed_at(plan)), columns)
    assert removed is not None and added is not None
    return _finish(plan, _minimize(plan, removed, added, columns), columns)


def read_changes(spark: Any, interval: Interval, information: str = ChangeFormat.DEFAULT) -> ChangeRead:
    """Changes of ``interval`` in ``information`` format: ``DEFAULT`` (minimum delta) or ``APPEND_ONLY``.

    DEFAULT: the smallest set of INSERT/DELETE rows that turns the table at ``start_version`` into the table at
    ``end_version``. A row inserted and deleted inside the interval is absent; inserted then updated is one
    INSERT (ISUPDATE false); an update is a DELETE+INSERT pair with ISUPDATE true and the same ROW_ID; a row
    updated back to its original values is absent. APPEND_ONLY: every row inserted inside the interval, with the
    values it was inserted with, whatever happened to it later (updates and deletes are ignored).

    The result is lazy; building it reads only the Delta log (no Spark job). Raises HistoryNotRetained when a
    data file it needs was vacuumed.
    """
    plan = plan_changes(spark, interval, information)
    return ChangeRead(execute_plan(spark, plan), plan.shape, interval, plan)


def explain_changes(spark: Any, interval: Interval, information: str = ChangeFormat.DEFAULT) -> ChangePlan:
    """The plan a change read would run (shape, files, scans), without running it: ``.shape``, ``.to_text()``."""
    return plan_changes(spark, interval, information)


def redundant_delta(spark: Any, interval: Interval, *, read_once: bool = False,
                    compared: frozenset[str] | None = None, kept: frozenset[str] | None = None) -> DataFrame:
    """Table columns + ``__action`` ('INSERT' | 'DELETE') + ``__row_id`` (same ids as ``METADATA$ROW_ID``).

    Rows of the net-removed files as DELETE, rows of the net-added files as INSERT. Applying it to the table at
    the interval start (as multisets) gives the table at the end. For the differentiation engine, which
    consolidates where its rules need a minimum delta. Rows that copy-on-write DML copied unchanged are left out
    (``_without_copies``).

    ``read_once``: when the read picks a few rows out of whole files by their deletion vectors (a DELETE with
    vectors writes no change data), compute it here in one Spark job (a local checkpoint) rather than at each of
    the places a derivative reads it, each of which would scan those files again; later refreshes that read the
    same interval read that checkpoint (``shared_reads``). Likewise a read of both sides (an interval that
    updated rows) from change data and new files only, that the log bounds to a few rows
    (``shared_reads.driver_rows_max``), whose rows the driver then holds: the places that read it run no job.

    ``compared``: the only columns the reader uses (``differentiation.columns_read``). A row whose DELETE and
    INSERT agree on them (an UPDATE of other columns) is left out, both halves: to the reader it did not change.

    ``kept``: where the read picks rows by deletion vector, the only columns it materializes (the caller's own and
    every other reader's of the table it knows of, so that they share one read); the others come back NULL. The
    read scans whole files for a few rows, so its cost is the columns it decodes: TPC-H's ``l_comment`` alone is
    about a third of lineitem's (bench/README.md). The caller guarantees that it reads no other column.
    """
    plan = plan_changes(spark, interval, ChangeFormat.DEFAULT)
    key = ("redundant_delta", plan.interval.location, plan.metadata.table_id, plan.interval.start_version,
           plan.interval.end_version, change_data_files(spark), direct_snapshots(spark))
    bound = _rows_bound(spark, plan) if read_once and plan.shape != Shape.NO_DATA else None
    # A read of both sides (an UPDATE's, a MERGE's) joins them: worth computing once for every place that reads
    # it (``moved``'s columns and the derivative's terms). A read of one side is a scan, cheaper to repeat. Rows
    # picked by vector are checkpointed, as before: TPC-H's RF2 held that way (5,747 lineitems) ran 0.84x of FULL
    # warm, cause not established.
    picks = bound is not None and _picks_rows(spark, plan)
    # Rows picked by vector that pyarrow reads on the driver (``picked_rows``) are held with the rest of the read:
    # no scan is left to compute once. Picked by a Spark scan, they are checkpointed as before: TPC-H's RF2 held
    # that way (5,747 lineitems, collected from the scan) ran 0.84x of FULL warm, cause not established.
    hold = bound is not None and bound <= driver_rows_max(spark) and (
        _picks_on_driver(spark, plan, bound) if picks else plan.shape == Shape.MINIMIZE)
    # One commit's change data alone (an UPDATE's) is a scan and a projection, which ``moved`` compares without
    # Spark where it reads the files on the driver (``change_data``). Where the driver makes the held rows too
    # (``driver_delta``), the first reader holds them: no job, and its write's plan has no change data scan, no
    # read statement to analyse (A/B on the 10M-row updates round: 0.344 s against 0.373, bench/README.md). Where
    # holding would take a Spark job, the first reader scans it in its own plan, a second one holds it for itself
    # and every later reader of the interval.
    if hold and not picks and bound is not None and _change_data_on_driver(spark, plan, bound) \
            and not _delta_on_driver_applies(spark, plan) and first_ask(spark, ("held change data", *key)):
        hold = False
    if bound is None or not (picks or hold):
        # Every refresh of this interval reads the same rows: the read's plan (its files, per-file row ids, copies
        # left out) is built once per application (`plan_once`), as snapshots are; the files are checked each time,
        # since a kept plan is scanned again by every read.
        if plan.shape != Shape.NO_DATA:
            check_files_retained(spark, plan, commit_reads=_by_commit(spark, plan))
        built = plan_once(spark, key, lambda: _redundant_delta(spark, plan, checked=True))
        return _without_unchanged(plan, built, compared)
    # Every refresh of this interval (the DAG's other tables over the same source) reads the same rows: kept.
    wanted = {c.lower() for c in kept} if kept is not None else set()
    only = frozenset(c.lower() for c in _columns(plan) if c.lower() in wanted)
    if not picks or kept is None or len(only) == len(_columns(plan)):
        read = read_once_shared(spark, key, bound, lambda: _redundant_delta(spark, plan), hold=hold,
                                held=lambda: _delta_on_driver(spark, plan, None))
        return _with_held_rows(_without_unchanged(plan, read, compared), read)
    read = read_once_shared(spark, (*key, tuple(sorted(only))), bound,
                            lambda: _narrowed(_redundant_delta(spark, plan, only=only), only), hold=hold,
                            held=lambda: _delta_on_driver(spark, plan, only))
    return _with_held_rows(_without_unchanged(plan, read, compared, lambda df: _widened(plan, df)), read)


# The attribute of a redundant delta whose rows the driver holds: the local relation of its read (``held_rows``).
_HELD_READ = "_dtables_held_read"


def _with_held_rows(delta: DataFrame, read: DataFrame) -> DataFrame:
    if marked_held(read):  # every held read is marked; asking Spark of a checkpointed one would cost a planning
        setattr(delta, _HELD_READ, read)  # its local relation made where asked for (it may cost an analysis)
    return delta


def held_rows(delta: DataFrame) -> DataFrame | None:
    """Where the driver holds the rows of ``redundant_delta``'s result ``delta``: a local relation of them, which
    collecting runs no Spark job for. A superset of ``delta``'s rows (both halves of an update that agrees on the
    compared columns are still there) with only the columns the read materialized (``kept``); None where the rows
    are not held."""
    read = vars(delta).get(_HELD_READ)
    return None if read is None else held_local(read)


def change_data_on_driver(spark: Any, interval: Interval) -> ChangePlan | None:
    """The change plan of ``interval`` where it reads one commit's change data alone, which ``change_data`` reads
    on the driver (an UPDATE's, of a local table); None elsewhere."""
    plan = plan_changes(spark, interval, ChangeFormat.DEFAULT)
    if plan.shape != Shape.MINIMIZE or not _by_commit(spark, plan) or not change_data.one_commit(plan):
        return None
    return plan if change_data.readable(spark, plan, _rows_bound(spark, plan)) else None


def _change_data_on_driver(spark: Any, plan: ChangePlan, bound: int) -> bool:
    return _by_commit(spark, plan) and change_data.readable(spark, plan, bound)


def _columns(plan: ChangePlan) -> list[str]:
    return [f.name for f in table_schema(plan.metadata).fields]


def _delta_on_driver_applies(spark: Any, plan: ChangePlan) -> bool:
    """Whether ``_delta_on_driver`` reads ``plan`` (``driver_delta.applies``, the setting, a read by commit)."""
    return (str(spark.conf.get(DELTA_ON_DRIVER, "true")).lower() != "false" and bool(_by_commit(spark, plan))
            and delta_on_driver_applies(plan))


def _delta_on_driver(spark: Any, plan: ChangePlan, only: frozenset[str] | None) -> DataFrame | None:
    """``_redundant_delta``'s rows (``_narrowed`` to ``only``) read and held by the driver without Spark
    (``driver_delta``), or None where they are not; ``spark.dtables.changes.deltaOnDriver = false`` never does."""
    if not _delta_on_driver_applies(spark, plan):
        return None
    check_files_retained(spark, plan, commit_reads=True)
    return delta_on_driver(spark, plan, only)


def _narrowed(delta: DataFrame, only: frozenset[str]) -> DataFrame:
    """``delta`` with only the table columns named (lower case) in ``only``, and its action and row id."""
    return delta.select(*[F.col(quote_column(c)) for c in delta.columns
                          if c.lower() in only or c in (DELTA_ACTION, DELTA_ROW_ID)])


def _widened(plan: ChangePlan, narrowed: DataFrame) -> DataFrame:
    """A ``_narrowed`` read with the redundant delta's columns again, those it left out NULL of their type."""
    present = set(narrowed.columns)
    fields = [*table_schema(plan.metadata).fields, T.StructField(DELTA_ACTION, T.StringType()),
              T.StructField(DELTA_ROW_ID, T.StringType())]
    return narrowed.select(*[F.col(quote_column(f.name)) if f.name in present
                             else F.lit(None).cast(f.dataType).alias(f.name) for f in fields])


def _without_unchanged(plan: ChangePlan, delta: DataFrame, compared: frozenset[str] | None,
                       widened: Callable[[DataFrame], DataFrame] = lambda df: df) -> DataFrame:
    """``widened(delta)`` without the rows whose DELETE and INSERT (one each per id: the row at the start and at
    the end) hold the same values in the ``compared`` columns. Only where the interval both removed and added rows
    and some column is not compared (an update of every column read is a change). Where the driver holds
    ``delta``'s rows as Arrow (``held_table``), the pairs are compared there (``pairs``) and the rows left are held
    in turn; the refresh's job then reads the change as it is, where Spark would pair the rows in a window per row
    id (an exchange and a sort, 50-60 ms of a 10M-row table's mixed refresh: bench/README.md). Otherwise in one pass
    over the change rows in Spark: that window, no join."""
    read = _compared_columns(plan, compared)
    if read is None:
        return widened(delta)
    # row ids derived where read (``driver_delta``): the rows are paired by the ids they are derived from
    source = held_source(delta)
    table, schema, derived = source if source is not None else (held_table(delta), delta.schema, None)
    if table is not None:  # a narrowed read lacks some columns: NULL on both halves, so they agree
        key = DELTA_ROW_ID if derived is None else derived.source
        ids = unchanged_ids(table.rename_columns([DELTA_ROW_ID if c == key else c for c in table.column_names]),
                            [c for c in table.column_names if c.lower() in read])
        if len(ids) == 0:
            return widened(delta)
        left = table.filter(pc.invert(pc.is_in(table.column(key), value_set=ids)))
        return widened(held_arrow(delta.sparkSession, left, schema, derived))
    delta = widened(delta)
    by_id = Window.partitionBy(F.col(DELTA_ROW_ID))
    kept = [F.col(quote_column(c)) for c in _columns(plan) if c.lower() in read]
    values = F.struct(*kept) if kept else F.lit(0)
    unchanged = ((F.count(F.lit(1)).over(by_id) == 2)
                 & (F.min(DELTA_ACTION).over(by_id) != F.max(DELTA_ACTION).over(by_id))
                 & F.min(values).over(by_id).eqNullSafe(F.max(values).over(by_id)))
    return delta.withColumn("__unchanged", unchanged).where(~F.col("__unchanged")).drop("__unchanged")


def _compared_columns(plan: ChangePlan, compared: frozenset[str] | None) -> frozenset[str] | None:
    """The columns (lower case: Spark resolves names without case) by which ``_without_unchanged`` leaves out the
    rows of ``plan`` whose DELETE and INSERT agree, for a reader of ``compared``; None where it leaves every row."""
    read = frozenset(c.lower() for c in compared) if compared is not None else frozenset()
    if compared is None or plan.shape != Shape.MINIMIZE or {c.lower() for c in _columns(plan)} <= read:
        return None
    return read


def compared_columns(spark: Any, interval: Interval, compared: frozenset[str] | None) -> frozenset[str] | None:
    """What decides the rows ``redundant_delta(..., compared=compared)`` leaves out of ``interval``'s change read
    (None: none), from the log: readers of different columns read the same rows where these are equal."""
    return _compared_columns(plan_changes(spark, interval, ChangeFormat.DEFAULT), compared)


def _rows_read(spark: Any, plan: ChangePlan) -> int:
    """At most the data-file rows a read that picks rows by deletion vector holds: every row its vectors mark,
    plus every row of the files it reads whole (a file without a count is taken as too many). Rows from change
    data files are not counted: they hold only the rows the interval's DML deleted or replaced."""
    total = 0
    for scan in _data_scans(spark, plan):
        picked = {r.path: r for r in scan.row_filters if r.selective}
        for f in scan.files:
            r = picked.get(f.path)
            if r is not None:
                total += picked_count(spark, plan.interval.location, r)
            else:
                total += f.num_records if f.num_records is not None else 1 << 40
    return total


def _rows_bound(spark: Any, plan: ChangePlan) -> int:
    """At most the rows the redundant delta holds, from the log alone: the data-file rows it reads
    (``_rows_read``) and the change data rows of its commits, from their operation metrics (an UPDATE writes a
    preimage and a postimage per row; a commit without the metrics counts as too many)."""
    total = _rows_read(spark, plan)
    if plan.commit_reads is None or not _by_commit(spark, plan):
        return total
    log = open_log(spark, plan.interval)
    for version in sorted({v for _, v in plan.commit_reads.change_files}):
        commit = log.commit(version)
        total += _change_data_rows(commit.metrics or {}, commit.operation)
    return total


# The operation metrics that count a commit's change data rows, with the change data rows per counted row
_CHANGE_DATA_METRICS = {
    "UPDATE": (("numUpdatedRows", 2),),
    "DELETE": (("numDeletedRows", 1),),
    "MERGE": (("numTargetRowsUpdated", 2), ("numTargetRowsDeleted", 1), ("numTargetRowsInserted", 1)),
}


def _change_data_rows(metrics: dict[str, Any], operation: str | None = None) -> int:
    counted = _CHANGE_DATA_METRICS.get(operation or "")
    try:
        return sum(int(metrics[name]) * per for name, per in counted) if counted else 1 << 40
    except (KeyError, TypeError, ValueError):
        return 1 << 40


def _picks_rows(spark: Any, plan: ChangePlan) -> bool:
    """Whether the read scans files for only the rows their deletion vectors newly mark (or revive)."""
    return any(r.selective for scan in _data_scans(spark, plan) for r in scan.row_filters)


def _picks_on_driver(spark: Any, plan: ChangePlan, bound: int) -> bool:
    """Whether the rows the read picks by vector (at most ``bound``) are read on the driver (``picked_rows``):
    each scan that picks rows picks them out of every file it reads."""
    return all(picked_on_driver(spark, plan.interval.location, plan.metadata, bound)
               and all(r.selective for r in scan.row_filters)
               for scan in _data_scans(spark, plan) if any(r.selective for r in scan.row_filters))


def _data_scans(spark: Any, plan: ChangePlan) -> tuple[FileScan, ...]:
    """The scans of data files the redundant delta reads (none of a commit's when it wrote change data)."""
    scans = plan.commit_reads.scans if _by_commit(spark, plan) and plan.commit_reads else (plan.removed, plan.added)
    return tuple(scan for scan in scans if scan is not None)


def _by_commit(spark: Any, plan: ChangePlan) -> bool:
    """Whether the read runs commit by commit, from change data where the commits wrote it (``commits``)."""
    return plan.commit_reads is not None and plan.information == ChangeFormat.DEFAULT and change_data_files(spark)


def _redundant_delta(spark: Any, plan: ChangePlan, checked: bool = False,
                     only: frozenset[str] | None = None) -> DataFrame:
    """``redundant_delta``'s rows; ``only``: as ``scan.scan_files``'s ``columns`` (the others may be NULL)."""
    columns = _columns(plan)
    out_schema = T.StructType(
        table_schema(plan.metadata).fields
        + [T.StructField(DELTA_ACTION, T.StringType(), False), T.StructField(DELTA_ROW_ID, T.StringType(), False)]
    )
    if plan.shape == Shape.NO_DATA:
        return spark.createDataFrame([], out_schema)
    if not checked:
        check_files_retained(spark, plan, commit_reads=_by_commit(spark, plan))
    if plan.removed is not None and plan.added is not None:
        return _without_copies(spark, plan, columns, only)
    parts = [_delta_rows(plan, scan_files(spark, plan.interval.location, plan.metadata, scan, only), action, columns)
             for scan, action in ((plan.removed, DELETE), (plan.added, INSERT)) if scan is not None]
    return parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])


def _without_copies(spark: Any, plan: ChangePlan, columns: list[str], only: frozenset[str] | None) -> DataFrame:
    """The redundant delta of an interval that removed and added files (copy-on-write DELETE, UPDATE, MERGE),
    without the rows those commits copied unchanged.

    Left in, each copy is a cancelling DELETE/INSERT pair that every operator above the change read carries: an
    0.1% DELETE spread over a table makes its whole contents flow through the derivative's joins twice. Row
    tracking tells copies apart without comparing rows: a copied row keeps its row commit version, so an added
    row is new or changed exactly when its version is inside the interval, and a removed row is gone or changed
    exactly when its id is not among the added rows copied unchanged. The ids of the latter are few; they are
    found on the id column alone and broadcast, so the removed files' rows are never shuffled. Where the plan
    reads the interval commit by commit (``commit_sides``) there are no copies to leave out and those files are
    not read at all.
    """
    location, start = plan.interval.location, plan.interval.start_version
    assert plan.removed is not None and plan.added is not None
    if _by_commit(spark, plan):
        return delta_rows(spark, plan, only)
    removed = scan_files(spark, location, plan.metadata, plan.removed, only)
    added = scan_files(spark, location, plan.metadata, plan.added, only)
    copied_ids = added.where(F.col(RCV) <= start).select(F.col(RID).alias("__copied"))
    gone_ids = removed.select(F.col(RID).alias("__gone")).join(
        copied_ids, F.col("__gone") == F.col("__copied"), "left_anti")
    deletes = removed.join(F.broadcast(gone_ids), F.col(RID) == F.col("__gone"), "left_semi")
    inserts = added.where(F.col(RCV) > start)
    return _delta_rows(plan, deletes, DELETE, columns).unionByName(_delta_rows(plan, inserts, INSERT, columns))


def _delta_rows(plan: ChangePlan, df: DataFrame, action: str, columns: list[str]) -> DataFrame:
    return _projected(df, [*[column(c) for c in columns],
                           exp.alias_(exp.Literal.string(action), DELTA_ACTION, quoted=True),
                           exp.alias_(row_id_sql(plan.metadata.table_id, column(RID)), DELTA_ROW_ID, quoted=True)])


def snapshot(spark: Any, table: str, version: int, *, location: str | None = None,
             keep: Callable[[FileAction], bool] | None = None) -> DataFrame:
    """The table at ``version`` (time travel): table columns + ``__row_id``, the same ids change reads give.

    ``keep``: the caller filters the rows so that no row of a file ``keep`` refuses survives (key pruning); such
    files are left out of a direct read (Delta's time travel skips files by the caller's filter itself)."""
    location = location or resolve_location(spark, table)
    log = open_log(spark, Interval(table, version, version, location))
    meta = _tracked(log, table, version)
    columns = [f.name for f in table_schema(meta).fields]
    files = log.files_at(version) if direct_snapshots(spark) else None
    if files and _direct(meta, files):
        # The version's files straight from parquet, row ids per the row-tracking spec (see scan.py), without the
        # rows their deletion vectors mark: the same rows and ids as Delta's time travel below, without the
        # Spark job that rebuilds the snapshot.
        if keep is not None:  # at least one file, so the read has the table's schema (the filter empties it)
            files = tuple(f for f in files if keep(f)) or files[:1]
        vectors = tuple(RowFilter(f.path, f.deletion_vector) for f in files if f.deletion_vector is not None)
        df = scan_files(spark, location, meta, FileScan(files, version, True, vectors))
        row_id = column(RID)
    else:
        df = spark.read.format("delta").option("versionAsOf", version).load(location)
        row_id = exp.column("row_id", "_metadata")
    return _projected(df, [*[column(c) for c in columns],
                           exp.alias_(row_id_sql(meta.table_id, row_id), DELTA_ROW_ID, quoted=True)])


def _projected(df: DataFrame, projection: list[exp.Expr]) -> DataFrame:
    """``df.select`` of statement expressions: one projection of SQL texts, not a PySpark Column per function."""
    return df.selectExpr(*[to_spark(e) for e in projection])


def _tracked(log: DeltaLog, table: str, version: int) -> TableMetadata:
    """The table's metadata at ``version``, which must exist and have row tracking on."""
    if not 0 <= version <= log.latest_version:
        raise VersionNotFound(
            f"snapshot of {table}: version {version} does not exist; the table has versions 0 to "
            f"{log.latest_version}"
        )
    meta = log.metadata_at(version)
    if not meta.row_tracking:
        raise TrackingDisabled(
            f"snapshot of {table} at version {version}: row tracking was off at that version, so rows have no "
            f"ids; turn it on with {ENABLE_TRACKING_FIX.format(table=table)} and use a later version"
        )
    return meta


def _direct(meta: TableMetadata, files: tuple[FileAction, ...]) -> bool:
    """Whether ``files`` can be read straight from parquet with their row ids (see scan.py)."""
    return meta.column_mapping == "none" and all(f.base_row_id is not None for f in files) and few_marks(files)


def snapshot_ends(spark: Any, table: str, start: int, end: int, *, location: str | None = None,
                  keep: Callable[[FileAction], bool] | None = None) -> DataFrame:
    """The table at versions ``start`` and ``end`` in one relation: table columns, ``__row_id``, and ``__at_start``,
    ``__at_end`` (whether each version holds the row). One read of the files of both (``scan.scan_ends``) where
    both can be read directly with one schema; else the two snapshots, each row flagged with its own version only.
    ``keep`` as for ``snapshot``."""
    location = location or resolve_location(spark, table)
    log = open_log(spark, Interval(table, start, end, location))
    metas = _tracked(log, table, start), _tracked(log, table, end)
    lists = (log.files_at(start), log.files_at(end)) if direct_snapshots(spark) else (None, None)
    first, last = lists
    if first is not None and last is not None and (first or last) and _one_layout(*metas) \
            and _direct(metas[1], first + last) and _same_ids(first, last):
        if keep is not None:  # at least one file, so the read has the table's schema (the filter empties it)
            kept = tuple(f for f in first if keep(f)), tuple(f for f in last if keep(f))
            first, last = kept if any(kept) else ((first or last)[:1], ())
        df = scan_ends(spark, location, metas[1], first, last)
        return _projected(df, [*[column(f.name) for f in table_schema(metas[1]).fields],
                               exp.alias_(row_id_sql(metas[1].table_id, column(RID)), DELTA_ROW_ID, quoted=True),
                               column(AT_START), column(AT_END)])
    at_start = snapshot(spark, table, start, location=location, keep=keep)
    at_end = snapshot(spark, table, end, location=location, keep=keep)
    return at_start.select("*", F.lit(True).alias(AT_START), F.lit(False).alias(AT_END)).unionByName(
        at_end.select("*", F.lit(False).alias(AT_START), F.lit(True).alias(AT_END)), allowMissingColumns=True)


def _one_layout(a: TableMetadata, b: TableMetadata) -> bool:
    return (a.table_id, a.schema_json, a.partition_columns) == (b.table_id, b.schema_json, b.partition_columns)


def _same_ids(a: tuple[FileAction, ...], b: tuple[FileAction, ...]) -> bool:
    """Whether every file both lists hold has the same row ids in both (a file keeps them when re-added with a new
    deletion vector)."""
    other = {f.path: f for f in b}
    return all((f.base_row_id, f.default_row_commit_version) ==
               (other[f.path].base_row_id, other[f.path].default_row_commit_version)
               for f in a if f.path in other)


CHANGE_DATA_FILES = "spark.dtables.changeDataFiles"
# Whether a held change read is made by pyarrow on the driver where it can be (``driver_delta``), or by Spark
DELTA_ON_DRIVER = "spark.dtables.changes.deltaOnDriver"


def table_at(spark: Any, location: str, version: int) -> DataFrame:
    """The table's own columns at ``version``: its data files read as Parquet when the version's checksum lists
    them (no Spark job rebuilding Delta's snapshot, which time travel to any version but the cached latest one
    costs), else Delta's time travel. Direct reads need a table without partitions or column mapping; rows its
    deletion vectors mark are left out by row index."""
    log = DeltaLog(spark, location)
    meta = log.metadata_at(version)
    files = log.files_at(version) if direct_snapshots(spark) else None
    if files is None or meta.partition_columns or meta.column_mapping != "none" or not few_marks(files):
        return spark.read.format("delta").option("versionAsOf", version).load(location)
    schema = table_schema(meta)
    if not files:
        return spark.createDataFrame([], schema)
    raw = spark.read.schema(schema).parquet(*[join(location, unquote(f.path)) for f in files])
    return without_marked_rows(spark, location, raw, files)


def identified_table_at(spark: Any, location: str, version: int, ids: tuple[str, str] = (RID, RCV)
                        ) -> DataFrame | None:
    """The table's columns at ``version`` with each row's row-tracking identity (named ``ids``), read from the
    data files its checksum lists; None where that read is not exact (no checksum, row tracking off, partitions,
    column mapping, deletion vectors, files without row ids). A writer that replaces the table's files keeps these
    for the rows it copies (``dtables.dynamic.overwrite``), as Delta's UPDATE and MERGE do."""
    log = DeltaLog(spark, location)
    meta = log.metadata_at(version)
    files = log.files_at(version)
    if (files is None or not meta.row_tracking or meta.partition_columns or meta.column_mapping != "none"
            or any(f.deletion_vector is not None or f.base_row_id is None for f in files)):
        return None
    columns = [quote_column(f.name) for f in table_schema(meta).fields]
    if not files:
        return spark.createDataFrame([], T.StructType([*table_schema(meta).fields,
                                                       *(T.StructField(i, T.LongType()) for i in ids)]))
    return scan_files(spark, location, meta, FileScan(files, version, True)).select(
        *columns, *(F.col(c).alias(i) for c, i in zip((RID, RCV), ids)))


def change_data_files(spark: Any) -> bool:
    """Whether the engine's change reads may take deletes and update preimages from Delta's change data files
    (``spark.dtables.changeDataFiles``, on by default; off reads the removed data files, e.g. to compare)."""
    return _switch(spark, CHANGE_DATA_FILES)


DIRECT_SNAPSHOTS = "spark.dtables.directSnapshots"


# Direct reads decode deletion vectors on the driver into a broadcast table of marked rows; past this many, Delta's
# own scan (which applies the vectors in its readers) is cheaper than that table.
MAX_DIRECT_MARKS = 200_000


def few_marks(files: tuple[FileAction, ...]) -> bool:
    """Whether the rows the files' deletion vectors mark are few enough for a direct read to leave out."""
    return sum(f.deletion_vector.cardinality for f in files if f.deletion_vector is not None) <= MAX_DIRECT_MARKS


def direct_snapshots(spark: Any) -> bool:
    """Whether snapshots may be read from the files their checksum lists (``spark.dtables.directSnapshots``, on
    by default; off forces Delta time travel, e.g. to compare the two)."""
    return _switch(spark, DIRECT_SNAPSHOTS)


def _switch(spark: Any, key: str) -> bool:
    return str(spark.conf.get(key, "true")).lower() != "false"
