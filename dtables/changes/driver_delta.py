"""The redundant delta of a small interval read commit by commit, computed by pyarrow on the driver, no Spark job.

A refresh holds a change read of a few thousand rows on the driver (``shared_reads.on_driver``): the plans over
it then read and broadcast it without a job. Made by Spark, that read was the statement of ``commit_sides`` over
the interval's files, planned, run as a job and brought to Python as Arrow, to go back as a local relation: on the
10M-row benchmark's mixed round (an INSERT, a scattered UPDATE and DELETE of 3,333 rows each) about 0.3 s of a
0.7 s refresh, for 13,000 rows whose files pyarrow reads in a few milliseconds (bench/README.md). Here the same
rows come from the same files read by pyarrow (``picked_rows``: change data files, appended files, the rows
deletion vectors newly mark), and what the statement computes per row is computed on the columns:

- change data: deaths are its ``delete`` and ``update_preimage`` rows, births its ``update_postimage`` rows, each
  with the row id Delta materialized in it (``scan.change_rows``);
- files the interval added (``CommitReads.new_rows``): births are the rows the file introduced (``__fresh``);
- rows commits without change data removed (``CommitReads.gone``): deaths;

DELETE for a death, INSERT for a birth, and the opaque row id ``md5('<table id>:' || id)`` (``row_id_sql``).

Only where no state can be born and die inside the interval (one commit, or deaths from files added by its start:
``commit_sides``' single-commit plan, no row-by-row matching), without partition columns, with flat columns whose
values Arrow carries as Spark does (``shared_reads``), and where every file reads on the driver exactly; anywhere
else (and where a change row lacks its id, which Spark's read reports as an error) Spark's read runs.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import types as T
from sqlglot import exp

from differentiation.vocabulary import ACTION, DELETE, INSERT, ROW_ID
from dtables.changes import picked_rows
from dtables.changes.change_data import CHANGE_TYPES, change_data_fields, files_table
from dtables.changes.commit_sides import row_id_sql
from dtables.changes.scan import CHANGE_TYPE, FRESH, RID, rows_on_driver, table_schema
from dtables.changes.shapes import ChangePlan
from dtables.changes.shared_reads import Derived, arrow_held, held_arrow
from dtables.sql.dialect import to_spark


def delta_on_driver(spark: Any, plan: ChangePlan, only: frozenset[str] | None = None) -> DataFrame | None:
    """``plan``'s redundant delta (table columns, ``__action``, ``__row_id``) held by the driver
    (``shared_reads.held_arrow``), or None where it is not read here (module docstring). ``only``: the table
    columns kept (lower case; the others are left out of the result, as ``reader._narrowed`` does)."""
    table = _delta_table(spark, plan, only)
    if table is None:
        return None
    fields = [f for f in table_schema(plan.metadata).fields if only is None or f.name.lower() in only]
    schema = T.StructType([*fields, T.StructField(ACTION, T.StringType(), False),
                           T.StructField(RID, T.LongType(), True)])
    # the opaque row ids from the row-tracking ids where they are read (``Derived``): an aggregate reads none
    table_id = plan.metadata.table_id
    row_ids = Derived(ROW_ID, RID, to_spark(row_id_sql(table_id, exp.column(RID, quoted=True))),
                      lambda ids: _row_ids(table_id, ids))
    return held_arrow(spark, table.select(schema.fieldNames()), schema, row_ids)


def applies(plan: ChangePlan) -> bool:
    """Whether ``plan``'s shape is one ``delta_on_driver`` reads (module docstring); a file that does not read on
    the driver, or a change row without its id, can still make it give None."""
    reads, metadata, interval = plan.commit_reads, plan.metadata, plan.interval
    if reads is None or metadata.partition_columns or not metadata.materialized_row_id_column \
            or not all(arrow_held(f.dataType) for f in table_schema(metadata).fields):
        return False
    # several commits: a state born inside the interval may have died inside it, which Spark matches row by row
    return interval.end_version == interval.start_version + 1 or reads.deaths_born_by_start


def _delta_table(spark: Any, plan: ChangePlan, only: frozenset[str] | None) -> Any:
    import pyarrow as pa  # PySpark's own dependency for its SQL module
    import pyarrow.compute as pc

    if not applies(plan):
        return None
    reads, metadata, interval = plan.commit_reads, plan.metadata, plan.interval
    assert reads is not None
    columns = [f.name for f in table_schema(metadata).fields]
    deaths: list[Any] = []
    births: list[Any] = []
    if reads.change_files:
        changed = _change_data(spark, plan, only)
        if changed is None:
            return None
        change_type = changed.column(CHANGE_TYPE)
        deaths.append(changed.filter(pc.is_in(change_type, value_set=pa.array(CHANGE_TYPES[:2]))))
        births.append(changed.filter(pc.equal(change_type, CHANGE_TYPES[2])))
    if reads.new_rows is not None:
        added = rows_on_driver(spark, interval.location, metadata, reads.new_rows, only)
        if added is None:
            return None
        births.append(added.filter(added.column(FRESH)))
    for gone in reads.gone:
        removed = rows_on_driver(spark, interval.location, metadata, gone.scan, only)
        if removed is None:
            return None
        deaths.append(removed)
    parts = [_as_changes(t, columns, action) for side, action in ((deaths, DELETE), (births, INSERT)) for t in side]
    rows = pa.concat_tables(parts) if parts else None
    if rows is None:
        return None
    return rows


def _row_ids(table_id: str, rids: Any) -> Any:
    """``row_id_sql`` of the row-tracking ids ``rids`` (NULL for NULL): the texts joined by Arrow, each digest one
    call (20,000 ids in 9 ms, against 15 formatting each text in Python)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    texts = pc.cast(pc.binary_join_element_wise(f"{table_id}:", pc.cast(rids, pa.string()), ""), pa.binary())
    md5 = hashlib.md5
    return pa.array([None if t is None else md5(t).hexdigest() for t in texts.to_pylist()], pa.string())


def _as_changes(table: Any, columns: list[str], action: str) -> Any:
    import pyarrow as pa

    return pa.table({**{c: table.column(c) for c in columns}, RID: table.column(RID),
                     ACTION: pa.array([action] * table.num_rows, pa.string())})


def _change_data(spark: Any, plan: ChangePlan, only: frozenset[str] | None) -> Any:
    """The interval's change data rows of ``CHANGE_TYPES`` with their table columns, ``_change_type`` and
    ``__rid`` (the row id Delta materialized); None where a file does not read here, or a row lacks its id."""
    import pyarrow.compute as pc
    import pyarrow as pa

    assert plan.commit_reads is not None
    metadata, location = plan.metadata, plan.interval.location
    rid = metadata.materialized_row_id_column
    assert rid
    fields = change_data_fields(plan)  # the table has no partition column here (``_delta_table``)
    files = [f for f, _ in plan.commit_reads.change_files]
    if not picked_rows.on_driver(spark, location, fields, sum(f.num_records or 0 for f in files)):
        return None
    wanted = None if only is None else frozenset({*only, rid.lower(), CHANGE_TYPE.lower()})
    table = files_table(plan, wanted)  # read whole for ``moved`` just before, as a rule
    if table is None:
        return None
    table = table.filter(pc.is_in(table.column(CHANGE_TYPE), value_set=pa.array(CHANGE_TYPES)))
    if table.column(rid).null_count:
        return None  # Spark's read stops with its error (``scan.change_rows``)
    return table.append_column(RID, table.column(rid))
