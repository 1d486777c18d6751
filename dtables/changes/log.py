"""Reading a Delta table's transaction log directly: versions, commit actions, commit timestamps, metadata.

Everything here reads the small JSON files under ``_delta_log`` (and the ``.crc`` checksum files Delta writes next
to them, which repeat the table metadata), so deciding what a change read must do costs no Spark job. Only when the
metadata of a version lies behind a checkpoint (its JSON commits were cleaned up and no checksum file is left) does
:meth:`DeltaLog.metadata_at` fall back to Spark to read the checkpoint parquet.

Commit timestamps follow Delta's own time-travel rule so that ``AT(TIMESTAMP => ts)`` here and ``TIMESTAMP AS OF``
in Delta agree: the in-commit timestamp when the commit carries one, otherwise the commit file's modification
time, made strictly increasing over versions.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from dtables.changes.deletion_vectors import DeletionVectorDescriptor
from dtables.changes.errors import HistoryNotRetained, VersionNotFound
from dtables.changes.storage import FileEntry, Storage

LOG_DIR = "_delta_log"
_COMMIT_FILE = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT_FILE = re.compile(r"^(\d{20})\.checkpoint(\.\d+\.\d+|\.[0-9a-f-]+)?\.parquet$")


@dataclass(frozen=True)
class FileAction:
    """An ``add`` or ``remove`` of a data file, or a ``cdc`` change data file, with what change reads need."""

    kind: Literal["add", "remove", "cdc"]
    path: str
    data_change: bool
    base_row_id: int | None
    default_row_commit_version: int | None
    partition_values: tuple[tuple[str, str | None], ...]
    has_deletion_vector: bool
    num_records: int | None
    stats: str | None = field(default=None, compare=False, repr=False)  # the action's statistics JSON
    size: int | None = field(default=None, compare=False, repr=False)  # bytes of the file
    # the file's deletion vector (rows of the file that are deleted), as the action describes it
    deletion_vector: DeletionVectorDescriptor | None = field(default=None, compare=False, repr=False)

    @property
    def file_name(self) -> str:
        """The last path segment; Delta data file names carry a UUID, so they identify the file in the table."""
        return self.path.rsplit("/", 1)[-1]

    @staticmethod
    def from_json(kind: Literal["add", "remove", "cdc"], body: dict[str, Any]) -> FileAction:
        stats = body.get("stats")
        num_records = None
        if stats:
            try:
                num_records = json.loads(stats).get("numRecords")
            except ValueError:
                num_records = None
        return FileAction(
            kind=kind,
            path=body["path"],
            data_change=bool(body.get("dataChange", True)),
            base_row_id=body.get("baseRowId"),
            default_row_commit_version=body.get("defaultRowCommitVersion"),
            partition_values=tuple(sorted((body.get("partitionValues") or {}).items())),
            has_deletion_vector=body.get("deletionVector") is not None,
            num_records=num_records,
            stats=stats or None,
            size=body.get("size"),
            deletion_vector=(DeletionVectorDescriptor.from_action(body["deletionVector"])
                             if body.get("deletionVector") else None),
        )


@dataclass(frozen=True)
class TableMetadata:
    """The ``metaData`` and ``protocol`` actions in force at one version, reduced to what change reads use."""

    table_id: str
    schema_json: str
    partition_columns: tuple[str, ...]
    configuration: dict[str, str] = field(hash=False)
    reader_features: frozenset[str] = frozenset()
    writer_features: frozenset[str] = frozenset()

    def _flag(self, key: str) -> bool:
        return self.configuration.get(key, "false").strip().lower() == "true"

    @property
    def row_tracking(self) -> bool:
        """Row ids are assigned and preserved: the feature is in the protocol and the property is on."""
        return "rowTracking" in self.writer_features and self._flag("delta.enableRowTracking")

    @property
    def change_data_feed(self) -> bool:
        return self._flag("delta.enableChangeDataFeed")

    @property
    def deletion_vectors(self) -> bool:
        return self._flag("delta.enableDeletionVectors")

    @property
    def column_mapping(self) -> str:
        return self.configuration.get("delta.columnMapping.mode", "none")

    @property
    def materialized_row_id_column(self) -> str | None:
        return self.configuration.get("delta.rowTracking.materializedRowIdColumnName")

    @property
    def materialized_row_commit_version_column(self) -> str | None:
        return self.configuration.get("delta.rowTracking.materializedRowCommitVersionColumnName")

    @staticmethod
    def from_actions(metadata: dict[str, Any], protocol: dict[str, Any]) -> TableMetadata:
        return TableMetadata(
            table_id=metadata["id"],
            schema_json=metadata["schemaString"],
            partition_columns=tuple(metadata.get("partitionColumns") or ()),
            configuration=dict(metadata.get("configuration") or {}),
            reader_features=frozenset(protocol.get("readerFeatures") or ()),
            writer_features=frozenset(protocol.get("writerFeatures") or ()),
        )


@dataclass(frozen=True)
class Commit:
    """One committed version: its file actions in log order, its change data files (``cdc`` actions, which hold
    every row the commit deleted or updated when present), and metadata/protocol if the commit changed them."""

    version: int
    in_commit_timestamp: int | None
    operation: str | None
    files: tuple[FileAction, ...]
    change_files: tuple[FileAction, ...] = ()
    engine: str | None = None  # commitInfo.engineInfo, e.g. "Apache-Spark/4.2.0 Delta-Lake/4.4.0"
    metadata: dict[str, Any] | None = field(default=None, hash=False, compare=False)
    protocol: dict[str, Any] | None = field(default=None, hash=False, compare=False)
    # commitInfo.operationMetrics (row counts such as numOutputRows, numDeletedRows; strings in the log)
    metrics: dict[str, Any] | None = field(default=None, hash=False, compare=False)


# A file list rebuilt from at most this many JSON commits (a few small reads) rather than by a Spark job.
MAX_REPLAYED_COMMITS = 32


def _commit_times(entries: list[FileEntry]) -> dict[int, int | None]:
    return {int(m.group(1)): entry.mtime_ms for entry in entries if (m := _COMMIT_FILE.match(entry.name))}


class DeltaLog:
    """Read-only view of one table's log. Lists the log folder once per instance; build a new one to see new commits."""

    def __init__(self, spark: Any, location: str, table: str | None = None):
        self.location = location.rstrip("/")
        self.table = table or location
        self._spark = spark
        self._storage = Storage(spark, self.location)
        self._commits: dict[int, Commit] = {}
        self._files: dict[int, tuple[FileAction, ...] | None] = {}

    @cached_property
    def _entries(self) -> list[FileEntry]:
        """The log folder, listed once (a listing is a request per page on an object store), without the files'
        times where they cost a call each: only ``commit_timestamps`` reads them."""
        return self._storage.list_dir(LOG_DIR, times=False)

    @cached_property
    def _listing(self) -> dict[int, int | None]:
        """Commit version -> commit file modification time (ms; None where ``_entries`` has no times), for every
        JSON commit still in the log."""
        return _commit_times(self._entries)

    @cached_property
    def _commit_file_times(self) -> dict[int, int]:
        """``_listing``'s versions with their commit files' times, looked up one by one where the listing has none
        (a local folder's: its checksum and checkpoint files are not stat'ed); a commit cleaned up since the
        listing is left out, as if it had been before it."""
        times = {v: t if t is not None else self._storage.modified_ms(f"{LOG_DIR}/{v:020d}.json")
                 for v, t in self._listing.items()}
        return {v: t for v, t in times.items() if t is not None}

    @cached_property
    def _checkpoints(self) -> dict[int, list[str]]:
        found: dict[int, list[str]] = {}
        for entry in self._entries:
            m = _CHECKPOINT_FILE.match(entry.name)
            if m:
                found.setdefault(int(m.group(1)), []).append(entry.name)
        return found

    @property
    def exists(self) -> bool:
        return bool(self._listing) or bool(self._checkpoints)

    @property
    def latest_version(self) -> int:
        versions = list(self._listing) + list(self._checkpoints)
        if not versions:
            raise VersionNotFound(f"table {self.table} has no Delta log at {self.location}/{LOG_DIR}")
        return max(versions)

    @property
    def earliest_commit_version(self) -> int:
        """The oldest version whose commit file is still in the log (older ones were cleaned up)."""
        if not self._listing:
            return self.latest_version
        return min(self._listing)

    def has_commit(self, version: int) -> bool:
        return version in self._listing

    def commit(self, version: int) -> Commit:
        """The actions of one commit. Raises HistoryNotRetained when its file was cleaned up."""
        if version in self._commits:
            return self._commits[version]
        text = self._storage.read_text(f"{LOG_DIR}/{version:020d}.json")
        if text is None:
            raise HistoryNotRetained(
                f"table {self.table}: the commit of version {version} is no longer in the Delta log "
                f"(earliest retained commit: {self.earliest_commit_version}); log retention "
                f"(delta.logRetentionDuration) removed it. Read changes from version "
                f"{self.earliest_commit_version} or later, or raise the retention."
            )
        files: list[FileAction] = []
        change_files: list[FileAction] = []
        metadata = protocol = None
        ict = operation = engine = metrics = None
        for line in text.splitlines():
            if not line.strip():
                continue
            action = json.loads(line)
            if "add" in action:
                files.append(FileAction.from_json("add", action["add"]))
            elif "remove" in action:
                files.append(FileAction.from_json("remove", action["remove"]))
            elif "cdc" in action:
                change_files.append(FileAction.from_json("cdc", action["cdc"]))
            elif "metaData" in action:
                metadata = action["metaData"]
            elif "protocol" in action:
                protocol = action["protocol"]
            elif "commitInfo" in action:
                ict = action["commitInfo"].get("inCommitTimestamp")
                operation = action["commitInfo"].get("operation")
                engine = action["commitInfo"].get("engineInfo")
                metrics = action["commitInfo"].get("operationMetrics")
        commit = Commit(version, ict, operation, tuple(files), tuple(change_files), engine, metadata, protocol,
                        metrics)
        self._commits[version] = commit
        return commit

    def commit_timestamps(self) -> dict[int, int]:
        """Version -> commit timestamp (epoch ms) for every retained commit, strictly increasing like Delta's."""
        uses_ict = False
        if self._listing:
            try:
                latest = self.metadata_at(max(self._listing))
                uses_ict = latest._flag("delta.enableInCommitTimestamps")
            except HistoryNotRetained:
                uses_ict = False
        result: dict[int, int] = {}
        previous: int | None = None
        for version, ts in sorted(self._commit_file_times.items()):
            if uses_ict:
                ict = self.commit(version).in_commit_timestamp
                ts = ict if ict is not None else ts
            if previous is not None and ts <= previous:
                ts = previous + 1  # Delta's monotonization: clock skew must not reorder versions
            result[version] = ts
            previous = ts
        return result

    def metadata_at(self, version: int) -> TableMetadata:
        """Metadata and protocol in force at ``version``: newest JSON/checksum at or before it, else a checkpoint."""
        metadata: dict[str, Any] | None = None
        protocol: dict[str, Any] | None = None
        v = version
        while v >= 0 and (metadata is None or protocol is None):
            crc_text = self._storage.read_text(f"{LOG_DIR}/{v:020d}.crc")
            if crc_text:
                crc = json.loads(crc_text)
                metadata = metadata or crc.get("metadata")
                protocol = protocol or crc.get("protocol")
                if metadata and protocol:
                    break
            if v in self._listing:
                commit = self.commit(v)
                metadata = metadata or commit.metadata
                protocol = protocol or commit.protocol
            elif v in self._checkpoints:
                cp_meta, cp_protocol = self._checkpoint_actions(v)
                metadata = metadata or cp_meta
                protocol = protocol or cp_protocol
            elif not crc_text:
                break
            v -= 1
        if metadata is None or protocol is None:
            raise HistoryNotRetained(
                f"table {self.table}: the metadata of version {version} can no longer be reconstructed from the "
                f"Delta log (earliest retained commit: {self.earliest_commit_version}). Use a later version."
            )
        return TableMetadata.from_actions(metadata, protocol)

    def size_at(self, version: int) -> int | None:
        """The table's size in bytes at ``version`` from that version's checksum file, or None without one."""
        text = self._storage.read_text(f"{LOG_DIR}/{version:020d}.crc")
        size = json.loads(text).get("tableSizeBytes") if text else None
        return int(size) if size is not None else None

    def file_count_at(self, version: int) -> tuple[int, int] | None:
        """(number of data files, bytes) of the table at ``version`` from its checksum file, or None without one."""
        text = self._storage.read_text(f"{LOG_DIR}/{version:020d}.crc")
        if not text:
            return None
        crc = json.loads(text)
        return int(crc.get("numFiles") or 0), int(crc.get("tableSizeBytes") or 0)

    def files_at(self, version: int) -> tuple[FileAction, ...] | None:
        """The data files of the table at ``version``: its checksum's file list, else that of a recent version's
        checksum (or the empty table before version 0) with the commits since replayed on it; None when neither
        is at hand within ``MAX_REPLAYED_COMMITS`` retained commits (a Spark job must then rebuild the snapshot).

        Delta writes the complete file list (``allFiles``, protocol: version checksum file) into the checksum of
        tables with few files, so a snapshot of such a table needs no log replay, hence no Spark job. Some commits'
        checksums lack it (Delta 4.4 leaves it out of an overwrite that replaces the schema: a dynamic table's
        initial refresh, whose version the first incremental refresh reads back), so a short replay of the JSON
        commits since a listing (protocol: action reconciliation, files keyed by path and deletion vector) stands
        in; its count must agree with the version's checksum where there is one.
        """
        if version not in self._files:
            self._files[version] = self._files_at(version)
        return self._files[version]

    def _files_at(self, version: int) -> tuple[FileAction, ...] | None:
        listed = self._listed_files(version)
        if listed is not None:
            return listed
        base = version - 1
        while base >= 0 and version - base <= MAX_REPLAYED_COMMITS and self.has_commit(base + 1):
            start = self._listed_files(base)
            if start is not None:
                return self._replayed(start, base, version)
            base -= 1
        if base < 0 and version < MAX_REPLAYED_COMMITS and self.has_commit(0):
            return self._replayed((), -1, version)
        return None

    def _listed_files(self, version: int) -> tuple[FileAction, ...] | None:
        """The file list of ``version``'s checksum; None when it is absent, holds no list, or disagrees with its
        own file count."""
        crc = self._checksum(version)
        files = crc.get("allFiles") if crc else None
        if crc is None or files is None or crc.get("numFiles") != len(files):
            return None
        return tuple(FileAction.from_json("add", f) for f in files)

    def set_transactions_at(self, version: int) -> dict[str, int] | None:
        """appId -> version of the table's ``txn`` actions at ``version`` from its checksum (Delta lists them there
        for tables with few), or None without such a list."""
        crc = self._checksum(version)
        listed = crc.get("setTransactions") if crc else None
        if listed is None:
            return None
        return {str(t["appId"]): int(t["version"]) for t in listed}

    def _checksum(self, version: int) -> dict[str, Any] | None:
        text = self._storage.read_text(f"{LOG_DIR}/{version:020d}.crc")
        return json.loads(text) if text else None

    def _replayed(self, start: tuple[FileAction, ...], base: int, version: int) -> tuple[FileAction, ...] | None:
        """The files of ``base`` (``start``) with the file actions of commits ``base + 1 .. version`` applied."""
        def key(f: FileAction) -> tuple[str, str | None]:
            return f.path, f.deletion_vector.unique_id if f.deletion_vector is not None else None

        files = {key(f): f for f in start}
        for v in range(base + 1, version + 1):
            if not self.has_commit(v):
                return None
            for action in self.commit(v).files:
                if action.kind == "add":
                    files[key(action)] = action
                else:
                    files.pop(key(action), None)
        crc = self._checksum(version)
        if crc is not None and crc.get("numFiles") is not None and int(crc["numFiles"]) != len(files):
            return None
        return tuple(files.values())

    def _checkpoint_actions(self, version: int) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        # Checkpoints are parquet; without pyarrow in the environment, Spark reads them (rare: old versions only).
        paths = [f"{self.location}/{LOG_DIR}/{name}" for name in self._checkpoints[version]]
        rows = (
            self._spark.read.parquet(*paths)
            .where("metaData IS NOT NULL OR protocol IS NOT NULL")
            .select("metaData", "protocol")
            .collect()
        )
        metadata = protocol = None
        for row in rows:
            if row["metaData"] is not None:
                metadata = row["metaData"].asDict(recursive=True)
                metadata["configuration"] = dict(metadata.get("configuration") or {})
            if row["protocol"] is not None:
                protocol = row["protocol"].asDict(recursive=True)
        return metadata, protocol
