"""Which columns an interval's updates moved: an UPDATE of columns a query does not read is no change to it.

A change read that compares only the columns its reader uses (``reader.redundant_delta``'s ``compared``) already
leaves such updates out, but only once it runs: the reader's plan was made from the log, which says "rows removed
and added", so every join term over that table's change is still built, read and joined, to come out empty (TPC-H's
update batch of prices and statuses: Q18 and Q21 read lineitem's quantities and dates, not its prices, and spent
10-13 s on terms of an empty lineitem change). Knowing before planning which columns moved lets the refresh treat
the table as unchanged (``dynamic.executor``): its terms are never built, and a refresh none of whose sources moved
a column it reads is NO_DATA.

The answer depends only on the interval's two versions, so it is computed once per Spark application, in one job
over the interval's change rows (the read a refresh would make anyway; a read that picks rows by deletion vector is
the shared, kept one), and every dynamic table over the same interval looks it up.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from pyspark.sql import functions as F
from pyspark.sql import types as T

from differentiation.vocabulary import ACTION, DELETE, INSERT, ROW_ID
from dtables.catalog import quote_column
from dtables.changes.interval import Interval, open_log
from dtables.changes.pairs import update_pairs
from dtables.changes.log import Commit
from dtables.changes import change_data
from dtables.changes.reader import change_data_on_driver, redundant_delta
from dtables.changes.shared_reads import held_local, held_rows, held_table, known_value, value_once
from dtables.spark.tiny_plans import in_few_tasks
from dtables.spark.sessions import own_session
from dtables.spark.types import has_map

_WHOLE = "__dtables_whole_rows"
_CHANGE_SETTINGS = "spark.dtables.changes."


@dataclass(frozen=True)
class MovedColumns:
    """What an interval that both removed and added rows changed, per row id: ``rows`` when some row was inserted
    or deleted outright (an id with no DELETE/INSERT pair); ``columns``, those in which some updated row holds
    another value at the end than at the start."""

    rows: bool
    columns: frozenset[str]
    # Those in which every updated row holds another value at the end: a reader comparing one of them sees every
    # updated row as changed, so pairing its DELETE and INSERT to leave out unchanged rows would leave out none.
    always: frozenset[str] = frozenset()

    def touch(self, read: Collection[str]) -> bool:
        """Whether a reader of only the columns ``read`` sees a change (names compared as Spark resolves them,
        without regard to case)."""
        return self.rows or not {c.lower() for c in self.columns}.isdisjoint(c.lower() for c in read)


# Operations that change rows without keeping their ids: their removed rows are deletes, their new rows inserts
# (a DELETE's copied rows keep id and values, so they are no change at all). Only an interval with some other
# commit (UPDATE, MERGE, RESTORE, or an operation this list does not know) can hold an updated row.
_WHOLE_ROW_OPERATIONS = frozenset({
    "WRITE", "STREAMING UPDATE", "DELETE", "TRUNCATE", "CREATE TABLE AS SELECT", "REPLACE TABLE AS SELECT",
    "CREATE OR REPLACE TABLE AS SELECT", "OPTIMIZE"})


def moved_columns(spark: Any, interval: Interval, identity: str) -> MovedColumns:
    """The columns ``interval`` moved (one Spark job, once per application for the interval; ``identity`` names
    the table's incarnation, e.g. its Delta id, so a table re-created at the same location is not confused). An
    interval whose commits only insert and delete whole rows (appends, DELETEs: TPC-H's RF2 under copy-on-write
    removes and adds files, as an UPDATE does), or whose log counts some row inserted or deleted outright, is
    answered from the log, without the job."""
    if _rows_moved_by_log(spark, interval):
        return MovedColumns(rows=True, columns=frozenset())
    return value_once(spark, _key(interval, identity), lambda: _read(spark, interval))


def known_moved_columns(spark: Any, interval: Interval, identity: str) -> MovedColumns | None:
    """What ``moved_columns`` answered for ``interval`` earlier in this application, without computing it."""
    return known_value(spark, _key(interval, identity))


def _key(interval: Interval, identity: str) -> tuple[Any, ...]:
    return ("moved_columns", interval.location or interval.table, identity, interval.start_version,
            interval.end_version)


def _rows_moved_by_log(spark: Any, interval: Interval) -> bool:
    """Whether the log alone says ``MovedColumns.rows``: every commit that changed files inserts and deletes whole
    rows, or one of them counts rows it inserted or deleted outright (a mixed interval of appends, UPDATEs and
    DELETEs, where the job would only find that out). True may be too careful (rows an append added and a later
    commit of the interval deleted are no change), which only plans the table as changed."""
    log = open_log(spark, interval)
    versions = range(interval.start_version + 1, interval.end_version + 1)
    if not all(log.has_commit(v) for v in versions):
        return False
    commits = [c for c in (log.commit(v) for v in versions) if c.files]
    return all(c.operation in _WHOLE_ROW_OPERATIONS for c in commits) or any(map(_outright, commits))


# Operation metrics that count rows an operation inserted or deleted outright (appends' rows get new ids).
_OUTRIGHT_METRICS = {
    "WRITE": ("numOutputRows",), "STREAMING UPDATE": ("numOutputRows",), "DELETE": ("numDeletedRows",),
    "MERGE": ("numTargetRowsInserted", "numTargetRowsDeleted")}


def _outright(commit: Commit) -> bool:
    """Whether ``commit``'s metrics count a row it inserted or deleted outright, not updated in place; False
    where it has no such metric (the job then finds out)."""
    metrics = commit.metrics or {}
    return any(str(metrics.get(k, "0")).strip() not in ("0", "")
               for k in _OUTRIGHT_METRICS.get((commit.operation or "").upper(), ()))


def _read(spark: Any, interval: Interval) -> MovedColumns:
    # Without adaptive execution: one job, not one per shuffle stage (as incremental refreshes run, see
    # dynamic.executor), on a session of its own so the caller's settings stay as they are.
    plan = change_data_on_driver(spark, interval)  # the caller's settings (``picked_rows.PICK_ON_DRIVER``)
    changed = change_data.changed_rows(plan) if plan is not None else None
    if changed is not None:  # one commit's change data, read here: no Spark job (``change_data``)
        return _moved_table(*changed)
    with own_session(spark) as clone:
        # the caller's change-read settings (a session of its own starts from the defaults), so that the read's
        # choices (held or not, picked on the driver or not) are the ones its later readers make
        for key, value in spark.conf.getAll.items():
            if key.startswith(_CHANGE_SETTINGS):
                clone.conf.set(key, value)
        clone.conf.set("spark.sql.adaptive.enabled", "false")
        delta = redundant_delta(clone, interval, read_once=True)
        rows = held_rows(delta)
        if rows is None:
            return _moved(delta)
        table = held_table(delta)  # the rows as Arrow already, where they came to the driver that way
        if table is not None:
            return _moved_table(delta.schema, table)
        delta = held_local(delta)  # collected without a job
        if all(isinstance(f.dataType, _ARROW_COMPARED) for f in delta.schema.fields) and rows >= ARROW_ROWS_MIN:
            with in_few_tasks(clone):  # rows the driver holds: one task sends them, not one per core
                return _moved_table(delta.schema, delta.toArrow())
        # Instants as numbers: Python turns a timestamp into a local time, which two instants of a DST change share
        # (a projection of rows the driver holds runs no job either)
        schema = delta.schema
        if any(isinstance(f.dataType, T.TimestampType) for f in schema.fields):
            delta = delta.select(*[F.unix_micros(F.col(quote_column(f.name))).alias(f.name)
                                   if isinstance(f.dataType, T.TimestampType) else F.col(quote_column(f.name))
                                   for f in schema.fields])
        return _moved_rows(schema, delta.collect())


def _moved_rows(schema: T.StructType, rows: list[Any]) -> MovedColumns:
    """``_moved`` over rows the driver holds, without a Spark job. Values compare as Python values, which can only
    say a column moved that did not (the safe side: its readers see a change, and pair no rows): a NaN differs
    from itself here, where Spark counts it equal, and maps and timestamps inside other values count as moved."""
    fields = [(i, f) for i, f in enumerate(schema.fields) if f.name not in (ACTION, ROW_ID)]
    action, row_id = schema.fieldNames().index(ACTION), schema.fieldNames().index(ROW_ID)
    by_id: dict[Any, list[Any]] = {}
    whole = False
    for row in rows:
        if row[row_id] is None:
            whole = True
        else:
            by_id.setdefault(row[row_id], []).append(row)
    moved = {f.name: False for _, f in fields}
    always = {f.name: True for _, f in fields}
    for pair in by_id.values():
        if len(pair) != 2 or {pair[0][action], pair[1][action]} != {DELETE, INSERT}:
            whole = True
            continue
        start, end = sorted(pair, key=lambda r: r[action] != DELETE)
        for i, f in fields:
            differs = _uncomparable(f.dataType, top=True) or start[i] != end[i]
            moved[f.name] = moved[f.name] or differs
            always[f.name] = always[f.name] and differs
    return MovedColumns(rows=whole, columns=frozenset(c for c, m in moved.items() if m),
                        always=frozenset(c for c, a in always.items() if a and rows))  # none of no rows, as SQL's


# Held reads of at least this many rows are compared as Arrow columns: 20,000 change rows (an UPDATE of 0.1% of a
# 10M-row table) took 0.2 s to collect as Python rows and 0.1 s to compare; ``toArrow`` is a job of about 40 ms, and
# the refresh went from 1.35 to 1.11 s (bench/README.md). A few rows are cheaper as Python rows, without the job.
ARROW_ROWS_MIN = 1_000
# Types whose values pyarrow compares as Spark does (NULL-safe; a NaN differs from itself, the safe side)
_ARROW_COMPARED = (T.NumericType, T.StringType, T.BinaryType, T.BooleanType, T.DateType, T.TimestampType,
                   T.TimestampNTZType)


def _moved_table(schema: T.StructType, table: Any) -> MovedColumns:
    """``_moved_rows`` over the rows as an Arrow table of flat columns (``_ARROW_COMPARED``): the DELETE and the
    INSERT of each paired id side by side, each column compared at once (``pairs``)."""
    import pyarrow.compute as pc  # PySpark's own dependency for its SQL module

    pairs = update_pairs(table)
    moved, always = set(), set()
    for f in schema.fields:
        if f.name in (ACTION, ROW_ID):
            continue
        same = pairs.same(f.name)
        if not pc.all(same, min_count=0).as_py():
            moved.add(f.name)
        if not pc.any(same, min_count=0).as_py():  # none of no pairs: every column, as bool_and of whole rows
            always.add(f.name)
    return MovedColumns(rows=pairs.whole, columns=frozenset(moved),
                        always=frozenset(always) if table.num_rows else frozenset())  # none of no rows, as SQL's


def _moved(delta: Any) -> MovedColumns:
    fields = [f for f in delta.schema.fields if f.name not in (ACTION, ROW_ID)]
    action = F.col(ACTION)
    start, end = (F.min_by(F.col(quote_column(f.name)), action) for f in fields), (
        F.max_by(F.col(quote_column(f.name)), action) for f in fields)
    per_id = delta.groupBy(ROW_ID).agg(
        ((F.count(F.lit(1)) != 2) | (F.min(action) != F.lit(DELETE)) | (F.max(action) != F.lit(INSERT))
         | F.col(ROW_ID).isNull()).alias(_WHOLE),
        *[_differs(f, a, b).alias(f"c{i}") for i, (f, a, b) in enumerate(zip(fields, start, end, strict=True))])
    # every pair moved column i: a whole-row insert or delete is no pair, it counts as moved
    every = [F.bool_and(F.col(_WHOLE) | F.col(f"c{i}")).alias(f"a{i}") for i in range(len(fields))]
    row = per_id.agg(F.bool_or(_WHOLE).alias(_WHOLE),
                     *[F.bool_or(f"c{i}").alias(f"c{i}") for i in range(len(fields))], *every).collect()[0]
    return MovedColumns(rows=bool(row[_WHOLE]),
                        columns=frozenset(f.name for i, f in enumerate(fields) if row[f"c{i}"]),
                        always=frozenset(f.name for i, f in enumerate(fields) if row[f"a{i}"]))


def _differs(field: T.StructField, start: Any, end: Any) -> Any:
    """Whether the row's value of ``field`` at the start differs from that at the end (NULL-safe). Spark cannot
    compare maps: a map column of an updated row counts as moved."""
    if has_map(field.dataType):
        return F.lit(True)
    return ~start.eqNullSafe(end)


def _uncomparable(t: T.DataType, *, top: bool = False) -> bool:
    """Whether ``_moved_rows`` counts a column of type ``t`` as moved without comparing: maps (as Spark), and
    timestamps inside other values (a top-level one is compared as a number)."""
    if isinstance(t, T.TimestampType):
        return not top
    if isinstance(t, T.ArrayType):
        return _uncomparable(t.elementType)
    if isinstance(t, T.StructType):
        return any(_uncomparable(f.dataType) for f in t.fields)
    return isinstance(t, T.MapType)
