"""Check a project without touching data: syntax, unknown tables and columns, cycles, templates.

Schemas come from the project itself: the column definitions of each source's CREATE TABLE and, in dependency
order, the output columns of each model. Errors name the file and line.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlglot import exp
from sqlglot.errors import OptimizeError, SqlglotError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from dtables.catalog import normalize, qualified
from dtables.project.config import ProjectError, format_problems
from dtables.project.loader import DynamicTableSpec, Project, load_project
from dtables.sql.chains import shallow
from dtables.sql.dialect import parse_one, to_spark
from scheduler import SchedulerError

Schema = dict[str, dict[str, str]]


def _source_schema(project: Project) -> tuple[Schema, set[str]]:
    schema: Schema = {}
    opaque: set[str] = set()  # CTAS or LOCATION sources: columns known only once created
    for source in project.sources:
        tree = parse_one(source.statement)
        if isinstance(tree.this, exp.Schema):
            schema[source.name] = {c.name: to_spark(c.args["kind"]) if c.args.get("kind") else "string"
                                   for c in tree.this.expressions if isinstance(c, exp.ColumnDef)}
        else:
            opaque.add(source.name)
    return schema, opaque


def _line_of(model: DynamicTableSpec, word: str) -> int:
    for offset, line in enumerate(model.query.splitlines()):
        if word.lower() in line.lower():
            return model.query_line + offset
    return model.query_line


def _nested(schema: Schema) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, cols in schema.items():
        db, table = name.split(".")
        out.setdefault(db, {})[table] = cols
    return out


def output_columns(model: DynamicTableSpec, schema: Schema, opaque: set[str]) -> dict[str, str] | None:
    """Check one model against the schema; return its output columns and types (None if unknowable)."""
    tree = shallow(parse_one(model.query))
    known = set(schema) | opaque
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    for table in tree.find_all(exp.Table):
        name = normalize(qualified(table.db, table.name))
        if table.name.lower() in ctes and not table.db:
            continue
        if name not in known:
            raise ProjectError(f"{model.path}:{_line_of(model, table.name)}: unknown table {table.name}")
    if any(normalize(qualified(t.db, t.name)) in opaque for t in tree.find_all(exp.Table)):
        return None
    try:
        qualified_tree = qualify(tree, schema=_nested(schema), dialect="spark", db="default",
                                 validate_qualify_columns=True)
    except OptimizeError as e:
        word = str(e).split("Column '")[-1].split("'")[0] if "Column '" in str(e) else ""
        raise ProjectError(f"{model.path}:{_line_of(model, word) if word else model.query_line}: {e}") from e
    except SqlglotError as e:
        raise ProjectError(f"{model.path}:{model.query_line}: {e}") from e
    typed = annotate_types(qualified_tree, schema=_nested(schema), dialect="spark")
    columns: dict[str, str] = {}
    for select in typed.selects if isinstance(typed, exp.Query) else []:
        name = select.alias_or_name
        if name in columns:
            raise ProjectError(f"{model.path}:{_line_of(model, name)}: column {name} appears twice in the output")
        dtype = to_spark(select.type) if select.type else "string"
        columns[name] = "string" if dtype.upper() in ("UNKNOWN", "NULL") else dtype
    return columns


def validate_project(folder: Any, profile: str | None = None) -> Project:
    """Load and check a project; raise ProjectError listing every problem with file and line."""
    return check_project(load_project(folder, profile))[0]


def check_project(project: Project) -> tuple[Project, Schema]:
    """Check a loaded project; return it with the schema of every table whose columns are known."""
    schema, opaque = _source_schema(project)
    names = {s.name for s in project.sources} | {m.name for m in project.dynamic_tables}
    problems: list[str] = []
    counts = Counter([s.name for s in project.sources] + [m.name for m in project.dynamic_tables])
    for name in sorted(names):
        if counts[name] > 1:
            problems.append(f"{name} is defined {counts[name]} times (sources and models share one namespace)")
    try:
        order = project.dag().topological_order()
    except SchedulerError as e:
        raise ProjectError(f"models: {e}") from e
    models = {m.name: m for m in project.dynamic_tables}
    for name in order:
        model = models[name]
        try:
            columns = output_columns(model, schema, opaque)
        except ProjectError as e:
            problems.append(str(e))
            opaque.add(model.name)
            continue
        if columns is None:
            opaque.add(model.name)
        else:
            schema[model.name] = columns
    if problems:
        raise ProjectError(format_problems(problems))
    return project, schema
