"""Stream errors: each names the stream and says what to do. Defined in ``dtables.errors`` (the stream records in
``dtables.state.streams`` raise them too); named here for the stream modules and their callers."""

from __future__ import annotations

from dtables.errors import StreamConflict, StreamError, StreamNotFound, StreamStale

__all__ = ["StreamConflict", "StreamError", "StreamNotFound", "StreamStale"]
