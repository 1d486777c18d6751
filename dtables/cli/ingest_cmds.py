"""``dtables ingest``: load JSON lines or CSV into a table through a channel, resuming after a crash."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from dtables.cli.app import JsonOption, ProfileOption, ProjectOption, app, console, err, failing_cleanly, \
    project_session

_SHOWN_PROBLEMS = 20


@app.command()
def ingest(
    table: str = typer.Argument(..., help="The table to load."),
    file: Optional[str] = typer.Argument(None, help="JSON lines or CSV file; - or nothing for standard input."),
    channel: str = typer.Option(..., "--channel", "-c", help="Channel name: a rerun with the same name resumes."),
    fmt: str = typer.Option("jsonl", "--format", "-f", help="jsonl (one JSON object per line) or csv (header)."),
    offset_field: Optional[str] = typer.Option(
        None, "--offset-field", help="Field whose value is the offset token (default: the record number)."),
    on_error: str = typer.Option("ABORT", "--on-error", help="CONTINUE | SKIP_BATCH | ABORT (stop at a bad record)."),
    batch_rows: int = typer.Option(1000, "--batch-rows", help="Records per insert_rows call (SKIP_BATCH's unit)."),
    max_client_lag: str = typer.Option("1 second", "--max-client-lag", help="Commit at least this often."),
    warehouse: Optional[str] = typer.Option(None, "--warehouse", "-w", help="A warehouse instead of the project's."),
    project: Path = ProjectOption, profile: Optional[str] = ProfileOption, as_json: bool = JsonOption,
) -> None:
    """Load records into TABLE through channel NAME. Each record's offset token is its number (or --offset-field);
    records up to the channel's committed token are skipped, so rerunning after a crash loads each one once.
    Exits 1 when ON_ERROR = ABORT stopped at a bad record (everything before it is committed)."""
    from dtables.client import Client
    from dtables.ingest.loader import FORMATS, load

    with failing_cleanly():
        if fmt not in FORMATS:
            raise typer.BadParameter(f"--format must be one of {', '.join(FORMATS)}")
        if warehouse is not None:
            import dtables

            session = dtables.connect(warehouse)
        else:
            session = project_session(project, profile)
        client = Client(session, max_client_lag=max_client_lag)
        try:
            ch = client.open_channel(channel, table, on_error=on_error)
            if file in (None, "-"):
                summary = load(ch, sys.stdin, fmt, offset_field, batch_rows)
            else:
                with open(file, newline="" if fmt == "csv" else None, encoding="utf-8") as stream:
                    summary = load(ch, stream, fmt, offset_field, batch_rows)
            ch.close()
            committed = ch.get_latest_committed_offset_token()
        finally:
            client.close()
        for problem in summary.problems[:_SHOWN_PROBLEMS]:
            err.print(f"{problem}", highlight=False, markup=False, soft_wrap=True)
        if len(summary.problems) > _SHOWN_PROBLEMS:
            err.print(f"... and {len(summary.problems) - _SHOWN_PROBLEMS} more problem(s)", highlight=False)
        result = {"table": ch.table, "channel": channel, "read": summary.read, "skipped": summary.skipped,
                  "inserted": summary.inserted, "rejected": summary.rejected, "aborted": summary.aborted,
                  "resumed_after": summary.resumed_after, "committed_offset_token": committed}
        if as_json:
            print(json.dumps(result))
        else:
            console.print(
                f"{ch.table} via channel {channel}: read {summary.read}, skipped {summary.skipped} already "
                f"committed, inserted {summary.inserted}, rejected {summary.rejected}; committed offset token "
                f"{committed}" + (" (stopped at the first bad record: ON_ERROR = ABORT)" if summary.aborted else ""),
                highlight=False)
        if summary.aborted:
            raise typer.Exit(1)
