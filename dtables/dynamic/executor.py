"""The refresh executor: bring dynamic tables to a data timestamp, one Delta commit per refresh, exactly once.

``refresh(session, names)`` refreshes the named tables and the dynamic tables they read (upstreams first) to one
shared data timestamp ``T``. Per table, under an exclusive lock:

1. *reconcile*: if the table's log holds a refresh commit newer than the store knows (a crash after the write),
   adopt its frontier and mark its history record SUCCEEDED; stale EXECUTING records become CANCELLED;
2. *resolve* every source at ``T`` (base tables from their logs, upstream dynamic tables from their refresh to
   ``T``) and read the kinds of changes since the old frontier from the logs (no Spark job); a source whose
   UPDATEs moved no column the query reads counts as unchanged (``unread``: one shared job per interval);
3. *decide* (``plan.decide``): NO_DATA, INCREMENTAL (append or MERGE), FULL or REINITIALIZE;
4. *write* in one idempotent commit carrying the new frontier (``apply``), then record it in the store.

A failure leaves the table, its frontier and data timestamp as they were and records FAILED with the cause.
``DTABLES_FAULT=<point>`` makes the process exit at a named point (before_write, after_write, after_store) so tests
can kill a refresh where it hurts.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from differentiation import ChangeStats
from dtables.catalog import normalize
from dtables.catalog.constraints import KeyStore
from dtables.changes import Interval
from dtables.changes.sources import differentiation_stats
from dtables.changes.log import DeltaLog
from dtables.dynamic import definition as defs
from dtables.dynamic import history, measure
from dtables.dynamic.apply import CommitMetadata, committed_refresh, configure_idempotent_write, write
from dtables.dynamic.definition import Column, Definition, now_utc, to_iso
from dtables.dynamic.errors import DynamicTableError
from dtables.dynamic.frontier import SourceVersion, read_window, resolve_source
from dtables.dynamic.plan import REWRITE_MAX_BYTES, RefreshAction, decide, incremental_support, rewritten_whole
from dtables.dynamic.readers import source_readers
from dtables.dynamic.tracking import ensure_tracked
from dtables.dynamic.unread import drop_unread_updates
from dtables.dynamic.vocabulary import Action, Write
from dtables.sql.dynamic_syntax import RefreshMode
from dtables.spark.sessions import own_session
from dtables.dynamic.sources import RefreshSources
from dtables.errors import DtablesError
from dtables.spark.jobs import SparkWork
from dtables.sql.spark_errors import translate
from dtables.state import locks
from dtables.catalog.warehouse import Warehouse
from scheduler.dag import DAG
from scheduler.runner import RefreshOutcome
from scheduler.vocabulary import RefreshState, SchedulingState, Trigger

FAULT_ENV = "DTABLES_FAULT"
FAULT_POINTS = ("before_write", "after_write", "after_store")


def _fault(point: str) -> None:
    if os.environ.get(FAULT_ENV) == point:
        os._exit(17)  # a crash, not an exception: nothing after this point runs, no cleanup


def _normalize_timestamp(at: dt.datetime | None) -> dt.datetime:
    if at is None:
        return now_utc()
    if at.tzinfo is None:
        at = at.replace(tzinfo=dt.timezone.utc)
    at = at.astimezone(dt.timezone.utc)
    return at.replace(microsecond=at.microsecond // 1000 * 1000)


def dependency_dag(session: Warehouse, extra: Definition | None = None) -> DAG[str]:
    """The DAG of dynamic tables (edges upstream -> downstream); ``extra`` adds or replaces one definition."""
    found = {d.name: d for d in defs.load_all(session.store)}
    if extra is not None:
        found[extra.name] = extra
    return DAG({n: [s for s in d.sources if s in found] for n, d in found.items()})


def refresh(session: Warehouse, names: Iterable[str], *, trigger: str = Trigger.MANUAL,
            data_timestamp: dt.datetime | None = None, with_upstreams: bool = True) -> list[history.RefreshRecord]:
    """Refresh ``names`` (and, with ``with_upstreams``, every dynamic table they read) to one data timestamp.

    Returns one history record per table, upstreams first. Does not raise for a failed refresh: the records say
    FAILED / UPSTREAM_FAILED with the cause. Raises DynamicTableError for an unknown name.
    """
    wanted = [normalize(n) for n in names]
    for name in wanted:
        defs.require(session.store, name)
    dag = dependency_dag(session)
    order = dag.upstream_closure(wanted) if with_upstreams else dag.topological_order(wanted)
    at = _normalize_timestamp(data_timestamp)
    results: dict[str, history.RefreshRecord] = {}
    for name in order:
        table_trigger = trigger if name in wanted or trigger == Trigger.SCHEDULED else Trigger.MANUAL
        failed = [u for u in dag.upstreams(name) if u in results and results[u].state != RefreshState.SUCCEEDED]
        if failed:
            results[name] = _upstream_failed(session, name, table_trigger, at, failed)
            continue
        results[name] = refresh_one(session, name, at, table_trigger)
    return [results[n] for n in order]


def _upstream_failed(session: Warehouse, name: str, trigger: str, at: dt.datetime,
                     failed: list[str]) -> history.RefreshRecord:
    rid = history.new_refresh_id()
    history.start(session.store, name, rid, trigger, at, None, state=RefreshState.UPSTREAM_FAILED)
    history.update(session.store, rid, state=RefreshState.UPSTREAM_FAILED,
                   error=f"dynamic table {name} was not refreshed: its upstream {', '.join(failed)} did not refresh "
                         f"to {to_iso(at)}")
    record = history.get(session.store, rid)
    assert record is not None
    return record


@contextmanager
def table_lock(session: Warehouse, name: str) -> Iterator[None]:
    """An exclusive lock on one dynamic table's refreshes, across threads and processes (fcntl on a lock file)."""
    with locks.exclusive(session.store, [normalize(name)]):
        yield


def refresh_one(session: Warehouse, name: str, at: dt.datetime, trigger: str) -> history.RefreshRecord:
    """Refresh one table to ``at``, assuming its upstream dynamic tables are already there (see ``refresh``)."""
    with table_lock(session, name):
        d = reconcile(session, name)
        if d.data_timestamp is not None and at <= d.data_timestamp:
            done = [r for r in history.records(session.store, name, states=(RefreshState.SUCCEEDED,))
                    if r.data_timestamp == at]
            if done:
                return done[-1]  # already refreshed to `at` (an upstream shared by two tables of one batch)
            return _finished_without_refresh(
                session, d, trigger, at, RefreshState.CANCELLED,
                f"dynamic table {name} is already at data timestamp {to_iso(d.data_timestamp)}, later than "
                f"{to_iso(at)}; a refresh never moves a table back in time")
        if d.state == SchedulingState.SUSPENDED and trigger == Trigger.SCHEDULED:
            return _finished_without_refresh(session, d, trigger, at, RefreshState.CANCELLED,
                                             f"dynamic table {name} is suspended")
        return _run(session, d, at, trigger)


def _finished_without_refresh(session: Warehouse, d: Definition, trigger: str, at: dt.datetime, state: str,
                              why: str) -> history.RefreshRecord:
    rid = history.new_refresh_id()
    history.start(session.store, d.name, rid, trigger, at, d.frontier, state=state)
    history.update(session.store, rid, state=state, error=why)
    record = history.get(session.store, rid)
    assert record is not None
    return record


def _location(session: Warehouse, name: str) -> str:
    obj = session.catalog.lookup(name)
    if obj is None:
        raise DynamicTableError(f"dynamic table {name} has no table in the catalog (dropped?)")
    return str(obj["location"])


def reconcile(session: Warehouse, name: str) -> Definition:
    """Repair the store from the table's Delta log after an interrupted refresh (call under the table's lock)."""
    d = defs.require(session.store, name)
    # The newest refresh commit the store may not know about, or whose history record was never finished.
    commit = committed_refresh(session.spark, _location(session, name), min_sequence=max(1, d.refresh_seq))
    if commit is not None:
        meta = commit.metadata
        if meta.sequence > d.refresh_seq:
            defs.record_refreshed(
                session.store, name, data_timestamp=dt.datetime.fromisoformat(meta.data_timestamp),
                data_version=commit.version, frontier=dict(meta.frontier), refresh_seq=meta.sequence,
                initialized_hash=meta.definition_hash, source_identities=dict(meta.source_identities),
                only_if_seq_below=meta.sequence)
        record = history.get(session.store, meta.refresh_id)
        if record is not None and record.state != RefreshState.SUCCEEDED:
            history.update(session.store, meta.refresh_id, state=RefreshState.SUCCEEDED, target_version=commit.version,
                           frontier_after=dict(meta.frontier), rows_inserted=commit.rows_inserted,
                           rows_deleted=commit.rows_deleted, rows_updated=commit.rows_updated, error=None,
                           reason=f"{record.reason or ''} (recovered from the Delta log: the process ended after "
                                  f"the commit, before recording it)".strip())
    for stale in history.records(session.store, name, states=(RefreshState.EXECUTING,)):
        history.update(session.store, stale.refresh_id, state=RefreshState.CANCELLED,
                       error=f"refresh of dynamic table {name} was interrupted before it committed (the process "
                             "ended); nothing was applied, the next refresh starts from the previous frontier")
    return defs.require(session.store, name)


def _stats(session: Warehouse, d: Definition, sources: dict[str, SourceVersion]) -> dict[str, ChangeStats]:
    """Change kinds of every source that moved since the stored frontier (logs only, no Spark job)."""
    out: dict[str, ChangeStats] = {}
    for name, src in sources.items():
        old = d.frontier.get(name)
        same_table = d.source_identities.get(name) == src.identity
        if old is None or not same_table or src.version <= old:
            continue
        out[name] = differentiation_stats(session.spark, Interval(name, old, src.version, src.location))
    return out


# Adaptive query execution runs each shuffle and broadcast stage as a Spark job of its own. An incremental refresh
# is many small stages (change reads, joins with snapshots, consolidation, the MERGE's own passes) over little
# data, so AQE about doubles its job count for nothing (bench/README.md, "Measurements behind design choices").
# FULL refreshes keep it. Set spark.dtables.incrementalAdaptive=true to keep AQE.
ADAPTIVE_SWITCH = "spark.dtables.incrementalAdaptive"


def _tune_for_small_changes(session: Warehouse, clone: Any) -> None:
    if session.spark.conf.get(ADAPTIVE_SWITCH, "false").lower() != "true":
        clone.conf.set("spark.sql.adaptive.enabled", "false")
        # Without AQE, Spark 4.2's union partitioning pass-through (SPARK-52921) builds sort-merge joins whose
        # sides report different partition counts when Delta's MERGE materializes its source, and planning fails
        # ("PartitioningCollection requires all of its partitionings have the same numPartitions"; seen on TPC-H
        # Q18 at SF 1 after RF2).
        clone.conf.set("spark.sql.unionOutputPartitioning", "false")


def _stored(session: Warehouse, d: Definition) -> tuple[tuple[str, ...], int | None]:
    """The columns the table holds at its last refresh, hidden ones included, and its size in bytes then (from the
    log: no Spark job)."""
    if d.data_version is None:
        return (), None
    log = DeltaLog(session.spark, _location(session, d.name), d.name)
    columns = tuple(f["name"] for f in json.loads(log.metadata_at(d.data_version).schema_json)["fields"])
    return columns, log.size_at(d.data_version)


REWRITE_SWITCH = "spark.dtables.refresh.rewriteMaxBytes"


def _rewrite_max_bytes(session: Warehouse) -> int:
    value = session.spark.conf.get(REWRITE_SWITCH, None)
    try:
        return int(value) if value is not None else REWRITE_MAX_BYTES
    except ValueError as e:
        raise DynamicTableError(f"{REWRITE_SWITCH} must be a number of bytes, not {value!r}") from e


def _error_text(name: str, error: BaseException) -> str:
    if isinstance(error, DtablesError):
        cause = str(error)
    else:
        cause = str(translate(error, f"refresh of {name}")) if isinstance(error, Exception) and not isinstance(
            error, AssertionError) else repr(error)
    return cause if name in cause else f"refresh of dynamic table {name} failed: {cause}"


def _output_columns(clone: Any, sources: RefreshSources, d: Definition) -> tuple[Column, ...]:
    """The query's output columns over the new frontier (analysis only); comments carried over by name."""
    schema = clone.sql(sources.plain_query(d.query)).schema
    comments = {c.name: c.comment for c in d.columns}
    return tuple(Column(f.name, f.dataType.simpleString(), comments.get(f.name)) for f in schema.fields)


def _run(session: Warehouse, d: Definition, at: dt.datetime, trigger: str) -> history.RefreshRecord:
    store, name = session.store, d.name
    rid = history.new_refresh_id()
    history.start(store, name, rid, trigger, at, d.frontier)
    work = SparkWork(session.spark, f"refresh {name}")
    try:
        with work:
            _refresh_once(session, d, at, rid)
    except Exception as e:  # noqa: BLE001 - every failure is recorded; the table keeps its last good contents
        history.update(store, rid, state=RefreshState.FAILED, error=_error_text(name, e))
    cost = work.cost
    history.update(store, rid, spark_jobs=cost.jobs, job_seconds=cost.job_seconds,
                   driver_seconds=cost.driver_seconds, bytes_read=cost.bytes_read, records_read=cost.records_read)
    record = history.get(store, rid)
    assert record is not None
    return record


def _refresh_once(session: Warehouse, d: Definition, at: dt.datetime, rid: str) -> None:
    """Decide and apply one refresh of ``d`` to ``at``, recording it under ``rid`` (raises on failure)."""
    store, name = session.store, d.name
    untracked = ensure_tracked(session, d.sources)  # normally done when this table was created (tracking.py)
    sources = {s: resolve_source(session, name, s, at) for s in d.sources}
    # changes are read between the commits that change rows: not across a compaction at either end
    frontier, sources = read_window(session, d.frontier, d.source_identities, sources)
    d = dataclasses.replace(d, frontier=frontier)
    stored_columns, target_bytes = _stored(session, d)
    stats = _stats(session, d, sources)
    support = incremental_support(d.query, sources)  # the query's plan: built once (about 10 ms), read by both
    unread = drop_unread_updates(session.spark, d, sources, stats, support)
    action = decide(d, sources, stats, at, stored_columns, target_bytes,
                    _rewrite_max_bytes(session), KeyStore(store).relied_on(list(sources)), untracked, support)
    if unread:
        action = dataclasses.replace(action, reason=f"{action.reason}; {', '.join(sorted(unread))}: updated only "
                                                    "columns the query does not read")
    # AUTO's cost model may turn an INCREMENTAL into a FULL (dynamic/cost.py); every refresh records its sizes
    action, measured = measure.with_cost_model(session.spark, store, d, sources, action, target_bytes,
                                               _location(session, name))
    history.update(store, rid, action=action.action, reason=action.reason, frontier_after=action.frontier_after,
                   write_kind=action.write, **measured)
    identities = {n: s.identity for n, s in sources.items()}
    if action.action == Action.NO_DATA:
        defs.record_refreshed(store, name, data_timestamp=at, data_version=d.data_version or 0,
                              frontier=dict(action.frontier_after), refresh_seq=d.refresh_seq,
                              initialized_hash=d.initialized_hash, source_identities=identities)
        history.update(store, rid, state=RefreshState.SUCCEEDED, target_version=d.data_version, rows_inserted=0,
                       rows_deleted=0, rows_updated=0)
    else:
        with own_session(session.spark) as clone:
            _apply(session, clone, d, action, sources, at, rid, target_bytes)


def _apply(session: Warehouse, clone: Any, d: Definition, action: RefreshAction, sources: Mapping[str, SourceVersion],
           at: dt.datetime, rid: str, target_bytes: int | None) -> None:
    """Write ``action`` (not NO_DATA) on ``clone``, a session of the refresh's own, and record it; ``target_bytes``:
    the table's size at its last refresh (``_stored``)."""
    store, name = session.store, d.name
    identities = {n: s.identity for n, s in sources.items()}
    if action.action == Action.INCREMENTAL:
        _tune_for_small_changes(session, clone)
    refresh_sources = RefreshSources(clone, d.frontier, sources, settings=session.spark,
                                     readers=source_readers(lambda: defs.load_all(store)))
    columns = d.columns
    if action.action == Action.REINITIALIZE:  # an upstream schema change may change the output columns
        columns = _output_columns(clone, refresh_sources, d)
        if columns != d.columns:
            defs.set_fields(store, name, columns=json.dumps([[c.name, c.type, c.comment] for c in columns]))
            d = defs.require(store, name)
    seq = d.refresh_seq + 1
    computed_under = action.contents_hash or d.definition_hash
    meta = CommitMetadata(rid, seq, to_iso(at) or "", dict(action.frontier_after), computed_under, identities)
    configure_idempotent_write(clone, name, meta)
    history.update(store, rid, sequence=seq)
    location = _location(session, name)
    _fault("before_write")
    # Laid out by row id for the MERGEs of later refreshes; a table they rewrite whole instead would only pay for it:
    # a sampling job and a shuffle per overwrite (TPC-H SF 1: AUTO's FULL of Q20 ran 11 jobs, 9 without, as its FULL
    # twin; bench/README.md, session 72)
    merged_later = not rewritten_whole(target_bytes, _rewrite_max_bytes(session))
    counts = write(clone, location, action, refresh_sources, d.query, columns, state_version=d.data_version,
                   by_row_id=d.refresh_mode_chosen != RefreshMode.FULL and merged_later, name=name,
                   state_bytes=target_bytes)
    if refresh_sources.pruning:
        history.update(store, rid, pruning=json.dumps(refresh_sources.pruning))
    if counts is not None and not counts.committed:
        # The change moved no row: the table already holds the query's result at `at`. Recorded as NO_DATA is:
        # the data timestamp and frontier move, the Delta version and refresh sequence stay.
        defs.record_refreshed(store, name, data_timestamp=at, data_version=d.data_version or 0,
                              frontier=dict(action.frontier_after), refresh_seq=d.refresh_seq,
                              initialized_hash=d.initialized_hash, source_identities=identities)
        history.update(store, rid, state=RefreshState.SUCCEEDED, target_version=d.data_version, rows_inserted=0,
                       rows_deleted=0, rows_updated=0, sequence=None, write_kind=Write.NONE,
                       reason=f"{action.reason}; the change set was empty: nothing written")
        return
    _fault("after_write")
    commit = committed_refresh(session.spark, location, min_sequence=seq)
    if commit is None:
        raise DynamicTableError(f"refresh of dynamic table {name}: its commit (sequence {seq}) is not in "
                                "the Delta log")
    if commit.metadata.refresh_id != rid:
        # Delta skips a write whose app and version are already in the log, without an error: the commit
        # found is another refresh's, and recording it as this one would move the frontier over changes
        # this refresh never wrote (issue 16).
        raise DynamicTableError(
            f"refresh of dynamic table {name}: sequence {seq} in the Delta log (version {commit.version}) "
            f"was written by refresh {commit.metadata.refresh_id}, not by this one; nothing was applied")
    defs.record_refreshed(store, name, data_timestamp=at, data_version=commit.version,
                          frontier=dict(action.frontier_after), refresh_seq=seq,
                          initialized_hash=computed_under, source_identities=identities)
    _fault("after_store")
    rows = ((counts.inserted, counts.deleted, counts.updated) if counts is not None else
            (commit.rows_inserted, commit.rows_deleted, commit.rows_updated))
    history.update(store, rid, state=RefreshState.SUCCEEDED, target_version=commit.version,
                   rows_inserted=rows[0], rows_deleted=rows[1], rows_updated=rows[2])


class DynamicTableRefresher:
    """The scheduler's ``Refresher`` (scheduler/runner.py): one table, at a data timestamp the scheduler chose."""

    def __init__(self, session: Warehouse):
        self.session = session

    def refresh(self, name: str, data_timestamp: dt.datetime, trigger: str) -> Any:
        started = now_utc()
        try:
            [record] = refresh(self.session, [name], trigger=trigger, data_timestamp=data_timestamp,
                               with_upstreams=False)
        except DtablesError as e:
            return RefreshOutcome(state=RefreshState.FAILED, error=str(e))
        took = ((record.ended_at or now_utc()) - started).total_seconds()
        return RefreshOutcome(state=record.state, action=record.action or "", error=record.error, duration_s=took)
