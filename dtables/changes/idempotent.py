"""Delta's idempotent writes, for every dtables writer that must apply a commit at most once.

A write made with ``txnAppId`` = A and ``txnVersion`` = N records a ``txn`` (SetTransaction) action in its commit;
Delta skips any later write with the same A and a version <= the recorded one, and a concurrent commit of the same
A makes the loser fail with a conflict. These settings, and the commit's ``userMetadata``, are options of the Spark
session, so each write runs on a session of its own (``dtables.spark.sessions.own_session``: same cluster and catalog,
private settings): writers in one process never see each other's settings.

The log answers afterwards what a crash left unknown: :func:`logged_commits` lists commits with their ``txn``
actions and ``commitInfo`` (which carries the user metadata), :func:`committed` says whether A/N is in the log.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from dtables.changes.log import DeltaLog
from dtables.changes.storage import Storage
from dtables.spark.sessions import own_session

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


@contextmanager
def idempotent_session(spark: Any, app: str, version: int, user_metadata: str | None = None) -> Iterator[Any]:
    """A session of its own whose next Delta write is transaction ``app``/``version`` with ``user_metadata``."""
    with own_session(spark) as clone:
        yield make_idempotent(clone, app, version, user_metadata)


def make_idempotent(clone: Any, app: str, version: int, user_metadata: str | None = None) -> Any:
    """Configure a session of one writer's own (a clone) so its next Delta write is transaction ``app``/``version``."""
    clone.conf.set(TXN_APP_ID, app)
    clone.conf.set(TXN_VERSION, str(version))
    if user_metadata is not None:
        clone.conf.set(USER_METADATA, user_metadata)
    return clone


@dataclass(frozen=True)
class LoggedCommit:
    """One commit of a table's log: its version, its ``txn`` actions (appId -> version) and its ``commitInfo``."""

    version: int
    txns: Mapping[str, int]
    info: Mapping[str, Any] = field(hash=False)

    @property
    def user_metadata(self) -> str | None:
        value = self.info.get("userMetadata")
        return str(value) if value is not None else None


def _read_commit(storage: Storage, version: int) -> LoggedCommit | None:
    text = storage.read_text(f"_delta_log/{version:020d}.json")
    if text is None:
        return None  # cleaned up behind a checkpoint
    txns: dict[str, int] = {}
    info: dict[str, Any] = {}
    for line in text.splitlines():
        if line.startswith('{"txn"'):
            txn = json.loads(line)["txn"]
            txns[str(txn.get("appId"))] = int(txn.get("version", -1))
        elif line.startswith('{"commitInfo"'):
            info = json.loads(line)["commitInfo"]
    return LoggedCommit(version, txns, info)


def logged_commits(spark: Any, location: str, after: int = -1, newest_first: bool = False) -> Iterator[LoggedCommit]:
    """The commits after version ``after`` whose JSON is still in the log, oldest first (or newest first)."""
    log = DeltaLog(spark, location)
    if not log.exists:
        return
    storage = Storage(spark, location)
    versions = range(after + 1, log.latest_version + 1)
    for version in reversed(versions) if newest_first else versions:
        commit = _read_commit(storage, version)
        if commit is not None:
            yield commit


def committed(spark: Any, location: str | None, after: int, app: str, seq: int, marker: str | None = None) -> bool:
    """Whether the table at ``location`` has a commit after version ``after`` carrying transaction ``app``/``seq``
    (or a later version of ``app``) and, when ``marker`` is given, whose user metadata contains it.

    The marker tells this writer's commit from an older one under the same app and version: Delta skips such a
    write as already applied without an error, so only the metadata shows whether the rows in the log are ours.
    """
    if location is None:
        return False
    return any(c.txns.get(app, -1) >= seq and (marker is None or marker in (c.user_metadata or ""))
               for c in logged_commits(spark, location, after))
