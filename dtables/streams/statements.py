"""SQL handlers of stream statements, and the executor's hook for statements that read streams or run inside a
transaction.

``HANDLERS`` (expression type -> handler) joins the executor's mapping; :func:`claims` and :func:`execute` are the
executor's hook: a statement that reads a stream is answered here (a query reads it, DML consumes it) and, inside
``BEGIN ... COMMIT``, DML is buffered until COMMIT.
"""

from __future__ import annotations

import fnmatch
import json
from typing import Any

from sqlglot import exp

from differentiation import incremental_reason
from differentiation.monotonic import non_monotonic_operator
from differentiation.vocabulary import ChangeFormat
from dtables import changes as ch
from dtables.catalog import normalize, qualified
from dtables.catalog.warehouse import Warehouse
from dtables.change_queries import bound_of, plan_view
from dtables.changes.interval import open_log
from dtables.dynamic.tracking import ensure_tracked
from dtables.errors import ChangeTrackingError, SqlError
from dtables.sql import expressions as syntax
from dtables.sql.dialect import to_spark
from dtables.sql.references import table_names
from dtables.state import streams as st
from dtables.streams import transactions
from dtables.streams.consume import (
    SHORTHANDS,
    WRITES,
    StreamRead,
    consume,
    recover,
    stream_locks,
    stream_tables,
    substitute,
    target_of,
)
from dtables.streams.frontier import latest_versions, stale_after, stale_reason
from dtables.streams.retention import track_retention
from dtables.streams.vacuum import vacuum as run


def _name(table: exp.Table) -> str:
    return normalize(qualified(table.db, table.name))


# -- CREATE / DROP / SHOW / DESCRIBE ---------------------------------------------------------------------------------


def create_stream(warehouse: Warehouse, tree: exp.Expr, statement: str) -> Any:
    name, source_table = _name(tree.this), tree.args["source"]
    source, kind = _name(source_table), tree.args["source_kind"].name
    mode, flavor = tree.args["mode"].name, tree.args["flavor"].name
    replace, if_not_exists = bool(tree.args.get("replace")), bool(tree.args.get("exists"))
    existing = st.get(warehouse.store, name)
    if existing is not None and not replace:
        if if_not_exists:
            return _status(warehouse, f"stream {name} already exists; nothing done")
        raise SqlError(f"stream {name} already exists; use CREATE OR REPLACE STREAM or IF NOT EXISTS", statement)
    if warehouse.catalog.lookup(name) is not None:
        raise SqlError(f"cannot create stream {name}: a table or view of that name exists", statement)
    base = _base_tables(warehouse, name, source, kind, mode, statement)
    when = source_table.args.get("when") or tree.args.get("at_before")
    start = _start(warehouse, name, base, when, statement) if when is not None else None
    # Extend the retention first, so that its metadata commit is not a change after a frontier taken "now".
    track_retention(warehouse, base, adding=True)
    frontier = start if start is not None else latest_versions(warehouse, base)
    st.create(warehouse.store, st.Stream(
        name, source, kind, mode, flavor, bool(tree.args["show_initial_rows"].this), frontier, st.utc_now(), 0,
        None, tree.args["comment"].this if tree.args.get("comment") else None, st.utc_now()), replace)
    if existing is not None:
        track_retention(warehouse, set(existing.frontier) - set(base))  # what the replaced stream read
    return _status(warehouse, f"stream {name} created on {kind.lower()} {source}")


def _base_tables(warehouse: Warehouse, name: str, source: str, kind: str, mode: str, statement: str) -> list[str]:
    obj = warehouse.catalog.lookup(source)
    actual = {"TABLE": "TABLE", "VIEW": "VIEW", "DYNAMIC_TABLE": "DYNAMIC TABLE"}.get(obj["kind"]) if obj else None
    if actual is not None and actual != kind:
        raise SqlError(f"cannot create stream {name}: {source} is a {actual.lower()}, not a {kind.lower()}; "
                       f"write ON {actual} {source}", statement)
    if kind == "VIEW":
        if obj is None:
            raise SqlError(f"cannot create stream {name}: view {source} does not exist", statement)
        try:
            plan = plan_view(warehouse, source)
        except SqlError as e:
            raise SqlError(f"cannot create stream {name} on view {source}: its query cannot be differentiated: "
                           f"{e}", statement) from e
        reason = incremental_reason(plan)  # buildable but not maintainable (a window without PARTITION BY, rand())
        if reason is not None:
            raise SqlError(f"cannot create stream {name} on view {source}: its query cannot be differentiated: "
                           f"{reason}", statement)
        if mode == ChangeFormat.APPEND_ONLY:
            op = non_monotonic_operator(plan)
            if op is not None:
                raise SqlError(f"cannot create APPEND_ONLY stream {name} on view {source}: the view is not "
                               f"monotonic ({op}), so its changes are not inserts only; use a standard stream",
                               statement)
        tables = list(plan.base_tables())
    else:
        warehouse.catalog.ensure_registered([source])
        tables = [source]
    ensure_tracked(warehouse, tables)  # a dynamic table's storage gets change tracking when first read by one
    for table in tables:
        try:
            log = open_log(warehouse.spark, table)
            meta = log.metadata_at(log.latest_version)
        except ChangeTrackingError as e:
            raise SqlError(f"cannot create stream {name}: {e}", statement) from e
        if not meta.row_tracking:
            raise SqlError(f"cannot create stream {name} on {source}: change tracking is off on table {table}; "
                           f"turn it on with ALTER TABLE {table} SET CHANGE_TRACKING = TRUE", statement)
    return tables


def _start(warehouse: Warehouse, name: str, base: list[str], when: exp.Expr, statement: str) -> dict[str, int]:
    kind = str(when.args.get("kind") or "").upper()
    if kind == "STREAM":
        other = st.get(warehouse.store, normalize(when.expression.name))
        if other is None:
            raise SqlError(f"cannot create stream {name}: AT(STREAM => '{when.expression.name}') names no stream",
                           statement)
        if set(other.frontier) != set(base):
            raise SqlError(f"cannot create stream {name} at stream {other.name}: it tracks other tables "
                           f"({', '.join(other.frontier)})", statement)
        return dict(other.frontier)
    assert isinstance(when, exp.HistoricalData)
    bound = bound_of(warehouse, when, statement)
    before = str(when.this).upper() == "BEFORE"
    try:
        return {t: ch.resolve_interval(warehouse.spark, t, at=None if before else bound,
                                       before=bound if before else None).start_version for t in base}
    except ChangeTrackingError as e:
        raise SqlError(f"cannot create stream {name}: {e}", statement) from e


def drop_stream(warehouse: Warehouse, tree: exp.Expr, statement: str) -> Any:
    name = _name(tree.this)
    existing = st.get(warehouse.store, name)
    if not st.drop(warehouse.store, name):
        if not tree.args.get("exists"):
            raise SqlError(f"stream {name} does not exist", statement)
        return _status(warehouse, f"stream {name} does not exist; nothing done")
    if existing is not None:
        track_retention(warehouse, existing.frontier)
    return _status(warehouse, f"stream {name} dropped")


_LISTING = ("created_on STRING, name STRING, database_name STRING, table_name STRING, source_type STRING, "
            "base_tables STRING, mode STRING, stale BOOLEAN, stale_after TIMESTAMP, comment STRING")


def show_streams(warehouse: Warehouse, tree: exp.Expr, statement: str) -> Any:
    like = tree.args.get("like")
    pattern = like.this.lower().replace("%", "*").replace("_", "?") if like is not None else None
    rows = []
    for s in st.all_streams(warehouse.store):
        if pattern is not None and not fnmatch.fnmatch(s.name.split(".")[-1], pattern):
            continue
        warehouse.catalog.ensure_registered(list(s.frontier))
        rows.append((s.created_at, s.name.split(".")[-1], s.name.split(".")[0], s.source, s.source_kind,
                     ", ".join(s.frontier),
                     (ChangeFormat.APPEND_ONLY if s.mode == ChangeFormat.APPEND_ONLY else ChangeFormat.DEFAULT).value,
                     _stale(warehouse, s) is not None, _stale_after(warehouse, s), s.comment))
    return warehouse.spark.createDataFrame(rows, _LISTING)


_DESCRIPTION = ("name STRING, source STRING, source_type STRING, mode STRING, show_initial_rows BOOLEAN, "
                "frontier STRING, last_consumed STRING, consume_sequence LONG, stale BOOLEAN, stale_after TIMESTAMP, "
                "stale_reason STRING, comment STRING, created_on STRING")


def describe(warehouse: Warehouse, name: str) -> dict[str, Any]:
    """One stream as DESCRIBE STREAM (and ``dtables streams``) show it, after finishing a crashed consumption."""
    with stream_locks(warehouse, [name]):
        stream = recover(warehouse, name)
    reason = _stale(warehouse, stream)
    row = (stream.name, stream.source, stream.source_kind,
           ChangeFormat.APPEND_ONLY.value if stream.mode == ChangeFormat.APPEND_ONLY
           else ("STANDARD" if stream.flavor == "SINGDATA" else ChangeFormat.DEFAULT.value),
           stream.show_initial_rows, json.dumps(dict(stream.frontier), sort_keys=True), stream.consumed_at,
           stream.seq, reason is not None, _stale_after(warehouse, stream), reason, stream.comment, stream.created_at)
    return dict(zip([c.split()[0] for c in _DESCRIPTION.split(", ")], row))


def describe_stream(warehouse: Warehouse, tree: exp.Expr, statement: str) -> Any:
    row = describe(warehouse, _name(tree.this))
    return warehouse.spark.createDataFrame([tuple(row.values())], _DESCRIPTION)


def _stale(warehouse: Warehouse, stream: st.Stream) -> str | None:
    for table, version in stream.frontier.items():
        reason = stale_reason(warehouse.spark, table, version)
        if reason is not None:
            return reason
    return None


def _stale_after(warehouse: Warehouse, stream: st.Stream) -> Any:
    try:
        return stale_after(warehouse, stream.frontier)
    except ChangeTrackingError:
        return None


def vacuum(warehouse: Warehouse, tree: exp.Expr, statement: str) -> Any:
    """``VACUUM t [RETAIN n HOURS] [DRY RUN]`` through the frontier-aware vacuum; Delta's result."""
    table = tree.this
    name = f"delta.`{table.name}`" if table.db.lower() == "delta" and ("/" in table.name or ":" in table.name) \
        else (qualified(table.db, table.name))
    retain = tree.args.get("retain")
    return run(warehouse, name, float(retain.this) if retain is not None else None,
               dry_run=bool(tree.args["dry_run"].this))


def _status(warehouse: Warehouse, text: str) -> Any:
    return warehouse.spark.createDataFrame([(text,)], "status STRING")


# -- transactions ----------------------------------------------------------------------------------------------------


def begin(warehouse: Warehouse, tree: exp.Expr, statement: str) -> Any:
    transactions.begin(warehouse)
    return _status(warehouse, "transaction started")


def rollback(warehouse: Warehouse, tree: exp.Expr, statement: str) -> Any:
    transactions.rollback(warehouse)
    return _status(warehouse, "transaction rolled back")


HANDLERS: dict[type[exp.Expr], Any] = {
    syntax.CreateStream: create_stream,
    syntax.DropStream: drop_stream,
    syntax.ShowStreams: show_streams,
    syntax.DescribeStream: describe_stream,
    syntax.BeginTransaction: begin,
    syntax.RollbackTransaction: rollback,
    syntax.Vacuum: vacuum,
}


# -- the executor's hook ---------------------------------------------------------------------------------------------


def _is_dml(tree: exp.Expr) -> bool:
    return isinstance(tree, WRITES) or target_of(tree) is not None


def claims(warehouse: Warehouse, tree: exp.Expr | None) -> bool:
    """Whether :func:`execute` answers this statement (so Spark's parser must not judge it first)."""
    if tree is None or type(tree).__module__.startswith("dtables"):
        return False
    if transactions.current(warehouse) is not None and _is_dml(tree):
        return True
    if any(p.name.upper() in SHORTHANDS for p in tree.find_all(exp.Parameter)):
        return True
    return bool(stream_tables(tree, st.names(warehouse.store)))


def execute(warehouse: Warehouse, statement: str, tree: exp.Expr) -> Any:
    """Run a statement :func:`claims`: buffer DML in a transaction, consume streams with DML, read them otherwise."""
    txn = transactions.current(warehouse)
    names = sorted({n for _, n in stream_tables(tree, st.names(warehouse.store))})
    if txn is not None and _is_dml(tree):
        for name in names:
            txn.read(warehouse, name)  # fixes what the stream shows for the rest of the transaction
        txn.buffered.append((statement, tree))
        return _status(warehouse, "buffered until COMMIT")
    if _is_dml(tree):
        consume(warehouse, [(statement, tree)], None, names)
        return _status(warehouse, f"consumed {', '.join(names)}" if names else "done")
    if txn is not None:
        reads = {n: txn.read(warehouse, n) for n in names}
    else:
        reads = {}
        for n in names:
            with stream_locks(warehouse, [n]):
                stream = recover(warehouse, n)
            reads[n] = StreamRead(stream, latest_versions(warehouse, list(stream.frontier)))
    warehouse.catalog.ensure_registered(table_names(tree))
    rewritten = substitute(warehouse, tree, reads)
    return warehouse.spark.sql(to_spark(rewritten))
