"""The ``dtables`` command line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from dtables.errors import DtablesError

app = typer.Typer(help="Declarative dynamic tables on Spark and Delta Lake.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
console = Console()
err = Console(stderr=True)

WarehouseOption = typer.Option("warehouse", "--warehouse", "-w", envvar="DTABLES_WAREHOUSE",
                               help="Warehouse path or URI.")


def print_dataframe(df: object, limit: int = 1000) -> None:
    rows = df.limit(limit).collect()  # type: ignore[attr-defined]
    table = Table(*df.columns, show_lines=False)  # type: ignore[attr-defined]
    for row in rows:
        table.add_row(*("NULL" if v is None else str(v) for v in row))
    console.print(table)


@app.command()
def sql(
    file: Optional[str] = typer.Argument(None, help="SQL file to run, or - for standard input."),
    execute: Optional[str] = typer.Option(None, "--execute", "-e", help="SQL text to run."),
    warehouse: str = WarehouseOption,
) -> None:
    """Run SQL statements and print the result of the last one as a table."""
    import dtables

    if execute is not None:
        text = execute
    elif file in (None, "-"):
        text = sys.stdin.read()
    else:
        text = Path(file).read_text()
    try:
        with dtables.connect(warehouse) as session:
            df = session.sql(text)
            if df is not None and df.columns:
                print_dataframe(df)
    except DtablesError as e:
        err.print(f"[red]error:[/red] {e}")
        raise typer.Exit(1) from None


@app.command()
def version() -> None:
    """Print the dtables version."""
    import dtables

    console.print(dtables.__version__)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
