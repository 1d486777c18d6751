"""The table a channel writes: its Delta location, its schema (from the log, no Spark job) and the row converter."""

from __future__ import annotations

import datetime as dt
import json
import zoneinfo
from dataclasses import dataclass

from pyspark.sql import types as T

from dtables.catalog import normalize
from dtables.catalog.warehouse import Warehouse
from dtables.changes import resolve_location
from dtables.changes.errors import NotADeltaTable
from dtables.changes.log import DeltaLog
from dtables.ingest.convert import ConvertOptions, RowConverter, UnsupportedType
from dtables.ingest.errors import IngestError

# Columns Delta fills itself; seed 004 refuses tables with them (AUTOINCREMENT/IDENTITY, defaults).
_COMPUTED = ("delta.generationExpression", "delta.identity.start", "CURRENT_DEFAULT")


@dataclass(frozen=True)
class Target:
    name: str
    location: str
    schema: T.StructType
    converter: RowConverter


def _location(warehouse: Warehouse, name: str) -> str:
    obj = warehouse.catalog.lookup(name)
    if obj is not None:
        if obj["kind"] == "DYNAMIC_TABLE":
            raise IngestError(f"cannot open a channel on {name}: it is a dynamic table, which only its refreshes "
                              "write; ingest into one of its source tables instead")
        if obj["kind"] != "TABLE":
            raise IngestError(f"cannot open a channel on {name}: it is a {obj['kind'].lower()}, not a table")
        return str(obj["location"]).rstrip("/")
    try:
        return resolve_location(warehouse.spark, name)
    except NotADeltaTable as e:
        raise IngestError(f"cannot open a channel on {name}: {e}") from e


def _time_zone(warehouse: Warehouse) -> dt.tzinfo:
    name = warehouse.spark.conf.get("spark.sql.session.timeZone")
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return dt.timezone.utc


def resolve(warehouse: Warehouse, table: str) -> Target:
    """The target of a channel on ``table``; IngestError when it is not a Delta table rows can be inserted into."""
    name = normalize(table)
    location = _location(warehouse, name)
    log = DeltaLog(warehouse.spark, location)
    if not log.exists:
        raise IngestError(f"cannot open a channel on {name}: no Delta table at {location}")
    schema = T.StructType.fromJson(json.loads(log.metadata_at(log.latest_version).schema_json))
    for f in schema.fields:
        computed = [k for k in _COMPUTED if k in (f.metadata or {})]
        if computed:
            raise IngestError(f"cannot open a channel on {name}: column {f.name} is computed by Delta "
                              f"({computed[0]}); streaming ingestion fills every column itself")
    try:
        converter = RowConverter(schema, ConvertOptions(_time_zone(warehouse)))
    except UnsupportedType as e:
        raise IngestError(f"cannot open a channel on {name}: {e}") from e
    return Target(name, location, schema, converter)
