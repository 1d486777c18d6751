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
  action too. Valid only without deletion vectors and column mapping.
- Delta: a time-travel scan at the plan's version filtered on ``_metadata.file_name``, using Delta's own
  ``_metadata.row_id`` / ``row_commit_version``. Always correct, but reads the whole snapshot's files.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dtables.changes.log import FileAction, TableMetadata
from dtables.changes.shapes import FileScan
from dtables.changes.storage import join

RID, RCV, FILE, FRESH = "__rid", "__rcv", "__file", "__fresh"
CHANGE_TYPE = "_change_type"  # the column of Delta's change data files: insert, delete, update_pre/postimage


def table_schema(metadata: TableMetadata) -> T.StructType:
    schema = T.StructType.fromJson(json.loads(metadata.schema_json))
    # Delta keeps column metadata (comments, generation expressions, mapping ids); the change read does not.
    return T.StructType([T.StructField(f.name, f.dataType, f.nullable) for f in schema.fields])


def _map_literal(pairs: list[tuple[str, Any]], value_type: T.DataType) -> Column:
    if not pairs:
        return F.create_map().cast(T.MapType(T.StringType(), value_type))
    return F.create_map(*[x for k, v in pairs for x in (F.lit(k), F.lit(v).cast(value_type))])


def _per_file(files: tuple[FileAction, ...], value: Any, value_type: T.DataType) -> Column:
    """An expression giving, for each row, ``value(file)`` of the file it was read from."""
    pairs = [(unquote(f.file_name), value(f)) for f in files]
    return F.try_element_at(_map_literal(pairs, value_type), F.col("_metadata.file_name"))


def scan_files(spark: Any, location: str, metadata: TableMetadata, scan: FileScan) -> DataFrame:
    """Rows of ``scan``'s files: table columns (schema of ``metadata``, in order), ``__rid``, ``__rcv``,
    ``__file``, ``__fresh``."""
    schema = table_schema(metadata)
    if scan.direct:
        return _scan_direct(spark, location, metadata, schema, scan)
    return _scan_delta(spark, location, schema, scan)


def _scan_direct(
    spark: Any, location: str, metadata: TableMetadata, schema: T.StructType, scan: FileScan
) -> DataFrame:
    partition_columns = set(metadata.partition_columns)
    mat_rid = metadata.materialized_row_id_column
    mat_rcv = metadata.materialized_row_commit_version_column
    read_fields = [f for f in schema.fields if f.name not in partition_columns]
    read_fields += [T.StructField(c, T.LongType(), True) for c in (mat_rid, mat_rcv) if c]
    paths = [join(location, unquote(f.path)) for f in scan.files]
    raw = spark.read.schema(T.StructType(read_fields)).parquet(*paths)

    base_row_id = _per_file(scan.files, lambda f: f.base_row_id, T.LongType())
    fresh_id = base_row_id + F.col("_metadata.row_index")
    row_id = F.coalesce(F.col(f"`{mat_rid}`"), fresh_id) if mat_rid else fresh_id
    fresh = (F.col(f"`{mat_rid}`").isNull() | (F.col(f"`{mat_rid}`") == fresh_id)) if mat_rid else F.lit(True)
    default_rcv = _per_file(scan.files, lambda f: f.default_row_commit_version, T.LongType())
    rcv = F.coalesce(F.col(f"`{mat_rcv}`"), default_rcv) if mat_rcv else default_rcv

    return raw.select(
        *_columns(schema, partition_columns, scan.files),
        row_id.alias(RID),
        rcv.alias(RCV),
        F.col("_metadata.file_name").alias(FILE),
        fresh.alias(FRESH),
    )


def scan_change_files(spark: Any, location: str, metadata: TableMetadata, files: tuple[FileAction, ...]) -> DataFrame:
    """Rows of Delta change data (``cdc``) files: table columns, ``__rid``, ``__rcv``, ``__file``, ``_change_type``.

    Delta writes the deleted rows and update preimages there with their row-tracking id and row commit version
    materialized; a missing id would make the change set wrong, so it stops the read instead."""
    schema = table_schema(metadata)
    mat_rid = metadata.materialized_row_id_column
    mat_rcv = metadata.materialized_row_commit_version_column
    assert mat_rid and mat_rcv, "change data rows carry ids only with row tracking"
    partition_columns = set(metadata.partition_columns)
    read_fields = [f for f in schema.fields if f.name not in partition_columns]
    read_fields += [T.StructField(mat_rid, T.LongType(), True), T.StructField(mat_rcv, T.LongType(), True),
                    T.StructField(CHANGE_TYPE, T.StringType(), True)]
    raw = spark.read.schema(T.StructType(read_fields)).parquet(*[join(location, unquote(f.path)) for f in files])
    missing = F.raise_error(F.lit(f"a change data file of {location} holds a deleted row without its row id; "
                                  f"set spark.dtables.changeDataFiles=false to read the data files instead"))
    return raw.select(
        *_columns(schema, partition_columns, files),
        F.coalesce(F.col(f"`{mat_rid}`"), missing).alias(RID),
        F.coalesce(F.col(f"`{mat_rcv}`"), missing).alias(RCV),
        F.col("_metadata.file_name").alias(FILE),
        F.col(CHANGE_TYPE),
    )


def _columns(schema: T.StructType, partition_columns: set[str], files: tuple[FileAction, ...]) -> list[Column]:
    """The table's columns of a direct parquet read: partition values come from each file's log action."""
    columns = []
    for f in schema.fields:
        if f.name in partition_columns:
            value = _per_file(files, lambda a, name=f.name: dict(a.partition_values).get(name), T.StringType())
            columns.append(value.cast(f.dataType).alias(f.name))
        else:
            columns.append(F.col(f"`{f.name}`"))
    return columns


def _scan_delta(spark: Any, location: str, schema: T.StructType, scan: FileScan) -> DataFrame:
    df = spark.read.format("delta").option("versionAsOf", scan.version).load(location)
    meta = F.col("_metadata")
    return df.where(meta.getField("file_name").isin(list(scan.file_names))).select(
        *[F.col(f"`{f.name}`").cast(f.dataType).alias(f.name) for f in schema.fields],
        meta.getField("row_id").alias(RID),
        meta.getField("row_commit_version").alias(RCV),
        meta.getField("file_name").alias(FILE),
        (meta.getField("row_id") == meta.getField("base_row_id") + meta.getField("row_index")).alias(FRESH),
    )
