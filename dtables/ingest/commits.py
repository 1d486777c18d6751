"""A channel's commits in the Delta log: the write itself and what reading the log back tells.

Every commit of a channel is one Delta append made with Delta's idempotent transaction identifiers:
``txnAppId`` = the channel's app id (``dtables-ingest:<channel>:<unique id of this incarnation>``) and
``txnVersion`` = ``epoch << 32 | n`` (the n-th commit of the handle opened at ``epoch``). Its ``userMetadata``
repeats those and adds the offset token and row counts, so the committed token can be rebuilt from the log.

Three kinds of commit:
- ROWS: buffered rows (possibly none, when only the offset token moved) and the token after them.
- FENCE: written when a channel is reopened, with no rows, at ``txnVersion = new epoch << 32``. Delta refuses any
  later write of the app with a lower txnVersion (skipped, or a conflict if it raced with the fence), so once the
  fence is in the log no handle of an older epoch, in any process, can commit again.
- DROP: the same fence when a channel is dropped; a later channel of that name starts afresh.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import types as T

from dtables.changes.idempotent import LoggedCommit, idempotent_session, logged_commits
from dtables.spark.sessions import rows_frame

METADATA_KEY = "dtables_ingest"
EPOCH_SHIFT = 32


def txn_version(epoch: int, n: int) -> int:
    return (epoch << EPOCH_SHIFT) | n


def epoch_of(version: int) -> int:
    return version >> EPOCH_SHIFT


@dataclass(frozen=True)
class ChannelCommit:
    """The ``userMetadata`` of a channel commit. ``rows_total``: rows committed by the channel up to this one."""

    table: str
    channel: str
    app: str
    seq: int
    kind: str  # ROWS | FENCE | DROP
    token: str | None
    rows: int
    rows_total: int

    @property
    def epoch(self) -> int:
        return epoch_of(self.seq)

    def to_json(self) -> str:
        return json.dumps({METADATA_KEY: {
            "table": self.table, "channel": self.channel, "app": self.app, "seq": self.seq, "kind": self.kind,
            "token": self.token, "rows": self.rows, "rows_total": self.rows_total}}, sort_keys=True)

    @staticmethod
    def from_json(text: str | None) -> ChannelCommit | None:
        try:
            body = json.loads(text or "")[METADATA_KEY]
            return ChannelCommit(body["table"], body["channel"], body["app"], int(body["seq"]), body["kind"],
                                 body["token"], int(body["rows"]), int(body["rows_total"]))
        except (ValueError, KeyError, TypeError):
            return None


@dataclass(frozen=True)
class FoundCommit:
    """A channel commit found in the log, with its table version and commit time (ISO UTC)."""

    version: int
    meta: ChannelCommit
    committed_at: str


def _found(commit: LoggedCommit) -> FoundCommit | None:
    meta = ChannelCommit.from_json(commit.user_metadata)
    if meta is None:
        return None
    millis = int(commit.info.get("timestamp") or 0)
    at = dt.datetime.fromtimestamp(millis / 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return FoundCommit(commit.version, meta, at)


@dataclass(frozen=True)
class AppInLog:
    """The commits of one app found in the log (oldest first)."""

    commits: tuple[FoundCommit, ...]

    @property
    def newest(self) -> FoundCommit | None:
        return self.commits[-1] if self.commits else None

    @property
    def newest_rows(self) -> FoundCommit | None:
        """The newest commit that carried rows or a token (not a fence)."""
        return next((c for c in reversed(self.commits) if c.meta.kind == "ROWS"), None)

    def at(self, seq: int) -> FoundCommit | None:
        return next((c for c in self.commits if c.meta.seq == seq), None)


def read_app(spark: Any, location: str, app: str, after: int) -> AppInLog:
    """The app's commits after version ``after`` (one pass over the log's newer commits)."""
    found = []
    for commit in logged_commits(spark, location, after):
        if app in commit.txns:
            one = _found(commit)
            if one is not None and one.meta.app == app:
                found.append(one)
    return AppInLog(tuple(found))


def find_channel(spark: Any, location: str, table: str, channel: str) -> AppInLog:
    """The newest incarnation of ``channel`` in the whole log, read newest first (used when the store has no row:
    a new channel, or a store that was lost): its newest commit and its newest ROWS commit (or a DROP alone)."""
    newest: FoundCommit | None = None
    for commit in logged_commits(spark, location, newest_first=True):
        if not any(app.startswith(f"dtables-ingest:{channel}:") for app in commit.txns):
            continue
        found = _found(commit)
        if found is None or found.meta.channel != channel or found.meta.table != table:
            continue
        if newest is None:
            newest = found
            if found.meta.kind == "DROP":
                return AppInLog((found,))
        if found.meta.app == newest.meta.app and found.meta.kind == "ROWS":
            return AppInLog((found, newest) if found is not newest else (found,))
    return AppInLog((newest,) if newest is not None else ())


def write_schema(schema: T.StructType) -> T.StructType:
    """The table's columns for the DataFrame written: names and types only (the converter enforced NOT NULL and
    lengths already; Delta checks them again on write)."""
    return T.StructType([T.StructField(f.name, f.dataType, True) for f in schema.fields])


def write(spark: Any, location: str, schema: T.StructType, rows: Sequence[tuple[Any, ...]],
          meta: ChannelCommit) -> None:
    """Append ``rows`` (in order, as one data file) in one commit that is transaction ``meta.app``/``meta.seq``.

    Delta skips the write if the app already has that sequence or a later one in the log, so calling this again
    after a failure never applies the rows twice.
    """
    with idempotent_session(spark, meta.app, meta.seq, meta.to_json()) as clone:
        df = rows_frame(clone, list(rows), write_schema(schema))  # the converter checked every value
        df.coalesce(1).write.format("delta").mode("append").save(location)
