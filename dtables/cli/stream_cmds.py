"""Verbs for streams and storage: ``streams`` (list them with their frontiers and staleness) and ``vacuum``
(frontier-aware VACUUM of the project's tables)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional, TextIO

import typer

from dtables.cli.app import JsonOption, ProfileOption, ProjectOption, app, console, failing_cleanly, print_rows, \
    project_session

STREAM_COLUMNS = ["name", "source", "source_type", "mode", "frontier", "stale", "stale_after", "last_consumed"]


@app.command()
def streams(project: Path = ProjectOption, profile: Optional[str] = ProfileOption, as_json: bool = JsonOption) -> None:
    """List the streams: source, mode, frontier (version per base table), stale, stale_after, last consumed."""
    from dtables.state import streams as st
    from dtables.streams.statements import describe

    with failing_cleanly():
        session = project_session(project, profile)
        rows = []
        for stream in st.all_streams(session.store):
            row = describe(session, stream.name)
            row["frontier"] = json.loads(row["frontier"])
            rows.append([row[c] if as_json or c != "frontier" else _frontier_text(row[c]) for c in STREAM_COLUMNS])
        if not rows and not as_json:
            console.print("no streams")
            return
        print_rows(STREAM_COLUMNS, rows, as_json)


def _frontier_text(frontier: dict[str, int]) -> str:
    return ", ".join(f"{table}@{version}" for table, version in sorted(frontier.items()))


@contextmanager
def _jvm_console_to_stderr(active: bool) -> Iterator[TextIO]:
    """Delta's VACUUM prints progress on the JVM's standard output, which is this process's: with ``--json`` the
    JVM (started inside the block) gets standard error as its output, and the JSON goes to the real one."""
    if not active:
        yield sys.stdout
        return
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with os.fdopen(os.dup(saved), "w") as out:
            yield out
    finally:
        os.dup2(saved, 1)
        os.close(saved)


@app.command()
def vacuum(
    tables: Optional[list[str]] = typer.Argument(None, help="Tables to vacuum (default: every table of the "
                                                            "warehouse, dynamic tables included)."),
    retain_hours: Optional[float] = typer.Option(None, "--retain-hours", min=0,
                                                 help="Hours of removed files to keep (default: each table's "
                                                      "delta.deletedFileRetentionDuration)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="List the files VACUUM would delete; delete nothing."),
    project: Path = ProjectOption, profile: Optional[str] = ProfileOption, as_json: bool = JsonOption,
) -> None:
    """VACUUM tables, never removing what a live stream or dynamic table frontier still needs; says what was
    kept and why."""
    from dtables.catalog import TABLE_KINDS
    from dtables.streams.vacuum import plan_vacuum, run_vacuum

    with failing_cleanly(), _jvm_console_to_stderr(as_json) as out:
        session = project_session(project, profile)
        names = tables or [o["name"] for o in session.catalog.objects() if o["kind"] in TABLE_KINDS]
        plans = [plan_vacuum(session, name, retain_hours) for name in names]  # every name checked before any runs
        results: list[dict[str, Any]] = []
        for plan in plans:
            outcome = run_vacuum(session, plan, dry_run)
            entry: dict[str, Any] = {
                "table": plan.table, "location": plan.location, "requested_hours": plan.requested_hours,
                "retain_hours": plan.retain_hours, "kept_for": plan.reasons()}
            if dry_run:
                entry["files_to_delete"] = [r[0] for r in outcome.collect()]
            results.append(entry)
        if as_json:
            print(json.dumps(results, indent=2, default=str), file=out, flush=True)
            return
        for r in results:
            raised = f"{r['retain_hours']:g} h (asked {r['requested_hours']:g} h)" \
                if r["retain_hours"] > r["requested_hours"] else f"{r['retain_hours']:g} h"
            verb = "would delete" if dry_run else "vacuumed"
            count = f": {len(r['files_to_delete'])} file(s)" if dry_run else ""
            console.print(f"{r['table']}: {verb} files removed more than {raised} ago{count}", highlight=False)
            for reason in r["kept_for"]:
                console.print(f"  {reason}", highlight=False)
            for path in r.get("files_to_delete", []):
                console.print(f"  {path}", highlight=False)
        if not results:
            console.print("no tables to vacuum")

