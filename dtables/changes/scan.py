"""Scanning data files with their row identity: table columns plus ``__rid`` (row-tracking id, long),
``__rcv`` (row commit version), ``__file`` (file name) and ``__fresh`` (the row still has the id it was inserted
with in this file, i.e. the file introduced it).

Two ways, chosen by the plan (``shapes.FileScan.direct``):

- direct: ``spark.read.parquet`` of exactly the planned files. Delta's own scan does not prune files on a
  ``_metadata.file_path`` filter (measured: it still reads every file of the snapshot), so reading the listed
  files directly is what makes a change read cost proportional to the files the interval touched. Row identity
  follows the row-tracking spec: ``row_id = coalesce(materialized id column, baseRowId + row_index)`` and
  ``row_commit_version = coalesce(materialized column, defaultRowCommitVersion)``, with ``baseRowId`` and
  ``defaultRowCommitVersion`` taken from the file's add/remove action in the log. Partition values come from the
  action too. A file with a deletion vector is read without the rows its vector marks, or for only the rows a
  vector newly marks (``shapes.RowFilter``): the vectors are decoded on the driver (``deletion_vectors``) into a
  small (file, row index) table joined by broadcast. Valid only without column mapping.
- Delta: a time-travel scan at the plan's version filtered on ``_metadata.file_name``, using Delta's own
  ``_metadata.row_id`` / ``row_commit_version``. Always correct, but reads the whole snapshot's files.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import numpy as np
from pyroaring import AbstractBitMap64, FrozenBitMap64
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from sqlglot import exp

from dtables.catalog import quote_column
from dtables.changes import deletion_vectors as dv
from dtables.changes import picked_rows
from dtables.changes.log import FileAction, TableMetadata
from dtables.changes.file_scans import FileScan, RowFilter
from dtables.changes.storage import Storage, join
from dtables.spark.fs import local_path
from dtables.spark.sessions import local_columns, rows_for_plans
from dtables.sql.dialect import to_spark

RID, RCV, FILE, FRESH = "__rid", "__rcv", "__file", "__fresh"
_ROW_INDEX, _MARK_FILE, _MARK_ROW, _MARK_KEEP = "__row_index", "__mark_file", "__mark_row", "__mark_keep"
CHANGE_TYPE = "_change_type"  # the column of Delta's change data files: insert, delete, update_pre/postimage


def table_schema(metadata: TableMetadata) -> T.StructType:
    schema = T.StructType.fromJson(json.loads(metadata.schema_json))
    # Delta keeps column metadata (comments, generation expressions, mapping ids); the change read does not.
    return T.StructType([T.StructField(f.name, f.dataType, f.nullable) for f in schema.fields])


def map_expr(pairs: list[tuple[str, Any]], value_type: T.DataType) -> exp.Expr:
    """A MAP literal of ``pairs`` (string keys, values of ``value_type``) as a SQL expression: a Column per key and
    value would cost several Py4J calls each, which for a scan of thousands of files is most of the change read's
    driver time."""
    target = exp.DataType.build(value_type.simpleString(), dialect="spark")
    if not pairs:
        empty = exp.Anonymous(this="MAP", expressions=[])
        return exp.cast(empty, exp.DataType.build(f"map<string, {value_type.simpleString()}>", dialect="spark"))
    args = [x for k, v in pairs for x in (exp.Literal.string(k), exp.cast(_literal(v), target))]
    return exp.Anonymous(this="MAP", expressions=args)


def try_element_at(mapping: exp.Expr, key: exp.Expr) -> exp.Expr:
    return exp.Anonymous(this="try_element_at", expressions=[mapping, key])


def _literal(value: Any) -> exp.Expr:
    if value is None:
        return exp.null()
    return exp.Literal.number(value) if isinstance(value, int) else exp.Literal.string(str(value))


def scan_files(spark: Any, location: str, metadata: TableMetadata, scan: FileScan,
               columns: frozenset[str] | None = None) -> DataFrame:
    """Rows of ``scan``'s files: table columns (schema of ``metadata``, in order), ``__rid``, ``__rcv``,
    ``__file``, ``__fresh``. ``columns``: the only table columns the caller reads (lower case; None: every one);
    rows picked on the driver (``picked_rows``) have the others NULL, not decoded (Spark's scans prune them by
    themselves)."""
    schema = table_schema(metadata)
    if scan.direct:
        return _scan_direct(spark, location, metadata, schema, scan, columns)
    return _scan_delta(spark, location, schema, scan)


def _scan_direct(spark: Any, location: str, metadata: TableMetadata, schema: T.StructType, scan: FileScan,
                 columns: frozenset[str] | None) -> DataFrame:
    marks, selective, empty = _row_marks(spark, location, scan.row_filters)
    files = tuple(f for f in scan.files if f.path not in empty) or scan.files[:1]
    if marks is not None and selective:
        picking = tuple(f for f in files if unquote(f.file_name) in selective)
        picked = RowMarks([m for m in marks.chunks if m.flags == (True,)])
        held = _picked_on_driver(spark, location, metadata, schema, picking, picked, columns)
        if held is not None and len(picking) == len(files):
            return _identified(held, metadata, schema, files)
        if held is not None:  # the files read whole (less their vectors' rows) are Spark's to scan
            rest = scan.restricted(tuple(f for f in scan.files if unquote(f.file_name) not in selective))
            return _identified(held, metadata, schema, picking).unionByName(
                _scan_direct(spark, location, metadata, schema, rest, columns))
    tagged = _direct_read(spark, location, metadata, schema, files)
    if len(files) == 1 and files[0].path in empty:
        tagged = tagged.where(F.lit(False))  # every file's filter keeps no row: an empty read with the right schema
    if marks is not None:
        # Rows are picked (or left out) by row index before anything is computed for them: a file read for the
        # few rows its vector newly marks costs one pass over its columns, not the per-row work below.
        every_file_picked = len(selective) == len({unquote(f.file_name) for f in files})
        picked = RowMarks([m for m in marks.chunks if m.flags == (True,)])
        if every_file_picked and 0 < len(picked) <= PICKED_AS_LITERALS_MAX:
            # The rows as a filter of literals: a join with them broadcast the rows first, a Spark job each
            tagged = tagged.where(to_spark(_picked_rows(picked.pairs())))
        elif every_file_picked:
            # One broadcast, so one Spark job (a join by index, then one by file and index, took two)
            tagged = tagged.join(F.broadcast(picked.frame(spark, PICKED_SCHEMA)), _by_row_index(), "left_semi")
        else:
            on = _by_row_index()
            keep = F.col(_MARK_KEEP).isNull()
            if selective:
                keep = F.when(F.col(FILE).isin(sorted(selective)), F.col(_MARK_KEEP).eqNullSafe(F.lit(True))) \
                    .otherwise(keep)
            tagged = tagged.join(F.broadcast(marks.frame(spark, MARK_SCHEMA)), on, "left").where(keep) \
                .drop(_MARK_FILE, _MARK_ROW, _MARK_KEEP)

    return _identified(tagged, metadata, schema, files)


def _by_row_index() -> Any:
    """A row joined to its deletion-vector mark: by row index alone (a key of one long, cheap per row), the file
    name compared only for the rows whose index some mark has, in the join's condition. As a key the name was
    hashed for every row of every file and probed a table of generic keys, which cost more than the scan itself
    (10M rows against 10,000 marks: 1.14 s against 0.38 s, bench/README.md); two comparisons are no equi-join key
    to Spark."""
    same_file = (F.col(FILE) >= F.col(_MARK_FILE)) & (F.col(FILE) <= F.col(_MARK_FILE))
    return (F.col(_ROW_INDEX) == F.col(_MARK_ROW)) & same_file


# Rows a read picks by row index (those a deletion vector newly marks) up to this many are a filter of literals,
# where the join broadcasts them in a Spark job (0.1-0.3 s on the 2-core benchmark machine). Measured warm
# there, Spark parses and analyses such a filter of 1,000 numbers in about 70 ms and runs it for about 40 ms more;
# of 10,000 in 480 ms plus 250 ms: beyond a few thousand the join and its job are cheaper.
PICKED_AS_LITERALS_MAX = 1_000


# Spark evaluates an IN list of more than this many values as a hash set (spark.sql.optimizer.inSetConversionThreshold)
_IN_SET_OVER = 10


def _picked_rows(picked: list[tuple[str, int]]) -> exp.Expr:
    """A filter keeping exactly the (file name, row index) pairs of ``picked``: per file, its row indexes, the file
    compared first. Spark writes the numbers of a short IN list into the code it generates, so each refresh's rows
    would compile classes of their own (40-60 ms each, then the JIT's work); a short list is an array instead, which
    the code refers to, and a long one an IN list, which Spark turns into a hash set that the code refers to too."""
    by_file: dict[str, list[int]] = {}
    for name, row in picked:
        by_file.setdefault(name, []).append(row)
    return exp.or_(*(exp.and_(exp.EQ(this=column(FILE), expression=exp.Literal.string(name)),
                              _row_index_in(sorted(set(rows))))
                     for name, rows in sorted(by_file.items())))


def _row_index_in(rows: list[int]) -> exp.Expr:
    numbers = [exp.Literal.number(r) for r in rows]
    if len(numbers) > _IN_SET_OVER:
        return exp.In(this=column(_ROW_INDEX), expressions=numbers)
    return exp.func("array_contains", exp.Array(expressions=numbers), column(_ROW_INDEX))


def _identified(tagged: DataFrame, metadata: TableMetadata, schema: T.StructType, files: tuple[FileAction, ...],
                *extra: str) -> DataFrame:
    """A direct read of ``files`` tagged with ``__file`` and its row index, as the table's columns (partition values
    from the log), the row-tracking identity columns, and the columns named ``extra``: one projection of SQL texts
    (see ``map_expr``)."""
    mat_rid = metadata.materialized_row_id_column
    mat_rcv = metadata.materialized_row_commit_version_column
    file = column(FILE)
    base_row_id = try_element_at(map_expr([(unquote(f.file_name), f.base_row_id) for f in files], T.LongType()), file)
    fresh_id = exp.Paren(this=exp.Add(this=base_row_id, expression=column(_ROW_INDEX)))
    row_id = exp.func("coalesce", column(mat_rid), fresh_id) if mat_rid else fresh_id
    fresh: exp.Expr = exp.or_(column(mat_rid).is_(exp.null()), exp.EQ(this=column(mat_rid), expression=fresh_id)) \
        if mat_rid else exp.true()
    default_rcv = try_element_at(
        map_expr([(unquote(f.file_name), f.default_row_commit_version) for f in files], T.LongType()), file)
    rcv = exp.func("coalesce", column(mat_rcv), default_rcv) if mat_rcv else default_rcv
    projection = [
        *columns_sql(schema, set(metadata.partition_columns), files, file),
        exp.alias_(row_id, RID, quoted=True),
        exp.alias_(rcv, RCV, quoted=True),
        file,
        exp.alias_(fresh, FRESH, quoted=True),
        *[column(c) for c in extra],
    ]
    return tagged.selectExpr(*[to_spark(e) for e in projection])


def _direct_read(spark: Any, location: str, metadata: TableMetadata, schema: T.StructType,
                 files: tuple[FileAction, ...]) -> DataFrame:
    """The parquet columns of ``files`` (materialized row-tracking columns included), with ``__file`` and the row
    index."""
    raw = spark.read.schema(T.StructType(_read_fields(metadata, schema))).parquet(
        *[join(location, unquote(f.path)) for f in files])
    return raw.select("*", F.col("_metadata.file_name").alias(FILE), F.col("_metadata.row_index").alias(_ROW_INDEX))


def _read_fields(metadata: TableMetadata, schema: T.StructType) -> list[T.StructField]:
    """The fields a direct read takes from the parquet files: the table's but its partition columns, then the
    materialized row-tracking columns."""
    partition_columns = set(metadata.partition_columns)
    tracking = (metadata.materialized_row_id_column, metadata.materialized_row_commit_version_column)
    return [*[f for f in schema.fields if f.name not in partition_columns],
            *[T.StructField(c, T.LongType(), True) for c in tracking if c]]


def picked_on_driver(spark: Any, location: str, metadata: TableMetadata, rows: int) -> bool:
    """Whether ``rows`` rows that deletion vectors pick out of the table's files are read on the driver
    (``picked_rows``)."""
    return picked_rows.on_driver(spark, location, _read_fields(metadata, table_schema(metadata)), rows)


def _picked_on_driver(spark: Any, location: str, metadata: TableMetadata, schema: T.StructType,
                      files: tuple[FileAction, ...], marks: RowMarks, columns: frozenset[str] | None
                      ) -> DataFrame | None:
    """The rows the vectors of ``files`` newly mark, read by pyarrow on the driver (``picked_rows``) as a local
    relation with ``_direct_read``'s columns; None where that read does not apply (then Spark scans)."""
    fields = _read_fields(metadata, schema)
    if not picked_rows.on_driver(spark, location, fields, len(marks)):
        return None
    paths = {unquote(f.file_name): local_path(join(location, unquote(f.path))) for f in files}
    tracking = {c.lower() for c in (metadata.materialized_row_id_column,
                                    metadata.materialized_row_commit_version_column) if c}
    wanted = None if columns is None else frozenset({c.lower() for c in columns} | tracking)
    picked = [picked_rows.PickedFile(paths[m.file_name], m.file_name, m.rows) for m in marks.chunks]
    table = picked_rows.read(picked, fields, wanted, FILE, _ROW_INDEX)
    if table is None:
        return None
    # one chunk per column: PySpark loses the rows after an empty chunk (a file that gave no row) of such a table
    return spark.createDataFrame(table.combine_chunks(), T.StructType([
        *fields, T.StructField(FILE, T.StringType(), True), T.StructField(_ROW_INDEX, T.LongType(), True)]))


def appended_columns(spark: Any, location: str, metadata: TableMetadata, files: tuple[FileAction, ...],
                     columns: list[str]) -> Any:
    """The ``columns`` (table columns stored in the files: no partition column) of every row of ``files``, files an
    interval appended whole (no deletion vector), read by pyarrow on the driver as a ``pyarrow.Table``; None where
    that read does not apply (``picked_rows.on_driver``, a file it cannot read exactly, a row count the log does
    not give)."""
    by_name = {f.name.lower(): f for f in table_schema(metadata).fields}
    partitions = {c.lower() for c in metadata.partition_columns}
    if any(c.lower() not in by_name or c.lower() in partitions for c in columns) \
            or any(f.num_records is None or f.has_deletion_vector for f in files):
        return None
    fields = [by_name[c.lower()] for c in columns]
    if not picked_rows.on_driver(spark, location, fields, sum(f.num_records or 0 for f in files)):
        return None
    picked = [picked_rows.PickedFile(local_path(join(location, unquote(f.path))), f.file_name, None) for f in files]
    return picked_rows.read(picked, fields, None, FILE, _ROW_INDEX)


def rows_on_driver(spark: Any, location: str, metadata: TableMetadata, scan: FileScan,
                   columns: frozenset[str] | None) -> Any:
    """The rows a direct ``scan`` reads, read by pyarrow on the driver (``picked_rows``) as a ``pyarrow.Table`` of
    ``_read_fields``' columns (those not in ``columns``, lower case, NULL; None: every one), ``__rid`` and
    ``__fresh`` as ``_identified`` computes them; None where that read does not apply (partition columns, a file
    without its row count or base row id, ``picked_rows.on_driver``'s conditions, a file it cannot read exactly)."""
    import pyarrow as pa  # PySpark's own dependency for its SQL module
    import pyarrow.compute as pc

    schema = table_schema(metadata)
    fields = _read_fields(metadata, schema)
    mat_rid = metadata.materialized_row_id_column
    if not scan.direct or metadata.partition_columns or not mat_rid \
            or any(f.num_records is None or f.base_row_id is None for f in scan.files):
        return None
    rows_of = _vector_rows(spark, location)
    filters = {r.path: r for r in scan.row_filters}
    # per file the rows a selective filter picks, or those it reads whole less what its vector marks (None: all)
    wanted_rows = [(f, rows_of(r.only) - rows_of(r.minus) if r.selective else rows_of(r.minus))
                   if (r := filters.get(f.path)) is not None else (f, None) for f in scan.files]
    count = 0
    for f, rows in wanted_rows:
        every = f.num_records or 0
        count += every if rows is None else len(rows) if filters[f.path].selective else every - len(rows)
    if not picked_rows.on_driver(spark, location, fields, count):
        return None
    picked = [picked_rows.PickedFile(
        local_path(join(location, unquote(f.path))), unquote(f.file_name),
        rows if rows is None or filters[f.path].selective else FrozenBitMap64(range(f.num_records or 0)) - rows)
        for f, rows in wanted_rows]
    tracking = {c.lower() for c in (mat_rid, metadata.materialized_row_commit_version_column) if c}
    wanted = None if columns is None else frozenset({c.lower() for c in columns} | tracking)
    table = picked_rows.read(picked, fields, wanted, FILE, _ROW_INDEX)
    if table is None:
        return None
    names = table.column(FILE).combine_chunks().dictionary_encode()
    bases = {unquote(f.file_name): f.base_row_id for f in scan.files}
    base = pa.array([bases[n] for n in names.dictionary.to_pylist()], pa.int64()).take(names.indices)
    fresh_id = pc.add(base, table.column(_ROW_INDEX))
    materialized = table.column(mat_rid)
    table = table.append_column(RID, pc.coalesce(materialized, fresh_id))
    return table.append_column(FRESH, pc.or_kleene(pc.is_null(materialized), pc.equal(materialized, fresh_id)))


AT_START, AT_END = "__at_start", "__at_end"
_GONE_START, _GONE_END = "__gone_at_start", "__gone_at_end"
ENDS_MARK_SCHEMA = T.StructType([T.StructField(_MARK_FILE, T.StringType(), False),
                                 T.StructField(_MARK_ROW, T.LongType(), False),
                                 T.StructField(_GONE_START, T.BooleanType(), False),
                                 T.StructField(_GONE_END, T.BooleanType(), False)])


# Decoded vectors kept per process, by table and vector id (a vector never changes once written): a file's vector
# at one refresh's end is the one its next refresh subtracts, and a read's size is counted from the rows it picks
# before the same vectors are decoded again to pick them (``picked_count``). Bounded by the rows they mark.
DECODED_ROWS_MAX = 20_000_000
_decoded: OrderedDict[tuple[str, str], FrozenBitMap64] = OrderedDict()
_decoded_rows = 0
_decoded_lock = threading.Lock()


def _vector_rows(spark: Any, location: str) -> Callable[[dv.DeletionVectorDescriptor | None], FrozenBitMap64]:
    """Decodes a deletion vector of the table at ``location`` into the row indexes it marks (none for no vector)."""
    storage = Storage(spark, location)

    def rows_of(descriptor: dv.DeletionVectorDescriptor | None) -> FrozenBitMap64:
        global _decoded_rows
        if descriptor is None:
            return FrozenBitMap64()
        key = (location, descriptor.unique_id)
        with _decoded_lock:
            rows = _decoded.get(key)
            if rows is not None:
                _decoded.move_to_end(key)
                return rows
        rows = FrozenBitMap64(dv.read_rows(descriptor, location, storage.read_bytes))
        with _decoded_lock:
            if key not in _decoded:
                _decoded[key] = rows
                _decoded_rows += len(rows)
            while _decoded_rows > DECODED_ROWS_MAX and len(_decoded) > 1:
                _decoded_rows -= len(_decoded.popitem(last=False)[1])
        return rows

    return rows_of


def vectors_decoded() -> frozenset[tuple[str, str]]:
    """The keys of the vectors decoded and kept now, for ``forget_vectors_since``."""
    with _decoded_lock:
        return frozenset(_decoded)


def forget_vectors_since(before: frozenset[tuple[str, str]]) -> None:
    """Drop the decoded vectors not in ``before`` (``vectors_decoded``): as ``shared_reads.forget_since``, for a
    benchmark whose passes over one interval each start from the same state."""
    global _decoded_rows
    with _decoded_lock:
        for key in [k for k in _decoded if k not in before]:
            _decoded_rows -= len(_decoded.pop(key))


def picked_count(spark: Any, location: str, row_filter: RowFilter) -> int:
    """How many rows a selective ``row_filter`` reads: those its ``only`` vector marks and its ``minus`` does not
    (decoded once, ``_vector_rows``). A file's vector holds every row ever deleted from it, so its cardinality
    alone counts the file's whole history, not what one interval picks."""
    rows_of = _vector_rows(spark, location)
    return len(rows_of(row_filter.only) - rows_of(row_filter.minus)) if row_filter.only is not None else 0


@dataclass(frozen=True)
class MarkedRows:
    """Rows of one data file by their row indexes (a bitmap), with the flags every one of them carries."""

    file_name: str
    rows: AbstractBitMap64
    flags: tuple[bool, ...]


@dataclass(frozen=True)
class RowMarks:
    """The rows deletion vectors mark, per file: made a local relation column by column from the bitmaps, never
    a Python tuple per row (a vector holds every row ever deleted from its file, which can be millions)."""

    chunks: list[MarkedRows]

    def __len__(self) -> int:
        return sum(len(c.rows) for c in self.chunks)

    def pairs(self) -> list[tuple[str, int]]:
        """(file name, row index) per marked row, for a few rows."""
        return [(c.file_name, r) for c in self.chunks for r in c.rows]

    def frame(self, spark: Any, schema: T.StructType) -> DataFrame:
        """The rows as a local relation of ``schema`` (``rows_for_plans``): file name, row index, then one column
        per flag."""
        counts = [len(c.rows) for c in self.chunks]
        names = np.repeat(np.array([c.file_name for c in self.chunks], dtype=object), counts)
        rows = np.concatenate([np.frombuffer(c.rows.to_array(), dtype=np.uint64).astype(np.int64)
                               for c in self.chunks]) if self.chunks else np.array([], dtype=np.int64)
        flags = [np.repeat(np.array([c.flags[i] for c in self.chunks], dtype=bool), counts)
                 for i in range(len(schema.fields) - 2)]
        return rows_for_plans(local_columns(spark, [names, rows, *flags], schema), len(rows))


def _not_in(files: tuple[FileAction, ...], paths: set[str]) -> Column:
    names = sorted(unquote(f.file_name) for f in files if f.path in paths)
    return ~F.col(FILE).isin(names) if names else F.lit(True)


def scan_ends(spark: Any, location: str, metadata: TableMetadata, start: tuple[FileAction, ...],
              end: tuple[FileAction, ...]) -> DataFrame:
    """Two versions of a table in one read: every row the files of ``start`` or of ``end`` (each a version's file
    list, with its deletion vectors) hold there, once, with ``__at_start`` and ``__at_end`` saying which version
    holds it; columns as ``scan_files``. A file both versions list is read once: with deletion vectors a DELETE
    between them adds the same file again with a larger vector, so the read costs what one version's does.
    Direct reads only (see the module docstring); a file both list must carry the same row ids in both, and one
    of them at least one file."""
    schema = table_schema(metadata)
    at_start, at_end = {f.path: f for f in start}, {f.path: f for f in end}
    files = tuple({**at_start, **at_end}.values())
    if not files:
        raise ValueError("a read of two versions needs a file at one of them")
    rows_of = _vector_rows(spark, location)
    chunks: list[MarkedRows] = []
    for path in at_start.keys() | at_end.keys():
        s, e = at_start.get(path), at_end.get(path)
        gone_start = rows_of(s.deletion_vector if s is not None else None)
        gone_end = rows_of(e.deletion_vector if e is not None else None)
        name = unquote(path.rsplit("/", 1)[-1])
        # a version that does not list the file holds none of its rows
        parts = ((gone_start & gone_end, True, True), (gone_start - gone_end, True, e is None),
                 (gone_end - gone_start, s is None, True))
        chunks += [MarkedRows(name, rows, (start, end)) for rows, start, end in parts if rows]
    marks = RowMarks(chunks)
    tagged = _direct_read(spark, location, metadata, schema, files)
    # A file only one version lists (appended, or rewritten by copy-on-write) is left out of the other; usually
    # few, so a set lookup per row (IN becomes a hash set) rather than a map of every file.
    in_start, in_end = _not_in(files, at_end.keys() - at_start.keys()), _not_in(files, at_start.keys() - at_end.keys())
    if marks.chunks:
        on = (F.col(FILE) == F.col(_MARK_FILE)) & (F.col(_ROW_INDEX) == F.col(_MARK_ROW))
        tagged = tagged.join(F.broadcast(marks.frame(spark, ENDS_MARK_SCHEMA)), on, "left")
        unmarked = F.col(_MARK_FILE).isNull()
        in_start = F.when(unmarked, in_start).otherwise(~F.col(_GONE_START))
        in_end = F.when(unmarked, in_end).otherwise(~F.col(_GONE_END))
    tagged = tagged.select("*", in_start.alias(AT_START), in_end.alias(AT_END)).where(
        F.col(AT_START) | F.col(AT_END))
    return _identified(tagged, metadata, schema, files, AT_START, AT_END)


def without_marked_rows(spark: Any, location: str, raw: DataFrame, files: tuple[FileAction, ...]) -> DataFrame:
    """``raw``, a parquet read of ``files``, without the rows their deletion vectors mark (its own columns)."""
    filters = tuple(RowFilter(f.path, f.deletion_vector) for f in files if f.deletion_vector is not None)
    marks, _, _ = _row_marks(spark, location, filters)
    if marks is None:
        return raw
    tagged = raw.select("*", F.col("_metadata.file_name").alias(FILE), F.col("_metadata.row_index").alias(_ROW_INDEX))
    on = (F.col(FILE) == F.col(_MARK_FILE)) & (F.col(_ROW_INDEX) == F.col(_MARK_ROW))
    return tagged.join(F.broadcast(marks.frame(spark, MARK_SCHEMA)), on, "left_anti") \
        .select(*[F.col(quote_column(c)) for c in raw.columns])


PICKED_SCHEMA = T.StructType([T.StructField(_MARK_FILE, T.StringType(), False),
                              T.StructField(_MARK_ROW, T.LongType(), False)])
MARK_SCHEMA = T.StructType([T.StructField(_MARK_FILE, T.StringType(), False),
                            T.StructField(_MARK_ROW, T.LongType(), False),
                            T.StructField(_MARK_KEEP, T.BooleanType(), False)])


def _row_marks(spark: Any, location: str, filters: tuple[RowFilter, ...]
               ) -> tuple[RowMarks | None, set[str], set[str]]:
    """The deletion vectors of ``filters`` decoded into marked rows (None: no filter), each flagged ``keep``: false
    for a row a file's vector marks deleted, true for a row a selective filter reads; then the file names of the
    selective filters (their other rows are not read) and the paths whose filter keeps no row at all."""
    if not filters:
        return None, set(), set()
    rows_of = _vector_rows(spark, location)
    chunks: list[MarkedRows] = []
    selective: set[str] = set()
    empty: set[str] = set()
    for f in filters:
        name = unquote(f.path.rsplit("/", 1)[-1])
        if f.selective:
            wanted = rows_of(f.only) - rows_of(f.minus)  # in C: the history both vectors hold is never listed
            selective.add(name)
            if not wanted:
                empty.add(f.path)
            chunks.append(MarkedRows(name, wanted, (True,)))
        else:
            chunks.append(MarkedRows(name, rows_of(f.minus), (False,)))
    return RowMarks([c for c in chunks if c.rows]), selective, empty


def change_data_frame(spark: Any, location: str, metadata: TableMetadata,
                      files: tuple[tuple[FileAction, int], ...]) -> DataFrame:
    """The raw rows of Delta change data (``cdc``) files: their parquet columns (the table's but partition columns,
    the materialized row-tracking columns, ``_change_type``) and ``__file``; ``change_rows`` makes them changes."""
    schema = table_schema(metadata)
    mat_rid = metadata.materialized_row_id_column
    mat_rcv = metadata.materialized_row_commit_version_column
    assert mat_rid and mat_rcv, "change data rows carry ids only with row tracking"
    partition_columns = set(metadata.partition_columns)
    read_fields = [f for f in schema.fields if f.name not in partition_columns]
    read_fields += [T.StructField(mat_rid, T.LongType(), True), T.StructField(mat_rcv, T.LongType(), True),
                    T.StructField(CHANGE_TYPE, T.StringType(), True)]
    raw = spark.read.schema(T.StructType(read_fields)).parquet(*[join(location, unquote(f.path)) for f, _ in files])
    return raw.selectExpr("*", f"_metadata.file_name AS {FILE}")


def change_rows(location: str, metadata: TableMetadata, files: tuple[tuple[FileAction, int], ...],
                frame: str) -> exp.Select:
    """The rows of ``change_data_frame`` (the table ``frame``), each with the version of the commit that wrote it:
    table columns, ``__rid``, ``__rcv``, ``__file``, ``_change_type``.

    Delta materializes the row-tracking id and row commit version of the rows a commit deleted and of update
    preimages, and the id (not the version) of update postimages: their version is the commit's own. A missing id
    or version where Delta writes one would make the change set wrong, so it stops the read instead. ``insert``
    rows (of a MERGE) have neither: their ids are those of the data file that holds them, so ``__rid`` is null."""
    schema = table_schema(metadata)
    mat_rid = metadata.materialized_row_id_column
    mat_rcv = metadata.materialized_row_commit_version_column
    assert mat_rid and mat_rcv, "change data rows carry ids only with row tracking"
    missing = exp.Anonymous(this="raise_error", expressions=[exp.Literal.string(
        f"a change data file of {location} holds a changed row without its row id or version; set "
        f"spark.dtables.changeDataFiles=false to read the data files instead")])
    change_type, file = column(CHANGE_TYPE), column(FILE)
    committed = try_element_at(map_expr([(unquote(f.file_name), v) for f, v in files], T.LongType()), file)
    row_id = exp.func("coalesce", column(mat_rid), exp.case().when(exp.NEQ(this=change_type,
                                                                         expression=exp.Literal.string("insert")),
                                                                  missing))
    born_here = change_type.isin(exp.Literal.string("insert"), exp.Literal.string("update_postimage"))
    version = exp.func("coalesce", column(mat_rcv), exp.case().when(born_here, committed).else_(missing))
    actions = tuple(f for f, _ in files)
    return exp.select(
        *columns_sql(schema, set(metadata.partition_columns), actions, file),
        exp.alias_(row_id, RID, quoted=True),
        exp.alias_(version, RCV, quoted=True),
        file,
        change_type,
    ).from_(frame)


def column(name: str) -> exp.Column:
    """A column reference of a statement, quoted as Spark needs any name."""
    return exp.column(name, quoted=True)


def columns_sql(schema: T.StructType, partition_columns: set[str], files: tuple[FileAction, ...],
                file: exp.Expr) -> list[exp.Expr]:
    """The table's columns of a direct parquet read as statement expressions: partition values come from each
    file's log action (``file``: the column holding the file's name)."""
    out: list[exp.Expr] = []
    for f in schema.fields:
        if f.name in partition_columns:
            pairs = [(unquote(a.file_name), dict(a.partition_values).get(f.name)) for a in files]
            value = try_element_at(map_expr(pairs, T.StringType()), file)
            target = exp.DataType.build(f.dataType.simpleString(), dialect="spark", udt=True)
            out.append(exp.alias_(exp.cast(value, target), f.name, quoted=True))
        else:
            out.append(column(f.name))
    return out


def _scan_delta(spark: Any, location: str, schema: T.StructType, scan: FileScan) -> DataFrame:
    df = spark.read.format("delta").option("versionAsOf", scan.version).load(location)
    meta = F.col("_metadata")
    return df.where(meta.getField("file_name").isin(list(scan.file_names))).select(
        *[F.col(quote_column(f.name)).cast(f.dataType).alias(f.name) for f in schema.fields],
        meta.getField("row_id").alias(RID),
        meta.getField("row_commit_version").alias(RCV),
        meta.getField("file_name").alias(FILE),
        (meta.getField("row_id") == meta.getField("base_row_id") + meta.getField("row_index")).alias(FRESH),
    )
