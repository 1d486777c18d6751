"""Consuming streams: a DML statement (or a transaction's statements) that reads streams writes its target(s) and
advances the streams' frontiers to exactly the versions it read, once.

Protocol, per consumption (one statement, or all statements of a transaction at COMMIT):

1. Take the streams' lock files (``_dtables/locks/stream-<name>.lock`` next to the state store, ``flock``; in
   name order, so two consumers never deadlock), then recover any consumption a crash left pending (below).
2. Fix the interval of every stream: ``(frontier, end]`` with ``end`` the versions current now (or, in a
   transaction, the versions pinned when it began).
3. Record the consumption as *pending* on each stream: sequence ``seq``, new frontiers, statements, and for each
   statement its target table, the target's version before writing and its idempotent-write id.
4. Run each statement on a session of its own (``own_session``: the write settings below are per
   session, so concurrent consumers in one process never share them) with ``txnAppId`` =
   ``dtables-stream:<streams>#<statement>``, ``txnVersion`` = ``seq`` and the new frontiers as the commit's
   ``userMetadata``: the frontier travels in the target's Delta commit.
5. Advance every stream's frontier and ``seq`` in one SQLite transaction (compare-and-set on the old ``seq``) and
   clear the pending record.

Crash recovery (step 1 of the next consumption, or of a read, of any of the streams): for each pending statement,
the target's log says whether its write committed (a ``txn`` action with that appId and version after the recorded
target version). All committed: adopt the new frontiers. None: forget the pending record (nothing was applied).
Some (a transaction killed between two writes): run the missing statements again over the recorded interval (Delta
skips any write it already has for that appId/version), then adopt. Nothing is lost and nothing applies twice.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from sqlglot import exp

from differentiation.vocabulary import METADATA_ACTION, METADATA_ISUPDATE, METADATA_ROW_ID
from dtables.catalog import normalize, qualified
from dtables.catalog.tables import create_table
from dtables.catalog.warehouse import Warehouse
from dtables.changes import resolve_location
from dtables.changes.idempotent import committed, idempotent_session
from dtables.changes.log import DeltaLog
from dtables.spark.sessions import own_session
from dtables.sql.dialect import parse, to_spark
from dtables.sql.references import aliased_table, replace_table, table_names
from dtables.state import locks
from dtables.state import streams as st
from dtables.streams import faults
from dtables.streams.dml import in_subquery_as_merge
from dtables.streams.errors import StreamConflict, StreamError
from dtables.streams.frontier import latest_versions
from dtables.streams.read import stream_changes
from dtables.streams.retention import track_retention

_view_ids = itertools.count()
SHORTHANDS = {"ACTION": METADATA_ACTION, "ISUPDATE": METADATA_ISUPDATE, "ROW_ID": METADATA_ROW_ID}
WRITES = (exp.Insert, exp.Merge, exp.Update, exp.Delete)


@dataclass(frozen=True)
class StreamRead:
    """A stream as one consumption sees it: its state when read, and the versions its interval ends at."""

    stream: st.Stream
    end: Mapping[str, int]


# -- statement trees -------------------------------------------------------------------------------------------------


def _name(table: exp.Table) -> str:
    return normalize(qualified(table.db, table.name))


def stream_tables(tree: exp.Expr, known: set[str]) -> list[tuple[exp.Table, str]]:
    """Table references in ``tree`` that name a stream (CHANGES clauses and CTE names excluded)."""
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    out = []
    for table in tree.find_all(exp.Table):
        if not table.name or table.args.get("changes") is not None:
            continue
        if not table.db and table.name.lower() in ctes:
            continue
        name = _name(table)
        if name in known:
            out.append((table, name))
    return out


def target_of(tree: exp.Expr) -> str | None:
    """The table a DML statement writes (INSERT, MERGE, UPDATE, DELETE, CREATE TABLE AS), or None."""
    if isinstance(tree, WRITES) or (isinstance(tree, exp.Create) and tree.expression is not None
                                     and (tree.args.get("kind") or "").upper() == "TABLE"):
        target = tree.this
        if isinstance(target, exp.Schema):
            target = target.this
        if isinstance(target, exp.Table):
            return _name(target)
    return None


def substitute(scope: Warehouse, tree: exp.Expr, reads: Mapping[str, StreamRead]) -> exp.Expr:
    """A copy of ``tree`` reading temp views (registered on ``scope.spark``) in place of the streams."""
    tree = tree.copy()
    stream_views = set()
    for table, name in stream_tables(tree, set(reads)):
        df = stream_changes(scope, reads[name].stream, reads[name].end)
        view = f"__dtables_stream_{next(_view_ids)}"
        df.createOrReplaceTempView(view)
        stream_views.add(view)
        alias = table.alias or table.name
        replace_table(table, aliased_table(view, alias))
    for param in list(tree.find_all(exp.Parameter)):  # Snowflake's $ACTION shorthand in stream queries
        key = param.name.upper()
        if key in SHORTHANDS:
            param.replace(exp.column(exp.to_identifier(SHORTHANDS[key], quoted=True)))
    _complete_merge_inserts(scope, tree)
    _drop_unactionable_merge_rows(tree, stream_views)
    return tree


def _drop_unactionable_merge_rows(tree: exp.Expr, stream_views: set[str]) -> None:
    """A MERGE from a stream keeps only the stream rows some WHEN clause can act on.

    Singdata's MERGE pattern matches UPDATE_BEFORE and UPDATE_AFTER rows of one key to the same target row and acts
    on the latter only; Delta refuses any target row matched by two source rows. Rows that satisfy no clause's
    condition change nothing, so dropping them first keeps the meaning, provided the conditions read the source
    alone and no WHEN NOT MATCHED BY SOURCE clause depends on which target rows the source matches.
    """
    if not isinstance(tree, exp.Merge):
        return
    using = tree.args.get("using")
    if not isinstance(using, exp.Table) or using.name not in stream_views:
        return
    alias = using.alias_or_name
    whens = tree.args["whens"].expressions
    conditions = []
    for when in whens:
        if when.args.get("source"):
            return
        condition = when.args.get("condition")
        if condition is None:
            return
        if any(c.table.lower() != alias.lower() for c in condition.find_all(exp.Column)):
            return
        conditions.append(condition.copy())
    if not conditions:
        return
    select = exp.select("*").from_(using.copy()).where(exp.or_(*conditions))
    using.replace(exp.Subquery(this=select, alias=exp.TableAlias(this=exp.to_identifier(alias))))


def _complete_merge_inserts(scope: Warehouse, tree: exp.Expr) -> None:
    """Singdata writes ``WHEN NOT MATCHED THEN INSERT VALUES (...)`` without a column list, which Spark rejects:
    supply the target's columns. In a NOT MATCHED clause there is no target row, so references to the target's
    alias there are NULL (Singdata's own example writes ``target.id``)."""
    if not isinstance(tree, exp.Merge):
        return
    target = tree.this
    alias = (target.alias or target.name).lower()
    for when in tree.find_all(exp.When):
        then = when.args.get("then")
        if not isinstance(then, exp.Insert) or then.this is not None or not isinstance(then.expression, exp.Tuple):
            continue
        columns = scope.spark.table(_name(target)).columns
        then.set("this", exp.Tuple(expressions=[exp.column(exp.to_identifier(c, quoted=True)) for c in columns]))
        for col in list(then.expression.find_all(exp.Column)):
            if col.table.lower() == alias:
                col.replace(exp.Null())


# -- locks -----------------------------------------------------------------------------------------------------------


@contextmanager
def stream_locks(warehouse: Warehouse, names: Sequence[str]) -> Iterator[None]:
    """Exclusive locks on the named streams, taken in name order, held until the block ends (or the process
    dies: the kernel drops ``flock`` locks of a dead process)."""
    with locks.streams(warehouse.store, names):
        yield


# -- executing a consumption -----------------------------------------------------------------------------------------


def app_id(streams: Mapping[str, st.Stream], index: int) -> str:
    """The idempotent-write app of a consumption's ``index``-th statement. It names the streams' incarnations (their
    creation times): a stream dropped and created again starts its sequence afresh, and under the old app id Delta
    would skip its first writes as already applied (issue 16)."""
    incarnation = hashlib.sha256("|".join(f"{n}@{s.created_at}" for n, s in sorted(streams.items())).encode())
    return f"dtables-stream:{'+'.join(sorted(streams))}#{index}@{incarnation.hexdigest()[:12]}"


def _location(warehouse: Warehouse, name: str) -> str | None:
    obj = warehouse.catalog.lookup(name)
    if obj is not None and obj.get("location"):
        return str(obj["location"])
    try:
        warehouse.catalog.ensure_registered([name])
        return resolve_location(warehouse.spark, name)
    except Exception:  # noqa: BLE001 - not a Delta table (yet): CREATE TABLE AS makes it
        return None


def _latest(warehouse: Warehouse, location: str | None) -> int:
    if location is None:
        return -1
    log = DeltaLog(warehouse.spark, location)
    return log.latest_version if log.exists else -1


def _run_on_clone(warehouse: Warehouse, reads: Mapping[str, StreamRead], statement: str, tree: exp.Expr,
                  app: str | None, seq: int, metadata: str) -> None:
    spark = warehouse.spark
    writer = idempotent_session(spark, app, seq, metadata) if app is not None else own_session(spark)
    with writer as clone:
        scope = warehouse.with_spark(clone)
        warehouse.catalog.ensure_registered(table_names(tree))
        rewritten = in_subquery_as_merge(substitute(scope, tree, reads), statement)
        if isinstance(rewritten, exp.Create):
            create_table(scope, rewritten, statement)
        else:
            clone.sql(to_spark(rewritten))


def consume(warehouse: Warehouse, statements: Sequence[tuple[str, exp.Expr]],
            reads: Mapping[str, StreamRead] | None, stream_names: Sequence[str]) -> None:
    """Run ``statements`` as one consumption of ``stream_names``.

    ``reads`` None: a single statement outside a transaction; the interval ends at the versions current once the
    locks are held. Otherwise (COMMIT): each stream's state and end as the transaction first read it; if another
    consumer advanced a stream since, StreamConflict and nothing is written.
    """
    with stream_locks(warehouse, stream_names):
        current = {n: recover(warehouse, n) for n in stream_names}
        if reads is None:
            reads = {n: StreamRead(s, latest_versions(warehouse, list(s.frontier))) for n, s in current.items()}
        for n, r in reads.items():
            if current[n].seq != r.stream.seq:
                raise StreamConflict(
                    f"stream {n} was consumed by another statement after this transaction read it (its frontier "
                    "moved); nothing of this transaction was written: run it again to consume the next changes")
        seq = max(s.seq for s in current.values()) + 1
        frontiers = {n: dict(r.end) for n, r in reads.items()}
        targets = [target_of(tree) for _, tree in statements]
        writes = []
        for i, target in enumerate(targets):
            location = _location(warehouse, target) if target else None
            writes.append({"target": target, "location": location, "after": _latest(warehouse, location),
                           "app": app_id({n: r.stream for n, r in reads.items()}, i)})
        pending: dict[str, Any] = {"seq": seq, "id": uuid.uuid4().hex, "streams": sorted(stream_names),
                                   "frontiers": frontiers,
                   "initial": sorted(n for n, r in reads.items() if r.stream.show_initial_rows),
                   "statements": [s for s, _ in statements], "writes": writes}
        st.set_pending(warehouse.store, [r.stream for r in reads.values()], pending)
        faults.crash_point("after_pending")
        _execute(warehouse, reads, statements, pending, skip_committed=False)
        faults.crash_point("after_write")
        st.advance(warehouse.store, {n: r.stream.seq for n, r in reads.items()}, seq, frontiers, pending["initial"])
        faults.crash_point("after_advance")
    track_retention(warehouse, {t for f in frontiers.values() for t in f})


def _execute(warehouse: Warehouse, reads: Mapping[str, StreamRead], statements: Sequence[tuple[str, exp.Expr]],
             pending: Mapping[str, Any], skip_committed: bool) -> None:
    metadata = json.dumps({"dtables_stream": {"seq": pending["seq"], "id": pending.get("id"),
                                              "frontiers": pending["frontiers"]}}, sort_keys=True)
    for i, (statement, tree) in enumerate(statements):
        write = pending["writes"][i]
        if skip_committed and _landed(warehouse, pending, write):
            continue
        _run_on_clone(warehouse, reads, statement, tree, write["app"] if write["target"] else None, pending["seq"],
                      metadata)
        if write["target"] and not _landed(warehouse, pending, write):
            raise StreamError(
                f"the write of {write['target']} is not in its Delta log as this consumption's commit (Delta skipped "
                f"it: {write['app']} version {pending['seq']} was already applied); the streams did not advance")
        if i + 1 < len(statements):
            faults.crash_point("between_writes")


def _landed(warehouse: Warehouse, pending: Mapping[str, Any], write: Mapping[str, Any]) -> bool:
    """Whether the target's log holds this consumption's commit of ``write`` (matched by the consumption id in its
    user metadata; pending records written before the id existed match on the app and sequence alone)."""
    if not write["target"]:
        return False
    marker = f'"id": "{pending["id"]}"' if pending.get("id") else None
    return committed(warehouse.spark, _location(warehouse, write["target"]), write["after"], write["app"],
                     pending["seq"], marker)


def recover(warehouse: Warehouse, name: str) -> st.Stream:
    """The stream after finishing or forgetting a consumption a crash left pending (call with its lock held)."""
    stream = st.require(warehouse.store, name)
    warehouse.catalog.ensure_registered(list(stream.frontier))  # a new process knows no table yet
    pending = stream.pending
    if not pending:
        return stream
    done = [_landed(warehouse, pending, w) for w in pending["writes"]]
    writing = [d for d, w in zip(done, pending["writes"]) if w["target"]]
    streams = [st.require(warehouse.store, n) for n in pending["streams"]]
    expected = {s.name: s.seq for s in streams}
    if writing and not any(writing):
        st.clear_pending(warehouse.store, pending["streams"])  # nothing was applied: as if it never ran
        return st.require(warehouse.store, name)
    if not all(writing):
        reads = {s.name: StreamRead(replace(s, pending=None), pending["frontiers"][s.name]) for s in streams}
        statements = []
        for text in pending["statements"]:
            tree = parse(text)
            if tree is None:
                raise StreamError(f"stream {name}: cannot re-parse pending statement {text!r} to finish it")
            statements.append((text, tree))
        _execute(warehouse, reads, statements, pending, skip_committed=True)
    st.advance(warehouse.store, expected, int(pending["seq"]), pending["frontiers"], pending.get("initial", ()))
    track_retention(warehouse, {t for f in pending["frontiers"].values() for t in f})
    return st.require(warehouse.store, name)
