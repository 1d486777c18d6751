"""SQL handlers of the dynamic-table statements (registered in ``dtables.sql.executor.HANDLERS``)."""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import re
from typing import Any

from sqlglot import exp

from differentiation.output import explain as explain_plan
from differentiation.plan import Join

from dtables.changes.log import DeltaLog
from dtables.catalog import STATE_PREFIX, new_table_properties, normalize, qualified, quote, quote_column
from dtables.dynamic import definition as defs
from dtables.dynamic import history, intermediates
from dtables.dynamic.definition import ROW_ID_COLUMN, Column, Definition, to_iso
from dtables.dynamic.errors import DynamicTableError, RefreshFailed
from dtables.dynamic.executor import dependency_dag, refresh
from dtables.dynamic.frontier import SourceMissing, describe_version
from dtables.dynamic.layout import CLUSTERING, log_properties
from dtables.dynamic.plan import incremental_support, maintained_plan
from dtables.dynamic.tracking import ensure_tracked, tracked_from_creation
from dtables.dynamic.visible import hide_state_columns
from dtables.spark import fs
from dtables.sql.dialect import to_spark
from dtables.sql.output_names import check_unique, column_mapping_properties, name_outputs
from dtables.sql.spark_errors import position
from dtables.sql.views import expand_views
from dtables.sql.dynamic_syntax import Initialize, RefreshMode, SettingError, target_lag
from dtables.sql.expressions import (
    AlterDynamicTable,
    CreateDynamicTable,
    DescribeDynamicTable,
    DropDynamicTable,
    ShowDynamicTables,
)
from dtables.catalog.warehouse import Warehouse
from scheduler.vocabulary import RefreshState, SchedulingState, Trigger


def _name(table: exp.Table) -> str:
    return normalize(qualified(table.db, table.name))


def _sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


_AT = re.compile(r"at line (\d+), column (\d+)")


def in_users_text(reason: str, query: str, statement: str | None) -> str:
    """``reason`` with its "at line L, column C" (a position in the stored, rewritten ``query``) moved to where the
    same token stands in the user's ``statement``; unchanged when the token is not found there."""
    m = _AT.search(reason)
    lines = query.split("\n")
    if m is None or statement is None or int(m[1]) > len(lines):
        return reason
    token = re.match(r"[\w`.]+|\S", lines[int(m[1]) - 1][int(m[2]) - 1:])
    found = position(statement, [token.group(0)]) if token else ""
    return reason[:m.start()] + found.strip() + reason[m.end():] if found else reason


def choose_refresh_mode(name: str, requested: str, query: str, sources: dict[str, Any],
                        statement: str | None = None) -> tuple[RefreshMode, str]:
    """(INCREMENTAL | FULL, reason in words). INCREMENTAL on a query that cannot be differentiated is refused."""
    plan, why_not = incremental_support(query, sources)
    if why_not is not None:
        why_not = in_users_text(why_not, query, statement)
    if requested == RefreshMode.FULL:
        return RefreshMode.FULL, "REFRESH_MODE = FULL was requested"
    if why_not is None:
        rewrites = _rewrites(plan)
        return RefreshMode.INCREMENTAL, ("REFRESH_MODE = INCREMENTAL was requested"
                                         if requested == RefreshMode.INCREMENTAL else
                                         "AUTO: every operator of the query can be maintained incrementally") + rewrites
    if requested == RefreshMode.INCREMENTAL:
        raise DynamicTableError(f"dynamic table {name}: REFRESH_MODE = INCREMENTAL is not possible: {why_not}; "
                                "use REFRESH_MODE = FULL or AUTO")
    return RefreshMode.FULL, f"AUTO chose FULL: {why_not}"


def _rewrites(plan: Any) -> str:
    """``; maintained as: EXISTS subquery -> semi join, ...`` for the joins the query's subqueries and set operations
    became (what the plan shows as ``(from ...)``), or ''."""
    seen = dict.fromkeys(f"{n.origin} -> {n.kind} join" for n in (plan.walk() if plan is not None else [])
                         if isinstance(n, Join) and n.origin)
    return f"; maintained as: {', '.join(seen)}" if seen else ""


def _check_sources(session: Warehouse, name: str, sources: tuple[str, ...]) -> dict[str, Any]:
    found = {}
    for source in sources:
        if source == name:
            raise DynamicTableError(f"dynamic table {name} cannot read itself")
        obj = session.catalog.lookup(source)
        if obj is None:
            raise DynamicTableError(f"dynamic table {name}: its query reads {source}, which does not exist")
        if obj["kind"] not in ("TABLE", "DYNAMIC_TABLE"):
            raise DynamicTableError(f"dynamic table {name}: its query reads {source}, a {obj['kind'].lower()}; "
                                    "dynamic tables read tables, views and dynamic tables")
        log = DeltaLog(session.spark, obj["location"], source)
        if not log.exists:
            raise SourceMissing(f"dynamic table {name}: its source {source} has no Delta log at {obj['location']}")
        found[source] = describe_version(source, log, log.latest_version, obj["kind"] == "DYNAMIC_TABLE")
    return found


def _stored_query(session: Warehouse, name: str, tree: CreateDynamicTable
                  ) -> tuple[exp.Expr, str, tuple[str, ...], dict[str, Any], Any, list[str]]:
    """The query as the table stores it (views inlined, sources qualified, outputs named), its sources and their
    versions, and its Spark schema (analysis only, no Spark job) and column names."""
    # Views are inlined: the stored query reads base tables and dynamic tables only, whose versions make the
    # frontier. A later CREATE OR REPLACE VIEW does not reach this table until it is re-created.
    query_tree, sources = defs.qualify_sources(expand_views(session, tree.args["query"].copy()))
    query = defs.query_sql(query_tree)
    source_versions = _check_sources(session, name, sources)
    session.catalog.ensure_registered(sources)
    visible = hide_state_columns(session, query_tree)  # upstream dynamic tables: their visible columns only
    schema = session.spark.sql(query if visible is None else to_spark(visible)).schema
    spark_names = [f.name for f in schema.fields]
    names = [c.name for c in tree.args.get("columns") or []] or spark_names
    check_unique(f"dynamic table {name}", names)
    # The stored query carries the final names (the column list's, or Spark's for unnamed expressions such as
    # sum(i)), so its plan, its refreshes and its table agree on every column.
    query_tree = name_outputs(query_tree, spark_names, names, f"dynamic table {name}")
    return query_tree, defs.query_sql(query_tree), sources, source_versions, schema, names


def explain_create(session: Warehouse, tree: CreateDynamicTable, statement: str) -> str:
    """EXPLAIN of a CREATE DYNAMIC TABLE, which creates nothing: the refresh mode it would get and why, then the
    plan it would be maintained by and that plan's derivative, each join with what it was written as."""
    name = _name(tree.this)
    _, query, _, source_versions, _, _ = _stored_query(session, name, tree)
    requested = tree.args["refresh_mode"].name.upper()
    try:
        mode, reason = choose_refresh_mode(name, requested, query, source_versions, statement)
    except DynamicTableError as e:
        return f"refused: {e}"
    head = f"dynamic table {name}: refresh mode {mode}: {reason}"
    split = (intermediates.split(query, name, source_versions)
             if mode == RefreshMode.INCREMENTAL and intermediates.enabled(session.spark) else None)
    for child in split[1] if split is not None else []:
        head += f"\nnested aggregate kept as intermediate dynamic table {child.name}: {to_spark(child.query)}"
    plan, _ = incremental_support(query, source_versions)
    if mode != RefreshMode.INCREMENTAL or plan is None:
        return head if plan is None else f"{head}\nplan:\n{plan.to_text()}"
    maintained = maintained_plan(plan, RefreshMode.INCREMENTAL)
    assert maintained is not None
    return f"{head}\n{explain_plan(maintained, state=maintained is not plan)}"  # as its refreshes differentiate it


def create(session: Warehouse, tree: exp.Expr, statement: str | None, parent: str | None = None) -> Any:
    """CREATE [OR REPLACE] DYNAMIC TABLE; ``parent``: the table an intermediate is created for (intermediates.py)."""
    assert isinstance(tree, CreateDynamicTable)
    name = _name(tree.this)
    existing = session.catalog.lookup(name)
    if existing is not None:
        if existing["kind"] != "DYNAMIC_TABLE":
            raise DynamicTableError(f"cannot create dynamic table {name}: a {existing['kind'].lower()} of that "
                                    "name exists")
        if tree.args.get("exists"):
            return session.spark.createDataFrame([(f"dynamic table {name} already exists",)], "status string")
        if not tree.args.get("replace"):
            raise DynamicTableError(f"dynamic table {name} already exists; use CREATE OR REPLACE DYNAMIC TABLE")
        replaced = defs.load(session.store, name)
        if replaced is not None:
            _not_intermediate(replaced, "replaced")
    try:
        lag = target_lag(tree.args["target_lag"].name)
    except SettingError as e:
        raise DynamicTableError(f"dynamic table {name}: {e}") from e
    query_tree, query, sources, source_versions, schema, names = _stored_query(session, name, tree)
    given = tree.args.get("columns") or []
    comments = _column_comments(name, given, names)
    columns = tuple(Column(comments[i][0], f.dataType.simpleString(), comments[i][1])
                    for i, f in enumerate(schema.fields))
    reserved = [c.name for c in columns if c.name.lower().startswith(STATE_PREFIX)]
    if reserved:
        raise DynamicTableError(f"dynamic table {name}: column name {reserved[0]} is reserved (names starting "
                                f"with {STATE_PREFIX} hold dtables' own state)")
    mode, reason = choose_refresh_mode(name, tree.args["refresh_mode"].name.upper(), query, source_versions,
                                       statement)
    comment = tree.args["comment"].name if tree.args.get("comment") else None
    d = Definition(name=name, query=query, sources=sources, columns=columns, target_lag=lag,
                   refresh_mode=tree.args["refresh_mode"].name.upper(), refresh_mode_chosen=mode,
                   refresh_mode_reason=reason, initialize=tree.args["initialize"].name.upper(), comment=comment,
                   parent=parent)
    dependency_dag(session, d)  # raises CycleError naming the cycle (OR REPLACE can close one)
    log = log_properties(session.spark)  # a bad setting fails here, before OR REPLACE drops anything
    split = (intermediates.split(query, name, source_versions)
             if mode == RefreshMode.INCREMENTAL and intermediates.enabled(session.spark) else None)
    if existing is not None:
        drop_table(session, name)
    if split is not None:
        d = _reading_intermediates(session, d, tree, *split)
    location = session.catalog.managed_location(name)
    if fs.exists(session.spark, location):
        fs.delete(session.spark, location)  # leftovers of an interrupted CREATE or DROP
    cols_sql = ", ".join(f"{quote_column(c.name)} {c.type}"
                         + (f" COMMENT {_sql_string(c.comment)}" if c.comment else "") for c in columns)
    properties = {**new_table_properties(session.spark, tracked_from_creation(session, name)),
                  **column_mapping_properties([c.name for c in columns]), **log}
    props = ", ".join(f"'{k}' = '{v}'" for k, v in properties.items())
    table_comment = f" COMMENT {_sql_string(comment)}" if comment else ""
    create = (f"CREATE TABLE {quote(name)} ({cols_sql}, `{ROW_ID_COLUMN}` STRING) USING DELTA%CLUSTERING% "
              f"LOCATION '{location}'{table_comment} TBLPROPERTIES ({props})")
    # Stored clustered on the row id, which its MERGEs match on (dynamic/layout.py); a table refreshed FULL only
    # is rewritten whole every time, and one whose row id is past the 32 columns with statistics cannot be.
    if mode == RefreshMode.FULL or not _created(session, create.replace("%CLUSTERING%", f" {CLUSTERING}", 1)):
        session.spark.sql(create.replace("%CLUSTERING%", "", 1))
    session.catalog.record_table(name, location, managed=True, kind="DYNAMIC_TABLE")
    ensure_tracked(session, d.sources)  # before the first refresh fixes the frontier this table reads them from
    defs.insert(session.store, d)
    if d.initialize == Initialize.ON_CREATE:
        records = refresh(session, [name], trigger=Trigger.CREATION)
        bad = [r for r in records if r.state != RefreshState.SUCCEEDED]
        if bad:
            drop_table(session, name)
            raise DynamicTableError(f"cannot create dynamic table {name}: its initial refresh failed: "
                                    f"{bad[-1].error}")
    return session.spark.createDataFrame(
        [(f"dynamic table {name} created, refresh mode {mode}: {reason}",)], "status string")


def _reading_intermediates(session: Warehouse, d: Definition, tree: CreateDynamicTable, query_tree: exp.Expr,
                           kept: list[intermediates.Intermediate]) -> Definition:
    """``d`` reading its nested aggregates from intermediate dynamic tables, created here; ``d`` as it was when
    the query over them could not be maintained incrementally after all (the intermediates are dropped again)."""
    made: list[str] = []
    try:
        for child in kept:
            create(session, CreateDynamicTable(
                this=exp.to_table(child.name), query=child.query, target_lag=exp.Literal.string("DOWNSTREAM"),
                refresh_mode=exp.var(d.refresh_mode), initialize=exp.var(Initialize.ON_SCHEDULE.value),
                comment=exp.Literal.string(f"a nested aggregate of {d.name}, kept for it by dtables")),
                None, parent=d.name)
            made.append(child.name)
        over = tree.copy()
        over.set("query", query_tree)
        _, query, sources, versions, _, _ = _stored_query(session, d.name, over)
        mode, reason = choose_refresh_mode(d.name, d.refresh_mode, query, versions)
    except DynamicTableError:
        mode = RefreshMode.FULL
    except BaseException:
        for name in made:
            drop_table(session, name)
        raise
    if mode != RefreshMode.INCREMENTAL:
        for name in made:
            drop_table(session, name)
        return d
    note = f"; nested aggregates kept as dynamic tables {', '.join(made)}"
    return dataclasses.replace(d, query=query, sources=sources, written_query=d.query,
                               refresh_mode_reason=d.refresh_mode_reason + note)


def _created(session: Warehouse, create: str) -> bool:
    """Run a CREATE TABLE with a CLUSTER BY; False when Delta refuses the clustering column (no statistics)."""
    try:
        session.spark.sql(create)
    except Exception as e:  # noqa: BLE001 - only the missing statistics are expected; others re-raised
        if "CLUSTERING_COLUMN_MISSING_STATS" not in str(e):
            raise
        return False
    return True


def _column_comments(name: str, given: list[exp.Expr], names: list[str]) -> list[tuple[str, str | None]]:
    """Column names (renamed by the optional column list, whose length name_outputs checked) and comments."""
    if not given:
        return [(n, None) for n in names]
    out: list[tuple[str, str | None]] = []
    for col in given:
        comment = col.find(exp.CommentColumnConstraint)
        out.append((col.name, comment.this.name if comment is not None else None))
    return out


def drop_table(session: Warehouse, name: str) -> None:
    for child in defs.kept_for(session.store, name):
        drop_table(session, child.name)
    obj = session.catalog.lookup(name)
    session.spark.sql(f"DROP TABLE IF EXISTS {quote(name)}")  # external: unregisters only
    if obj is not None:
        fs.delete(session.spark, obj["location"])
    session.catalog.forget(name)
    defs.delete(session.store, name)


def drop(session: Warehouse, tree: exp.Expr, statement: str) -> Any:
    assert isinstance(tree, DropDynamicTable)
    name = _name(tree.this)
    found = defs.load(session.store, name)
    if found is None:
        if tree.args.get("exists"):
            return session.spark.createDataFrame([(f"dynamic table {name} does not exist",)], "status string")
        raise DynamicTableError(f"dynamic table {name} does not exist")
    _not_intermediate(found, "dropped")
    drop_table(session, name)
    return session.spark.createDataFrame([(f"dynamic table {name} dropped",)], "status string")


def alter(session: Warehouse, tree: exp.Expr, statement: str) -> Any:
    assert isinstance(tree, AlterDynamicTable)
    name = _name(tree.this)
    found = defs.require(session.store, name)
    action = tree.args["action"].name.upper()
    if action != "REFRESH":
        _not_intermediate(found, "altered")
    if action == "REFRESH":
        records = refresh(session, [name], trigger=Trigger.MANUAL)
        bad = [r for r in records if r.state != RefreshState.SUCCEEDED]
        if bad:
            raise RefreshFailed(bad[-1].error or f"refresh of dynamic table {name} ended {bad[-1].state}",
                                tuple(records))
        return history.dataframe(session).where(
            f"refresh_id IN ({', '.join(repr(r.refresh_id) for r in records)})")
    if action in ("SUSPEND", "RESUME"):
        state = SchedulingState.SUSPENDED if action == "SUSPEND" else SchedulingState.ACTIVE
        for table in [name, *(child.name for child in _intermediates_of(session, name))]:
            defs.set_fields(session.store, table, state=state)
        done = "suspended" if action == "SUSPEND" else "resumed"
        return session.spark.createDataFrame([(f"dynamic table {name} {done}",)], "status string")
    try:
        lag = target_lag(tree.args["target_lag"].name)
    except SettingError as e:
        raise DynamicTableError(f"dynamic table {name}: {e}") from e
    defs.set_fields(session.store, name, target_lag=lag)
    return session.spark.createDataFrame([(f"dynamic table {name} target lag set to {lag}",)], "status string")


def _not_intermediate(d: Definition, what: str) -> None:
    if d.parent is not None:
        raise DynamicTableError(f"dynamic table {d.name} is kept by dtables for {d.parent} and cannot be {what} on "
                                f"its own; it goes with {d.parent}")


def _intermediates_of(session: Warehouse, name: str) -> list[Definition]:
    """``name``'s intermediates, theirs too (an intermediate may keep a nested aggregate of its own)."""
    found = defs.kept_for(session.store, name)
    return found + [g for child in found for g in _intermediates_of(session, child.name)]


SHOW_COLUMNS = ("name string, target_lag string, refresh_mode string, refresh_mode_reason string, "
                "requested_refresh_mode string, initialize string, scheduling_state string, data_timestamp string, "
                "last_refresh_action string, last_refresh_state string, last_refresh_at string, "
                "comment string, created_on string, text string, last_refresh_write string, "
                "last_refresh_seconds double, last_refresh_spark_jobs bigint, last_refresh_job_seconds double, "
                "last_refresh_driver_seconds double, last_refresh_bytes_read bigint, last_refresh_cost_choice string, "
                "last_refresh_cost_reason string, last_refresh_estimate_incremental_s double, "
                "last_refresh_estimate_full_s double")


def _cost(record: history.RefreshRecord | None) -> tuple[Any, ...]:
    """Where the last refresh spent its time, and what AUTO's cost model chose for it and why, with its estimates
    (the SHOW columns after ``text``)."""
    if record is None:
        return (None,) * 10
    seconds = (record.ended_at - record.started_at).total_seconds() if record.ended_at else None
    return (record.write_kind, seconds, record.spark_jobs, record.job_seconds, record.driver_seconds,
            record.bytes_read, record.cost_choice, record.cost_reason, record.estimate_incremental_s,
            record.estimate_full_s)


def show(session: Warehouse, tree: exp.Expr, statement: str) -> Any:
    assert isinstance(tree, ShowDynamicTables)
    like = tree.args.get("like")
    rows = []
    for d in defs.load_all(session.store):
        if d.parent is not None and like is None:
            continue  # an intermediate is listed only when a pattern asks for it
        if like is not None and not fnmatch.fnmatchcase(d.name.split(".")[-1].lower(),
                                                         like.name.lower().replace("%", "*").replace("_", "?")):
            continue
        last = history.records(session.store, d.name)
        final = [r for r in last if r.state != RefreshState.EXECUTING]
        latest = final[-1] if final else None
        rows.append((d.name, d.target_lag, d.refresh_mode_chosen, d.refresh_mode_reason, d.refresh_mode,
                     d.initialize, d.state, to_iso(d.data_timestamp), latest and latest.action,
                     latest and latest.state, latest and to_iso(latest.ended_at), d.comment, d.created_at, d.text,
                     *_cost(latest)))
    return session.spark.createDataFrame(rows, SHOW_COLUMNS)


def describe(session: Warehouse, tree: exp.Expr, statement: str) -> Any:
    assert isinstance(tree, DescribeDynamicTable)
    d = defs.require(session.store, _name(tree.this))
    rows: list[tuple[str, str | None, str | None, str]] = [(c.name, c.type, c.comment, "COLUMN") for c in d.columns]
    rows.append((ROW_ID_COLUMN, "string", "row identity maintained by dtables", "HIDDEN"))
    properties = {"query": d.text, "maintained_query": d.query if d.written_query else None,
                  "sources": ", ".join(d.sources), "intermediate_of": d.parent, "target_lag": d.target_lag,
                  "refresh_mode": d.refresh_mode_chosen, "refresh_mode_reason": d.refresh_mode_reason,
                  "scheduling_state": d.state, "data_timestamp": to_iso(d.data_timestamp),
                  "frontier": json.dumps(d.frontier, sort_keys=True), "comment": d.comment}
    rows += [(k, None, v, "PROPERTY") for k, v in properties.items()]
    return session.spark.createDataFrame(rows, "name string, type string, comment string, kind string")


HANDLERS: dict[type[exp.Expr], Any] = {
    CreateDynamicTable: create,
    AlterDynamicTable: alter,
    DropDynamicTable: drop,
    ShowDynamicTables: show,
    DescribeDynamicTable: describe,
}
