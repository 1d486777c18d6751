"""Verbs that run SQL against a warehouse: sql, changes, show."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from differentiation.vocabulary import ChangeFormat
from dtables.cli.app import JsonOption, ProfileOption, ProjectOption, app, failing_cleanly, print_dataframe, \
    print_rows, project_session


@app.command()
def sql(
    file: Optional[str] = typer.Argument(None, help="SQL file to run, or - for standard input."),
    execute: Optional[str] = typer.Option(None, "--execute", "-e", help="SQL text to run."),
    project: Path = ProjectOption, profile: Optional[str] = ProfileOption, as_json: bool = JsonOption,
) -> None:
    """Run SQL statements and print the result of the last one."""
    if execute is not None:
        text = execute
    elif file in (None, "-"):
        text = sys.stdin.read()
    else:
        text = Path(file).read_text()
    with failing_cleanly():
        session = project_session(project, profile)
        df = session.sql(text)
        if df is not None and df.columns:
            print_dataframe(df, as_json)


def _bound(value: str) -> object:
    import datetime as dt

    if value.lstrip("-").isdigit():
        return int(value)
    return dt.datetime.fromisoformat(value)


@app.command()
def changes(
    table: str = typer.Argument(..., help="Table, view or dynamic table."),
    since: str = typer.Option(..., "--since", help="A version number or an ISO timestamp (exclusive start)."),
    until: Optional[str] = typer.Option(None, "--until", help="End version or timestamp (inclusive)."),
    append_only: bool = typer.Option(False, "--append-only", help="Only rows inserted in the interval."),
    project: Path = ProjectOption, profile: Optional[str] = ProfileOption, as_json: bool = JsonOption,
) -> None:
    """Print what changed in TABLE since a version or timestamp (a CHANGES query)."""
    with failing_cleanly():
        session = project_session(project, profile)
        df = session.changes(table, start=_bound(since), end=_bound(until) if until else None,
                             information=ChangeFormat.APPEND_ONLY if append_only else ChangeFormat.DEFAULT)
        print_dataframe(df, as_json)


@app.command()
def show(
    name: str = typer.Argument(..., help="A table, view or dynamic table."),
    project: Path = ProjectOption, profile: Optional[str] = ProfileOption, as_json: bool = JsonOption,
) -> None:
    """Describe an object: kind, location or definition, and its columns."""
    from dtables.errors import ObjectNotFound

    with failing_cleanly():
        session = project_session(project, profile)
        obj = session.catalog.lookup(name)
        if obj is None:
            raise ObjectNotFound(f"{name} is not a table, view or dynamic table of this warehouse")
        info = [["kind", obj["kind"]], ["location", obj["location"]], ["definition", obj["definition"]]]
        print_rows(["property", "value"], [r for r in info if r[1] is not None], as_json, title=obj["name"])
        columns = session.table(obj["name"]).schema.fields
        print_rows(["column", "type"], [[f.name, f.dataType.simpleString()] for f in columns], as_json)


@app.command()
def version() -> None:
    """Print the dtables version."""
    import dtables

    print(dtables.__version__)
