"""A query whose every input is tiny, run as one Spark job.

Spark plans a join with a side under ``spark.sql.autoBroadcastJoinThreshold`` as a broadcast join, and every
broadcast is a Spark job of its own, run before the query's (a one-row change's REWRITE of the benchmark's 50-group
aggregate: three broadcasts, the held change rows, the stored state, the change's groups, then the write).
Without adaptive execution (off for incremental refreshes, ``executor._tune_for_small_changes``) a shuffle is a stage
inside the query's one job instead. Where all the query reads is a few hundred kilobytes, shuffling it into one
partition costs less than a job per broadcast: ``one_job`` turns broadcasts off and shuffles into one partition
while such a query is planned and run.

The inputs are the leaves of the query's analysed plan (file relations sized by their files, local relations by
their rows, a common table expression's leaves once however often it is used; analysis already happened when the
DataFrame was made, so nothing is planned twice). A leaf Spark cannot size, or a Spark Connect session, counts as
not tiny. A local checkpoint Spark sizes as the plan it was computed from (a scan of every file a DELETE's vectors
touched, for the few rows it picked); one whose rows are known (``known_rows``) is sized by them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# Reading and shuffling this many bytes of input in one task costs less than one broadcast job (about 30-160 ms on
# the 2-core benchmark machine, bench/README.md "A tiny REWRITE in one job").
TINY_INPUT_BYTES = 1 << 20

# A local relation of a few rows (a change the driver holds) is otherwise read in as many tasks as it has rows, up to
# the default parallelism: a task each, in a stage of the one job.
_ONE_TASK = (("spark.sql.leafNodeDefaultParallelism", "1"),)
_SETTINGS = (("spark.sql.autoBroadcastJoinThreshold", "-1"), ("spark.sql.shuffle.partitions", "1"), *_ONE_TASK)
# And small files are packed into as many partitions as the default parallelism, a task each, unless this is 1. Spark
# reads it from the session of the file relation, not the one planning: a plan kept from an earlier refresh
# (``shared_reads.plan_once``: the snapshot of an unchanged dimension) scans under the settings of the session that
# built it, so it is set there too (the benchmark's dimension of 4 small files: 4 tasks, then 1).
PACK_FILES = "spark.sql.files.minPartitionNum"


_lock = threading.Lock()
_known: OrderedDict[tuple[str, int], int] = OrderedDict()  # (application, RDD id) -> bytes
_KNOWN_MAX = 256


def known_rows(df: Any, rows: int) -> None:
    """Record that ``df``, a local checkpoint, holds at most ``rows`` rows: plans that read it size it by them
    (Spark's own estimate of a row's size, as for a local relation), not by the plan it was computed from."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return
    plan = jdf.queryExecution().analyzed()
    if plan.nodeName() != "LogicalRDD":
        return
    key = (str(df.sparkSession.conf.get("spark.app.id", "")), int(plan.rdd().id()))
    with _lock:
        _known[key] = rows * (8 + int(jdf.schema().defaultSize()))  # Spark's EstimationUtils.getSizePerRow
        _known.move_to_end(key)
        while len(_known) > _KNOWN_MAX:
            _known.popitem(last=False)


def input_bytes(df: Any) -> int | None:
    """The bytes the leaves of ``df``'s analysed plan hold by Spark's estimate, or None where one is unknown (a
    reference Spark sizes only after planning, a Spark Connect DataFrame)."""
    return _inputs(df)[0]


def _inputs(df: Any, sized: bool = True) -> tuple[int | None, list[Any]]:
    """``input_bytes`` (None without ``sized``), and the JVM sessions of the plan's relations other than ``df``'s
    own, every one of them even where a leaf cannot be sized."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return None, []
    leaves = jdf.queryExecution().analyzed().collectLeaves()
    application = str(df.sparkSession.conf.get("spark.app.id", ""))
    own = int(df.sparkSession._jsparkSession.hashCode())
    total: int | None = 0 if sized else None
    others = dict[int, Any]()
    for i in range(leaves.size()):
        leaf = leaves.apply(i)
        name = leaf.nodeName()
        if name == "CTERelationRef":  # a common table expression's use: its definition's leaves are counted
            continue
        if name == "LogicalRelation":
            session = leaf.relation().sqlContext().sparkSession()
            others.setdefault(int(session.hashCode()), session)
        if total is None:
            continue
        if name not in ("LogicalRelation", "LocalRelation", "LogicalRDD", "OneRowRelation"):
            total = None
            continue
        known = _known.get((application, int(leaf.rdd().id()))) if name == "LogicalRDD" else None
        total += known if known is not None else int(str(leaf.stats().sizeInBytes()))  # a Scala BigInt: its text
    others.pop(own, None)
    return total, list(others.values())


@contextmanager
def one_job(spark: Any, df: Any, max_bytes: int = TINY_INPUT_BYTES) -> Iterator[bool]:
    """While the block plans and runs ``df`` on ``spark``: no broadcast joins and one shuffle partition if ``df``'s
    inputs hold at most ``max_bytes`` (yields whether they do); the session's settings are restored after."""
    size, others = _inputs(df)
    if size is None or size > max_bytes:
        yield False
        return
    with _set(spark, _SETTINGS), _files_packed(spark, others):
        yield True


@contextmanager
def in_few_tasks(spark: Any, df: Any = None) -> Iterator[None]:
    """While the block plans and runs a read whose inputs are known to be small (a change read bounded from the log
    to a few thousand rows, which the driver then holds; ``df``, if given, is it): its files and local relations in
    one task each scan rather than one per file or per core (a mixed interval's held read ran 16 tasks of a few
    milliseconds each)."""
    others = _inputs(df, sized=False)[1] if df is not None else []
    with _set(spark, _ONE_TASK), _files_packed(spark, others):
        yield


# Sessions whose files are packed (``PACK_FILES``) for a block now: JVM session identity -> [blocks, the session's
# own value (None: unset), session]. Counted, so that blocks of concurrent refreshes over plans built in one session
# restore its value once, after the last of them.
_packing: dict[int, list[Any]] = {}


@contextmanager
def _files_packed(spark: Any, others: list[Any]) -> Iterator[None]:
    """While the block runs: ``PACK_FILES`` = 1 on ``spark`` and on ``others`` (JVM sessions), each session's own
    value restored after."""
    own = getattr(spark, "_jsparkSession", None)
    if own is None:  # Spark Connect: the server's session only
        with _set(spark, ((PACK_FILES, "1"),)):
            yield
        return
    sessions, keys = [own, *others], []
    with _lock:
        for session in sessions:
            key = int(session.hashCode())
            if key in keys:
                continue
            entry = _packing.get(key)
            if entry is None:
                conf = session.conf()
                saved = conf.getOption(PACK_FILES)
                entry = _packing[key] = [0, str(saved.get()) if saved.isDefined() else None, session]
                conf.set(PACK_FILES, "1")
            entry[0] += 1
            keys.append(key)
    try:
        yield
    finally:
        with _lock:
            for key in keys:
                entry = _packing[key]
                entry[0] -= 1
                if entry[0] == 0:
                    del _packing[key]
                    if entry[1] is None:
                        entry[2].conf().unset(PACK_FILES)
                    else:
                        entry[2].conf().set(PACK_FILES, entry[1])


# Spark's optimizer evaluates a projection or filter over a local relation on the driver, row by row and
# interpreted (``ConvertToLocalRelation``), each time a plan over it is optimized: for the 20,000 change rows an
# UPDATE of 0.1% of a 10M-row table leaves held by the driver, about a third of the optimizer's time in a REWRITE's
# planning (JFR, bench/README.md), where the write's job computes the same projection compiled, in its tasks.
EXCLUDED_RULES = "spark.sql.optimizer.excludedRules"
FOLD_LOCAL_RELATIONS = "org.apache.spark.sql.catalyst.optimizer.ConvertToLocalRelation"


@contextmanager
def local_rows_unfolded(spark: Any) -> Iterator[None]:
    """While the block plans and runs a query that runs a Spark job anyway (a write): projections and filters over
    rows the driver holds are left to that job rather than computed by the optimizer. Not for a read collected
    without a job (``shared_reads.on_driver``), which that folding is what makes so."""
    current = spark.conf.get(EXCLUDED_RULES, None) or ""
    rules = [r.strip() for r in current.split(",") if r.strip()]
    if FOLD_LOCAL_RELATIONS in rules:
        yield
        return
    with _set(spark, ((EXCLUDED_RULES, ",".join([*rules, FOLD_LOCAL_RELATIONS])),)):
        yield


@contextmanager
def _set(spark: Any, settings: tuple[tuple[str, str], ...]) -> Iterator[None]:
    """``settings`` on ``spark`` for the block, the session's own restored after."""
    saved = [(key, spark.conf.get(key, None)) for key, _ in settings]
    for key, value in settings:
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in saved:
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
