"""The fault soak of bench/soak.py, short: one victim of each kind (a DAG refresh, a stream consumption, a channel
producer) killed with SIGKILL while this process writes to the sources; nothing lost, nothing duplicated.

The full soak (hundreds of kills) runs on demand: ``python -m bench.soak --kills 300``.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # bench/ is a folder of scripts, not an installed package

from bench import soak  # noqa: E402


# 86 s; the crash tests of each part (dynamic/test_crash, streams/test_stream_crash, ingest/test_ingest_crash)
# stay in the default suite
@pytest.mark.slow
def test_killed_refresh_consumer_and_producer_lose_and_duplicate_nothing(connect: Any, warehouse: Path) -> None:
    session = connect()
    seed = random.randrange(1 << 30)
    lines: list[str] = []
    # each victim dies right after one of its commits, the riskiest moment (data written, bookkeeping maybe not)
    tallies = soak.run_soak(session, warehouse, kills=len(soak.KINDS), seed=seed, after_commit=1.0, log=lines.append)
    assert [t.kills for t in tallies.values()] == [1, 1, 1], lines
    assert [t.after_commit for t in tallies.values()] == [1, 1, 1], lines
    assert [t.recoveries for t in tallies.values()] == [1, 1, 1], lines
    assert sum(t.lost for t in tallies.values()) == 0, (seed, lines)
    assert sum(t.duplicated for t in tallies.values()) == 0, (seed, lines)
    # the check counts what it should: a row removed behind the stream's back is reported lost
    first = session.sql("SELECT min(id) AS id FROM tgt WHERE action = 'INSERT'").first().id
    session.sql(f"DELETE FROM tgt WHERE id = {first} AND action = 'INSERT'")
    assert soak.recover_and_check("consume", session, soak.Writer(session, random.Random())).lost == 1
