"""CHANGES queries in SQL and Python: ``FROM t CHANGES(INFORMATION => ...) AT|BEFORE(...) [END(...)]``.

On a table, the clause becomes a change read (``dtables.changes``). On a view, the view's query is differentiated
(``differentiation``) into a plan over its base tables' changes and snapshots, each read over the interval the
bounds resolve to for that table. Either way the table reference is replaced by a temporary view holding the change
set, so the rest of the statement (filters, joins, projections of ``METADATA$`` columns) runs as ordinary Spark SQL.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

import differentiation as diff
from differentiation.vocabulary import ChangeFormat
from dtables import changes as ch
from dtables.catalog import TABLE_KINDS, normalize, qualified, without_state_columns
from dtables.catalog.constraints import KeyStore
from dtables.catalog.warehouse import Warehouse
from dtables.changes.interval import open_log
from dtables.changes.sources import IntervalSources, differentiation_stats
from dtables.changes.window import narrowed
from dtables.errors import ChangeTrackingError, SqlError, UsageTypeError
from dtables.sql.references import aliased_table, replace_table, table_names
from dtables.sql.views import view_query
from dtables.state import streams as st
from dtables.sql.dialect import to_spark

_view_names = itertools.count()


@dataclass(frozen=True)
class Bounds:
    """The AT/BEFORE and END of a CHANGES clause, as ``dtables.changes.Bound``s."""

    at: ch.Bound | None = None
    before: ch.Bound | None = None
    end: ch.Bound | None = None

    @staticmethod
    def of(start: Any = None, end: Any = None, before: Any = None) -> Bounds:
        return Bounds(at=_as_bound(start), before=_as_bound(before), end=_as_bound(end))


def _as_bound(value: Any) -> ch.Bound | None:
    """Python values for ``session.changes``: a version (int), a datetime or ISO string, or a Bound."""
    if value is None or isinstance(value, ch.Bound):
        return value
    if isinstance(value, bool):
        raise UsageTypeError("a change bound is a version number, a timestamp or a Bound")
    if isinstance(value, int):
        return ch.Bound.version(value)
    if isinstance(value, (dt.datetime, str)):
        return ch.Bound.timestamp(value)
    raise UsageTypeError(f"a change bound is a version number, a timestamp or a Bound, not {value!r}")


def bound_of(warehouse: Warehouse, data: exp.HistoricalData, statement: str) -> ch.Bound:
    """The bound an ``AT|BEFORE(VERSION|TIMESTAMP|OFFSET|STREAM => ...)`` clause names."""
    kind = str(data.args.get("kind") or "").upper()
    value = data.expression
    if kind == "VERSION":
        return ch.Bound.version(int(_evaluate(warehouse, value)))
    if kind == "TIMESTAMP":
        return ch.Bound.timestamp(_evaluate(warehouse, value, cast="TIMESTAMP"))
    if kind == "OFFSET":
        return ch.Bound.offset(float(_evaluate(warehouse, value)))
    if kind == "STREAM":
        return stream_bound(warehouse, str(_evaluate(warehouse, value)), statement)
    raise SqlError(f"{data.this}({kind} => ...) is not supported; use VERSION, TIMESTAMP or OFFSET", statement)


def stream_bound(warehouse: Warehouse, name: str, statement: str) -> ch.Bound:
    """``AT(STREAM => 's')``: the stream's frontier as a bound. One base table: its version; several: the time the
    frontier last advanced (paper 3.3: a frontier used as a point in time is its last-updated timestamp)."""
    stream = st.get(warehouse.store, normalize(name))
    if stream is None:
        raise SqlError(f"AT(STREAM => '{name}'): there is no stream {normalize(name)}", statement)
    if len(stream.frontier) == 1:
        return ch.Bound.version(next(iter(stream.frontier.values())))
    return ch.Bound.timestamp(dt.datetime.fromisoformat(stream.consumed_at.replace("Z", "+00:00")))


def _evaluate(warehouse: Warehouse, value: exp.Expr, cast: str | None = None) -> Any:
    if isinstance(value, exp.Literal) and not value.is_string and cast is None:
        return value.this
    if isinstance(value, exp.Neg) and isinstance(value.this, exp.Literal) and cast is None:
        return "-" + value.this.this
    if cast == "TIMESTAMP" and isinstance(value, exp.Literal) and value.is_string:
        try:
            return dt.datetime.fromisoformat(value.this)
        except ValueError:
            pass
    text = to_spark(value)
    expression = f"CAST({text} AS {cast})" if cast else text
    return warehouse.spark.sql(f"SELECT {expression} AS v").first()[0]


def bounds_of(warehouse: Warehouse, clause: exp.Changes, statement: str) -> Bounds:
    start = clause.args.get("at_before")
    end = clause.args.get("end")
    if start is None:
        raise SqlError(f"CHANGES needs AT(...) or BEFORE(...) to say where the interval starts in statement: "
                       f"{statement}", statement)
    first = bound_of(warehouse, start, statement)
    last = bound_of(warehouse, end, statement) if end is not None else None
    if str(start.this).upper() == "BEFORE":
        return Bounds(before=first, end=last)
    return Bounds(at=first, end=last)


def information_of(clause: exp.Changes) -> str:
    info = clause.args["information"].name.upper()
    if info not in tuple(ChangeFormat):
        raise SqlError(f"CHANGES(INFORMATION => {info}) is not supported; use DEFAULT or APPEND_ONLY")
    return info


# -- change sets ----------------------------------------------------------------------------------------------------


def changes_of(warehouse: Warehouse, name: str, bounds: Bounds, information: str = ChangeFormat.DEFAULT) -> Any:
    """The change set of a table or view over ``bounds`` as a DataFrame (columns, then ``METADATA$`` columns)."""
    obj = warehouse.catalog.lookup(name)
    if obj is not None and obj["kind"] == "VIEW":
        return view_changes(warehouse, name, bounds, information)
    warehouse.catalog.ensure_registered([name])
    interval = _interval(warehouse, _spark_name(name, obj), bounds)
    df = ch.read_changes(warehouse.spark, interval, information).df
    return without_state_columns(df) if obj is not None and obj["kind"] == "DYNAMIC_TABLE" else df


def _interval(warehouse: Warehouse, table: str, bounds: Bounds, now: dt.datetime | None = None) -> ch.Interval:
    """The interval ``bounds`` name on ``table``, without the commits at either end that change no row (a
    compaction right after the start or right before the end, ``dtables.changes.window``): the same changes, without
    reading every file the compaction rewrote as deleted and inserted again."""
    interval = ch.resolve_interval(warehouse.spark, table, at=bounds.at, before=bounds.before, end=bounds.end, now=now)
    return narrowed(open_log(warehouse.spark, interval), interval)


def _spark_name(name: str, obj: Mapping[str, Any] | None) -> str:
    return normalize(name) if obj is not None and obj["kind"] in TABLE_KINDS else name


def table_schemas(warehouse: Warehouse, tables: list[str]) -> dict[str, dict[str, str]]:
    """Each table's columns and their Spark types, as ``differentiation.build_plan`` takes them."""
    out: dict[str, dict[str, str]] = {}
    for table in tables:
        warehouse.catalog.ensure_registered([table])
        fields = warehouse.spark.table(table).schema.fields
        out[table] = {f.name: f.dataType.simpleString() for f in fields}
    return out


def plan_view(warehouse: Warehouse, name: str) -> Any:
    """The differentiation plan of a view's query (views inside expanded)."""
    query = view_query(warehouse, name)
    tables = sorted({t for t in table_names(query)})
    try:
        return diff.build_plan(query, table_schemas(warehouse, tables))
    except diff.UnsupportedQuery as e:
        raise SqlError(f"cannot compute changes of view {name}: {e}") from e


def view_changes(warehouse: Warehouse, name: str, bounds: Bounds, information: str = ChangeFormat.DEFAULT) -> Any:
    plan = plan_view(warehouse, name)
    intervals = _view_intervals(warehouse, name, plan.base_tables(), bounds)
    stats = {t: differentiation_stats(warehouse.spark, i) for t, i in intervals.items()}
    try:
        derivative = diff.differentiate(plan, ChangeFormat(information), stats,
                                        constraints=KeyStore(warehouse.store).relied_on(list(plan.base_tables())))
    except diff.UnsupportedQuery as e:
        raise SqlError(f"cannot compute {information} changes of view {name}: {e}") from e
    query = IntervalSources(warehouse.spark, intervals).changes_query(derivative)
    return warehouse.spark.sql(to_spark(query))


def _view_intervals(warehouse: Warehouse, view: str, tables: tuple[str, ...], bounds: Bounds) -> dict[str, ch.Interval]:
    by_version = [b for b in (bounds.at, bounds.before, bounds.end) if b is not None and b.kind == "version"]
    if by_version and len(tables) != 1:
        raise ChangeTrackingError(
            f"CHANGES on view {view} reads {len(tables)} tables ({', '.join(tables)}), so a VERSION bound is "
            "ambiguous; use TIMESTAMP or OFFSET bounds")
    now = dt.datetime.now(dt.timezone.utc)
    return {t: _interval(warehouse, t, bounds, now) for t in tables}


def explain_view_changes(warehouse: Warehouse, name: str, information: str = ChangeFormat.DEFAULT) -> str:
    """The view's plan and its derivative, as text."""
    plan = plan_view(warehouse, name)
    return diff.explain(plan, information=ChangeFormat(information))


# -- statements ----------------------------------------------------------------------------------------------------


def resolve_changes(warehouse: Warehouse, tree: exp.Expr, statement: str) -> exp.Expr:
    """Replace every ``t CHANGES(...)`` table reference by a temporary view of its change set."""
    tree = tree.copy()
    for table in list(tree.find_all(exp.Table)):
        clause = table.args.get("changes")
        if clause is None:
            continue
        name = qualified(table.db, table.name)
        if table.db.lower() == "delta" and "/" in table.name:
            name = f"delta.`{table.name}`"
        df = changes_of(warehouse, name, bounds_of(warehouse, clause, statement), information_of(clause))
        view = f"__dtables_changes_{next(_view_names)}"
        df.createOrReplaceTempView(view)
        alias = table.alias or table.name
        replace_table(table, aliased_table(view, alias))
    return tree


def explain_changes_clause(warehouse: Warehouse, tree: exp.Expr, statement: str) -> str:
    """EXPLAIN text for the CHANGES clauses of a statement: the shape and plan of each change read."""
    lines = []
    for table in tree.find_all(exp.Table):
        clause = table.args.get("changes")
        if clause is None:
            continue
        name = qualified(table.db, table.name)
        obj = warehouse.catalog.lookup(name)
        info = information_of(clause)
        if obj is not None and obj["kind"] == "VIEW":
            lines.append(f"CHANGES of view {normalize(name)}:\n{explain_view_changes(warehouse, name, info)}")
            continue
        warehouse.catalog.ensure_registered([name])
        bounds = bounds_of(warehouse, clause, statement)
        interval = _interval(warehouse, _spark_name(name, obj), bounds)
        plan = ch.explain_changes(warehouse.spark, interval, info)
        lines.append(f"CHANGES of {interval} ({info}):\n{plan.to_text()}")
    return "\n".join(lines)
