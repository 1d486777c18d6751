"""The resumable file load behind ``dtables ingest`` (in process): record numbers or a field as offset tokens,
skipping what is committed, CSV, unreadable records under each ON_ERROR."""

from __future__ import annotations

import io
from typing import Any

import pytest

from dtables.client import Client
from dtables.ingest.loader import load
from dtables.testing import assert_same_rows


@pytest.fixture
def client(dt: Any) -> Any:
    dt.sql("CREATE TABLE nums (n INT NOT NULL, label STRING)")
    with Client(dt, max_client_lag=600) as c:
        yield c


def _jsonl(numbers: range, bad: dict[int, str] | None = None) -> io.StringIO:
    bad = bad or {}
    return io.StringIO("".join(bad.get(n, f'{{"n": {n}, "label": "L{n}"}}') + "\n" for n in numbers))


def test_rerun_skips_records_up_to_the_committed_line(dt: Any, client: Any) -> None:
    ch = client.open_channel("file", "nums")
    first = load(ch, _jsonl(range(1, 6)), batch_rows=2)
    assert (first.read, first.inserted, first.skipped, first.resumed_after) == (5, 5, 0, None)
    ch.close()
    ch = client.open_channel("file", "nums")  # the same file, grown by five lines
    again = load(ch, _jsonl(range(1, 11)), batch_rows=2)
    assert (again.read, again.skipped, again.inserted, again.resumed_after) == (10, 5, 5, "5")
    ch.close()
    assert_same_rows(dt.sql("SELECT n FROM nums").collect(), [(n,) for n in range(1, 11)])
    assert ch.get_latest_committed_offset_token() == "10"


def test_offset_field_and_csv(dt: Any, client: Any) -> None:
    ch = client.open_channel("csv", "nums")
    text = "n,label\n" + "".join(f"{n},L{n}\n" for n in (100, 101, 102)) + "103,\n"  # empty field: NULL
    summary = load(ch, io.StringIO(text), fmt="csv", offset_field="n")
    ch.close()
    assert (summary.inserted, ch.get_latest_committed_offset_token()) == (4, "103")
    ch = client.open_channel("csv", "nums")
    more = load(ch, io.StringIO(text + "104,L104\n"), fmt="csv", offset_field="n")
    ch.close()
    assert (more.skipped, more.inserted) == (4, 1)
    assert_same_rows(dt.sql("SELECT * FROM nums").collect(),
                     [(100, "L100"), (101, "L101"), (102, "L102"), (103, None), (104, "L104")])


def test_bad_records_under_each_on_error(dt: Any, client: Any) -> None:
    bad = {3: "{not json", 5: '{"n": "five"}'}
    cont = client.open_channel("continue", "nums", on_error="CONTINUE")
    summary = load(cont, _jsonl(range(1, 8), bad), batch_rows=3)
    assert [(p.token, p.column) for p in summary.problems] == [("3", None), ("5", "n")]
    assert (summary.inserted, summary.rejected, summary.aborted) == (5, 2, False)
    cont.close()
    skip = client.open_channel("skip", "nums", on_error="SKIP_BATCH")
    summary = load(skip, _jsonl(range(11, 18), {13: "[1]"}), batch_rows=3)  # batches 11-13, 14-16, 17
    assert (summary.inserted, summary.rejected) == (4, 3)
    skip.close()
    abort = client.open_channel("abort", "nums")
    summary = load(abort, _jsonl(range(21, 28), {25: '{"n": 25, "x": 1}'}), batch_rows=3)
    assert summary.aborted and [(p.token, p.column) for p in summary.problems] == [("5", "x")]  # line 5
    abort.close()
    assert abort.get_latest_committed_offset_token() == "4"  # everything before the bad record
    assert_same_rows(dt.sql("SELECT n FROM nums").collect(),
                     [(n,) for n in (1, 2, 4, 6, 7, 14, 15, 16, 17, 21, 22, 23, 24)])
