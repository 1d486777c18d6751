"""Finer kinds of ``ChangeTrackingError``, so callers (streams, refresh) can react to each one differently.

Every message names the table, the versions involved and what the user can do about it.
"""

from __future__ import annotations

from dtables.errors import ChangeTrackingError


class NotADeltaTable(ChangeTrackingError):
    """The name does not resolve to a Delta table."""


class TrackingDisabled(ChangeTrackingError):
    """Row tracking (the row identity changes are built on) was off at the start of, or during, the interval."""


class InvalidInterval(ChangeTrackingError):
    """The interval is malformed: start after end, no start bound, or a timestamp before the table existed."""


class VersionNotFound(ChangeTrackingError):
    """A version bound names a version the table never had (negative, or after the latest commit)."""


class HistoryNotRetained(ChangeTrackingError):
    """The commits or data files the interval needs were removed (log cleanup or VACUUM)."""


class CorruptDeletionVector(ChangeTrackingError):
    """A deletion vector that cannot be decoded: unknown format, wrong size or checksum, or a file that ends early."""
