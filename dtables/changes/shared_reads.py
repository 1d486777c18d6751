"""Change reads computed once per Spark application and read by every refresh of the same interval.

A DELETE with deletion vectors writes no change data, so the rows it deleted are picked by row index out of every
file whose vector grew: a scan of those files whole, however few rows it keeps. One refresh computes that read once
(a local checkpoint, see ``reader.redundant_delta``). The dynamic tables of a DAG that read one source at one
frontier (after a batch, every TPC-H query over lineitem) all read the same interval, so the checkpoint outlives the
refresh that made it: it is kept for the application as a global temporary view, which every session of it (each
refresh's clone included) can read, under a key holding everything that decides its rows: the application, the
table's location and Delta id, the interval's two versions and the change-read settings. A version's files never
change, so a kept read stays right until it is evicted (least recently used first, ``MAX_KEPT`` at most) or the
application ends.

Snapshots are kept the same way, as plans (``plan_once``): nothing is computed ahead, but the driver's work of
building a snapshot of a version (its file list, its deletion vectors decoded into a table of marked rows) is done
once per application, not once per refresh that reads it.

A read of an interval that updated a few rows (bounded from the log, ``spark.dtables.changes.driverRowsMax``) is
held by the driver instead of checkpointed (``on_driver``): a local relation, which the plans over it read and
broadcast without a job, and which ``moved`` can compare in Python.

``spark.dtables.changes.sharedReads = false`` computes each refresh's read on its own (as before); reads that may
pick more than ``spark.dtables.changes.sharedReadsMaxRows`` rows (default 5,000,000, counted from the vectors) are
never kept, so a large DELETE does not pin its rows in memory after its refresh.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame
from pyspark.sql import types as T
from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame

from dtables.catalog import quote_column
from dtables.spark.observations import counting, observed
from dtables.spark.sessions import is_connect, rows_for_plans
from dtables.spark.tiny_plans import in_few_tasks, known_rows

SHARED_READS = "spark.dtables.changes.sharedReads"
SHARED_READS_MAX_ROWS = "spark.dtables.changes.sharedReadsMaxRows"
DEFAULT_MAX_ROWS = 5_000_000
# Change reads of at most this many rows (bounded from the log before any job runs) are kept on the driver. An
# UPDATE of 0.1% of a 10M-row table writes 20,000 change rows: above 10,000 (the earlier default) its columns moved
# were found in a job of their own (0.3 s) and the refresh read the change files again (bench/README.md).
DRIVER_ROWS_MAX = "spark.dtables.changes.driverRowsMax"
DEFAULT_DRIVER_ROWS_MAX = 50_000
MAX_KEPT = 16  # intervals kept per process: enough for every source of a DAG refreshed at one frontier
MAX_PLANS = 64  # snapshot plans kept per process (they hold no rows)
MAX_HELD = 32  # restricted reads held per process (``held_once``: each at most ``driver_rows_max`` rows)

_lock = threading.Lock()
_kept: OrderedDict[tuple[Hashable, ...], str] = OrderedDict()
_values: OrderedDict[tuple[Hashable, ...], Any] = OrderedDict()
_names = itertools.count()


def _application(spark: Any) -> str:
    return str(spark.conf.get("spark.app.id", ""))


def _global_database(spark: Any) -> str:
    return str(spark.conf.get("spark.sql.globalTempDatabase", "global_temp"))


def read_once(spark: Any, key: tuple[Hashable, ...], rows: int, build: Callable[[], DataFrame], *,
              hold: bool = False, held: Callable[[], DataFrame | None] | None = None) -> DataFrame:
    """``build()`` computed once, or the same rows computed earlier in this application under ``key``: held by the
    driver where ``hold`` (``on_driver``; the caller checks ``driver_rows_max``), otherwise in a local checkpoint.
    ``rows`` bounds the rows the read can hold (kept for later refreshes only up to the configured maximum).
    ``held``: where the rows are to be held, the same rows held without Spark (``held_arrow``), or None where it
    cannot make them (``build`` then runs)."""
    small = hold and rows <= driver_rows_max(spark)

    def computed() -> DataFrame:
        if small:
            made = held() if held is not None else None
            return made if made is not None else on_driver(build())
        if is_connect(spark):  # no plan of its to size (``tiny_plans``)
            return build().localCheckpoint(eager=True)
        counted, observation = counting(build(), "dtables_read")
        kept = counted.localCheckpoint(eager=True)
        metrics = observed(observation)
        # sized by its rows, not by the scan it came from (``tiny_plans``); ``rows`` bounds them from the log
        known_rows(kept, int(metrics["rows"]) if metrics and metrics.get("rows") is not None else rows)
        return kept

    if str(spark.conf.get(SHARED_READS, "true")).lower() == "false" \
            or rows > int(spark.conf.get(SHARED_READS_MAX_ROWS, str(DEFAULT_MAX_ROWS))):
        return computed()
    full_key = ("read", _application(spark), *key)
    kept = _lookup(spark, full_key)
    if kept is not None:
        return kept
    return _keep(spark, full_key, computed())


def driver_rows_max(spark: Any) -> int:
    """How many rows a change read may hold to be kept on the driver (``spark.dtables.changes.driverRowsMax``;
    -1 keeps none there, as over Spark Connect, whose client has no JVM to hold them)."""
    return -1 if is_connect(spark) else int(spark.conf.get(DRIVER_ROWS_MAX, str(DEFAULT_DRIVER_ROWS_MAX)))


def held_once(spark: Any, key: tuple[Hashable, ...], build: Callable[[], DataFrame], most: int) -> DataFrame | None:
    """``build()``'s rows held by the driver (``on_driver``), or the rows held earlier in this application under
    ``key``, for reads whose size nothing bounds ahead (a snapshot restricted to a change's keys,
    ``IntervalSources.held``). None the first time ``key`` is asked for: a read that one plan only reads (TPC-H
    Q17's lineitem by the changed parts) costs that plan nothing more than its own scan, where holding it costs a
    job of its own; the second asker holds it for itself and every later one. None too when it has more than
    ``most`` rows (found by the one job that tried, at most ``most + 1`` rows taken, and remembered, so that no
    later refresh tries again). Scanned in as many tasks as Spark plans, not ``in_few_tasks``: the read it scans
    is a whole table's."""
    if most <= 0 or str(spark.conf.get(SHARED_READS, "true")).lower() == "false":
        return None
    full_key = ("held", _application(spark), *key)
    kept = _lookup(spark, full_key)
    if kept is not None:
        return kept
    if known_value(spark, ("too many", *full_key)):
        return None
    if first_ask(spark, full_key):  # one reader scans it in its own plan, as it would anyway
        return None
    held = on_driver(build().limit(most + 1), few_tasks=False)
    if (held_rows(held) or 0) > most:
        value_once(spark, ("too many", *full_key), lambda: True)
        return None
    return _keep(spark, full_key, held)


def first_ask(spark: Any, key: tuple[Hashable, ...]) -> bool:
    """True the first time ``key`` is asked for in this application, False after: a read that one reader scans in
    its own plan as cheaply is held only for the second."""
    if known_value(spark, ("asked", *key)):
        return False
    value_once(spark, ("asked", *key), lambda: True)
    return True


def on_driver(df: DataFrame, *, few_tasks: bool = True) -> DataFrame:
    """``df``'s rows computed now (one Spark job, as a local checkpoint takes) and held by the driver as a local
    relation. A plan over a local relation reads no files, and collecting it runs no job; a broadcast of it still
    does (Spark collects a ``LocalTableScanExec`` through its RDD to broadcast it), but one that reads no files,
    where a checkpoint or a scan of the change files costs a scan at every read. More than ``PLANNED_ROWS_MAX``
    rows are given to plans as an RDD of them (``rows_for_plans``: planning copies a local relation's rows at every
    rule), the local relation kept for collecting (``held_local``). Classic Spark only (a Connect client has no JVM
    to hold them).

    Rows of flat columns whose values Arrow carries exactly (``_ARROW_HELD``) come to Python as one Arrow table
    and go back as the local relation (``held_table`` then gives the table, which ``moved`` compares without a
    second job): 20,000 change rows took 58 ms that way against 106 ms collected in the JVM and then copied to
    Arrow for ``moved`` (bench/README.md). Other rows stay in the JVM (``collectAsList``). ``few_tasks``: the rows
    come from inputs as small as they are (``in_few_tasks``), not from a scan of a whole table."""
    session = df.sparkSession
    jdf = df._jdf  # type: ignore[attr-defined]
    with in_few_tasks(session, df) if few_tasks else nullcontext():  # a few thousand rows: tasks would cost more
        # Rows the driver holds already (picked by ``picked_rows``) are collected without a job; Arrow takes one
        held_already = jdf.queryExecution().optimizedPlan().nodeName() == "LocalRelation"
        if not held_already and all(arrow_held(f.dataType) for f in df.schema.fields):
            table = df.toArrow()
            if table.nbytes * 2 <= _local_relation_bytes(session):  # else Spark would make it an RDD, not held
                return held_arrow(session, table, df.schema)
        rows = jdf.collectAsList()
    local = session._jsparkSession.createDataFrame(rows, jdf.schema())  # type: ignore[attr-defined]
    return _for_plans(ClassicDataFrame(local, session), int(rows.size()))


@dataclass(frozen=True)
class Derived:
    """The last column of held rows, computed where it is read rather than when they are held (``held_arrow``): by
    Spark in the plans over them (a projection, which a plan that does not read the column prunes), by the driver
    when their Arrow table is asked for (``held_table``). It takes the place of ``source``, a column of the held
    rows that readers never see. A change read's opaque row ids are (``driver_delta``): an aggregate's refresh
    reads none of them, and digesting 20,000 of them in Python and sending the texts to the JVM cost about 20 ms of
    a 0.4 s refresh."""

    name: str
    source: str
    sql: str  # Spark SQL of the column over ``source``
    arrow: Callable[[Any], Any]  # the column as a pyarrow array, from ``source``'s

    def over(self, df: DataFrame, names: list[str]) -> DataFrame:
        """``df`` (of the columns ``names``) with the column in the place of ``source``."""
        return df.selectExpr(*[quote_column(n) for n in names if n != self.source],
                             f"{self.sql} AS {quote_column(self.name)}")

    def table(self, table: Any) -> Any:
        return table.drop_columns([self.source]).append_column(self.name, self.arrow(table.column(self.source)))


class _Deferred:
    """A value made when first asked for (``held_table``, ``held_local``), then kept."""

    def __init__(self, make: Callable[[], Any]):
        self._make: Callable[[], Any] | None = make
        self._value: Any = None

    def __call__(self) -> Any:
        if self._make is not None:
            self._value, self._make = self._make(), None
        return self._value


class _DerivedTable(_Deferred):
    """The Arrow table of held rows with a ``Derived`` column, made when first asked for from ``raw`` (of
    ``schema``, ``derived.source`` in the column's place)."""

    def __init__(self, raw: Any, schema: T.StructType, derived: Derived):
        super().__init__(lambda: derived.table(raw))
        self.raw, self.schema, self.derived = raw, schema, derived


def held_source(df: DataFrame) -> tuple[Any, T.StructType, Derived] | None:
    """Where ``df`` holds rows with a ``Derived`` column (``held_arrow``): their Arrow table with ``source`` in its
    place, that table's schema and the ``Derived``, for work on the rows that needs the column only as a key."""
    table = vars(df).get(_HELD_TABLE)
    return (table.raw, table.schema, table.derived) if isinstance(table, _DerivedTable) else None


def held_arrow(session: Any, table: Any, schema: T.StructType, derived: Derived | None = None) -> DataFrame:
    """The rows of ``table`` (a ``pyarrow.Table`` of ``schema``'s columns, of ``_ARROW_HELD`` types) held by the
    driver as ``on_driver`` holds them, ``held_table`` giving ``table`` back; with ``derived``, its column in
    the place of ``derived.source`` (in ``held_table``'s too). One chunk per column: PySpark 4.2's conversion loses
    the rows after an empty chunk of a table concatenated from several."""
    table = table.combine_chunks()
    local = session.createDataFrame(table, schema=schema)
    given = table if derived is None else _DerivedTable(table, schema, derived)
    return _held_frame(local, table.num_rows, given, derived)


def _held_frame(local: DataFrame, rows: int, table: Any, derived: Derived | None) -> DataFrame:
    """The rows of ``local`` (a local relation of ``rows`` rows) held for plans (``_for_plans``), their Arrow table
    ``table`` (or a ``_Deferred`` one, or None), ``derived``'s column computed over them."""
    if derived is None:
        held = _for_plans(local, rows)
    else:
        names = local.schema.names
        held = _marked(derived.over(rows_for_plans(local, rows), names), rows)
        setattr(held, _HELD_LOCAL, _Deferred(lambda: derived.over(local, names)))
        setattr(held, _HELD_RAW, (local, derived))
    if table is not None:
        setattr(held, _HELD_TABLE, table)
    return held


def _for_plans(local: DataFrame, rows: int) -> DataFrame:
    """The rows of ``local`` (a local relation of ``rows`` rows) as plans read them (``rows_for_plans``), marked
    as held, with ``local`` kept to collect them without a job (``held_local``)."""
    planned = _marked(rows_for_plans(local, rows), rows)
    if planned is not local:
        setattr(planned, _HELD_LOCAL, local)
    return planned


# Types whose values go to Arrow and back unchanged (no time zone to convert, no nesting, no collation)
_ARROW_HELD = (T.NumericType, T.BinaryType, T.BooleanType, T.DateType)


def arrow_held(data_type: T.DataType) -> bool:
    if isinstance(data_type, T.StringType):
        return data_type.collation == "UTF8_BINARY"
    return isinstance(data_type, _ARROW_HELD)


def _local_relation_bytes(session: Any) -> int:
    """How large an Arrow table Spark turns into a local relation (``spark.sql.execution.arrow.
    localRelationThreshold``; larger ones become an RDD)."""
    text = str(session.conf.get("spark.sql.execution.arrow.localRelationThreshold", "48MB"))
    return int(session._jvm.org.apache.spark.network.util.JavaUtils.byteStringAsBytes(text))  # type: ignore[attr-defined]


def held_local(df: DataFrame) -> DataFrame:
    """The local relation of the rows ``on_driver`` held as ``df``, which collecting runs no job for; ``df`` itself
    where it is one already (or not held at all)."""
    local = vars(df).get(_HELD_LOCAL, df)
    return local() if isinstance(local, _Deferred) else local


def held_table(df: DataFrame) -> Any:
    """The Arrow table of the rows ``on_driver`` held as ``df`` (a ``pyarrow.Table``), or None where it kept them
    in the JVM only (or ``df`` is not its result)."""
    table = vars(df).get(_HELD_TABLE)
    return table() if isinstance(table, _Deferred) else table


# The attribute that marks a DataFrame ``on_driver`` made (or a kept read of one) with its row count: asking Spark
# (its optimized plan) costs an optimization of the plan, about 20 ms, where the caller only wants to know. Read
# from the instance's own attributes: a DataFrame answers any other name as a column (a Spark Connect one does so
# even for names that start with an underscore).
_HELD_ROWS = "_dtables_held_rows"
_HELD_TABLE = "_dtables_held_table"
_HELD_LOCAL = "_dtables_held_local"
_HELD_RAW = "_dtables_held_raw"  # (local relation, ``Derived``) where a column is derived: what ``_keep`` keeps
_held: dict[str, int] = {}  # kept view name -> rows, for the reads ``on_driver`` made
# kept view name -> its rows as Arrow (or a ``_Deferred`` table), where ``on_driver`` brought them so, and the column
# derived over the view's rows (``Derived``), if any
_held_tables: dict[str, tuple[Any, Derived | None]] = {}


def _marked(df: DataFrame, rows: int | None) -> DataFrame:
    if rows is not None:
        setattr(df, _HELD_ROWS, rows)
    return df


def _marked_rows(df: DataFrame) -> int | None:
    rows = vars(df).get(_HELD_ROWS)
    return int(rows) if rows is not None else None


def held_rows(df: DataFrame) -> int | None:
    """How many rows ``df`` holds if it is rows held by the driver (``on_driver``), else None: collecting it runs no
    Spark job. Known without Spark for a read ``on_driver`` made; otherwise from the optimized plan."""
    rows = _marked_rows(df)
    if rows is not None:
        return rows
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return None
    plan = jdf.queryExecution().optimizedPlan()
    return int(plan.data().size()) if plan.getClass().getSimpleName() == "LocalRelation" else None


def marked_held(df: DataFrame) -> bool:
    """Whether ``df`` is a read ``on_driver`` held (or a kept read of one), from its mark alone: no Spark call,
    where ``is_on_driver`` asks Spark about other DataFrames."""
    return _marked_rows(df) is not None


def is_on_driver(df: DataFrame) -> bool:
    """Whether ``df`` is rows held by the driver (``on_driver``): collecting it runs no Spark job."""
    return held_rows(df) is not None


def plan_once(spark: Any, key: tuple[Hashable, ...], build: Callable[[], DataFrame]) -> DataFrame:
    """``build()``, or the DataFrame built earlier in this application under ``key``. Nothing is computed or
    cached: each read scans again. What is saved is the driver's work of building it, which for a snapshot of a
    table with deletion vectors (the version's file list, its vectors decoded, their marked rows made a table) is
    paid again by every refresh that reads the same version, e.g. every query over lineitem after a batch."""
    if str(spark.conf.get(SHARED_READS, "true")).lower() == "false":
        return build()
    full_key = ("plan", _application(spark), *key)
    kept = _lookup(spark, full_key)
    return kept if kept is not None else _keep(spark, full_key, build())


def value_once(spark: Any, key: tuple[Hashable, ...], compute: Callable[[], Any]) -> Any:
    """``compute()``, or the value computed earlier in this application under ``key``: for small facts about fixed
    versions (``moved.moved_columns``), which never change once known (``MAX_PLANS`` kept, least recently used
    first out)."""
    full_key = ("value", _application(spark), *key)
    with _lock:
        if full_key in _values:
            _values.move_to_end(full_key)
            return _values[full_key]
    value = compute()
    with _lock:
        _values[full_key] = value
        while len(_values) > MAX_PLANS:
            _values.popitem(last=False)
    return value


def known_value(spark: Any, key: tuple[Hashable, ...]) -> Any:
    """The value ``value_once`` computed under ``key`` in this application, or None."""
    with _lock:
        return _values.get(("value", _application(spark), *key))


def _lookup(spark: Any, full_key: tuple[Hashable, ...]) -> DataFrame | None:
    with _lock:
        name = _kept.get(full_key)
        if name is not None:
            _kept.move_to_end(full_key)
    if name is None:
        return None
    try:
        kept = spark.table(f"{_global_database(spark)}.{name}")
        rows, (table, derived) = _held.get(name), _held_tables.get(name, (None, None))
        if rows is None:
            return kept
        return _held_frame(kept, rows, table, derived)
    except AnalysisException:  # dropped behind our back (e.g. by a user): build it again
        with _lock:
            _kept.pop(full_key, None)
            _held.pop(name, None)
            _held_tables.pop(name, None)
        return None


def _keep(spark: Any, full_key: tuple[Hashable, ...], df: DataFrame) -> DataFrame:
    name = f"dtables_{full_key[0]}_{next(_names)}"
    raw, derived = vars(df).get(_HELD_RAW, (None, None))
    # held rows as a local relation (``_lookup``), a derived column left to be computed over it again
    (raw if raw is not None else held_local(df)).createOrReplaceGlobalTempView(name)
    limit = {"read": MAX_KEPT, "held": MAX_HELD}.get(str(full_key[0]), MAX_PLANS)
    rows = _marked_rows(df)
    with _lock:
        _kept[full_key] = name
        if rows is not None:
            _held[name] = int(rows)
        if vars(df).get(_HELD_TABLE) is not None or derived is not None:
            _held_tables[name] = (vars(df).get(_HELD_TABLE), derived)
        same = [k for k in _kept if k[0] == full_key[0]]  # oldest first
        evicted = [_kept.pop(k) for k in same[:max(0, len(same) - limit)]]
        for old in evicted:
            _held.pop(old, None)
            _held_tables.pop(old, None)
    for old in evicted:  # a checkpoint's blocks go with the last reference to them
        spark.catalog.dropGlobalTempView(old)
    return df


def forget_all(spark: Any) -> None:
    """Drop every kept read of ``spark``'s application (tests; a session that closes); values stay."""
    forget_since(spark, frozenset(k for k in remembered(spark) if k[0] == "value"))


def remembered(spark: Any) -> frozenset[tuple[Hashable, ...]]:
    """The keys of everything kept for ``spark``'s application now (reads, plans, values), for ``forget_since``."""
    app = _application(spark)
    with _lock:
        return frozenset(k for k in [*_kept, *_values] if k[1] == app)


def forget_since(spark: Any, before: frozenset[tuple[Hashable, ...]]) -> None:
    """Drop what ``spark``'s application kept that is not in ``before`` (``remembered``), values included: the next
    reader finds what it would have found then. A benchmark gives each of several passes over the same interval
    the same start (the first pass would otherwise compute the reads every later pass finds done)."""
    app = _application(spark)
    with _lock:
        names = [_kept.pop(k) for k in [k for k in _kept if k[1] == app and k not in before]]
        for name in names:
            _held.pop(name, None)
            _held_tables.pop(name, None)
        for k in [k for k in _values if k[1] == app and k not in before]:
            del _values[k]
    for name in names:
        spark.catalog.dropGlobalTempView(name)
