"""Stream errors: each names the stream and says what to do."""

from __future__ import annotations

from dtables.errors import DtablesError


class StreamError(DtablesError):
    """A stream statement or consumption failed; the stream's frontier is as it was."""


class StreamNotFound(StreamError):
    pass


class StreamStale(StreamError):
    """The stream's frontier is older than the history its source still retains."""


class StreamConflict(StreamError):
    """Another consumer advanced the stream after this transaction read it."""
