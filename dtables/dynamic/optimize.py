"""Compaction: Delta ``OPTIMIZE`` of dynamic tables (clustering them where clustering is declared: on the row id,
``layout.py``), by hand (``dtables optimize``) and by the daemon after a refresh that leaves too many small files.

Every incremental refresh adds a file or a few (a MERGE's rewritten and inserted rows, an append); after many, a
read opens many small files and the MERGE's pruning finds few files to skip (each new file spans the id space).
``OPTIMIZE`` rewrites them in one commit that changes no data (``dataChange = false``, row ids kept by row tracking):
change reads of the table see no change in it, the refresh commit stays findable (``committed_refresh`` passes
over commits without a refresh's metadata) and the idempotent-write record (``txn``) stays in the table's state. A
compaction runs under the table's refresh lock, so it never races a refresh of the same table.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dtables.catalog import normalize
from dtables.catalog.warehouse import Warehouse
from dtables.changes.log import DeltaLog
from dtables.dynamic import definition as defs
from dtables.dynamic.errors import DynamicTableError
from dtables.dynamic.executor import table_lock
from dtables.dynamic.layout import clustering_columns

SMALL_FILES = "spark.dtables.optimize.smallFiles"  # the daemon compacts a table with at least this many; 0: never
DEFAULT_SMALL_FILES = 32
SMALL_FILE_BYTES = "spark.dtables.optimize.smallFileBytes"  # a file smaller than this is a small file
DEFAULT_SMALL_FILE_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class Compaction:
    """One table's OPTIMIZE: its files before and after, the commit (None: nothing to compact), its clustering."""

    name: str
    files_before: int
    files_after: int
    version: int | None
    clustering: tuple[str, ...]


def _location(session: Warehouse, name: str) -> str:
    obj = session.catalog.lookup(name)
    if obj is None or obj["kind"] not in ("TABLE", "DYNAMIC_TABLE"):
        kind = "does not exist" if obj is None else f"is a {obj['kind'].lower().replace('_', ' ')}"
        raise DynamicTableError(f"cannot optimize {normalize(name)}: it {kind} (OPTIMIZE compacts tables and "
                                "dynamic tables)")
    return str(obj["location"])


def _files(spark: Any, location: str) -> tuple[int, int]:
    """(number of files, latest version) of the table."""
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{location}`").first()
    return int(detail["numFiles"] or 0), DeltaLog(spark, location).latest_version


def optimize(session: Warehouse, names: Iterable[str] | None = None) -> list[Compaction]:
    """``OPTIMIZE`` the named tables (default: every dynamic table), each under its refresh lock."""
    wanted = [normalize(n) for n in names] if names else [d.name for d in defs.load_all(session.store)]
    locations = {n: _location(session, n) for n in wanted}  # every name checked before anything runs
    out = []
    for name, location in locations.items():
        session.catalog.ensure_registered([name])
        with table_lock(session, name):
            before, version = _files(session.spark, location)
            session.spark.sql(f"OPTIMIZE delta.`{location}`")
            after, latest = _files(session.spark, location)
        out.append(Compaction(name, before, after, latest if latest > version else None,
                              tuple(clustering_columns(session.spark, location))))
    return out


def small_files(spark: Any, location: str) -> int | None:
    """How many of the table's files are small, from its latest checksum file (no Spark job); None when the
    checksum is missing. Without the file list (tables with many files), every file counts when the average is."""
    log = DeltaLog(spark, location)
    limit = int(spark.conf.get(SMALL_FILE_BYTES, str(DEFAULT_SMALL_FILE_BYTES)))
    version = log.latest_version
    files = log.files_at(version)
    if files is not None:
        return sum(1 for f in files if (f.size or 0) < limit)
    summary = log.file_count_at(version)
    if summary is None:
        return None
    count, size = summary
    return count if count and size / count < limit else 0


def wants_compaction(session: Warehouse, name: str) -> bool:
    """The daemon's policy: the table has at least ``spark.dtables.optimize.smallFiles`` small files."""
    threshold = int(session.spark.conf.get(SMALL_FILES, str(DEFAULT_SMALL_FILES)))
    if threshold <= 0:
        return False
    found = small_files(session.spark, _location(session, name))
    return found is not None and found >= threshold
