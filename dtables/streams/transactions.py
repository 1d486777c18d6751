"""``BEGIN ... COMMIT | ROLLBACK`` on a dtables session, for consuming streams transactionally.

Delta has no transactions across tables, so a transaction here buffers its DML (INSERT, MERGE, UPDATE, DELETE,
CREATE TABLE AS) and runs it at COMMIT as one stream consumption (``dtables.streams.consume``):

- Repeatable read: the versions of the tables streams read are pinned when the transaction begins; every read of a
  stream inside it (queries run at once, DML at COMMIT) sees the interval from the frontier it had when the
  transaction first read it to those versions.
- ROLLBACK (or an error at COMMIT before the first write) discards the buffered statements: nothing was written,
  no frontier moved.
- COMMIT writes each target in its own Delta commit, tagged with the consumption's idempotent-write id, then moves
  the frontiers of the streams the DML read. A crash in between is finished on the next use of those streams.
- Queries inside the transaction do not see the transaction's own buffered writes; other statements (DDL, plain
  queries) run at once, as in Snowflake where DDL commits immediately.
"""

from __future__ import annotations

import datetime as dt
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlglot import exp

from dtables.catalog.warehouse import Warehouse
from dtables.errors import ChangeTrackingError
from dtables.state import streams as st
from dtables.streams.consume import StreamRead, consume, recover, stream_locks, stream_tables
from dtables.streams.errors import StreamError
from dtables.streams.frontier import latest_versions


@dataclass
class Transaction:
    """The open transaction of a session: pinned table versions, first reads of streams, buffered DML."""

    begun_at: dt.datetime
    pinned: dict[str, int]
    reads: dict[str, StreamRead] = field(default_factory=dict)
    buffered: list[tuple[str, exp.Expr]] = field(default_factory=list)

    def read(self, warehouse: Warehouse, name: str) -> StreamRead:
        """The stream as this transaction sees it (fixed at its first read here)."""
        if name not in self.reads:
            with stream_locks(warehouse, [name]):
                stream = recover(warehouse, name)
            missing = [t for t in stream.frontier if t not in self.pinned]
            self.pinned.update(latest_versions(warehouse, missing))
            self.reads[name] = StreamRead(stream, {t: self.pinned[t] for t in stream.frontier})
            assert st.get(warehouse.store, name) is not None
        return self.reads[name]


_open: weakref.WeakKeyDictionary[Warehouse, Transaction] = weakref.WeakKeyDictionary()


def current(warehouse: Warehouse) -> Transaction | None:
    return _open.get(warehouse)


def begin(warehouse: Warehouse) -> None:
    if warehouse in _open:
        raise StreamError("a transaction is already open on this session; COMMIT or ROLLBACK it first")

    pinned: dict[str, int] = {}
    for table in sorted({t for s in st.all_streams(warehouse.store) for t in s.frontier}):
        warehouse.catalog.ensure_registered([table])
        try:
            pinned.update(latest_versions(warehouse, [table]))
        except ChangeTrackingError:
            continue  # a source dropped since: reading its streams fails later with the reason
    _open[warehouse] = Transaction(dt.datetime.now(dt.timezone.utc), pinned)


def rollback(warehouse: Warehouse) -> None:
    _open.pop(warehouse, None)


def commit(warehouse: Warehouse, stream_names_of: Mapping[int, list[str]] | None = None) -> list[tuple[str, exp.Expr]]:
    """Run the buffered statements as one consumption of every stream they read; the transaction ends either way.

    When none of them reads a stream they are plain statements: returned, for the statement executor to run in
    order (COMMIT's handler there does); otherwise nothing is left to run."""
    txn = _open.pop(warehouse, None)
    if txn is None or not txn.buffered:
        return []
    known = st.names(warehouse.store)
    names = sorted({n for _, tree in txn.buffered for _, n in stream_tables(tree, known)})
    if not names:
        return list(txn.buffered)
    for name in names:
        txn.read(warehouse, name)
    consume(warehouse, txn.buffered, {n: txn.reads[n] for n in names}, names)
    return []
