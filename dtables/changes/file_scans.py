"""Which rows of which data files a change read scans: the files, the version they are read at, and per file the
rows its deletion vectors pick or leave out. Planned by ``shapes`` and ``commits``, executed by ``scan``."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from dtables.changes.deletion_vectors import DeletionVectorDescriptor
from dtables.changes.log import FileAction


@dataclass(frozen=True)
class RowFilter:
    """Which rows of one data file a direct scan reads, by row index, from deletion vectors (see
    ``deletion_vectors``): every row but those ``minus`` marks (the vector the file had at that end of the
    interval), or, when ``selective``, just the rows ``only`` marks and ``minus`` does not (none when ``only`` is
    None): the rows a DELETE, UPDATE or MERGE marked deleted in place, without rewriting the file (or, the other
    way round, rows a RESTORE brought back)."""

    path: str
    minus: DeletionVectorDescriptor | None
    only: DeletionVectorDescriptor | None = None
    selective: bool = False


@dataclass(frozen=True)
class FileScan:
    """Rows of some data files as the table held them at ``version``.

    ``direct``: the files are read straight from parquet (pruned to exactly these files; their content never
    changes, so the version does not matter), each restricted by its ``row_filters`` entry when deletion vectors
    mark some of its rows. Otherwise a Delta time-travel scan at ``version`` filtered on the file names: needed
    when column mapping makes the parquet content differ from the rows, or the files lack row ids.
    """

    files: tuple[FileAction, ...]
    version: int
    direct: bool
    row_filters: tuple[RowFilter, ...] = ()

    def restricted(self, files: tuple[FileAction, ...]) -> FileScan:
        """The same scan over some of its files, with their row filters."""
        paths = {f.path for f in files}
        return FileScan(files, self.version, self.direct, tuple(r for r in self.row_filters if r.path in paths))

    @property
    def file_names(self) -> tuple[str, ...]:
        return tuple(unquote(f.file_name) for f in self.files)

    @property
    def estimated_rows(self) -> int | None:
        counts = [f.num_records for f in self.files]
        return None if any(c is None for c in counts) else sum(c for c in counts if c is not None)
