"""What a stream returns: its source's changes over ``(frontier, end]``, in the stream's format and columns.

Tables (and dynamic tables, which are Delta tables) are change reads (``dtables.changes``); views are
differentiated (``differentiation``) over per-table intervals. SHOW_INITIAL_ROWS: until the first consumption the
stream returns the source as INSERTs: for a minimum-delta stream the source at ``end`` (the smallest delta from
an empty source), for APPEND_ONLY the source at the frontier plus what was appended since.

Columns. Streams created in Snowflake's spelling: the source's columns, then the ``METADATA$`` columns of change
reads. Streams created in Singdata's spelling (``CREATE TABLE STREAM``): ``__change_type`` (INSERT, DELETE,
UPDATE_BEFORE, UPDATE_AFTER), ``__commit_version`` and ``__commit_timestamp`` (for INSERT/UPDATE_AFTER the commit
that produced the row state; for DELETE/UPDATE_BEFORE the commit that had produced the old row state, as Singdata
documents), then the source's columns.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from sqlglot import exp

import differentiation as diff
from differentiation.vocabulary import DELETE, INSERT, ChangeFormat
from dtables import changes as ch
from dtables.catalog import quote_column, without_state_columns
from dtables.catalog.constraints import KeyStore
from dtables.catalog.warehouse import Warehouse
from dtables.change_queries import IntervalSources, plan_view
from dtables.changes.interval import open_log
from dtables.changes.window import narrowed
from dtables.changes.reader import row_id_string
from dtables.changes.scan import table_schema
from dtables.state.streams import Stream
from dtables.streams.errors import StreamError, StreamStale
from dtables.sql.dialect import to_spark

SINGDATA_COLUMNS = ("__change_type", "__commit_version", "__commit_timestamp")


def intervals(spark: Any, stream: Stream, end: Mapping[str, int]) -> dict[str, ch.Interval]:
    """The interval of each base table, checked; a history that is gone makes the stream stale. Compactions at
    either end of it, which change no row, are left out (``dtables.changes.window``): the same changes, read
    without taking every compacted file as deleted and inserted again. The stream's offset still moves to ``end``."""
    out = {}
    for table, start in stream.frontier.items():
        try:
            interval = ch.resolve_interval(spark, table, at=ch.Bound.version(start),
                                           end=ch.Bound.version(end[table]))
        except (ch.HistoryNotRetained, ch.VersionNotFound) as e:
            raise _stale(stream, table, start, str(e)) from e
        out[table] = narrowed(open_log(spark, interval), interval)
    return out


def _stale(stream: Stream, table: str, version: int, why: str) -> StreamStale:
    return StreamStale(
        f"stream {stream.name} is stale: its frontier (version {version} of {table}, last consumed "
        f"{stream.consumed_at}) is older than the history {table} still retains ({why}). The changes since then "
        f"cannot be read any more. Recover: CREATE OR REPLACE STREAM {stream.name} ON {stream.source_kind} "
        f"{stream.source} (with SHOW_INITIAL_ROWS = TRUE to reload the current rows into the consumer); consume "
        f"streams within the source's retention, which streams extend up to dtables.stream.max_retention")


def stream_changes(scope: Warehouse, stream: Stream, end: Mapping[str, int]) -> DataFrame:
    """The stream's rows over ``(frontier, end]`` as a lazy DataFrame on ``scope.spark``."""
    spans = intervals(scope.spark, stream, end)
    try:
        if stream.source_kind == "VIEW":
            df = _view_changes(scope, stream, spans)
        else:
            df = _table_changes(scope.spark, stream, spans[next(iter(spans))])
    except ch.HistoryNotRetained as e:
        table = next(iter(spans))
        raise _stale(stream, table, stream.frontier[table], str(e)) from e
    if stream.source_kind == "DYNAMIC TABLE":
        df = without_state_columns(df)
    if stream.flavor == "SINGDATA":
        df = _singdata_columns(scope.spark, stream, spans, df)
    return df


def _table_changes(spark: Any, stream: Stream, interval: ch.Interval) -> DataFrame:
    if not stream.show_initial_rows:
        return ch.read_changes(spark, interval, stream.mode).df
    log = open_log(spark, interval)
    if stream.mode == ChangeFormat.APPEND_ONLY:
        rows = _snapshot_as_inserts(spark, interval, interval.start_version, log)
        return rows.unionByName(ch.read_changes(spark, interval, ChangeFormat.APPEND_ONLY).df)
    return _snapshot_as_inserts(spark, interval, interval.end_version, log)


def _snapshot_as_inserts(spark: Any, interval: ch.Interval, version: int, log: Any) -> DataFrame:
    meta = log.metadata_at(version)
    columns = [f.name for f in table_schema(meta).fields]
    times = log.commit_timestamps()
    pairs = [x for v, ms in times.items()
             for x in (F.lit(v).cast("long"), F.lit(dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)))]
    ts_map = F.create_map(*pairs) if pairs else F.create_map().cast(T.MapType(T.LongType(), T.TimestampType()))
    df = spark.read.format("delta").option("versionAsOf", version).load(interval.location)
    rcv = F.col("_metadata.row_commit_version").cast("long")
    return df.select(
        *[F.col(quote_column(c)) for c in columns],
        F.lit(INSERT).alias(ch.ACTION),
        F.lit(False).alias(ch.ISUPDATE),
        row_id_string(meta.table_id, exp.column("row_id", "_metadata")).alias(ch.ROW_ID),
        rcv.alias(ch.COMMIT_VERSION),
        F.try_element_at(ts_map, rcv).alias(ch.COMMIT_TIMESTAMP),
    )


def _view_changes(scope: Warehouse, stream: Stream, spans: dict[str, ch.Interval]) -> DataFrame:
    plan = plan_view(scope, stream.source)  # type: ignore[arg-type]
    sources = IntervalSources(scope.spark, spans)
    if stream.show_initial_rows and stream.mode == ChangeFormat.DEFAULT:
        snap = scope.spark.sql(to_spark(diff.snapshot_query(plan, sources, "end")))
        return snap.select(*(F.col(quote_column(c)) for c in plan.columns()), F.lit(INSERT).alias(ch.ACTION),
                           F.lit(False).alias(ch.ISUPDATE), F.col(ch.DELTA_ROW_ID).alias(ch.ROW_ID))
    if stream.show_initial_rows:
        raise StreamError(f"stream {stream.name}: SHOW_INITIAL_ROWS with APPEND_ONLY is supported on tables only")
    stats = {t: ch.change_stats(scope.spark, i) for t, i in spans.items()}
    try:
        derivative = diff.differentiate(plan, ChangeFormat(stream.mode), stats,
                                        constraints=KeyStore(scope.store).relied_on(list(plan.base_tables())))
    except diff.UnsupportedQuery as e:
        raise StreamError(f"stream {stream.name}: cannot compute the changes of view {stream.source}: {e}") from e
    return scope.spark.sql(to_spark(sources.changes_query(derivative)))


def _singdata_columns(spark: Any, stream: Stream, spans: dict[str, ch.Interval], df: DataFrame) -> DataFrame:
    data = [c for c in df.columns if not c.startswith("METADATA$")]
    action, is_update = F.col(quote_column(ch.ACTION)), F.col(quote_column(ch.ISUPDATE))
    change_type = (F.when(is_update & (action == DELETE), F.lit("UPDATE_BEFORE"))
                   .when(is_update, F.lit("UPDATE_AFTER")).otherwise(action))
    if stream.source_kind == "VIEW" or ch.COMMIT_VERSION not in df.columns:
        version, stamp = F.lit(None).cast("long"), F.lit(None).cast("timestamp")
        return df.select(change_type.alias("__change_type"), version.alias("__commit_version"),
                         stamp.alias("__commit_timestamp"), *[F.col(quote_column(c)) for c in data])
    interval = next(iter(spans.values()))
    log = open_log(spark, interval)
    # The old state of a deleted/updated row was produced by the commit recorded as its row commit version at the
    # interval start: look it up by row id in the snapshot at the start (only rows that were deleted need it).
    meta = log.metadata_at(interval.start_version)
    before = (spark.read.format("delta").option("versionAsOf", interval.start_version).load(interval.location)
              .select(row_id_string(meta.table_id, exp.column("row_id", "_metadata")).alias("__old_rid"),
                      F.col("_metadata.row_commit_version").cast("long").alias("__old_version")))
    deletes = df.where(action == DELETE)
    old = deletes.join(before, deletes[quote_column(ch.ROW_ID)] == before["__old_rid"], "left") \
        .withColumn(ch.COMMIT_VERSION, F.coalesce(F.col("__old_version"), F.col(quote_column(ch.COMMIT_VERSION)))) \
        .drop("__old_rid", "__old_version")
    combined = df.where(action != DELETE).unionByName(old)
    times = log.commit_timestamps()
    pairs = [x for v, ms in times.items()
             for x in (F.lit(v).cast("long"), F.lit(dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)))]
    ts_map = F.create_map(*pairs) if pairs else F.create_map().cast(T.MapType(T.LongType(), T.TimestampType()))
    version = F.col(quote_column(ch.COMMIT_VERSION))
    return combined.select(change_type.alias("__change_type"), version.alias("__commit_version"),
                           F.try_element_at(ts_map, version).alias("__commit_timestamp"),
                           *[F.col(quote_column(c)) for c in data])
