"""Resolving a dynamic table's sources at a data timestamp, from Delta logs and the state store only (no Spark job).

A base table's version at ``T`` is its latest commit with a commit timestamp at or before ``T`` (Delta's own
time-travel rule, as ``dtables.changes.log`` computes it). An upstream dynamic table's version at ``T`` is the
version its own refresh to ``T`` left (recorded in its history), never a wall-clock lookup: the upstream commits
*after* ``T``, yet holds the data as of ``T``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass

from dtables.catalog import TABLE_KINDS
from dtables.catalog.warehouse import Warehouse
from dtables.changes.log import DeltaLog
from dtables.changes.window import changed_window, past_unchanged
from dtables.dynamic import definition as defs
from dtables.dynamic import history
from dtables.catalog import STATE_PREFIX
from dtables.dynamic.errors import DynamicTableError


@dataclass(frozen=True)
class SourceVersion:
    """One source of a refresh: where it lives, the version to read, and what identifies its table and schema."""

    name: str
    location: str
    version: int
    identity: str  # "<delta table id>:<schema hash>": changes when the table is re-created or its schema changes
    schema: tuple[tuple[str, str], ...]  # (column, type) at `version`
    is_dynamic: bool


class SourceMissing(DynamicTableError):
    pass


def _type_name(t: object) -> str:
    if isinstance(t, dict):
        return str(t.get("type", "struct"))
    return {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint"}.get(str(t), str(t))


def describe_version(name: str, log: DeltaLog, version: int, is_dynamic: bool) -> SourceVersion:
    meta = log.metadata_at(version)
    fields = json.loads(meta.schema_json)["fields"]
    # A dynamic table's hidden columns (row id, aggregate state) are not part of what its readers see.
    schema = tuple((f["name"], _type_name(f["type"])) for f in fields
                   if not (is_dynamic and f["name"].startswith(STATE_PREFIX)))
    identity = f"{meta.table_id}:{hashlib.sha256(meta.schema_json.encode()).hexdigest()[:16]}"
    return SourceVersion(name, log.location, version, identity, schema, is_dynamic)


def version_at(log: DeltaLog, at: dt.datetime) -> int | None:
    """The latest version committed at or before ``at``, or None when the table did not exist yet."""
    target = int(at.timestamp() * 1000)
    eligible = [v for v, ts in log.commit_timestamps().items() if ts <= target]
    return max(eligible) if eligible else None


def read_window(session: Warehouse, frontier: dict[str, int], identities: dict[str, str],
                sources: dict[str, SourceVersion]) -> tuple[dict[str, int], dict[str, SourceVersion]]:
    """The versions a refresh reads each source's changes between: without the commits at either end of
    ``(frontier, source version]`` that change no row (``dtables.changes.window``), so a compaction of a source
    (the daemon compacts right after a refresh, users run OPTIMIZE) does not make the read take the whole table as
    deleted and inserted again. The end is the reader's next frontier: the same contents as the source's version. A
    source re-created or with another schema since the frontier (``identities``) is left alone: the refresh
    reports it."""
    starts, ends = dict(frontier), dict(sources)
    for name, src in sources.items():
        old = frontier.get(name)
        if old is None or old >= src.version or identities.get(name) != src.identity:
            continue
        log = DeltaLog(session.spark, src.location, name)
        starts[name], end = changed_window(log, old, src.version)
        if end != src.version:
            ends[name] = describe_version(name, log, end, src.is_dynamic)
    return starts, ends


def resolve_source(session: Warehouse, owner: str, source: str, at: dt.datetime) -> SourceVersion:
    """The version of ``source`` that ``owner``'s refresh to ``at`` reads. Raises SourceMissing with the cause."""
    obj = session.catalog.lookup(source)
    if obj is None:
        renamed = _renamed_to(session, owner, source)
        if renamed is not None:
            raise SourceMissing(
                f"dynamic table {owner}: its source {source} was renamed to {renamed}; a dynamic table reads its "
                f"sources by name (as in Snowflake), so it fails until a table named {source} exists again: rename "
                f"it back, or re-create {owner} over {renamed} (CREATE OR REPLACE DYNAMIC TABLE)")
        raise SourceMissing(f"dynamic table {owner}: its source {source} does not exist (was it dropped?)")
    if obj["kind"] not in ("TABLE", "DYNAMIC_TABLE"):
        raise SourceMissing(f"dynamic table {owner}: its source {source} is a {obj['kind'].lower()}, not a table")
    log = DeltaLog(session.spark, obj["location"], source)
    if not log.exists:
        raise SourceMissing(f"dynamic table {owner}: its source {source} has no Delta log at {obj['location']}")
    if obj["kind"] == "DYNAMIC_TABLE":
        version = history.version_at_data_timestamp(session.store, source, at)
        if version is None:
            raise SourceMissing(
                f"dynamic table {owner}: its upstream dynamic table {source} has no successful refresh to data "
                f"timestamp {at.isoformat()}; refresh it first (ALTER DYNAMIC TABLE {owner} REFRESH does)")
        return describe_version(source, log, past_unchanged(log, version), True)
    version = version_at(log, at)
    if version is None:
        raise SourceMissing(f"dynamic table {owner}: its source {source} did not exist yet at {at.isoformat()}")
    return describe_version(source, log, version, False)


def _renamed_to(session: Warehouse, owner: str, source: str) -> str | None:
    """The table that ``source``, missing now, was renamed to: the catalog table holding the Delta table ``owner``
    last read under that name (same table id). Only on this failure path, so reading a few logs is fine."""
    d = defs.load(session.store, owner)
    identity = d.source_identities.get(source) if d is not None else None
    if not identity:
        return None
    table_id = identity.split(":")[0]
    for obj in session.catalog.objects():
        if obj["kind"] not in TABLE_KINDS:
            continue
        try:
            log = DeltaLog(session.spark, obj["location"], obj["name"])
            if log.exists and log.metadata_at(log.latest_version).table_id == table_id:
                return str(obj["name"])
        except Exception:  # noqa: BLE001, S112 - an unreadable table is simply not the one
            continue
    return None
