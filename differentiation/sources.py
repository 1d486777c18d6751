"""The caller-implemented access to base tables: snapshots and redundant change reads, as SQL text."""

from __future__ import annotations

from typing import Literal, Protocol

When = Literal["start", "end"]


class Sources(Protocol):
    """Where the rendered SQL reads base tables from. Implementations do the I/O; we only embed text."""

    def snapshot(self, table: str, when: When) -> str:
        """A relation with the table's columns plus `__row_id` STRING (unique, stable across updates),
        as of the interval start ("start" = I0) or end ("end" = I1)."""
        ...

    def changes(self, table: str) -> str:
        """A relation with the table's columns plus `__action` ('INSERT'|'DELETE') and `__row_id`:
        a redundant delta of the table over the interval (may hold cancelling pairs)."""
        ...
