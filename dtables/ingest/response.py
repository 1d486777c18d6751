"""What ``insert_row``/``insert_rows`` return: the rows' problems, one record per bad value."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RowError:
    """A problem of one inserted row: its index in the ``insert_rows`` batch (0 for ``insert_row``), the column
    (None when the row as a whole is wrong) and what is wrong."""

    row_index: int
    column: str | None
    message: str

    def __str__(self) -> str:
        where = f"row {self.row_index}" + (f", column {self.column}" if self.column else "")
        return f"{where}: {self.message}"


@dataclass(frozen=True)
class InsertResponse:
    """``errors``: every problem found (under SKIP_BATCH the whole batch was then dropped; under CONTINUE only the
    bad rows). ``rows_buffered``: how many rows of the batch will be committed."""

    rows_buffered: int
    errors: tuple[RowError, ...] = field(default=())

    @property
    def has_errors(self) -> bool:
        return bool(self.errors)

    @property
    def bad_row_indexes(self) -> list[int]:
        return sorted({e.row_index for e in self.errors})
