"""A channel handle: validates inserted rows, buffers them in order, and commits them exactly once.

Rows and offset tokens are buffered in insertion order; a commit takes the whole buffer (one Delta append of its
rows, carrying the newest token), and one handle commits one batch at a time, so the rows of a channel commit in
the order they were inserted. The client's flusher commits a buffer once its oldest row has waited
``max_client_lag`` or it reached the size threshold; :meth:`Channel.flush` and :meth:`Channel.close` commit at once.

Before each commit the handle checks that the store still holds its epoch: a reopen anywhere (or a drop) makes it
fail with ChannelInvalidatedError and discard what it buffered. The commit itself is a Delta transaction of the
channel's app id at ``epoch << 32 | n``; if it raised, the log says whether it landed, and a retry with the same
sequence never applies twice.

A commit attempt is a fixed batch (:class:`_Attempt`): its rows, its token and its sequence. When an attempt fails
in a way that leaves its fate unknown, it is retried exactly as it was, and rows inserted since wait for the next
sequence. Delta skips a write whose ``txnAppId``/``txnVersion`` is already in the log without an error, so a retry
that carried more rows than the attempt that landed would lose the difference while the token advanced (issue 16:
that is how concurrent channels lost rows). For the same reason a commit found in the log counts as this attempt's
only if its record (rows, running total, token) is the one this attempt wrote.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dtables.catalog.warehouse import Warehouse
from dtables.ingest import commits
from dtables.ingest import store as cs
from dtables.ingest.commits import ChannelCommit
from dtables.ingest.convert import ConvertedRow
from dtables.ingest.errors import (
    ChannelClosedError,
    ChannelInvalidatedError,
    CommitFailedError,
    IngestError,
    InsertRowsError,
)
from dtables.ingest.response import InsertResponse, RowError
from dtables.ingest.store import ChannelState
from dtables.ingest.target import Target

ON_ERROR = ("CONTINUE", "SKIP_BATCH", "ABORT")
_RETRIES = 5  # commit attempts before a channel gives up (CommitFailedError)


@dataclass(frozen=True)
class FlushPolicy:
    """When a buffer is committed: its oldest row waited ``max_client_lag`` seconds, or it holds ``max_rows`` rows
    or ``max_bytes`` bytes (roughly). Inserting waits while a buffer holds twice the threshold (back-pressure)."""

    max_client_lag: float
    max_rows: int
    max_bytes: int


@dataclass(frozen=True)
class _Attempt:
    """One commit attempt: the rows and token it carries and the sequence it commits as. Never changed once cut
    from the buffer: a retry must send the same batch under the same sequence."""

    rows: list[tuple[Any, ...]]
    size: int
    oldest: float
    token: str | None
    seq: int


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


class Channel:
    """An open channel on one table. Get one from ``Client.open_channel``."""

    def __init__(self, warehouse: Warehouse, target: Target, state: ChannelState, policy: FlushPolicy,
                 on_closed: Any = None, wake_flusher: Any = None):
        self.name = state.name
        self.table = target.name
        self.on_error = state.on_error
        self.policy = policy
        self._warehouse = warehouse
        self._target = target
        self._app = state.app_id
        self._epoch = state.epoch
        self._commits_made = 0
        self._log_version = state.log_version
        self._rows_total = state.rows_committed
        self._committed_token = state.offset_token
        self._on_closed = on_closed
        self._wake_flusher = wake_flusher or (lambda: None)
        self._lock = threading.Condition()  # guards the buffer and the handle's state
        self._commit_lock = threading.Lock()  # one commit at a time, in buffer order
        self._rows: list[tuple[Any, ...]] = []
        self._bytes = 0
        self._oldest: float | None = None  # monotonic time the oldest buffered insert arrived
        self._token: str | None = None
        self._token_pending = False  # an insert set a token that is not committed yet
        self._attempt: _Attempt | None = None  # a failed commit whose fate is unknown, to be retried as it was
        self._invalid: str | None = None  # why the handle was invalidated
        self._discarded = 0  # rows dropped by the invalidation
        self._closed = False
        self._failure: CommitFailedError | None = None
        self._failures = 0
        self._retry_at = 0.0
        self.scheduled = False  # a background commit of this handle is queued or running (the client's flag)

    # -- what users call ----------------------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        """The client sequencer: which open of the channel this handle is (a reopen increments it)."""
        return self._epoch

    @property
    def is_valid(self) -> bool:
        return self._invalid is None

    @property
    def is_closed(self) -> bool:
        return self._closed

    def insert_row(self, row: Mapping[str, Any], offset_token: str | int | None = None) -> InsertResponse:
        """Insert one row (a mapping of column name to value); see :meth:`insert_rows`."""
        return self.insert_rows([row], offset_token)

    def insert_rows(self, rows: Iterable[Mapping[str, Any]], offset_token: str | int | None = None
                    ) -> InsertResponse:
        """Validate, convert and buffer ``rows``; ``offset_token`` becomes the channel's committed token once the
        batch is committed. ON_ERROR decides what bad rows do: CONTINUE buffers the good rows and reports the bad
        ones, SKIP_BATCH buffers nothing of a batch with a bad row and reports every problem, ABORT raises
        InsertRowsError on the first bad row and buffers nothing of the batch."""
        self._check_usable()
        good: list[ConvertedRow] = []
        errors: list[RowError] = []
        for index, row in enumerate(rows):
            out = self._target.converter.convert(row)
            if isinstance(out, ConvertedRow):
                good.append(out)
                continue
            problems = [RowError(index, p.column, p.message) for p in out]
            if self.on_error == "ABORT":
                raise InsertRowsError(f"channel {self.name} on {self.table}: {problems[0]}; nothing of this batch "
                                      "was buffered (ON_ERROR = ABORT)", problems)
            errors.extend(problems)
        if errors and self.on_error == "SKIP_BATCH":
            good = []
        self._buffer(good, None if offset_token is None else str(offset_token))
        return InsertResponse(len(good), tuple(errors))

    def get_latest_committed_offset_token(self) -> str | None:
        """The offset token of the channel's latest commit (None if no token was committed yet)."""
        if self._invalid is not None:
            raise self._invalidated_error()
        state = cs.get(self._warehouse.store, self.table, self.name)
        if state is None or state.epoch != self._epoch:
            self.invalidate("it was reopened or dropped after this handle opened it")
            raise self._invalidated_error()
        return state.offset_token

    def flush(self) -> None:
        """Commit everything buffered now (waiting for a commit in progress), retrying transient failures."""
        for attempt in range(_RETRIES):
            try:
                self._commit_buffer()
                return
            except (ChannelInvalidatedError, ChannelClosedError):
                raise
            except CommitFailedError:
                raise  # the handle gave up (see _commit): retrying cannot help
            except Exception as e:  # noqa: BLE001 - retried; the log decides whether it landed
                if attempt + 1 == _RETRIES:
                    raise CommitFailedError(f"channel {self.name} on {self.table}: commit failed {_RETRIES} times: "
                                            f"{_first_line(e)}") from e
                time.sleep(0.2 * 2 ** attempt)

    def close(self) -> None:
        """Commit what is buffered and close the handle. Closing an invalidated handle raises
        ChannelInvalidatedError if the invalidation discarded rows of it."""
        if self._closed:
            return
        try:
            if self._invalid is None:
                self.flush()
            elif self._discarded:
                raise self._invalidated_error()
        finally:
            with self._lock:
                self._closed = True
                self._lock.notify_all()
            if self._on_closed is not None:
                self._on_closed(self)

    def __enter__(self) -> Channel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("invalid" if self._invalid else "open")
        return f"<Channel {self.name} on {self.table} epoch={self._epoch} {state}>"

    # -- buffering ----------------------------------------------------------------------------------------------

    def _check_usable(self) -> None:
        if self._closed:
            raise ChannelClosedError(f"channel {self.name} on {self.table} is closed")
        if self._invalid is not None:
            raise self._invalidated_error()
        if self._failure is not None:
            raise self._failure

    def _invalidated_error(self) -> ChannelInvalidatedError:
        lost = f"; {self._discarded} buffered row(s) were discarded" if self._discarded else ""
        return ChannelInvalidatedError(
            f"channel {self.name} on {self.table} is no longer valid: {self._invalid}{lost}. Reopen it and resume "
            "from its latest committed offset token")

    def _over_threshold(self, factor: int = 1) -> bool:
        return len(self._rows) >= factor * self.policy.max_rows or self._bytes >= factor * self.policy.max_bytes

    def _buffer(self, rows: list[ConvertedRow], token: str | None) -> None:
        if not rows and token is None:
            return
        with self._lock:
            while self._over_threshold(2) and self._usable_locked():
                self._lock.wait(0.5)  # back-pressure: the flusher is behind
            self._check_usable()
            self._rows.extend(r.values for r in rows)
            self._bytes += sum(r.size for r in rows)
            if token is not None:
                self._token, self._token_pending = token, True
            if self._oldest is None:
                self._oldest = time.monotonic()
            full = self._over_threshold()
        if full:
            self._wake_flusher()

    def _usable_locked(self) -> bool:
        return not self._closed and self._invalid is None and self._failure is None

    def invalidate(self, reason: str) -> None:
        """Make the handle unusable and discard its buffer (a reopen or drop of the channel did this)."""
        with self._lock:
            if self._invalid is None:
                self._invalid = reason
                self._discarded += len(self._rows) + (len(self._attempt.rows) if self._attempt else 0)
            self._rows, self._bytes, self._oldest, self._token_pending = [], 0, None, False
            self._attempt = None
            self._lock.notify_all()

    # -- committing ---------------------------------------------------------------------------------------------

    def due_in(self, now: float) -> float | None:
        """Seconds until the buffer must be committed (<= 0: now), None when there is nothing to commit."""
        with self._lock:
            if not self._usable_locked():
                return None
            if self._attempt is not None:
                due = 0.0
            elif self._oldest is None:
                return None
            else:
                due = 0.0 if self._over_threshold() else self._oldest + self.policy.max_client_lag - now
            return max(due, self._retry_at - now)

    def background_commit(self) -> None:
        """One commit attempt by the flusher; failures are retried later, and give up after a few."""
        try:
            self._commit_buffer()
            self._failures = 0
        except (ChannelInvalidatedError, ChannelClosedError):
            pass  # the handle reports it on its next use
        except Exception as e:  # noqa: BLE001 - kept for the user: the next insert or flush raises it
            self._failures += 1
            if self._failures >= _RETRIES:
                with self._lock:
                    self._failure = CommitFailedError(
                        f"channel {self.name} on {self.table}: commit failed {self._failures} times, last: "
                        f"{_first_line(e)}; the rows are not committed: reopen the channel and resume from its "
                        "latest committed offset token")
                    self._lock.notify_all()
            else:
                self._retry_at = time.monotonic() + 0.2 * 2 ** self._failures

    def _commit_buffer(self) -> None:
        """Commit a failed attempt again (as it was), then what is buffered; one commit at a time, in order."""
        with self._commit_lock:
            for _ in range(2):
                with self._lock:
                    if self._invalid is not None:
                        raise self._invalidated_error()
                    if self._closed:
                        raise ChannelClosedError(f"channel {self.name} on {self.table} is closed")
                    if self._failure is not None:
                        raise self._failure
                    retry = self._attempt is not None
                    attempt = self._attempt or self._cut_attempt()
                    if attempt is None:
                        return
                    self._attempt = None  # in flight: not due for the flusher while this commit runs
                try:
                    self._commit(attempt)
                except ChannelInvalidatedError:
                    raise
                except BaseException:
                    with self._lock:  # its fate unknown: kept whole, to be sent again as it was
                        if self._invalid is None and self._failure is None:
                            self._attempt = attempt
                    raise
                finally:
                    with self._lock:
                        self._lock.notify_all()
                if not retry:
                    return

    def _cut_attempt(self) -> _Attempt | None:
        """The whole buffer as the next attempt (call with the lock held), None when there is nothing to commit."""
        if not self._rows and not self._token_pending:
            return None
        assert self._oldest is not None or not self._rows
        attempt = _Attempt(self._rows, self._bytes, self._oldest or time.monotonic(),
                           self._token if self._token_pending else self._committed_token,
                           commits.txn_version(self._epoch, self._commits_made + 1))
        self._rows, self._bytes, self._oldest, self._token_pending = [], 0, None, False
        return attempt

    def _commit(self, attempt: _Attempt) -> None:
        """One Delta commit of the attempt's rows and token, exactly once; the store learns of it afterwards."""
        store, spark, target = self._warehouse.store, self._warehouse.spark, self._target
        if cs.current_epoch(store, self.table, self.name) != self._epoch:
            self.invalidate("it was reopened or dropped after this handle opened it")
            raise self._invalidated_error()
        meta = ChannelCommit(self.table, self.name, self._app, attempt.seq, "ROWS", attempt.token,
                             len(attempt.rows), self._rows_total + len(attempt.rows))
        failure: BaseException | None = None
        try:
            commits.write(spark, target.location, target.schema, attempt.rows, meta)
        except Exception as e:  # noqa: BLE001 - the log says whether it landed (e.g. lost a race with a fence)
            failure = e
        found = commits.read_app(spark, target.location, self._app, self._log_version)
        mine = found.at(meta.seq)
        if mine is None:
            newer = found.newest
            if newer is not None and newer.meta.epoch > self._epoch:
                self.invalidate("it was reopened or dropped while it was committing")
                raise self._invalidated_error()
            raise failure or IngestError(f"channel {self.name} on {self.table}: commit {meta.seq} is not in the log")
        if mine.meta != meta:
            # Delta skipped this write as already applied, yet the commit of that sequence holds other rows: never
            # report rows as committed that the log does not hold. The handle stops; the log's token is the truth.
            with self._lock:
                self._failure = CommitFailedError(
                    f"channel {self.name} on {self.table}: the log's commit {meta.seq} (table version {mine.version}) "
                    f"holds {mine.meta.rows} row(s) up to token {mine.meta.token!r}, not the {meta.rows} row(s) up to "
                    f"token {meta.token!r} this handle sent; nothing more was committed: reopen the channel and "
                    "resume from its latest committed offset token")
                self._lock.notify_all()
            raise self._failure
        self._commits_made += 1
        self._log_version = mine.version
        self._rows_total = meta.rows_total
        self._committed_token = attempt.token
        recorded = cs.record_commit(store, ChannelState(
            self.table, self.name, self._app, self._epoch, meta.seq, mine.version, attempt.token, mine.committed_at,
            meta.rows_total, self.on_error, "", ""))
        if not recorded:  # committed, then reopened elsewhere: the reopen adopted this commit from the log
            self.invalidate("it was reopened or dropped after its last commit")
