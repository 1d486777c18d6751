"""Replacing every row of a Delta table in one commit through Delta's transaction API, the files to remove taken from
the table's checksum.

Delta's own overwrite (``mode("overwrite")``) lists the files to remove from its snapshot's state, which it rebuilds
in a Spark job ("Compute snapshot for version") whenever the table moved since it last did: every refresh of a
dynamic table paid it (0.25-0.9 s). A table of few files carries that list in each version's checksum
(``DeltaLog.files_at``, which change reads already trust for the same table). Writing the new files with
``OptimisticTransaction.writeFiles`` and committing them with a ``remove`` of each listed file is Delta's own commit
(same actions, conflict checks as a read of the whole table, checksum and hooks) without that job. It also
splits the write from the commit: a REWRITE whose change set turns out empty while its files are written commits
nothing and deletes them.

The session's idempotent-write settings (``idempotent.py``) become the commit's ``txn`` action and
``userMetadata`` as Delta's writer makes them. Used only where the session reaches the JVM (not Spark Connect), the
checksum of the version the transaction starts at lists its files and none has a deletion vector; elsewhere
``start`` returns None and the caller writes through Delta's DataFrame writer.
"""

from __future__ import annotations

import json
import posixpath
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import Any
from urllib.parse import unquote

from dtables.changes.idempotent import TXN_APP_ID, TXN_VERSION, USER_METADATA
from dtables.changes.log import DeltaLog, FileAction
from dtables.spark import fs
from dtables.spark.jvm import jvm_class, scala_object, static
from dtables.spark.tiny_plans import local_rows_unfolded

_DELTA = "org.apache.spark.sql.delta"
_CONVERTERS = "scala.jdk.javaapi.CollectionConverters"


@dataclass
class Overwrite:
    """One overwrite of ``location`` begun at ``version``: ``write`` then ``commit``, on one session."""

    spark: Any
    location: str
    version: int
    txn: Any  # the JVM's OptimisticTransaction
    removes: tuple[str, ...]  # one ``remove`` action (JSON) per file of the table at ``version``
    written: Any = None  # the FileActions writeFiles returned (a Scala Seq)

    def write(self, rows: Any, identity: tuple[str, str] | None = None) -> None:
        """Write ``rows`` (the table's columns) as new data files of the table, not yet committed. ``identity``
        names two more columns of ``rows``, a row id and a row commit version (``identified_table_at``'s), that
        become the table's materialized row-tracking columns, as Delta's UPDATE and MERGE write them: a row keeps
        the id and version given, a NULL takes a fresh id or this commit's version. Without them every row of an
        overwrite gets a new id, and every reader of the table's changes (streams, downstream dynamic tables) reads
        its whole contents as deleted and inserted again."""
        if identity is not None:
            rows = self._identified(rows, *identity)
        with _active(self.spark), local_rows_unfolded(self.spark):
            self.written = self.txn.writeFiles(rows._jdf)

    def keeps_identity(self) -> bool:
        """Whether the table has row tracking, so that ``write`` may keep its rows' ids."""
        return self._materialized is not None

    @cached_property
    def _materialized(self) -> tuple[str, str] | None:
        meta = DeltaLog(self.spark, self.location).metadata_at(self.version)
        names = meta.materialized_row_id_column, meta.materialized_row_commit_version_column
        return (names[0], names[1]) if meta.row_tracking and names[0] and names[1] else None

    def _identified(self, rows: Any, row_id: str, version: str) -> Any:
        names = self._materialized
        assert names is not None, "the table has no row tracking: no identity to keep"
        out = rows
        for given, name, helper in ((row_id, names[0], "RowId"), (version, names[1], "RowCommitVersion")):
            # the column metadata that marks it as the materialized column, as Delta's own DML tags it
            tag = json.loads(static(self.spark, f"{_DELTA}.{helper}", "columnMetadata")(name, False).json())
            out = out.withColumnRenamed(given, name).withMetadata(name, tag)
        return out

    def commit(self) -> int:
        """Commit the written files and the removes in one version (the table's next, or Delta's conflict error)."""
        assert self.written is not None, "write before commit"
        spark = self.spark
        actions = jvm_class(spark, "java.util.ArrayList")()
        actions.addAll(static(spark, _CONVERTERS, "asJava")(self.written))  # in the JVM, not one call per file
        for text in self.removes + self._set_transaction():
            actions.add(_action(spark, text))
        seq = static(spark, _CONVERTERS, "asScala")(actions).toSeq()
        with _active(spark):
            return int(self.txn.commit(seq, _write_operation(spark, spark.conf.get(USER_METADATA, None))))

    def abandon(self) -> None:
        """Delete the written files instead of committing them (no commit names them: no reader can see them)."""
        assert self.written is not None, "write before abandon"
        for action in static(self.spark, _CONVERTERS, "asJava")(self.written):
            fs.delete(self.spark, posixpath.join(self.location, unquote(str(action.path()))))

    def _set_transaction(self) -> tuple[str, ...]:
        app, version = _transaction(self.spark)
        if app is None or version is None:
            return ()
        return (json.dumps({"txn": {"appId": app, "version": version, "lastUpdated": int(time.time() * 1000)}}),)


def start(spark: Any, location: str) -> Overwrite | None:
    """An overwrite of the table at ``location`` as of its latest version (the transaction's), replacing every file
    of that version as Delta's writer would, or None where that writer must do it (module docstring); also None
    where the checksum does not list the table's ``txn`` actions or lists the session's idempotent write as done
    (Delta's writer then skips it as it does)."""
    if getattr(spark, "_jsparkSession", None) is None:
        return None
    with _active(spark):
        txn = static(spark, f"{_DELTA}.DeltaLog", "forTable")(spark._jsparkSession, location).startTransaction()
    version = int(txn.snapshot().version())
    log = DeltaLog(spark, location)
    files = log.files_at(version)
    if files is None or any(f.has_deletion_vector for f in files):
        return None
    app, txn_version = _transaction(spark)
    if app is not None and txn_version is not None:
        # from the checksum: Delta's own txnVersion would rebuild the snapshot's state for it (a Spark job)
        done = log.set_transactions_at(version)
        if done is None or done.get(app, -1) >= txn_version:
            return None
    txn.readWholeTable()  # a concurrent commit that adds files fails this one, as Delta's overwrite does
    now = int(time.time() * 1000)
    return Overwrite(spark, location, version, txn, tuple(_remove(f, now) for f in files))


def _remove(file: FileAction, now: int) -> str:
    body: dict[str, Any] = {"path": file.path, "deletionTimestamp": now, "dataChange": True,
                            "extendedFileMetadata": True, "partitionValues": dict(file.partition_values)}
    if file.size is not None:
        body["size"] = file.size
    if file.stats is not None:
        body["stats"] = file.stats
    if file.base_row_id is not None:
        body["baseRowId"] = file.base_row_id
    if file.default_row_commit_version is not None:
        body["defaultRowCommitVersion"] = file.default_row_commit_version
    return json.dumps({"remove": body})


def _transaction(spark: Any) -> tuple[str | None, int | None]:
    app, version = spark.conf.get(TXN_APP_ID, None), spark.conf.get(TXN_VERSION, None)
    return (app or None), (int(version) if version not in (None, "") else None)


def _action(spark: Any, text: str) -> Any:
    return scala_object(spark, f"{_DELTA}.actions.Action").fromJson(text)


def _write_operation(spark: Any, user_metadata: str | None) -> Any:
    """``DeltaOperations.Write(SaveMode.Overwrite)``, every other field at its default (py4j passes no defaults)."""
    none = scala_object(spark, "scala.None")
    meta = jvm_class(spark, "scala.Some")(user_metadata) if user_metadata is not None else none
    write = jvm_class(spark, f"{_DELTA}.DeltaOperations$Write")
    overwrite = static(spark, "org.apache.spark.sql.SaveMode", "Overwrite")
    return write(overwrite, none, none, meta, none, none, none, none, none)


@contextmanager
def _active(spark: Any) -> Iterator[None]:
    """The session active on this thread's JVM side, as Delta's transaction reads its settings from
    ``SparkSession.active``."""
    sessions = "org.apache.spark.sql.SparkSession"
    previous = static(spark, sessions, "getActiveSession")()
    static(spark, sessions, "setActiveSession")(spark._jsparkSession)
    try:
        yield
    finally:
        if previous.isDefined():
            static(spark, sessions, "setActiveSession")(previous.get())
        else:
            static(spark, sessions, "clearActiveSession")()
