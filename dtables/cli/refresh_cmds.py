"""Verbs that change or inspect the warehouse against the project: plan, apply, refresh, history."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Optional

import typer
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from dtables.cli.app import JsonOption, ProfileOption, ProjectOption, app, console, failing_cleanly, \
    print_dataframe, print_rows, project_session
from scheduler.vocabulary import RefreshState

PLAN_COLUMNS = ["kind", "name", "status", "refresh", "why", "estimate"]


def _plan(project: Path, profile: Optional[str]):  # type: ignore[no-untyped-def]
    from dtables.project.deploy import plan_project
    from dtables.project.validate import validate_project

    spec = validate_project(project, profile)  # every file checked before Spark starts or anything changes
    session = project_session(project, profile)
    return session, spec, plan_project(session, spec)


@app.command()
def plan(
    project: Path = ProjectOption, profile: Optional[str] = ProfileOption, as_json: bool = JsonOption,
    do_apply: bool = typer.Option(False, "--apply", help="Apply the plan after showing it."),
) -> None:
    """Show what apply would do: each table new, changed, unchanged or removed, and how it refreshes."""
    with failing_cleanly():
        session, spec, changes = _plan(project, profile)
        print_rows(PLAN_COLUMNS, [[c.kind, c.name, c.status, c.refresh, c.reason, c.estimate] for c in changes],
                   as_json)
        if do_apply:
            _apply(session, spec, changes)


def _apply(session, spec, changes) -> None:  # type: ignore[no-untyped-def]
    from dtables.project.deploy import apply_plan

    done = apply_plan(session, spec, changes)
    console.print(f"applied {len(done)} change(s)" if done else "nothing to apply: the warehouse matches")


@app.command()
def apply(project: Path = ProjectOption, profile: Optional[str] = ProfileOption) -> None:
    """Make the warehouse match the project folder."""
    with failing_cleanly():
        session, spec, changes = _plan(project, profile)
        print_rows(PLAN_COLUMNS[:-1], [[c.kind, c.name, c.status, c.refresh, c.reason] for c in changes
                                       if c.status != "UNCHANGED"], False)
        _apply(session, spec, changes)


@app.command("refresh")
def refresh_cmd(
    names: Optional[list[str]] = typer.Argument(None, help="Dynamic tables (default: all); upstreams come along."),
    project: Path = ProjectOption, profile: Optional[str] = ProfileOption, as_json: bool = JsonOption,
) -> None:
    """Refresh dynamic tables now, with their upstreams, to one data timestamp."""
    from dtables.dynamic import definition as defs

    with failing_cleanly():
        session = project_session(project, profile)
        wanted = names or [d.name for d in defs.load_all(session.store)]
        if not wanted:
            console.print("no dynamic tables to refresh (run `dtables apply` first)")
            return
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                      console=console, transient=True, disable=as_json) as progress:
            progress.add_task(f"refreshing {', '.join(wanted)} and their upstreams", total=None)
            records = session.refresh(wanted, raise_on_failure=False)
        rows = [[r.name, r.action, r.state, r.rows_inserted, r.rows_deleted, r.rows_updated,
                 round((r.ended_at - r.started_at).total_seconds(), 2) if r.ended_at else None,
                 r.reason if r.state == RefreshState.SUCCEEDED else r.error] for r in records]
        print_rows(["table", "action", "state", "inserted", "deleted", "updated", "seconds", "why / error"],
                   rows, as_json, title=f"refresh at {records[0].data_timestamp:%Y-%m-%d %H:%M:%S} UTC")
        if any(r.state != RefreshState.SUCCEEDED for r in records):
            raise typer.Exit(1)


app.command("refresh-now", help="Same as refresh.")(refresh_cmd)


@app.command()
def optimize(
    names: Optional[list[str]] = typer.Argument(None, help="Tables or dynamic tables (default: every dynamic table)."),
    project: Path = ProjectOption, profile: Optional[str] = ProfileOption, as_json: bool = JsonOption,
) -> None:
    """Compact tables with Delta OPTIMIZE (clustering them where CLUSTER BY is declared): the small files that
    incremental refreshes leave behind become a few large ones."""
    from dtables.dynamic.optimize import optimize as run_optimize

    with failing_cleanly():
        session = project_session(project, profile)
        done = run_optimize(session, names or None)
        if not done:
            console.print("no dynamic tables to optimize (run `dtables apply` first)")
            return
        rows = [[c.name, c.files_before, c.files_after, c.version, ", ".join(c.clustering) or None] for c in done]
        print_rows(["table", "files_before", "files_after", "version", "clustered_by"], rows, as_json)


@app.command()
def history(
    name: Optional[str] = typer.Argument(None, help="One dynamic table (default: all)."),
    since: Optional[str] = typer.Option(None, "--since", help="ISO timestamp: only refreshes after it."),
    project: Path = ProjectOption, profile: Optional[str] = ProfileOption, as_json: bool = JsonOption,
) -> None:
    """Refresh history: one row per refresh, oldest first."""
    with failing_cleanly():
        session = project_session(project, profile)
        df = session.history(name, dt.datetime.fromisoformat(since) if since else None)
        keep = [c for c in ("name", "refresh_id", "trigger", "action", "state", "data_timestamp",
                            "rows_inserted", "rows_deleted", "rows_updated", "target_version", "reason", "cost_reason",
                            "error")
                if c in df.columns]
        print_dataframe(df.select(*keep) if not as_json else df, as_json)
    _ = json
