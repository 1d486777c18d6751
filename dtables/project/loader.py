"""Load a project folder into definitions: sources, dynamic tables, streams.

    dtables.yml            name, warehouse, Spark settings, defaults, vars, profiles
    sources/*.sql          CREATE TABLE statements; seeds/<table>.csv loads a new table's first rows
    models/*.sql           one dynamic table per file, named after the file: a SELECT, settings in leading
                           `-- key: value` comment lines (target_lag, refresh_mode, initialize, comment)

Names of sources, models and streams are SQL identifiers (``[A-Za-z_][A-Za-z0-9_]*``, optionally ``db.name``): a
model's file name is written unquoted into its CREATE DYNAMIC TABLE. Settings are read by the parser of
``CREATE DYNAMIC TABLE`` (``dtables.sql.dynamic_syntax.setting``), and every statement ``apply`` would send is parsed
by the SQL parser here, so what SQL refuses the project refuses before anything runs.
    streams/*.sql          CREATE STREAM statements
    macros/*.sql           Jinja macros, callable from every file

Every SQL file is a Jinja template with ``ref('name')`` (a source, model or stream of the project) and
``var('name'[, default])``. Dependencies come from the SQL itself (the tables each query reads), never from a list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
from pydantic import BaseModel, ConfigDict, ValidationError
from sqlglot import exp
from sqlglot.errors import ParseError

from dtables.catalog import normalize, qualified, quote
from dtables.project.config import (
    Initialize,
    ProjectConfig,
    ProjectError,
    RefreshMode,
    TargetLag,
    format_problems,
    load_config,
    problem_text,
)
from dtables.sql.dialect import parse_one, split_statements, to_spark
from dtables.sql.expressions import CreateStream
from dtables.sql.references import table_names
from scheduler import DAG

_HEADER = re.compile(r"^\s*--\s*([A-Za-z_]+)\s*:\s*(.*?)\s*$")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def name_problem(name: str) -> str | None:
    """Why ``name`` (``name`` or ``db.name``) is not an unquoted SQL identifier, or None when it is one."""
    parts = name.split(".")
    if len(parts) > 2 or not all(_IDENTIFIER.match(part) for part in parts):
        return (f"{name!r} is not a SQL identifier: a name is ASCII letters, digits and _, not starting with a "
                "digit (db.name for another database)")
    try:  # a keyword (select, from, ...) is a word the SQL parser does not take for a name
        tree = parse_one(f"CREATE DYNAMIC TABLE {name} TARGET_LAG = DOWNSTREAM AS SELECT 1")
        read = [part.name for part in tree.this.parts]
    except (ParseError, AttributeError):
        read = []
    if read != parts:
        return f"{name!r} is a reserved word of SQL and cannot name a table unquoted"
    return None


class ModelSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    target_lag: TargetLag | None = None
    refresh_mode: RefreshMode | None = None
    initialize: Initialize | None = None
    comment: str | None = None


@dataclass(frozen=True)
class SourceSpec:
    name: str
    statement: str
    path: Path
    line: int
    seed: Path | None = None


@dataclass(frozen=True)
class DynamicTableSpec:
    name: str
    query: str
    target_lag: str
    refresh_mode: str
    initialize: str
    comment: str | None
    path: Path
    query_line: int
    reads: tuple[str, ...] = ()

    def create_statement(self) -> str:
        comment = f" COMMENT = {to_spark(exp.Literal.string(self.comment))}" if self.comment else ""
        lag = "DOWNSTREAM" if self.target_lag.upper() == "DOWNSTREAM" else to_spark(exp.Literal.string(self.target_lag))
        return (f"CREATE OR REPLACE DYNAMIC TABLE {quote(self.name)} TARGET_LAG = {lag} REFRESH_MODE = "
                f"{self.refresh_mode} INITIALIZE = {self.initialize}{comment} AS\n{self.query}")


@dataclass(frozen=True)
class StreamSpec:
    name: str
    statement: str
    path: Path
    line: int


@dataclass(frozen=True)
class Project:
    folder: Path
    config: ProjectConfig
    sources: tuple[SourceSpec, ...]
    dynamic_tables: tuple[DynamicTableSpec, ...]
    streams: tuple[StreamSpec, ...] = ()
    names: frozenset[str] = field(default_factory=frozenset)

    def dynamic_table(self, name: str) -> DynamicTableSpec:
        for d in self.dynamic_tables:
            if d.name == normalize(name) or d.name == name:
                return d
        raise ProjectError(f"no dynamic table {name} in project {self.config.name}")

    def dag(self) -> Any:
        """The DAG of dynamic tables (edges from the dynamic tables each one reads); rejects cycles."""
        models = {d.name for d in self.dynamic_tables}
        return DAG({d.name: [r for r in d.reads if r in models] for d in self.dynamic_tables})


class _Templates:
    """The Jinja environment of one project: ref(), var() and the macros of macros/*.sql."""

    def __init__(self, folder: Path, config: ProjectConfig, names: set[str]):
        self.folder = folder
        self.config = config
        self.names = names
        self.env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(folder)), undefined=jinja2.StrictUndefined,
                                      keep_trailing_newline=True)
        self.env.globals.update(ref=self._ref, var=self._var)
        for macro_file in sorted((folder / "macros").glob("*.sql")):
            module = self._template(macro_file).module
            self.env.globals.update({k: getattr(module, k) for k in dir(module) if not k.startswith("_")})

    def _ref(self, name: str) -> str:
        if normalize(name) not in self.names:
            raise ProjectError(f"ref('{name}') names nothing in this project (sources, models, streams)")
        return name

    _MISSING = object()

    def _var(self, name: str, default: Any = _MISSING) -> Any:
        if name in self.config.vars:
            return self.config.vars[name]
        if default is not self._MISSING:
            return default
        raise ProjectError(f"var('{name}') is not set in dtables.yml vars (or the active profile)")

    def _template(self, path: Path) -> jinja2.Template:
        try:
            return self.env.get_template(path.relative_to(self.folder).as_posix())
        except jinja2.TemplateSyntaxError as e:
            raise ProjectError(f"{path}:{e.lineno}: template error: {e.message}") from e

    def render(self, path: Path) -> str:
        try:
            return self._template(path).render()
        except ProjectError as e:
            raise ProjectError(f"{path}:{_jinja_line(e)}: {e}") from e
        except jinja2.TemplateError as e:
            raise ProjectError(f"{path}:{getattr(e, 'lineno', None) or _jinja_line(e)}: template error: {e}") from e


def _jinja_line(error: BaseException) -> int:
    """The template line an exception raised inside rendering points at (Jinja rewrites tracebacks)."""
    tb = error.__traceback__
    line = 1
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith(".sql"):
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _names_in(folder: Path) -> set[str]:
    """Every name a ref() may point to, found before rendering (sources by CREATE TABLE, models by file name)."""
    names = {normalize(p.stem) for p in (folder / "models").glob("*.sql")}
    pattern = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?(?:TABLE\s+)?(?:STREAM\s+|TABLE\s+)(?:IF\s+NOT\s+EXISTS\s+)?"
                         r"([`\w.]+)", re.IGNORECASE)
    for sub in ("sources", "streams"):
        for p in (folder / sub).glob("*.sql"):
            names |= {normalize(m.group(1)) for m in pattern.finditer(p.read_text())}
    return names


def _header(path: Path, text: str) -> tuple[ModelSettings, int]:
    """Settings from leading ``-- key: value`` lines, and the line where the query starts."""
    data: dict[str, Any] = {}
    lines_of: dict[str, int] = {}
    lines = text.splitlines()
    start = 0
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        match = _HEADER.match(line)
        if match is None:
            if line.strip().startswith("--"):
                continue
            start = i
            break
        data[match.group(1).lower()] = match.group(2).strip("'\"") or None
        lines_of[match.group(1).lower()] = i + 1
    else:
        start = len(lines)
    try:
        settings = ModelSettings.model_validate(data)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            key = str(err["loc"][0]) if err["loc"] else "?"
            message = "unknown setting" if err["type"] == "extra_forbidden" else problem_text(err)
            problems.append(f"{path}:{lines_of.get(key, 1)}: {key}: {message}")
        raise ProjectError(format_problems(problems)) from e
    return settings, start + 1


def _statements(path: Path, text: str) -> list[tuple[str, int]]:
    out, cursor = [], 0
    for statement in split_statements(text):
        at = text.find(statement, cursor)
        cursor = at + len(statement)
        out.append((statement, text.count("\n", 0, at) + 1))
    return out



def _syntax_problem(path: Path, first_line: int, e: ParseError) -> str:
    """`path:line: syntax error: ...` for a statement starting at `first_line` of the file."""
    err = e.errors[0] if e.errors else {}
    return f"{path}:{first_line + (err.get('line') or 1) - 1}: syntax error: {err.get('description', e)}"

def load_project(folder: str | Path, profile: str | None = None) -> Project:
    """Read, render and check the structure of a project folder. Raises ProjectError naming file and line."""
    folder = Path(folder)
    config = load_config(folder, profile)
    names = _names_in(folder)
    templates = _Templates(folder, config, names)
    problems: list[str] = []

    sources: list[SourceSpec] = []
    for path in sorted((folder / "sources").glob("*.sql")):
        try:
            for statement, line in _statements(path, templates.render(path)):
                try:
                    tree = parse_one(statement)
                except ParseError as e:
                    problems.append(f"{path}:{line + (e.errors[0].get('line') or 1) - 1}: syntax error: "
                                    f"{e.errors[0]['description'] if e.errors else e}")
                    continue
                if not (isinstance(tree, exp.Create) and str(tree.args.get("kind")).upper() == "TABLE"):
                    problems.append(f"{path}:{line}: sources hold CREATE TABLE statements, not "
                                    f"{statement.split()[0].upper()}")
                    continue
                target = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
                written = qualified(target.db, target.name)
                if name_problem(written):
                    problems.append(f"{path}:{line}: source table name {name_problem(written)}")
                    continue
                name = normalize(written)
                seed = next((p for p in (folder / "seeds").glob(f"{target.name}.*")
                             if p.suffix in (".csv", ".json", ".jsonl")), None)
                sources.append(SourceSpec(name, statement, path, line, seed))
        except ProjectError as e:
            problems.append(str(e))

    models: list[DynamicTableSpec] = []
    for path in sorted((folder / "models").glob("*.sql")):
        if name_problem(path.stem):
            problems.append(f"{path}: model name (the file's name) {name_problem(path.stem)}")
            continue
        try:
            text = templates.render(path)
            settings, query_line = _header(path, text)
            query = "\n".join(text.splitlines()[query_line - 1:]).strip().rstrip(";").strip()
            if not query:
                problems.append(f"{path}:{query_line}: no query: a model file holds one SELECT")
                continue
            try:
                tree = parse_one(query)
            except ParseError as e:
                problems.append(_syntax_problem(path, query_line, e))
                continue
            if not isinstance(tree, exp.Query):
                problems.append(f"{path}:{query_line}: a model holds one SELECT, not {type(tree).__name__}")
                continue
            d = config.defaults
            spec = DynamicTableSpec(
                name=normalize(path.stem), query=query, target_lag=settings.target_lag or d.target_lag,
                refresh_mode=settings.refresh_mode or d.refresh_mode, initialize=settings.initialize or d.initialize,
                comment=settings.comment, path=path, query_line=query_line,
                reads=tuple(sorted({normalize(t) for t in table_names(tree)})))
            # What apply will send, through the SQL parser: anything the statement parser refuses is found now.
            try:
                parse_one(spec.create_statement())
            except ParseError as e:
                err = e.errors[0] if e.errors else {}
                problems.append(f"{path}: the CREATE DYNAMIC TABLE this file makes is refused: "
                                f"{err.get('description', e)}")
                continue
            models.append(spec)
        except ProjectError as e:
            problems.append(str(e))

    streams: list[StreamSpec] = []
    for path in sorted((folder / "streams").glob("*.sql")):
        try:
            for statement, line in _statements(path, templates.render(path)):
                try:
                    tree = parse_one(statement)
                except ParseError as e:
                    problems.append(_syntax_problem(path, line, e))
                    continue
                if not isinstance(tree, CreateStream) or not isinstance(tree.this, exp.Table):
                    problems.append(f"{path}:{line}: streams hold CREATE STREAM statements")
                    continue
                written = qualified(tree.this.db, tree.this.name)
                if name_problem(written):
                    problems.append(f"{path}:{line}: stream name {name_problem(written)}")
                    continue
                streams.append(StreamSpec(normalize(written), statement, path, line))
        except ProjectError as e:
            problems.append(str(e))

    if problems:
        raise ProjectError(format_problems(problems))
    return Project(folder, config, tuple(sources), tuple(models), tuple(streams), frozenset(names))
