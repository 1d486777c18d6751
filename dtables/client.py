"""The ingestion client (``dtables.Client``): opens and drops channels, and runs the flusher that commits their
buffers in time. A user-facing entry point like the session, above project loading (it opens a project folder's
warehouse); the channels themselves are in ``dtables.ingest``.

One background thread watches every open channel of the client and hands a channel whose buffer is due (its
oldest row waited ``max_client_lag``, or it reached the size threshold) to a small pool of commit threads: a
channel commits one batch at a time, different channels commit concurrently (Delta appends do not conflict).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from dtables.ingest import lifecycle
from dtables.ingest.channel import ON_ERROR, Channel, FlushPolicy
from dtables.ingest.errors import ChannelClosedError, IngestError
from dtables.ingest.target import resolve
from dtables.project.connect import connect_project
from dtables.session import Session, connect

MAX_CLIENT_LAG = 600.0  # seconds: seed 004's limit of 10 minutes
DEFAULT_CLIENT_LAG = 1.0
_LAG = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*([a-z]*)\s*$", re.IGNORECASE)
_UNITS = {"": 1.0, "ms": 0.001, "millisecond": 0.001, "milliseconds": 0.001, "s": 1.0, "sec": 1.0, "secs": 1.0,
          "second": 1.0, "seconds": 1.0, "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0}


def parse_lag(value: Any) -> float:
    """``max_client_lag`` in seconds from a number of seconds, a timedelta or text (``'500 ms'``, ``'2 minutes'``);
    more than 0 and at most 10 minutes."""
    if isinstance(value, dt.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and (match := _LAG.match(value)) and match.group(2).lower() in _UNITS:
        seconds = float(match.group(1)) * _UNITS[match.group(2).lower()]
    else:
        raise IngestError(f"max_client_lag {value!r} is not a duration (seconds, or text like '1 second')")
    if not 0 < seconds <= MAX_CLIENT_LAG:
        raise IngestError(f"max_client_lag must be more than 0 and at most 10 minutes, not {value!r}")
    return seconds


def _session_of(source: Any) -> tuple[Any, bool]:
    """A dtables Session for a session, a project folder (holding dtables.yml) or a warehouse; and whether the
    client opened it (and so closes it)."""
    if isinstance(source, Session):
        return source, False
    if source is None:
        source = "."
    if isinstance(source, (str, os.PathLike)):
        folder = Path(source)
        if (folder / "dtables.yml").is_file():
            return connect_project(folder), True
        return connect(source), True
    raise IngestError(f"Client() takes a dtables session, a project folder or a warehouse, not {type(source).__name__}")


class Client:
    """Opens channels on the tables of one warehouse and commits their rows.

    ``source``: a dtables session, a project folder, or a warehouse path/URI. ``max_client_lag``: the default for
    its channels (seconds, or text such as ``'500 ms'``; at most 10 minutes). A buffer is also committed once it
    holds ``max_buffer_rows`` rows or about ``max_buffer_bytes`` bytes.
    """

    def __init__(self, source: Any = None, *, max_client_lag: Any = DEFAULT_CLIENT_LAG,
                 max_buffer_rows: int = 100_000, max_buffer_bytes: int = 64 << 20, commit_threads: int = 4):
        self.max_client_lag = parse_lag(max_client_lag)
        if max_buffer_rows < 1 or max_buffer_bytes < 1:
            raise IngestError("max_buffer_rows and max_buffer_bytes must be positive")
        self.session, self._owns_session = _session_of(source)
        self._max_rows, self._max_bytes = max_buffer_rows, max_buffer_bytes
        self._channels: dict[tuple[str, str], Channel] = {}
        self._wake = threading.Condition()
        self._stopping = False
        self._closed = False
        self._pool = ThreadPoolExecutor(max_workers=commit_threads, thread_name_prefix="dtables-ingest-commit")
        self._flusher = threading.Thread(target=self._run, name="dtables-ingest-flusher", daemon=True)
        self._flusher.start()

    # -- channels ---------------------------------------------------------------------------------------------

    def open_channel(self, name: str, table: str, *, on_error: str = "ABORT",
                     max_client_lag: Any = None) -> Channel:
        """Open (or reopen) channel ``name`` on ``table``. Reopening bumps the channel's epoch: handles opened
        before, in this or any process, are invalidated and what they buffered is discarded. The returned
        handle's ``get_latest_committed_offset_token()`` tells where to resume."""
        self._check_open()
        mode = on_error.upper()
        if mode not in ON_ERROR:
            raise IngestError(f"on_error must be one of {', '.join(ON_ERROR)}, not {on_error!r}")
        if not name or not name.strip():
            raise IngestError("a channel needs a name")
        lag = self.max_client_lag if max_client_lag is None else parse_lag(max_client_lag)
        target = resolve(self.session, table)
        key = (target.name, name)
        with self._wake:
            old = self._channels.pop(key, None)
        if old is not None:
            old.invalidate("the channel was reopened")
        state = lifecycle.open_state(self.session, target, name, mode)
        channel = Channel(self.session, target, state, FlushPolicy(lag, self._max_rows, self._max_bytes),
                          on_closed=self._forget, wake_flusher=self._wake_up)
        with self._wake:
            self._channels[key] = channel
        return channel

    def drop_channel(self, name: str, table: str) -> None:
        """Drop channel ``name`` on ``table``: open handles of it anywhere are invalidated (their buffers
        discarded) and its offset token is forgotten; a new channel of that name starts with none."""
        self._check_open()
        target = resolve(self.session, table)
        with self._wake:
            old = self._channels.pop((target.name, name), None)
        if old is not None:
            old.invalidate("the channel was dropped")
        lifecycle.drop_state(self.session, target, name)

    def channels(self) -> list[Channel]:
        """The channels this client has open."""
        with self._wake:
            return list(self._channels.values())

    def close(self) -> None:
        """Close every open channel (committing their buffers), stop the flusher, and close the session if the
        client opened it. Raises the first failure after closing everything."""
        if self._closed:
            return
        first: BaseException | None = None
        for channel in self.channels():
            try:
                channel.close()
            except Exception as e:  # noqa: BLE001 - close the others first
                first = first or e
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
        self._flusher.join(timeout=30)
        self._pool.shutdown(wait=True)
        self._closed = True
        if self._owns_session:
            self.session.close()
        if first is not None:
            raise first

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the flusher ------------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed or self._stopping:
            raise ChannelClosedError("the ingestion client is closed")

    def _forget(self, channel: Channel) -> None:
        with self._wake:
            key = (channel.table, channel.name)
            if self._channels.get(key) is channel:
                del self._channels[key]

    def _wake_up(self) -> None:
        with self._wake:
            self._wake.notify_all()

    def _run(self) -> None:
        while True:
            with self._wake:
                if self._stopping:
                    return
                now = time.monotonic()
                due, wait = [], 1.0
                for channel in self._channels.values():
                    if channel.scheduled:
                        continue
                    left = channel.due_in(now)
                    if left is None:
                        continue
                    if left <= 0:
                        channel.scheduled = True
                        due.append(channel)
                    else:
                        wait = min(wait, left)
                if not due:
                    self._wake.wait(wait)
                    continue
            for channel in due:
                self._pool.submit(self._commit_in_background, channel)

    def _commit_in_background(self, channel: Channel) -> None:
        try:
            channel.background_commit()
        finally:
            with self._wake:
                channel.scheduled = False
                self._wake.notify_all()


__all__ = ["Client", "parse_lag", "MAX_CLIENT_LAG"]
