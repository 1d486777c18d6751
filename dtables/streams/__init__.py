"""Streams: named bookmarks on a table, view or dynamic table whose DML consumption advances exactly once.

Modules: ``frontier`` (versions, staleness, retention),
``read`` (what a stream returns), ``consume`` (exactly-once consumption and crash recovery), ``transactions``
(BEGIN/COMMIT/ROLLBACK), ``statements`` (SQL handlers and the executor hook), ``vacuum`` (frontier-aware VACUUM).
Their syntax is in ``dtables.sql.stream_syntax``, their rows in the state store in ``dtables.state.streams``.
"""

from __future__ import annotations

from dtables.streams.errors import StreamConflict, StreamError, StreamNotFound, StreamStale

__all__ = ["StreamConflict", "StreamError", "StreamNotFound", "StreamStale"]
