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


def create_stream(session: Warehouse, tree: exp.Expr, statement: str) -> Any:
    name, source_table = _name(tree.this), tree.args["source"]
    source, kind = _name(source_table), tree.args["source_kind"].name
    mode, flavor = tree.args["mode"].name, tree.args["flavor"].name
    replace, if_not_exists = bool(tree.args.get("replace")), bool(tree.args.get("exists"))
    existing = st.get(session.store, name)
    if existing is not None and not replace:
        if if_not_exists:
            return _status(session, f"stream {name} already exists; nothing done")
        raise SqlError(f"stream {name} already exists; use CREATE OR REPLACE STREAM or IF NOT EXISTS", statement)
    if session.catalog.lookup(name) is not None:
        raise SqlError(f"cannot create stream {name}: a table or view of that name exists", statement)
    base = _base_tables(session, name, source, kind, mode, statement)
    when = source_table.args.get("when") or tree.args.get("at_before")
    start = _start(session, name, base, when, statement) if when is not None else None
    # Extend the retention first, so that its metadata commit is not a change after a frontier taken "now".
    track_retention(session, base, adding=True)
    frontier = start if start is not None else latest_versions(session, base)
    st.create(session.store, st.Stream(
        name, source, kind, mode, flavor, bool(tree.args["show_initial_rows"].this), frontier, st.utc_now(), 0,
        None, tree.args["comment"].this if tree.args.get("comment") else None, st.utc_now()), replace)
    if existing is not None:
        track_retention(session, set(existing.frontier) - set(base))  # what the replaced stream read
    return _status(session, f"stream {name} created on {kind.lower()} {source}")


def _base_tables(session: Warehouse, name: str, source: str, kind: str, mode: str, statement: str) -> list[str]:
    obj = session.catalog.lookup(source)
    actual = {"TABLE": "TABLE", "VIEW": "VIEW", "DYNAMIC_TABLE": "DYNAMIC TABLE"}.get(obj["kind"]) if obj else None
    if actual is not None and actual != kind:
        raise SqlError(f"cannot create stream {name}: {source} is a {actual.lower()}, not a {kind.lower()}; "
                       f"write ON {actual} {source}", statement)
    if kind == "VIEW":
        if obj is None:
            raise SqlError(f"cannot create stream {name}: view {source} does not exist", statement)
        try:
            plan = plan_view(session, source)
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
        session.catalog.ensure_registered([source])
        tables = [source]
    for table in tables:
        try:
            log = open_log(session.spark, table)
            meta = log.metadata_at(log.latest_version)
        except ChangeTrackingError as e:
            raise SqlError(f"cannot create stream {name}: {e}", statement) from e
        if not meta.row_tracking:
            raise SqlError(f"cannot create stream {name} on {source}: change tracking is off on table {table}; "
                           f"turn it on with ALTER TABLE {table} SET CHANGE_TRACKING = TRUE", statement)
    return tables


def _start(session: Warehouse, name: str, base: list[str], when: exp.Expr, statement: str) -> dict[str, int]:
    kind = str(when.args.get("kind") or "").upper()
    if kind == "STREAM":
        other = st.get(session.store, normalize(when.expression.name))
        if other is None:
            raise SqlError(f"cannot create stream {name}: AT(STREAM => '{when.expression.name}') names no stream",
                           statement)
        if set(other.frontier) != set(base):
            raise SqlError(f"cannot create stream {name} at stream {other.name}: it tracks other tables "
                           f"({', '.join(other.frontier)})", statement)
        return dict(other.frontier)
    assert isinstance(when, exp.HistoricalData)
    bound = bound_of(session, when, statement)
    before = str(when.this).upper() == "BEFORE"
    try:
        return {t: ch.resolve_interval(session.spark, t, at=None if before else bound,
                                       before=bound if before else None).start_version for t in base}
    except ChangeTrackingError as e:
        raise SqlError(f"cannot create stream {name}: {e}", statement) from e


def drop_stream(session: Warehouse, tree: exp.Expr, statement: str) -> Any:
    name = _name(tree.this)
    existing = st.get(session.store, name)
    if not st.drop(session.store, name):
        if not tree.args.get("exists"):
            raise SqlError(f"stream {name} does not exist", statement)
        return _status(session, f"stream {name} does not exist; nothing done")
    if existing is not None:
        track_retention(session, existing.frontier)
    return _status(session, f"stream {name} dropped")


_LISTING = ("created_on STRING, name STRING, database_name STRING, table_name STRING, source_type STRING, "
            "base_tables STRING, mode STRING, stale BOOLEAN, stale_after TIMESTAMP, comment STRING")


def show_streams(session: Warehouse, tree: exp.Expr, statement: str) -> Any:
    like = tree.args.get("like")
    pattern = like.this.lower().replace("%", "*").replace("_", "?") if like is not None else None
    rows = []
    for s in st.all_streams(session.store):
        if pattern is not None and not fnmatch.fnmatch(s.name.split(".")[-1], pattern):
            continue
        session.catalog.ensure_registered(list(s.frontier))
        rows.append((s.created_at, s.name.split(".")[-1], s.name.split(".")[0], s.source, s.source_kind,
                     ", ".join(s.frontier),
                     (ChangeFormat.APPEND_ONLY if s.mode == ChangeFormat.APPEND_ONLY else ChangeFormat.DEFAULT).value,
                     _stale(session, s) is not None, _stale_after(session, s), s.comment))
    return session.spark.createDataFrame(rows, _LISTING)


_DESCRIPTION = ("name STRING, source STRING, source_type STRING, mode STRING, show_initial_rows BOOLEAN, "
                "frontier STRING, last_consumed STRING, consume_sequence LONG, stale BOOLEAN, stale_after TIMESTAMP, "
                "stale_reason STRING, comment STRING, created_on STRING")


def describe(session: Warehouse, name: str) -> dict[str, Any]:
    """One stream as DESCRIBE STREAM (and ``dtables streams``) show it, after finishing a crashed consumption."""
    with stream_locks(session, [name]):
        stream = recover(session, name)
    reason = _stale(session, stream)
    row = (stream.name, stream.source, stream.source_kind,
           ChangeFormat.APPEND_ONLY.value if stream.mode == ChangeFormat.APPEND_ONLY
           else ("STANDARD" if stream.flavor == "SINGDATA" else ChangeFormat.DEFAULT.value),
           stream.show_initial_rows, json.dumps(dict(stream.frontier), sort_keys=True), stream.consumed_at,
           stream.seq, reason is not None, _stale_after(session, stream), reason, stream.comment, stream.created_at)
    return dict(zip([c.split()[0] for c in _DESCRIPTION.split(", ")], row))


def describe_stream(session: Warehouse, tree: exp.Expr, statement: str) -> Any:
    row = describe(session, _name(tree.this))
    return session.spark.createDataFrame([tuple(row.values())], _DESCRIPTION)


def _stale(session: Warehouse, stream: st.Stream) -> str | None:
    for table, version in stream.frontier.items():
        reason = stale_reason(session.spark, table, version)
        if reason is not None:
            return reason
    return None


def _stale_after(session: Warehouse, stream: st.Stream) -> Any:
    try:
        return stale_after(session, stream.frontier)
    except ChangeTrackingError:
        return None


def vacuum(session: Warehouse, tree: exp.Expr, statement: str) -> Any:
    """``VACUUM t [RETAIN n HOURS] [DRY RUN]`` through the frontier-aware vacuum; Delta's result."""
    table = tree.this
    name = f"delta.`{table.name}`" if table.db.lower() == "delta" and ("/" in table.name or ":" in table.name) \
        else (qualified(table.db, table.name))
    retain = tree.args.get("retain")
    return run(session, name, float(retain.this) if retain is not None else None,
               dry_run=bool(tree.args["dry_run"].this))


def _status(session: Warehouse, text: str) -> Any:
    return session.spark.createDataFrame([(text,)], "status STRING")


# -- transactions ----------------------------------------------------------------------------------------------------


def begin(session: Warehouse, tree: exp.Expr, statement: str) -> Any:
    transactions.begin(session)
    return _status(session, "transaction started")


def rollback(session: Warehouse, tree: exp.Expr, statement: str) -> Any:
    transactions.rollback(session)
    return _status(session, "transaction rolled back")


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


def claims(session: Warehouse, tree: exp.Expr | None) -> bool:
    """Whether :func:`execute` answers this statement (so Spark's parser must not judge it first)."""
    if tree is None or type(tree).__module__.startswith("dtables"):
        return False
    if transactions.current(session) is not None and _is_dml(tree):
        return True
    if any(p.name.upper() in SHORTHANDS for p in tree.find_all(exp.Parameter)):
        return True
    return bool(stream_tables(tree, st.names(session.store)))


def execute(session: Warehouse, statement: str, tree: exp.Expr) -> Any:
    """Run a statement :func:`claims`: buffer DML in a transaction, consume streams with DML, read them otherwise."""
    txn = transactions.current(session)
    names = sorted({n for _, n in stream_tables(tree, st.names(session.store))})
    if txn is not None and _is_dml(tree):
        for name in names:
            txn.read(session, name)  # fixes what the stream shows for the rest of the transaction
        txn.buffered.append((statement, tree))
        return _status(session, "buffered until COMMIT")
    if _is_dml(tree):
        consume(session, [(statement, tree)], None, names)
        return _status(session, f"consumed {', '.join(names)}" if names else "done")
    if txn is not None:
        reads = {n: txn.read(session, n) for n in names}
    else:
        reads = {}
        for n in names:
            with stream_locks(session, [n]):
                stream = recover(session, n)
            reads[n] = StreamRead(stream, latest_versions(session, list(stream.frontier)))
    session.catalog.ensure_registered(table_names(tree))
    rewritten = substitute(session, tree, reads)
    return session.spark.sql(to_spark(rewritten))
