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

``spark.dtables.changes.sharedReads = false`` computes each refresh's read on its own (as before); reads that may
pick more than ``spark.dtables.changes.sharedReadsMaxRows`` rows (default 5,000,000, counted from the vectors) are
never kept, so a large DELETE does not pin its rows in memory after its refresh.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame

SHARED_READS = "spark.dtables.changes.sharedReads"
SHARED_READS_MAX_ROWS = "spark.dtables.changes.sharedReadsMaxRows"
DEFAULT_MAX_ROWS = 5_000_000
MAX_KEPT = 16  # intervals kept per process: enough for every source of a DAG refreshed at one frontier

_lock = threading.Lock()
_kept: OrderedDict[tuple[Hashable, ...], str] = OrderedDict()
_names = itertools.count()


def _application(spark: Any) -> str:
    return str(spark.conf.get("spark.app.id", ""))


def _global_database(spark: Any) -> str:
    return str(spark.conf.get("spark.sql.globalTempDatabase", "global_temp"))


def read_once(spark: Any, key: tuple[Hashable, ...], rows: int, build: Callable[[], DataFrame]) -> DataFrame:
    """``build()`` computed once (a local checkpoint), or the same rows computed earlier in this application under
    ``key``. ``rows`` bounds the rows the read can hold (kept only up to the configured maximum)."""
    if str(spark.conf.get(SHARED_READS, "true")).lower() == "false" \
            or rows > int(spark.conf.get(SHARED_READS_MAX_ROWS, str(DEFAULT_MAX_ROWS))):
        return build().localCheckpoint(eager=True)
    full_key = (_application(spark), *key)
    with _lock:
        name = _kept.get(full_key)
        if name is not None:
            _kept.move_to_end(full_key)
    if name is not None:
        try:
            return spark.table(f"{_global_database(spark)}.{name}")
        except AnalysisException:  # dropped behind our back (e.g. by a user): compute it again
            with _lock:
                _kept.pop(full_key, None)
    df = build().localCheckpoint(eager=True)
    name = f"dtables_change_read_{next(_names)}"
    df.createOrReplaceGlobalTempView(name)
    with _lock:
        _kept[full_key] = name
        evicted = [_kept.popitem(last=False)[1] for _ in range(max(0, len(_kept) - MAX_KEPT))]
    for old in evicted:  # the checkpoint's blocks go with the last reference to them
        spark.catalog.dropGlobalTempView(old)
    return df


def forget_all(spark: Any) -> None:
    """Drop every kept read of ``spark``'s application (tests; a session that closes)."""
    app = _application(spark)
    with _lock:
        names = [_kept.pop(k) for k in [k for k in _kept if k[0] == app]]
    for name in names:
        spark.catalog.dropGlobalTempView(name)
