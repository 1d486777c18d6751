"""Writing a refresh to the dynamic table: one Delta commit that carries the new frontier.

Every write runs on the refresh's cloned session with Delta's idempotent-write settings (``txnAppId`` =
``dtables-refresh:<table>``, ``txnVersion`` = the refresh sequence) and the refresh's identity and frontier as the
commit's user metadata. Delta honours ``txnAppId``/``txnVersion`` for appends, overwrites and MERGE (checked on
Delta 4.4: a second write with the same pair commits nothing), so a rerun after a crash never applies twice, and
the store can be repaired from the log (``committed_refresh``).

Writes by action: APPEND (the change set has inserts only: a plain append), MERGE (insert/update/delete matched on
the hidden row id, so one copy of a duplicated row is deleted exactly, pruned to the files whose row ids the change
set holds: ``layout.py``), OVERWRITE (FULL and REINITIALIZE: recompute and replace in one commit, rows
range-partitioned by row id for tables refreshed incrementally). Overwrites keep the table's clustering: with the
same schema they replace every row (``replaceWhere`` = true, which keeps the table's metadata); a new schema needs
``overwriteSchema``, which drops it, so it is declared again after the commit.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Observation
from pyspark.sql import functions as F
from pyspark.sql import types as T
from sqlglot import exp

from differentiation import merges_state, snapshot_query
from differentiation.merge_state import KEPT, TOUCHED
from differentiation.sql import alias, cast, col, ident
from differentiation.vocabulary import DELETE, INSERT, METADATA_ACTION, METADATA_ROW_ID, ROW_ID
from dtables.catalog import quote_column
from dtables.changes.idempotent import TXN_APP_ID, TXN_VERSION, USER_METADATA, logged_commits, make_idempotent
from dtables.changes.log import DeltaLog
from dtables.changes.reader import identified_table_at, table_at
from dtables.changes.storage import Storage
from dtables.dynamic.definition import ROW_ID_COLUMN, Column
from dtables.dynamic import layout, overwrite
from dtables.dynamic.plan import STATE_VIEW, RefreshAction, stored_name
from dtables.dynamic.sources import RefreshSources
from dtables.dynamic.vocabulary import Write
from dtables.spark.observations import counting, observed
from dtables.spark.tiny_plans import TINY_INPUT_BYTES, known_rows, local_rows_unfolded, one_job
from dtables.spark.types import has_map
from dtables.sql.dialect import to_spark

METADATA_KEY = "dtables_refresh"
MERGE_SOURCE_VIEW = "__dt_merge_source"  # the consolidated change set a MERGE reads (in the refresh's own session)
REWRITE_OLD_VIEW = "__dt_rewrite_old"  # a REWRITE's old rows, joined with its change set (same session)
REWRITE_SOURCE_VIEW = "__dt_rewrite_source"  # a REWRITE's change set once computed (same session)
# A REWRITE's old rows' row-tracking identity, kept through the overwrite (``_old_rows``); named in the hidden
# prefix that no user column may take
_OLD_ID, _OLD_VERSION = "__dtables_old_rid", "__dtables_old_rcv"


@dataclass(frozen=True)
class CommitMetadata:
    """What a refresh commit records about itself (the commit's ``userMetadata``)."""

    refresh_id: str
    sequence: int
    data_timestamp: str
    frontier: Mapping[str, int]
    definition_hash: str
    source_identities: Mapping[str, str]

    def to_json(self) -> str:
        return json.dumps({METADATA_KEY: {
            "refresh_id": self.refresh_id, "sequence": self.sequence, "data_timestamp": self.data_timestamp,
            "frontier": dict(self.frontier), "definition_hash": self.definition_hash,
            "source_identities": dict(self.source_identities)}}, sort_keys=True)

    @staticmethod
    def from_json(text: str | None) -> CommitMetadata | None:
        try:
            body = json.loads(text or "")[METADATA_KEY]
        except (ValueError, KeyError, TypeError):
            return None
        return CommitMetadata(body["refresh_id"], int(body["sequence"]), body["data_timestamp"], body["frontier"],
                              body["definition_hash"], body["source_identities"])


@dataclass(frozen=True)
class WrittenCommit:
    """A refresh commit found in the log, with the row counts of its operation metrics."""

    version: int
    metadata: CommitMetadata
    rows_inserted: int | None
    rows_deleted: int | None
    rows_updated: int | None


def configure_idempotent_write(clone: Any, name: str, metadata: CommitMetadata) -> None:
    make_idempotent(clone, f"dtables-refresh:{name}", metadata.sequence, metadata.to_json())


def _cast_select(source_columns: Sequence[str], target: Sequence[Column]) -> list[exp.Expr]:
    """Positional mapping of the compiled plan's columns to the table's, cast to the stored types (hidden state
    columns, typed None, keep the plan's own types)."""
    return [alias(cast(col(s), t.type) if t.type else col(s), t.name) for s, t in _positional(source_columns, target)]


def _holds_map(sql_type: str) -> bool:
    """Whether a column of the SQL type ``sql_type`` (as the definition records it; empty if unknown: the hidden
    state's numbers) holds a map anywhere."""
    if not sql_type:
        return False
    built = exp.DataType.build(sql_type, dialect="spark")
    return any(t.this == exp.DataType.Type.MAP for t in built.find_all(exp.DataType))


def stored_columns(action: RefreshAction, columns: Sequence[Column]) -> list[Column]:
    """The table's columns this write fills: the query's, then the hidden aggregate state the plan maintains."""
    plan_cols = action.plan.columns() if action.plan is not None else ()
    helpers = plan_cols[len(columns):]
    return list(columns) + [Column(stored_name(h), "") for h in helpers]


def register_state(clone: Any, location: str, version: int, action: RefreshAction, columns: Sequence[Column]) -> None:
    """The table's stored state at ``version`` as the temp view the algebraic change plan reads (``STATE_VIEW``):
    the helper columns under the names the plan gives them."""
    assert action.plan is not None
    helpers = action.plan.columns()[len(columns):]
    (table_at(clone, location, version)
     .selectExpr(*_texts(alias(col(stored_name(h)), h) for h in helpers))
     .createOrReplaceTempView(STATE_VIEW))


def _texts(expressions: Iterable[exp.Expr]) -> list[str]:
    """Spark SQL texts of ``expressions``, for ``selectExpr`` and ``F.expr``: one py4j call for a whole projection,
    where a ``Column`` costs a round trip per function and each function a lookup of its class (dtables.spark.jvm)."""
    return [to_spark(e) for e in expressions]


def _sql(clone: Any, query: exp.Expr) -> Any:
    """``query`` run on ``clone``: printed without the copy sqlglot makes to print safely (its printer may rewrite
    the tree it prints), a copy of a change plan's whole tree per statement; every caller builds ``query`` for
    this one statement."""
    return clone.sql(to_spark(query, copy=False))


def _wrapped(query: exp.Select, *items: exp.Expr) -> exp.Select:
    """SELECT items FROM (query) AS q, the query's CTEs moved to the outer statement (Spark 4.2 fails on some
    nested ones). ``query`` becomes part of the result (not copied: the caller gives it up)."""
    inner, ctes = _without_ctes(query)
    return _with_ctes(exp.select(*items).from_(inner.subquery("q", copy=False)), ctes)


def _without_ctes(query: exp.Select) -> tuple[exp.Select, exp.Expr | None]:
    """``query`` with its WITH clause taken off, and that clause (to put on the statement it is nested in). The
    caller gives ``query`` up: copying a change plan's tree took a few milliseconds to tens of them, four times
    per refresh."""
    ctes = query.args.get("with_")
    query.set("with_", None)
    return query, ctes


def _with_ctes(outer: exp.Select, ctes: exp.Expr | None) -> exp.Select:
    if ctes is not None:
        outer.set("with_", ctes)
    return outer


def merge_statement(location: str, source: str, targets: Sequence[Column],
                    target_filter: exp.Expr | None = None) -> exp.Merge:
    """MERGE of a consolidated change set (one row per row id, flagged deletes) into the table, matched on the hidden
    row id: a duplicated row is deleted or updated exactly once. ``target_filter``, a condition on the target's
    columns (``t``) that every row with a change-set id meets, narrows the files Delta joins."""
    target = exp.Table(this=ident(location), db=ident("delta"), alias=exp.TableAlias(this=ident("t")))
    names = [c.name for c in targets]
    matched_delete = exp.When(matched=True, condition=col("__dt_delete", "s"), then=exp.var("DELETE"))
    update = exp.When(matched=True, then=exp.Update(expressions=[
        exp.EQ(this=col(n, "t"), expression=col(n, "s")) for n in names]))
    insert = exp.When(matched=False, condition=exp.Not(this=col("__dt_delete", "s")), then=exp.Insert(
        this=exp.Tuple(expressions=[col(n) for n in names] + [col(ROW_ID_COLUMN)]),
        expression=exp.Tuple(expressions=[col(n, "s") for n in names] + [col("__dt_rid", "s")])))
    on: exp.Expr = exp.EQ(this=col(ROW_ID_COLUMN, "t"), expression=col("__dt_rid", "s"))
    if target_filter is not None:
        on = exp.And(this=on, expression=target_filter)
    return exp.Merge(this=target, using=exp.Table(this=ident(source), alias=exp.TableAlias(this=ident("s"))),
                     on=on,
                     whens=exp.Whens(expressions=[matched_delete, update, insert]))


def _same_schema(log: DeltaLog, df: Any) -> bool:
    """Whether ``df`` has the table's columns (names and types, in order) at its latest version."""
    table = T.StructType.fromJson(json.loads(log.metadata_at(log.latest_version).schema_json))
    return [(f.name, f.dataType) for f in table.fields] == [(f.name, f.dataType) for f in df.schema.fields]


def _overwrite(clone: Any, location: str, df: Any, by_row_id: bool, settings: Any) -> None:
    """Replace every row of the table with ``df`` in one commit, keeping its clustering (module docstring)."""
    if by_row_id:  # the MERGEs that follow skip the files of other ids
        df = layout.by_row_id(df, settings)
    log = DeltaLog(clone, location)
    if _same_schema(log, df):
        _replace_all(df, location, overwrite.start(clone, location))
        return
    clustered = layout.clustering_columns(clone, location)
    df.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(location)
    kept = [c for c in clustered if c in df.columns]
    if kept:
        # Declared on a session without the refresh's transaction and metadata: a commit of its own, which the
        # search for the refresh's commit (committed_refresh) passes over. A crash before it leaves the table
        # unclustered until the next overwrite with a new schema; nothing else depends on it.
        with_metadata = {k: clone.conf.get(k, None) for k in (TXN_APP_ID, TXN_VERSION, USER_METADATA)}
        for k in with_metadata:
            clone.conf.unset(k)
        try:
            layout.cluster_by(clone, location, kept)
        finally:
            for k, v in with_metadata.items():
                if v is not None:
                    clone.conf.set(k, v)


def write(clone: Any, location: str, action: RefreshAction, sources: RefreshSources, query: str,
          columns: Sequence[Column], state_version: int | None = None, by_row_id: bool = False,
          name: str = "", state_bytes: int | None = None) -> RowCounts | None:
    """Apply ``action`` to the table at ``location`` in one commit (the session must be configured first).

    ``state_version`` is the table version holding the previous result (needed by plans that keep aggregate
    state, whose change set is computed from the stored groups), ``state_bytes`` its size then (from the log; None:
    unknown). ``by_row_id``: lay an overwrite's files out by row
    id (tables refreshed incrementally; layout.py). A MERGE adds what it may touch to ``sources.pruning``. Returns
    the rows the change set inserted, deleted and updated where Delta's commit metrics cannot tell (a REWRITE
    replaces every row), ``NOTHING_WRITTEN`` where a REWRITE's or MERGE's change set was empty (no commit is made:
    the table is as the change would leave it); else None."""
    if action.write == Write.OVERWRITE:
        if action.plan is not None:
            body = snapshot_query(action.plan, sources, "end")
            df = _sql(clone, _wrapped(body, *_cast_select(action.plan.columns(), stored_columns(action, columns)),
                                      alias(col(ROW_ID), ROW_ID_COLUMN)))
        else:  # no plan (the query cannot be built into one): any unique id will do, FULL overwrites every time
            plain = clone.sql(sources.plain_query(query))
            df = plain.select(*(F.col(quote_column(s)).cast(t.type).alias(t.name) if t.type else F.col(quote_column(s))
                                for s, t in _positional(plain.columns, columns)),
                              F.expr("uuid()").alias(ROW_ID_COLUMN))
        _overwrite(clone, location, df, by_row_id, sources.settings)
        return None
    assert action.derivative is not None and action.plan is not None
    targets = stored_columns(action, columns)
    if action.write == Write.REWRITE and state_version is not None and _merges(sources, action, state_bytes):
        direct = overwrite.start(clone, location)
        if direct is not None:
            return _rewrite_merged(clone, location, state_version, direct, action, sources, columns, targets)
    if len(targets) > len(columns):
        if state_version is None:
            raise ValueError("an aggregate maintained from its stored state needs the table version holding it")
        register_state(clone, location, state_version, action, columns)
    # a state smaller than a tiny plan's inputs is shuffled with the change in the write's one job, not probed by a
    # broadcast (a job of its own: a third of a one-row change's jobs on a table of 50 groups)
    changes = sources.changes_query(action.derivative,
                                    broadcast_state=state_bytes is None or state_bytes > TINY_INPUT_BYTES)
    plan_cols = action.plan.columns()
    if action.write == Write.APPEND:
        appended = _wrapped(changes, *_cast_select(plan_cols, targets), alias(col(METADATA_ROW_ID), ROW_ID_COLUMN))
        appended = appended.where(exp.EQ(this=col(METADATA_ACTION), expression=exp.Literal.string(INSERT)))
        with local_rows_unfolded(clone):
            _sql(clone, appended).write.format("delta").mode("append").save(location)
        return None
    maps = [c for c, t in zip(plan_cols, targets, strict=False) if _holds_map(t.type)]
    source = _wrapped(one_row_per_id(changes, plan_cols, action.derivative.minimal, maps),
                      *_cast_select(plan_cols, targets), alias(col(METADATA_ROW_ID), "__dt_rid"),
                      alias(exp.EQ(this=col(METADATA_ACTION), expression=exp.Literal.string(DELETE)), "__dt_delete"))
    if action.write == Write.REWRITE:
        if state_version is None:
            raise ValueError("a REWRITE needs the table version holding the previous result")
        return rewrite(clone, location, state_version, source, targets, state_bytes)
    # Computed once: its row ids narrow the MERGE (one small job), which then reads it from memory.
    computed = _computed_once(_sql(clone, source))
    if computed is None:
        return NOTHING_WRITTEN
    merged, rows = computed
    if rows is not None and rows <= ONE_FILE_MAX_ROWS:
        # One partition: the MERGE writes the rows it inserts and the new versions of those it updates in as many
        # files as its source has partitions, and a refresh's small change left 16 tiny files each time (TPC-H
        # Q10 at SF 10: 5 files after its first refresh, 53 after three), which every later MERGE and state read
        # then opens. A narrow coalesce of the kept rows: no shuffle, no job.
        merged = merged.coalesce(1)
    enabled = str(sources.settings.conf.get(layout.MERGE_PRUNING, "true")).lower() != "false"
    target_filter, pruning = layout.merge_pruning(clone, location, merged, "__dt_rid", enabled)
    sources.pruning.append({"table": name, **pruning})
    merged.createOrReplaceTempView(MERGE_SOURCE_VIEW)
    _sql(clone, merge_statement(location, MERGE_SOURCE_VIEW, targets, target_filter))
    return None


# Change sets of at most this many rows are merged from one partition (one file written per MERGE, not one per
# shuffle partition)
ONE_FILE_MAX_ROWS = 100_000


def _computed_once(changes: Any) -> tuple[Any, int | None] | None:
    """The change set computed in one job and kept (a local checkpoint), which the write then reads, with its row
    count (None if the count did not arrive); None when it is empty (a change that moved no row of the table, such
    as an update of columns its groups' sums do not read), counted in the same job."""
    counted, observation = counting(changes, "dtables_changes")
    with local_rows_unfolded(changes.sparkSession):
        kept = counted.localCheckpoint(eager=True)
    metrics = observed(observation)
    rows = int(metrics.get("rows") or 0) if metrics is not None else None
    if rows == 0:
        return None
    if rows is not None:
        known_rows(kept, rows)
    return kept, rows


def one_row_per_id(changes: exp.Select, columns: Sequence[str], minimal: bool,
                   maps: Collection[str] = ()) -> exp.Select:
    """The change set's rows, one per row id: its INSERT if it has one (new values), else its DELETE. A change set
    left unconsolidated (``minimal`` false, see ``differentiation.pure``) may hold an id whose only rows are a
    DELETE and an INSERT of equal values (an affected group that did not move): it is left out, as consolidation
    would have, in the same window (no shuffle of its own). Not where some column holds a map (``maps``: Spark
    cannot compare them): such an id's INSERT is written again, the same values."""
    def over(fn: exp.Expr) -> exp.Window:  # over the id's rows, INSERT first
        return exp.Window(this=fn, partition_by=[col(METADATA_ROW_ID)],
                          order=exp.Order(expressions=[exp.Ordered(this=col(METADATA_ACTION), desc=True)]))

    def lead(e: exp.Expr, n: int) -> exp.Window:
        return over(exp.Lead(this=e, offset=exp.Literal.number(n)))

    keep: exp.Expr = exp.EQ(this=col("__dt_pick"), expression=exp.Literal.number(1))
    items: list[exp.Expr] = [exp.Star(), alias(over(exp.RowNumber()), "__dt_pick")]
    if not minimal and not set(maps) & set(columns):
        # NULL-safe throughout: a lone row has no lead, and NOT NULL would drop it
        unchanged = exp.and_(
            exp.EQ(this=col(METADATA_ACTION), expression=exp.Literal.string(INSERT)),
            exp.NullSafeEQ(this=lead(col(METADATA_ACTION), 1), expression=exp.Literal.string(DELETE)),
            exp.Is(this=lead(col(METADATA_ACTION), 2), expression=exp.Null()),
            *(exp.NullSafeEQ(this=col(c), expression=lead(col(c), 1)) for c in columns))
        items.append(alias(unchanged, "__dt_unchanged"))
        keep = exp.and_(keep, exp.Not(this=col("__dt_unchanged")))
    return _wrapped(_wrapped(changes, *items), exp.Star()).where(keep)


@dataclass(frozen=True)
class RowCounts:
    inserted: int
    deleted: int
    updated: int
    committed: bool = True  # False: the change set was empty and nothing was written (no commit)


NOTHING_WRITTEN = RowCounts(0, 0, 0, committed=False)


# A REWRITE of a table of at least REWRITE_BROADCAST_MIN_BYTES joins its old rows with the change set's ids broadcast
# (two narrow columns, one small Spark job) up to REWRITE_BROADCAST_MAX_ROWS change rows. A smaller table, or a
# larger change set, is full-outer-joined with it, both sides shuffled: for a table of a few groups that shuffle
# costs less than the broadcast's job; for millions of changed ids no executor must hold them in memory.
REWRITE_BROADCAST_MIN_BYTES = 1 << 20
# false writes a small aggregate's REWRITE from its change set (as before the state merge, to compare)
MERGE_STATE = "spark.dtables.refresh.mergeState"
REWRITE_BROADCAST_MAX_ROWS = 1_000_000
# A table under REWRITE_BROADCAST_MIN_BYTES taking at most this many change rows is written as one file by one task:
# split into a file per shuffle partition, every later refresh and query opens that many files for a few KB.
REWRITE_ONE_FILE_MAX_ROWS = 100_000


def rewrite(clone: Any, location: str, version: int, changes: exp.Select, targets: Sequence[Column],
            size: int | None) -> RowCounts | None:
    """The table's new contents in one overwrite: its rows at ``version`` (its latest) whose row id the change set
    ``changes`` (a query: one row per row id, deletes flagged) does not hold, and the change set's rows that are not
    deletes. ``size``: the table's bytes at ``version`` (None: unknown).
    For a small table one pass that reads and writes it whole is cheaper than a MERGE's several (find the touched
    files, then rewrite them). The counts are observed during that pass (no extra Spark job); ``NOTHING_WRITTEN``
    where the change set is empty.

    A table under ``REWRITE_BROADCAST_MIN_BYTES`` committed directly (``overwrite.py``) takes it all in one Spark
    job: the change set is computed inside the write, which is committed only if it held a row. Otherwise the change
    set is computed once first (``_computed_once``: counted, and read twice by the broadcast join below)."""
    direct = overwrite.start(clone, location)
    old, identity = _old_rows(clone, location, version, direct)
    small = size is not None and size < REWRITE_BROADCAST_MIN_BYTES
    if direct is not None and small:
        # one file: its change set is not counted first (that would be a job of its own), so the limit on
        # REWRITE_ONE_FILE_MAX_ROWS is not known here; a large change into a table this small is rare
        rows, observation = _joined_rows(clone, old, changes, targets, identity)
        with one_job(clone, rows):
            direct.write(rows.coalesce(1), identity)
        metrics = observed(observation)
        if metrics is not None and not int(metrics.get("changes") or 0):
            direct.abandon()
            return NOTHING_WRITTEN
        direct.commit()
        return _joined_counts(metrics)
    computed = _computed_once(_sql(clone, changes))
    if computed is None:
        return NOTHING_WRITTEN
    source, source_rows = computed
    if source_rows is None or source_rows > REWRITE_BROADCAST_MAX_ROWS or small or size is None:
        source.createOrReplaceTempView(REWRITE_SOURCE_VIEW)
        rows, observation = _joined_rows(clone, old, exp.select(exp.Star()).from_(REWRITE_SOURCE_VIEW), targets,
                                         identity)
        one_file = small and source_rows is not None and source_rows <= REWRITE_ONE_FILE_MAX_ROWS
        _replace_all(rows.coalesce(1) if one_file else rows, location, direct, identity)
        return _joined_counts(observed(observation))
    # The old rows are only probed against the change set's ids, which are broadcast: no shuffle of the table
    # (a full outer join would sort both sides by row id: most of the write's time on a table of 40,000 groups).
    ids = source.selectExpr(*_texts([alias(col("__dt_rid"), "__dt_mid"), alias(col("__dt_delete"), "__dt_mdel")]))
    on_id = to_spark(exp.EQ(this=col(ROW_ID_COLUMN), expression=col("__dt_mid")))
    probe = old.join(F.broadcast(ids), F.expr(on_id), "left_outer")
    matched, deleting = exp.Not(this=exp.Is(this=col("__dt_mid"), expression=exp.null())), col("__dt_mdel")
    on_old = Observation(f"dtables_rewrite_{uuid.uuid4().hex}")
    probed = probe.observe(on_old, _count(exp.and_(matched, deleting), "deleted"),
                           _count(exp.and_(matched, exp.not_(deleting)), "updated"))
    new = source.where(to_spark(exp.not_(col("__dt_delete"))))
    on_new = Observation(f"dtables_rewrite_{uuid.uuid4().hex}")
    new = new.observe(on_new, _count(exp.true(), "written"))
    columns = _texts(col(c) for c in old.columns)
    written = new.selectExpr(*_texts([*(col(c.name) for c in targets), alias(col("__dt_rid"), ROW_ID_COLUMN)]))
    if identity is not None:
        written = _with_old_ids(written, probe.where(to_spark(exp.and_(matched, exp.not_(deleting)))), identity)
    rows = probed.where(to_spark(exp.not_(matched))).selectExpr(*columns).unionByName(written.selectExpr(*columns))
    _replace_all(rows, location, direct, identity)
    old_counts, new_counts = observed(on_old), observed(on_new)
    if old_counts is None or new_counts is None:
        return None
    updated = int(old_counts.get("updated") or 0)
    return RowCounts(int(new_counts.get("written") or 0) - updated, int(old_counts.get("deleted") or 0), updated)


def _merges(sources: RefreshSources, action: RefreshAction, size: int | None) -> bool:
    """Whether a REWRITE of a table of ``size`` bytes takes its new rows from its stored aggregate state merged with
    the change (``_rewrite_merged``): a small table (as ``rewrite``'s one-job path) kept from a grouped state."""
    assert action.derivative is not None
    return (size is not None and size < REWRITE_BROADCAST_MIN_BYTES
            and str(sources.settings.conf.get(MERGE_STATE, "true")).lower() != "false"
            and merges_state(action.derivative))


def _rewrite_merged(clone: Any, location: str, version: int, direct: overwrite.Overwrite, action: RefreshAction,
                    sources: RefreshSources, columns: Sequence[Column], targets: Sequence[Column]) -> RowCounts | None:
    """``rewrite`` of a small table kept from a grouped aggregate state, in one Spark job: its rows at ``version``
    (the state) merged with the change's sums per group (``differentiation.state_merge_query``: the state read
    once, no change set, no consolidation, no second join with the old rows), each group's row as stored unless
    the change moved one of its values. A group keeps its row id; with row tracking (``_old_rows``) its Delta
    identity too, and its row commit version unless it changed. Committed only if some row changed; the counts as
    ``rewrite``'s (None where they did not arrive)."""
    assert action.derivative is not None and action.plan is not None
    old, identity = _old_rows(clone, location, version, direct)
    helpers = action.plan.columns()[len(columns):]
    # the state the merge reads: the old rows, their helper columns also under the plan's names
    (old.selectExpr("*", *_texts(alias(col(stored_name(h)), h) for h in helpers))
     .createOrReplaceTempView(STATE_VIEW))
    before = {c: f"__dt_old{i}" for i, c in enumerate(old.columns)}
    merged = sources.state_merge_query(action.derivative, list(before.items()))
    new = {t.name: cast(col(s, "m"), t.type) if t.type else col(s, "m")
           for s, t in _positional(action.plan.columns(), targets)}
    new[ROW_ID_COLUMN] = col(ROW_ID, "m")
    touched, kept = col(TOUCHED, "m"), col(KEPT, "m")
    in_old = exp.Not(this=exp.Is(this=col(before[ROW_ID_COLUMN], "m"), expression=exp.null()))
    # a value holding a map cannot be compared (Spark has no <=> for maps): a touched group's is taken as moved
    maps = {f.name for f in old.schema.fields if has_map(f.dataType)}
    differs = exp.or_(*(exp.true() if n in maps else exp.Not(this=exp.NullSafeEQ(this=v.copy(),
                                                                                  expression=col(before[n], "m")))
                        for n, v in new.items()))
    changed = exp.and_(touched.copy(), exp.or_(exp.not_(in_old.copy()), exp.not_(kept.copy()), differs))
    moved = col("__dt_changed", "m")  # computed once, below the projection of every column that reads it

    def value(name: str) -> exp.Expr:
        if identity is not None and name == identity[0]:
            return alias(col(before[name], "m"), name)
        if identity is not None and name == identity[1]:
            return alias(exp.Case(ifs=[exp.If(this=moved.copy(), true=cast(exp.null(), "bigint"))],
                                  default=col(before[name], "m")), name)
        if name not in new:
            raise ValueError(f"the merged state has no column {name!r} of the table")
        return alias(exp.Case(ifs=[exp.If(this=moved.copy(), true=new[name].copy())],
                              default=col(before[name], "m")), name)

    inner, ctes = _without_ctes(merged)
    judged = exp.select(exp.Star(), alias(in_old, "__dt_in_old"), alias(changed, "__dt_changed")).from_(
        inner.subquery("m", copy=False))
    flags = _sql(clone, _with_ctes(exp.select(
        *(value(c) for c in old.columns), *(col(c, "m") for c in ("__dt_in_old", "__dt_changed", TOUCHED, KEPT)))
        .from_(judged.subquery("m", copy=False)), ctes))
    was, now, left = col("__dt_in_old"), col(TOUCHED), col(KEPT)
    observation = Observation(f"dtables_rewrite_{uuid.uuid4().hex}")
    flags = flags.observe(observation, _count(exp.and_(was, now, exp.not_(left)), "deleted"),
                          _count(exp.and_(was, col("__dt_changed"), left), "updated"),
                          _count(exp.and_(exp.not_(was), now, left), "inserted"))
    rows = (flags.where(to_spark(exp.not_(exp.and_(now, exp.not_(left)))))
            .selectExpr(*_texts(col(c) for c in old.columns)))
    with one_job(clone, rows):
        direct.write(rows.coalesce(1), identity)
    counts = _joined_counts(observed(observation))
    if counts is not None and not (counts.inserted or counts.deleted or counts.updated):
        direct.abandon()
        return NOTHING_WRITTEN
    direct.commit()
    return counts


def _with_old_ids(written: Any, updated: Any, identity: tuple[str, str]) -> Any:
    """The probe path's new rows with the identity columns ``Overwrite.write`` keeps: an updated row (one of
    ``updated``, the old rows the change set replaces) keeps its old row id and takes this commit's version (NULL),
    as in ``_joined_rows``, so readers see an update pair; a new row takes a fresh id. The ids are joined back from
    a second probe of the old rows (the change set's broadcast ids reused), unobserved, so nothing is counted twice."""
    row_id, version = identity
    kept = updated.selectExpr(*_texts([alias(col(ROW_ID_COLUMN), "__dt_kid"), alias(col(row_id), "__dt_kept")]))
    on = to_spark(exp.EQ(this=col(ROW_ID_COLUMN), expression=col("__dt_kid")))
    return (written.join(kept, F.expr(on), "left_outer").drop("__dt_kid")
            .withColumnRenamed("__dt_kept", row_id)
            .selectExpr("*", to_spark(alias(cast(exp.null(), "bigint"), version))))


def _old_rows(clone: Any, location: str, version: int, direct: overwrite.Overwrite | None
              ) -> tuple[Any, tuple[str, str] | None]:
    """The rows a REWRITE starts from, and the names of their row-tracking identity columns where the overwrite
    keeps it (``Overwrite.write``): a table read by streams or downstream dynamic tables (row tracking on) then
    shows them the rows the refresh changed, not all of its rows deleted and inserted again."""
    identified = None
    if direct is not None and direct.keeps_identity() and _same_rows(clone, location, version, direct.version):
        # read where the overwrite starts: commits since the refresh's own (row tracking switched on and its ids
        # backfilled, OPTIMIZE) change no row but may give the rows the ids readers know them by
        identified = identified_table_at(clone, location, direct.version, (_OLD_ID, _OLD_VERSION))
    if identified is None:
        return table_at(clone, location, version), None
    return identified, (_OLD_ID, _OLD_VERSION)


def _same_rows(clone: Any, location: str, start: int, end: int) -> bool:
    """Whether the commits after ``start`` up to ``end`` left every row as it was (no data change)."""
    log = DeltaLog(clone, location)
    return all(log.has_commit(v) and not any(a.data_change for a in log.commit(v).files)
               for v in range(start + 1, end + 1))


def _joined_rows(clone: Any, old: Any, source: exp.Select, targets: Sequence[Column],
                 identity: tuple[str, str] | None = None) -> tuple[Any, Observation]:
    """``rewrite`` for a small table or a change set too large to broadcast: the old rows full-outer-joined with the
    change set on the row id, the change set's values where it has a row, deleted rows left out; and the
    observation that counts the change set's rows and what they did. With ``identity`` (the old rows' row id and
    row commit version columns) a row keeps its id, and its version unless the change set updates it.

    One SQL statement over the old rows (``REWRITE_OLD_VIEW``) and the change set's query, not DataFrame operations
    on the change set's: each of those analyses the whole change plan again (0.1-0.3 s on TPC-H's plans)."""
    old.createOrReplaceTempView(REWRITE_OLD_VIEW)
    in_old, in_changes = exp.Not(this=exp.Is(this=col(ROW_ID_COLUMN, "o"), expression=exp.null())), \
        exp.Not(this=exp.Is(this=col("__dt_rid", "s"), expression=exp.null()))
    names = {c.name for c in targets}

    def value(name: str) -> exp.Expr:
        if identity is not None and name == identity[0]:
            return alias(col(name, "o"), name)
        if identity is not None and name == identity[1]:
            return alias(exp.Case(ifs=[exp.If(this=in_changes.copy(), true=cast(exp.null(), "bigint"))],
                                  default=col(name, "o")), name)
        new = col("__dt_rid", "s") if name == ROW_ID_COLUMN else col(name, "s") if name in names else None
        if new is None:
            raise ValueError(f"the change set has no column {name!r} of the table")
        return alias(exp.Case(ifs=[exp.If(this=in_changes.copy(), true=new)], default=col(name, "o")), name)

    inner, ctes = _without_ctes(source)
    joined = (exp.select(*(value(c) for c in old.columns), alias(in_old, "__dt_in_old"),
                         alias(in_changes.copy(), "__dt_in_changes"),
                         alias(exp.func("coalesce", col("__dt_delete", "s"), exp.false()), "__dt_deleting"))
              .from_(exp.Table(this=ident(REWRITE_OLD_VIEW), alias=exp.TableAlias(this=ident("o"))))
              .join(inner.subquery("s", copy=False),
                    on=exp.EQ(this=col(ROW_ID_COLUMN, "o"), expression=col("__dt_rid", "s")), join_type="FULL OUTER"))
    flags = _sql(clone, _with_ctes(joined, ctes))
    was, now, deleting = col("__dt_in_old"), col("__dt_in_changes"), col("__dt_deleting")
    observation = Observation(f"dtables_rewrite_{uuid.uuid4().hex}")
    flags = flags.observe(observation, _count(exp.and_(was, now, deleting), "deleted"),
                          _count(exp.and_(was, now, exp.not_(deleting)), "updated"),
                          _count(exp.and_(exp.not_(was), now, exp.not_(deleting)), "inserted"),
                          _count(now, "changes"))
    return (flags.where(to_spark(exp.not_(deleting))).selectExpr(*_texts(col(c) for c in old.columns)),
            observation)


def _joined_counts(metrics: Mapping[str, Any] | None) -> RowCounts | None:
    if metrics is None:
        return None
    return RowCounts(int(metrics.get("inserted") or 0), int(metrics.get("deleted") or 0),
                     int(metrics.get("updated") or 0))


def _count(condition: exp.Expr, name: str) -> Any:
    """The rows where ``condition`` holds, as an observed metric."""
    counted = exp.Sum(this=exp.Case(ifs=[exp.If(this=condition, true=exp.Literal.number(1))],
                                    default=exp.Literal.number(0)))
    return F.expr(to_spark(alias(counted, name)))


def _replace_all(rows: Any, location: str, direct: overwrite.Overwrite | None,
                 identity: tuple[str, str] | None = None) -> None:
    """Every row of the table replaced by ``rows``, its metadata (clustering) kept: committed ``direct``ly where
    it could begin, else by Delta's writer (which rebuilds the snapshot's state to list the files it removes)."""
    if direct is not None:
        direct.write(rows, identity)
        direct.commit()
        return
    rows.write.format("delta").mode("overwrite").option("replaceWhere", "true").save(location)


def _positional(names: Sequence[str], target: Sequence[Column]) -> list[tuple[str, Column]]:
    if len(names) != len(target):
        raise ValueError(f"the query produces {len(names)} columns, the table has {len(target)}")
    return list(zip(names, target))


def _metric(metrics: Mapping[str, Any], *keys: str) -> int | None:
    for key in keys:
        if key in metrics:
            return int(metrics[key])
    return None


def _removed_rows(spark: Any, location: str, version: int) -> int | None:
    text = Storage(spark, location).read_text(f"_delta_log/{version:020d}.json") or ""
    total = 0
    for line in text.splitlines():
        if line.startswith('{"remove"'):
            stats = json.loads(line)["remove"].get("stats")
            if not stats:
                return None
            total += int(json.loads(stats).get("numRecords", 0))
    return total


def committed_refresh(spark: Any, location: str, *, min_sequence: int = 1, look_back: int = 20) -> WrittenCommit | None:
    """The newest refresh commit in the table's log with a sequence >= ``min_sequence``, or None.

    Looks at the last ``look_back`` commits only: refresh commits are the only writes to a dynamic table, so the
    newest one is near the end (maintenance commits such as OPTIMIZE may follow it).
    """
    log = DeltaLog(spark, location)
    if not log.exists:
        return None
    for commit in logged_commits(spark, location, after=log.latest_version - look_back, newest_first=True):
        info, version = commit.info, commit.version
        meta = CommitMetadata.from_json(info.get("userMetadata"))
        if meta is None:
            continue
        if meta.sequence < min_sequence:
            return None
        metrics = info.get("operationMetrics") or {}
        inserted = _metric(metrics, "numTargetRowsInserted", "numOutputRows")
        deleted = _metric(metrics, "numTargetRowsDeleted")
        if deleted is None and info.get("operation") in ("WRITE", "CREATE OR REPLACE TABLE AS SELECT") \
                and (info.get("operationParameters") or {}).get("mode") == "Overwrite":
            deleted = _removed_rows(spark, location, version)
        elif deleted is None:
            deleted = 0
        updated = _metric(metrics, "numTargetRowsUpdated")
        return WrittenCommit(version, meta, inserted, deleted, updated if updated is not None else 0)
    return None
