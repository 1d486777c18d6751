"""The Delta log's listing: names only where the times cost a call per file, the commit times looked up when asked."""

from __future__ import annotations

import os
from typing import Any

from dtables.changes.log import LOG_DIR, DeltaLog


def _commit(folder: Any, version: int, mtime_s: int) -> None:
    path = folder / f"{version:020d}.json"
    path.write_text('{"commitInfo": {"operation": "WRITE"}}\n')
    (folder / f"{version:020d}.crc").write_text("{}")
    os.utime(path, (mtime_s, mtime_s))


def test_a_local_log_is_listed_without_times_and_its_commit_times_are_read_when_asked(tmp_path: Any) -> None:
    folder = tmp_path / LOG_DIR
    folder.mkdir()
    _commit(folder, 0, 1_000)
    _commit(folder, 1, 2_000)
    _commit(folder, 2, 1_500)  # a clock that went back: Delta's timestamps stay increasing
    log = DeltaLog(None, str(tmp_path))
    assert log.latest_version == 2 and log.has_commit(1)
    assert {e.name for e in log._entries} >= {"00000000000000000001.json", "00000000000000000001.crc"}
    assert all(e.mtime_ms is None for e in log._entries)  # no file stat'ed for the listing
    assert log.commit_timestamps() == {0: 1_000_000, 1: 2_000_000, 2: 2_000_001}


def test_a_commit_cleaned_up_after_the_listing_has_no_time(tmp_path: Any) -> None:
    folder = tmp_path / LOG_DIR
    folder.mkdir()
    for version in range(3):
        _commit(folder, version, 1_000 + version)
    log = DeltaLog(None, str(tmp_path))
    assert log.earliest_commit_version == 0
    os.remove(folder / f"{0:020d}.json")
    assert log.commit_timestamps() == {1: 1_001_000, 2: 1_002_000}
