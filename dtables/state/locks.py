"""Lock files of a warehouse: one exclusive ``flock`` per dynamic table's refreshes and per stream.

They live in ``locks/`` next to the state store (``<warehouse>/_dtables/locks/<key>.lock``), created owner-only like
the store (0700 folder, 0600 files). A table's key is its normalized name (``default.t``), a stream's is
``stream-<name>`` (and ``stream-retention-<table>`` for the deciders of a table's retention). The kernel drops a
``flock`` lock when its holder dies, so a crashed process never blocks the next one.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from dtables.state.store import StateStore, open_private, private_folder

LOCKS_FOLDER = "locks"


def lock_path(store: StateStore, key: str) -> Path:
    """The lock file of ``key`` (not created)."""
    return store.path.parent / LOCKS_FOLDER / f"{key}.lock"


@contextmanager
def exclusive(store: StateStore, keys: Sequence[str]) -> Iterator[None]:
    """Exclusive locks on ``keys``, taken one after the other in the given order (blocking, no timeout) and held
    until the block ends; callers that take several keep one order so that two of them cannot deadlock."""
    folder = private_folder(store.path.parent / LOCKS_FOLDER)
    fds = []
    try:
        for key in keys:
            fd = open_private(folder / f"{key}.lock")
            fds.append(fd)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        for fd in reversed(fds):
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def streams(store: StateStore, names: Sequence[str]) -> AbstractContextManager[None]:
    """Exclusive locks on the named streams (``stream-<name>``), taken in name order so that two consumers of
    overlapping streams never deadlock."""
    return exclusive(store, [f"stream-{name}" for name in sorted(set(names))])


def is_held(path: Path) -> bool:
    """Whether some thread or process holds the lock on ``path`` right now (a non-blocking probe; False when the
    file does not exist)."""
    if not os.path.exists(path):
        return False
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)
