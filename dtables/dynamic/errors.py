"""Errors of dynamic tables: every message names the dynamic table and the cause."""

from __future__ import annotations

from dtables.errors import SqlError


class DynamicTableError(SqlError):
    """A dynamic-table statement cannot be carried out (bad definition, unknown name, wrong state)."""


class RefreshFailed(SqlError):
    """A refresh did not succeed; the table keeps its last good contents. ``results`` are the refreshes' records."""

    def __init__(self, message: str, results: tuple[object, ...] = ()):
        super().__init__(message)
        self.results = results
