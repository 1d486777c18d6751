"""Verbs about the project folder: init, validate, dag."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from dtables.cli.app import ProfileOption, ProjectOption, app, console, failing_cleanly


@app.command()
def init(directory: Path = typer.Argument(Path("."), help="Folder for the new project.")) -> None:
    """Create a small working project (dtables.yml, a source with seed data, two dynamic tables)."""
    from dtables.project.scaffold import init_project

    with failing_cleanly():
        written = init_project(directory)
    console.print(f"created project in {directory}:")
    for path in written:
        console.print(f"  {path.relative_to(directory)}")
    console.print(f"next: cd {directory} && dtables apply && dtables refresh")


@app.command()
def validate(project: Path = ProjectOption, profile: Optional[str] = ProfileOption) -> None:
    """Check every file without touching data: syntax, unknown tables/columns, cycles, templates."""
    from dtables.project.validate import validate_project

    with failing_cleanly():
        p = validate_project(project, profile)
    console.print(f"ok: {len(p.sources)} source table(s), {len(p.dynamic_tables)} dynamic table(s), "
                  f"{len(p.streams)} stream(s)")


@app.command()
def dag(
    fmt: str = typer.Option("text", "--format", help="text, mermaid, dot or png."),
    output: Path = typer.Option(Path("dag.png"), "--output", "-o", help="File written by --format png."),
    project: Path = ProjectOption, profile: Optional[str] = ProfileOption,
) -> None:
    """Print the dynamic tables' dependency graph with each table's target lag, last refresh and suspension."""
    from dtables.cli.daemon_cmds import dag_node_notes, render_dag_png
    from dtables.project.validate import validate_project

    with failing_cleanly():
        p = validate_project(project, profile)
        graph = p.dag()
        lags = {d.name: d.target_lag for d in p.dynamic_tables}
        notes = dag_node_notes(project, profile)  # from the warehouse's state store, if it exists
        label = lambda name: "; ".join([f"lag {lags.get(name, '?')}", *notes.get(name, [])])  # noqa: E731
        renderers = {"text": graph.to_text, "mermaid": graph.to_mermaid, "dot": graph.to_dot}
        if fmt == "png":
            console.print(f"wrote {output} ({render_dag_png(graph, label, output)})")
            return
        if fmt not in renderers:
            raise typer.BadParameter(f"--format must be one of {', '.join([*renderers, 'png'])}")
        print(renderers[fmt](label=label))
