"""Loading a file of records through a channel, resumable: what ``dtables ingest`` runs.

Records are JSON lines (one object per line) or CSV (a header line, then one record per line; an empty field is
NULL). Each record's offset token is its number (the line number for JSON lines, the record number after the header
for CSV) or, with ``offset_field``, the value of that field. On start the channel's committed token tells which
records are in the table already: records up to it are skipped, so running the same load again after a crash
loads each record exactly once. Tokens from a field must increase through the file (numerically when they are
integers).

Bad records follow the channel's ON_ERROR: CONTINUE loads the others and reports them; SKIP_BATCH drops each batch
of ``batch_rows`` records that holds one; ABORT loads every record before the first bad one, then stops.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

from dtables.ingest.channel import Channel
from dtables.errors import UsageError
from dtables.ingest.errors import InsertRowsError

FORMATS = ("jsonl", "csv")


@dataclass
class LoadProblem:
    """A bad record: its offset token, the column (if one), and what is wrong."""

    token: str
    column: str | None
    message: str

    def __str__(self) -> str:
        return f"record {self.token}" + (f", column {self.column}" if self.column else "") + f": {self.message}"


@dataclass
class LoadSummary:
    read: int = 0  # records in the input
    skipped: int = 0  # records at or before the committed token (loaded by an earlier run)
    inserted: int = 0  # records handed to the channel and accepted
    rejected: int = 0  # bad records (and, under SKIP_BATCH, the good records of their batches)
    aborted: bool = False  # ON_ERROR = ABORT stopped at a bad record
    problems: list[LoadProblem] = field(default_factory=list)
    resumed_after: str | None = None  # the committed token found on start


def records(stream: TextIO, fmt: str) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """(record number, row) pairs, or (number, message) for a record that cannot be read."""
    if fmt == "jsonl":
        for number, line in enumerate(stream, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as e:
                yield number, f"not valid JSON ({e})"
                continue
            yield (number, row) if isinstance(row, dict) else (number, "not a JSON object")
    elif fmt == "csv":
        for number, record in enumerate(csv.DictReader(stream), 1):
            if None in record:
                yield number, "more fields than the header names"
            else:
                yield number, {k: v for k, v in record.items() if v not in ("", None)}
    else:
        raise UsageError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")


class _Resume:
    """Whether a record's token is at or before the committed one."""

    def __init__(self, committed: str | None):
        self.committed = committed
        self._passed = committed is None

    def done(self, token: str) -> bool:
        if self._passed:
            return False
        assert self.committed is not None
        if _is_int(token) and _is_int(self.committed):
            if int(token) <= int(self.committed):
                return True
            self._passed = True
            return False
        if token == self.committed:
            self._passed = True  # this one is committed, the next is not
        return True


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit()


def load(channel: Channel, stream: TextIO, fmt: str = "jsonl", offset_field: str | None = None,
         batch_rows: int = 1000) -> LoadSummary:
    """Insert the records of ``stream`` not yet committed through ``channel`` (which the caller closes)."""
    summary = LoadSummary(resumed_after=channel.get_latest_committed_offset_token())
    resume = _Resume(summary.resumed_after)
    batch: list[dict[str, Any]] = []
    tokens: list[str] = []
    handled = 0  # records handled since the last send, good or bad
    bad_in_batch = False
    last_token: str | None = None  # token of the newest record handled and not sent yet

    def send() -> bool:
        nonlocal batch, tokens, handled, bad_in_batch, last_token
        rows, row_tokens, token, skip = batch, tokens, last_token, bad_in_batch and channel.on_error == "SKIP_BATCH"
        batch, tokens, handled, bad_in_batch, last_token = [], [], 0, False, None
        if not rows and token is None:
            return True
        if skip:
            summary.rejected += len(rows)
            rows = []
        try:
            response = channel.insert_rows(rows, offset_token=token)
        except InsertRowsError as e:  # ABORT: load what came before the bad record, then stop
            first = e.errors[0].row_index
            summary.problems += [LoadProblem(row_tokens[first], p.column, p.message) for p in e.errors]
            summary.rejected += 1
            if first:
                channel.insert_rows(rows[:first], offset_token=row_tokens[first - 1])
                summary.inserted += first
            summary.aborted = True
            return False
        summary.problems += [LoadProblem(row_tokens[p.row_index], p.column, p.message) for p in response.errors]
        summary.rejected += len(response.bad_row_indexes)
        summary.inserted += response.rows_buffered
        return True

    for number, record in records(stream, fmt):
        summary.read += 1
        token: str | None = str(number)
        if offset_field is not None:
            value = record.get(offset_field) if isinstance(record, dict) else None
            token = None if value is None else str(value)
            if token is None and isinstance(record, dict):
                record = f"has no offset field {offset_field!r}"
        if token is not None and resume.done(token):
            summary.skipped += 1
            continue
        handled += 1
        if isinstance(record, str):  # unreadable: it never reaches the channel
            summary.problems.append(LoadProblem(token or f"#{number}", None, record))
            summary.rejected += 1
            if channel.on_error == "ABORT":
                send()
                summary.aborted = True
                break
            bad_in_batch = True
        else:
            batch.append(record)
            tokens.append(token or "")
        last_token = token or last_token
        if handled >= batch_rows and not send():
            break
    else:
        send()
    return summary
