"""The errors dtables raises. Every message names the statement or object and the problem, never a Java trace."""

from __future__ import annotations


class DtablesError(Exception):
    """Base class of every error dtables raises on purpose."""


class SqlError(DtablesError):
    """A statement failed: syntax, unknown object or column, type mismatch. ``statement`` is its text."""

    def __init__(self, message: str, statement: str | None = None, cause: str | None = None):
        self.statement = statement
        self.cause = cause
        super().__init__(message)


class ObjectNotFound(SqlError):
    """A table, view, stream or dynamic table named in a statement does not exist."""


class ChangeTrackingError(DtablesError):
    """Changes cannot be read: tracking off, bad interval, or history no longer retained."""


class StateStoreError(DtablesError):
    """The state store cannot be opened or migrated."""


class UsageError(DtablesError, ValueError):
    """A Python API or a setting was given a value it cannot take. Also a ValueError, as these errors were before
    they joined this hierarchy, so code catching ValueError still catches them."""


class UsageTypeError(UsageError, TypeError):
    """A Python API was given a value of a type it cannot take (also a TypeError, as these errors were)."""


class StreamError(DtablesError):
    """A stream statement or consumption failed; the stream's frontier is as it was."""


class StreamNotFound(StreamError):
    pass


class StreamStale(StreamError):
    """The stream's frontier is older than the history its source still retains."""


class StreamConflict(StreamError):
    """Another consumer advanced the stream after this transaction read it."""
