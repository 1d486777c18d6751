"""The typer app, shared options and output helpers of the CLI."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dtables.errors import DtablesError

app = typer.Typer(help="Declarative dynamic tables on Spark and Delta Lake.", no_args_is_help=True,
                  pretty_exceptions_enable=False, add_completion=False)
console = Console()
err = Console(stderr=True)

ProjectOption = typer.Option(".", "--project", "-p", envvar="DTABLES_PROJECT", help="Project folder.")
ProfileOption = typer.Option(None, "--profile", envvar="DTABLES_PROFILE", help="Profile of dtables.yml.")
JsonOption = typer.Option(False, "--json", help="Print JSON for programs instead of tables.")

F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def failing_cleanly() -> Iterator[None]:
    """dtables errors print as one readable message and exit 1; nothing else is swallowed."""
    try:
        yield
    except DtablesError as e:
        # the message is plain text: brackets in it (`dtables[png]`, `a[0]`) are not rich markup
        err.print(f"[red]error:[/red] {escape(str(e))}", highlight=False, markup=True, soft_wrap=True)
        raise typer.Exit(1) from None


def rows_table(columns: list[str], rows: list[list[Any]], title: str | None = None) -> Table:
    table = Table(*columns, title=title)
    for row in rows:
        table.add_row(*("NULL" if v is None else str(v) for v in row))
    return table


def print_rows(columns: list[str], rows: list[list[Any]], as_json: bool, title: str | None = None) -> None:
    if as_json:
        print(json.dumps([dict(zip(columns, r)) for r in rows], default=str, indent=2))
    else:
        console.print(rows_table(columns, rows, title))


def print_dataframe(df: Any, as_json: bool = False, limit: int = 1000) -> None:
    rows = [list(r) for r in df.limit(limit).collect()]
    print_rows(list(df.columns), rows, as_json)


def project_session(project: Path, profile: str | None) -> Any:
    from dtables.project.connect import connect_project

    return connect_project(project, profile)
