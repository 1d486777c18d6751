"""Rows picked out of data files by deletion vector, read on the driver with pyarrow instead of a Spark scan.

A DELETE with deletion vectors writes no change data: the rows it deleted are found by their row indexes, the
rows its new vectors mark and the old ones did not. Spark finds them by scanning every such file whole with
``_metadata.row_index`` and joining the indexes: a scattered DELETE of 0.1% of a 10M-row table touches every file,
so its change read was a job of 0.3-0.45 s on the 2-core benchmark machine, most of a refresh (bench/README.md).
Here each file's row groups that hold a picked row are decoded by pyarrow (the columns the caller reads only, on
the driver's threads, no job), the picked rows taken by position (a Parquet file's rows are in row-index order),
and the few rows made a local relation: the plans above read and broadcast it without a job, as rows the driver
holds (``shared_reads.on_driver``).

Only where that read gives exactly what Spark's would: a local table location (a remote one goes through Hadoop's
FileSystem, which pyarrow does not share), no column mapping (``scan``'s direct reads already need that), flat
columns of types whose Parquet encodings pyarrow decodes as Spark does, files written without Spark's legacy
calendar rebase, and at most ``PICKS_MAX`` rows. Anywhere else the Spark scan runs as before;
``spark.dtables.changes.pickOnDriver = false`` forces it (to compare the two).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from pyroaring import AbstractBitMap64
from pyspark.sql import types as T

from dtables.spark.fs import is_local
from dtables.spark.jobs import driver_read
from dtables.spark.sessions import is_connect

PICK_ON_DRIVER = "spark.dtables.changes.pickOnDriver"
# Rows picked here at most (more are Spark's to pick). Decoding costs what the files' columns cost whatever the
# count; the bound keeps the local relation they become small in the driver's memory. TPC-H SF 10's RF2 picks
# 60,764 lineitems out of every file of lineitem.
PICKS_MAX = "spark.dtables.changes.driverPicksMax"
DEFAULT_PICKS_MAX = 500_000

# Spark types whose Parquet values pyarrow decodes to the same values (nested types, intervals, variants and
# collated strings are left to Spark's reader, whose field resolution and conversions differ in details)
_FLAT = (T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType,
         T.DecimalType, T.BinaryType, T.DateType, T.TimestampType, T.TimestampNTZType)
# Key-value metadata Spark writes into a file whose dates or timestamps it rebased to the legacy hybrid calendar
_LEGACY_CALENDAR = (b"org.apache.spark.legacyDateTime", b"org.apache.spark.legacyINT96")


@dataclass(frozen=True)
class PickedFile:
    """One data file's rows to read: its local path, the name the read tags its rows with, and their row indexes
    (None: every row, as a change data file is read)."""

    path: str
    name: str
    rows: AbstractBitMap64 | None


def on_driver(spark: Any, location: str, fields: Iterable[T.StructField], rows: int) -> bool:
    """Whether ``rows`` rows picked out of the files of a table at ``location`` with these read fields are read
    here: ``PICK_ON_DRIVER`` on (the default), at most ``PICKS_MAX`` rows, classic Spark (a Connect client makes
    no local relation without sending every row), the location local, every field flat."""
    return str(spark.conf.get(PICK_ON_DRIVER, "true")).lower() != "false" \
        and rows <= int(spark.conf.get(PICKS_MAX, str(DEFAULT_PICKS_MAX))) and not is_connect(spark) \
        and is_local(location) and all(_flat(f.dataType) for f in fields)


def _flat(data_type: T.DataType) -> bool:
    if isinstance(data_type, T.StringType):  # the default collation only: others compare and hash differently
        return getattr(data_type, "collation", "UTF8_BINARY") == "UTF8_BINARY"
    return isinstance(data_type, _FLAT)


def read(files: list[PickedFile], fields: list[T.StructField], wanted: frozenset[str] | None, file_column: str,
         row_index_column: str) -> Any:
    """The picked rows of ``files`` as a pyarrow table: ``fields`` (Spark's read schema, in order; a field not in
    ``wanted``, lower-case names, comes back NULL without being decoded; None wants every one), then the file's
    name and the row index. None where some file cannot be read exactly (legacy calendar, a name two columns of
    the file share without case, an encoding pyarrow refuses): the caller scans with Spark instead."""
    import pyarrow as pa  # PySpark's own dependency for its SQL module

    with ThreadPoolExecutor(max_workers=min(len(files), os.cpu_count() or 1) or 1) as pool:
        parts = list(pool.map(lambda f: _read_file(f, fields, wanted, file_column, row_index_column), files))
    if any(p is None for p in parts):
        return None
    driver_read(sum(p.bytes for p in parts if p), sum(p.records for p in parts if p))
    schema = _arrow_schema(fields, file_column, row_index_column)
    return pa.concat_tables([p.table for p in parts if p]) if parts else schema.empty_table()


@dataclass(frozen=True)
class _Read:
    """One file's picked rows, with the compressed bytes and the rows of the column chunks decoded for them."""

    table: Any
    bytes: int
    records: int


def _arrow_schema(fields: list[T.StructField], file_column: str, row_index_column: str) -> Any:
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    return pa.schema([*[pa.field(f.name, to_arrow_type(f.dataType, timezone="UTC")) for f in fields],
                      pa.field(file_column, pa.string()), pa.field(row_index_column, pa.int64())])


def _read_file(picked: PickedFile, fields: list[T.StructField], wanted: frozenset[str] | None, file_column: str,
               row_index_column: str) -> _Read | None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        with pq.ParquetFile(picked.path, coerce_int96_timestamp_unit="us") as parquet:
            return _read_open(parquet, picked, fields, wanted, file_column, row_index_column)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # an encoding pyarrow refuses (e.g. invalid UTF-8)
        return None


def _read_open(parquet: Any, picked: PickedFile, fields: list[T.StructField], wanted: frozenset[str] | None,
               file_column: str, row_index_column: str) -> _Read | None:
    import pyarrow as pa

    if _legacy_calendar(parquet.metadata.metadata or {}, fields):
        return None
    # Spark resolves a read schema's names in the file without case (spark.sql.caseSensitive is off by default);
    # a missing column (added to the table after the file was written) reads as NULL
    names: dict[str, str] = {}
    for name in parquet.schema_arrow.names:
        if name.lower() in names:
            return None
        names[name.lower()] = name
    decoded = [f for f in fields if (wanted is None or f.name.lower() in wanted) and f.name.lower() in names]
    total = parquet.metadata.num_rows
    every = picked.rows is None
    rows = np.arange(total, dtype=np.int64) if picked.rows is None else \
        np.frombuffer(picked.rows.to_array(), dtype=np.uint64).astype(np.int64)
    if len(rows) and rows[-1] >= total:
        raise ValueError(f"a deletion vector of {picked.path} marks row {rows[-1]}, past its {total} rows")
    starts = np.cumsum([0] + [parquet.metadata.row_group(i).num_rows for i in range(parquet.num_row_groups)])
    pieces, read_bytes, records = [], 0, 0
    physical = [names[f.name.lower()] for f in decoded]
    for group in np.unique(np.searchsorted(starts, rows, side="right") - 1):  # only the groups a picked row is in
        from_file = physical  # the columns decoded from the file, not taken from ``_decoded``
        if every:
            pieces.append(parquet.read_row_group(int(group), columns=physical))
        else:
            taken_rows, from_file = _picked_batches(parquet, picked.path, int(group), physical,
                                               rows[(rows >= starts[group]) & (rows < starts[group + 1])]
                                               - starts[group])
            pieces += taken_rows
        meta = parquet.metadata.row_group(int(group))
        read_bytes += sum(meta.column(i).total_compressed_size for i in range(meta.num_columns)
                          if meta.column(i).path_in_schema in from_file)
        records += meta.num_rows if from_file else 0
    taken = pa.concat_tables(pieces) if pieces else None
    schema = _arrow_schema(fields, file_column, row_index_column)
    columns = []
    for f, target in zip(fields, schema):
        if taken is not None and f in decoded:
            columns.append(_cast(taken.column(names[f.name.lower()]), target.type))
        else:
            columns.append(pa.nulls(len(rows), target.type))
    columns += [pa.array([picked.name] * len(rows), pa.string()), pa.array(rows, pa.int64())]
    return _Read(pa.Table.from_arrays(columns, schema=schema), read_bytes, records)


# Rows decoded at a time where a few are picked out of a row group: a whole group decoded at once (Spark writes
# 2.5M-row groups of a 10M-row table) is a fresh allocation of tens of MB per file, which the kernel spent 0.1-0.3 s
# of system time mapping per file inside a refresh (against 20-30 ms to decode); batches reuse a few MB.
_BATCH_ROWS = 65_536

# Decoded column batches of the row groups rows were picked from, kept per process by file, row group and column (a
# data file never changes once written): scattered deletes pick a few rows out of the same large files refresh after
# refresh, until OPTIMIZE rewrites them, and decoding their columns again each time was most of the driver's read of
# a small mixed change (50-60 ms of a 0.4 s refresh for four 2.5M-row files, bench/README.md). Bounded by the bytes
# the batches hold, the least recently used out first.
DECODED_BYTES_MAX = 256 << 20
_decoded: OrderedDict[tuple[str, int, str], list[Any]] = OrderedDict()
_decoded_bytes = 0
_decoded_lock = threading.Lock()


def _picked_batches(parquet: Any, path: str, group: int, physical: list[str], rows: Any
                    ) -> tuple[list[Any], list[str]]:
    """The rows at ``rows`` (sorted indexes within row group ``group``) of its ``physical`` columns, as tables, and
    the columns decoded from the file for them (not kept in ``_decoded``)."""
    import pyarrow as pa

    if not physical:
        return [], []  # nothing to decode: the caller makes every column NULL
    batches, decoded = _column_batches(parquet, path, group, physical)
    pieces, start = [], 0
    for i, first in enumerate(batches[physical[0]]):
        end = start + len(first)
        lo, hi = np.searchsorted(rows, [start, end])
        if hi > lo:
            at = pa.array(rows[lo:hi] - start)
            pieces.append(pa.Table.from_arrays([batches[c][i].take(at) for c in physical], names=physical))
        start = end
    return pieces, decoded


def _column_batches(parquet: Any, path: str, group: int, physical: list[str]
                    ) -> tuple[dict[str, list[Any]], list[str]]:
    """Per column of ``physical``, row group ``group``'s values in batches of ``_BATCH_ROWS``: those ``_decoded``
    keeps, the others decoded (together, and named second) and kept."""
    found: dict[str, list[Any]] = {}
    with _decoded_lock:
        for column in physical:
            if (kept := _decoded.get((path, group, column))) is not None:
                _decoded.move_to_end((path, group, column))
                found[column] = kept
    missing = [c for c in physical if c not in found]
    if missing:
        decoded: dict[str, list[Any]] = {c: [] for c in missing}
        for batch in parquet.iter_batches(batch_size=_BATCH_ROWS, row_groups=[group], columns=missing,
                                          use_threads=False):
            for c in missing:
                decoded[c].append(batch.column(c))
        found.update(decoded)
        _keep_decoded(path, group, decoded)
    return found, missing


def forget_decoded() -> None:
    """Empty ``_decoded`` (tests that count what a read decodes)."""
    global _decoded_bytes
    with _decoded_lock:
        _decoded.clear()
        _decoded_bytes = 0


def _keep_decoded(path: str, group: int, decoded: dict[str, list[Any]]) -> None:
    global _decoded_bytes
    with _decoded_lock:
        for column, arrays in decoded.items():
            size = sum(a.nbytes for a in arrays)
            if size > DECODED_BYTES_MAX or (path, group, column) in _decoded:
                continue
            _decoded[(path, group, column)] = arrays
            _decoded_bytes += size
        while _decoded_bytes > DECODED_BYTES_MAX and _decoded:
            _, arrays = _decoded.popitem(last=False)
            _decoded_bytes -= sum(a.nbytes for a in arrays)


def _legacy_calendar(metadata: dict[bytes, bytes], fields: list[T.StructField]) -> bool:
    dated = any(isinstance(f.dataType, T.DateType | T.TimestampType | T.TimestampNTZType) for f in fields)
    return dated and any(key in metadata for key in _LEGACY_CALENDAR)


def _cast(column: Any, target: Any) -> Any:
    """A decoded column as the type Spark reads it as: a timestamp without a zone that Spark reads as an instant
    (INT96, which pyarrow decodes without one) is UTC, as Spark takes it; Delta's type widening (a file written
    before an INT column became BIGINT) widens."""
    import pyarrow as pa

    if pa.types.is_timestamp(target) and target.tz is not None and pa.types.is_timestamp(column.type) \
            and column.type.tz is None:
        column = column.cast(pa.timestamp(column.type.unit, tz="UTC"))
    return column.cast(target) if column.type != target else column
