"""Errors of streaming ingestion. Each names the channel and table it concerns."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from dtables.errors import DtablesError

if TYPE_CHECKING:
    from dtables.ingest.response import RowError


class IngestError(DtablesError):
    """A channel cannot be opened, used or committed: unknown table, unsupported column, bad setting."""


class ChannelInvalidatedError(IngestError):
    """The channel was reopened (by this or another process) or dropped after this handle opened it: the handle
    can no longer insert or commit; what it buffered and had not committed is discarded. Reopen the channel and
    resume from its latest committed offset token."""


class ChannelClosedError(IngestError):
    """The handle was closed (or its client was)."""


class InsertRowsError(IngestError):
    """ON_ERROR = ABORT and a row of an ``insert_rows`` batch is bad: nothing of the batch was buffered.
    ``errors`` holds the first bad row's problems."""

    def __init__(self, message: str, errors: Sequence[RowError]):
        self.errors = tuple(errors)
        super().__init__(message)


class CommitFailedError(IngestError):
    """Committing a channel's buffered rows failed repeatedly (the cause is in the message). The rows stay
    uncommitted; reopen the channel and resume from its latest committed offset token."""
