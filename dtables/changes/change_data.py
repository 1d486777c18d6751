"""One commit's change data alone (an UPDATE's), read by pyarrow on the driver for ``moved``'s comparison.

Which columns an UPDATE moved is a comparison of each row's preimage with its postimage, both in the commit's
change data files. Read by Spark, that read was a job the refresh held the rows from (``shared_reads.on_driver``:
planning, the job, the rows to Python as Arrow and back: about 150 ms of a 0.65 s refresh of 20,000 change rows
on the 2-core benchmark machine), so that the plans after it would not scan the files again. But one commit's
change data read alone is a scan and a projection, no join of the rows before and after: the plan that reads it
scans it within its own job about as cheaply. So where the files can be read here exactly (``picked_rows``'s
conditions: a local table, flat columns, few enough rows), ``moved`` compares them without Spark, and the read is
held only once a second reader of the interval asks for it (``reader.redundant_delta``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any
from urllib.parse import unquote

from pyspark.sql import types as T

from differentiation.vocabulary import ACTION, DELETE, INSERT, ROW_ID
from dtables.changes import picked_rows
from dtables.changes.scan import CHANGE_TYPE, table_schema
from dtables.changes.shapes import ChangePlan
from dtables.changes.storage import join
from dtables.spark.fs import local_path

_FILE, _ROW_INDEX = "__file", "__row_index"
# The change types of the deaths (a deleted row, an update's preimage) and of the births (an update's postimage)
# that change data contributes; an ``insert`` row's birth is read from its data file (``CommitReads.new_rows``)
CHANGE_TYPES = ("delete", "update_preimage", "update_postimage")


def one_commit(plan: ChangePlan) -> bool:
    """Whether ``plan``'s commit-by-commit read is one commit's change data and nothing else: no appended files,
    no rows deleted without change data."""
    reads = plan.commit_reads
    return (reads is not None and plan.interval.end_version == plan.interval.start_version + 1
            and bool(reads.change_files) and reads.new_rows is None and not reads.gone)


def readable(spark: Any, plan: ChangePlan, rows: int) -> bool:
    """Whether ``plan`` (of at most ``rows`` change rows) is ``one_commit`` and its files are read here."""
    return one_commit(plan) and picked_rows.on_driver(spark, plan.interval.location, change_data_fields(plan), rows)


# A refresh reads one commit's change data twice on the driver: ``moved`` compares it, then its change read
# (``driver_delta``) is made of it. A commit's files never change (their names are new at every write), so the last
# few tables read whole are kept for the second reader (8 ms of a 0.4 s refresh of 20,000 change rows).
_RECENT = 4
_recent: OrderedDict[tuple[str, tuple[str, ...]], Any] = OrderedDict()
_recent_lock = threading.Lock()


def files_table(plan: ChangePlan, wanted: frozenset[str] | None = None) -> Any:
    """The rows of ``plan``'s change data files as pyarrow reads them (``picked_rows.read``: the fields of
    ``change_data_fields``, a field not in ``wanted`` NULL unless read earlier, then the file name and row index),
    or None where a file cannot be read here. A table read with every field is kept (``_RECENT``) and serves any
    ``wanted`` after it."""
    assert plan.commit_reads is not None
    files = [f for f, _ in plan.commit_reads.change_files]
    key = (plan.interval.location, tuple(f.path for f in files))
    with _recent_lock:
        kept = _recent.get(key)
        if kept is not None:
            _recent.move_to_end(key)
            return kept
    location = plan.interval.location
    picked = [picked_rows.PickedFile(local_path(join(location, unquote(f.path))), unquote(f.file_name), None)
              for f in files]
    table = picked_rows.read(picked, change_data_fields(plan), wanted, _FILE, _ROW_INDEX)
    if table is not None and wanted is None:
        with _recent_lock:
            _recent[key] = table
            while len(_recent) > _RECENT:
                _recent.popitem(last=False)
    return table


def change_data_fields(plan: ChangePlan) -> list[T.StructField]:
    """The fields of a change data file: the table's but its partition columns, the row id, the change type."""
    rid = plan.metadata.materialized_row_id_column
    partition_columns = set(plan.metadata.partition_columns)
    return [*[f for f in table_schema(plan.metadata).fields if f.name not in partition_columns],
            *([T.StructField(rid, T.LongType(), True)] if rid else []),
            T.StructField(CHANGE_TYPE, T.StringType(), True)]


def changed_rows(plan: ChangePlan) -> tuple[T.StructType, Any] | None:
    """The rows of a ``one_commit`` read as ``moved`` compares them: the table's columns, ``__action`` (a
    preimage or deleted row DELETE, a postimage INSERT) and ``__row_id``, here the row-tracking id itself (the
    redundant delta's opaque id is a function of it); a partition column as the text the log holds for its file (one
    text per value: equal texts are equal values). None where a file cannot be read exactly, the table has no
    materialized row ids, or a row is an insert (whose id is its data file's: Spark's read then runs)."""
    import pyarrow as pa  # PySpark's own dependency for its SQL module
    import pyarrow.compute as pc

    rid = plan.metadata.materialized_row_id_column
    assert plan.commit_reads is not None
    files = [f for f, _ in plan.commit_reads.change_files]
    if not rid:
        return None
    table = files_table(plan)
    if table is None:
        return None
    change_type = table.column(CHANGE_TYPE)
    if not pc.all(pc.is_in(change_type, value_set=pa.array(CHANGE_TYPES)),
                  min_count=0).as_py():
        return None
    by_file = table.column(_FILE).combine_chunks().dictionary_encode()
    partitions = {unquote(f.file_name): dict(f.partition_values) for f in files}
    schema = table_schema(plan.metadata)
    columns = {}
    for field in schema.fields:
        if field.name in plan.metadata.partition_columns:
            texts = [partitions[name].get(field.name) for name in by_file.dictionary.to_pylist()]
            columns[field.name] = pa.array(texts, pa.string()).take(by_file.indices)
        else:
            columns[field.name] = table.column(field.name)
    columns[ACTION] = pc.if_else(pc.equal(change_type, "update_postimage"), INSERT, DELETE)
    columns[ROW_ID] = table.column(rid)
    out_schema = T.StructType([*(T.StructField(f.name, T.StringType() if f.name in plan.metadata.partition_columns
                                               else f.dataType) for f in schema.fields),
                               T.StructField(ACTION, T.StringType()), T.StructField(ROW_ID, T.LongType())])
    return out_schema, pa.table(columns)
