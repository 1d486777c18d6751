"""How a dynamic table's files are laid out, so that a refresh's MERGE reads only the files it must.

A dynamic table is stored clustered on its hidden row id (``CLUSTER BY (__dtables_row_id)``, Delta liquid
clustering): the MERGE of an incremental refresh matches on the row id, and every kind of query has one (joins,
filters, aggregates, DISTINCT), of one type, so one rule serves all of them. A FULL or initial refresh writes its rows
range-partitioned by row id (each file covers a narrow slice of the id space), and ``OPTIMIZE`` re-clusters what
MERGEs leave behind (``dtables/dynamic/optimize.py``). Row ids are hashes, so a change touches ids spread over the
whole id space: the layout pays when a refresh changes fewer rows than the table has files (the common case of
frequent refreshes of a large table), not when a change is localized in a source's own key space.

``merge_pruning`` turns the change set's row ids into at most ``MAX_RANGES`` merged ranges, a conjunct of the
MERGE's ON clause that names only the target: Delta prunes the target's files with such conjuncts by their
statistics before it joins (``MergeIntoCommandBase.getTargetOnlyPredicates``, used by
``ClassicMergeExecutor.findTouchedFiles``). Every target row a change-set row matches has one of the change set's
ids, so the conjunct changes no match.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import functions as F
from sqlglot import exp

from differentiation.sql import col, string
from dtables.changes.keys import MAX_RANGES, merged_ranges
from dtables.dynamic.definition import ROW_ID_COLUMN
from dtables.dynamic.errors import DynamicTableError
from dtables.sql.dialect import to_spark

MERGE_PRUNING = "spark.dtables.refresh.mergePruning"  # false: MERGE on the row id alone (to compare)
ROW_ID_RANGES = "spark.dtables.refresh.rowIdRanges"  # files an overwrite writes (default: as Spark partitions)
MAX_MERGE_IDS = 100_000  # change-set row ids brought to the driver; beyond, the MERGE is not pruned
CLUSTERING = f"CLUSTER BY (`{ROW_ID_COLUMN}`)"
_PREFIX_BYTES = 16

# Delta writes a checkpoint of the log (the table's state as Parquet: three more Spark jobs) inside every tenth
# commit by default, and a dynamic table commits once per refresh: every tenth refresh took 1.3-2.4 s longer than the
# others on 2 cores (bench/README.md, "Steady state"). Its log grows by a few files per refresh, so rebuilding its
# snapshot from up to a hundred JSON commits after a checkpoint costs little more than from one (measured there).
CHECKPOINT_INTERVAL = "spark.dtables.dynamicTables.checkpointInterval"
DEFAULT_CHECKPOINT_INTERVAL = 100


def log_properties(spark: Any) -> dict[str, str]:
    """The Delta properties of a dynamic table's log: its checkpoint interval (``CHECKPOINT_INTERVAL``)."""
    value = spark.conf.get(CHECKPOINT_INTERVAL, None)
    try:
        interval = int(value) if value is not None else DEFAULT_CHECKPOINT_INTERVAL
    except ValueError:
        interval = 0
    if interval < 1:
        raise DynamicTableError(f"{CHECKPOINT_INTERVAL} must be a whole number of commits of at least 1, "
                                f"not {value!r}")
    return {"delta.checkpointInterval": str(interval)}


def _text_order(value: str) -> int:
    """A number in the byte order of a text's first bytes (a row id's gap to the next, for merging ranges)."""
    return int.from_bytes(value.encode("utf-8")[:_PREFIX_BYTES].ljust(_PREFIX_BYTES, b"\0"), "big")


def row_id_ranges(ids: Sequence[str], limit: int = MAX_RANGES) -> tuple[tuple[str, str], ...]:
    """Sorted distinct row ids -> at most ``limit`` inclusive ranges, split at the widest gaps (as key pruning's)."""
    return merged_ranges(sorted(set(ids)), _text_order, limit)


def ranges_condition(column: exp.Expr, ranges: Sequence[tuple[str, str]]) -> exp.Expr:
    """``column`` in one of the inclusive ``ranges`` (an OR of equalities and BETWEENs)."""
    terms: list[exp.Expr] = [
        exp.EQ(this=column.copy(), expression=string(lo)) if lo == hi
        else exp.Between(this=column.copy(), low=string(lo), high=string(hi)) for lo, hi in ranges]
    out = terms[0]
    for t in terms[1:]:
        out = exp.Or(this=out, expression=t)
    return exp.Paren(this=out) if len(terms) > 1 else out


def merge_pruning(clone: Any, location: str, source: Any, rid: str,
                  enabled: bool = True) -> tuple[exp.Expr | None, dict[str, Any]]:
    """The target-only conjunct for the MERGE of ``source`` (one row per row id, in column ``rid``) into the table
    at ``location``, or None where it would skip no file; and the pruning record ``{keys, files, of}``: the files
    the MERGE may touch of all the table's files (Delta's own data skipping, asked by planning a filtered scan)."""
    target = clone.read.format("delta").load(location)
    total = len(target.inputFiles())  # planning only: the snapshot's file list
    entry: dict[str, Any] = {"at": "merge", "keys": [], "files": total, "of": total}
    if total < 2 or not enabled:
        return None, entry
    [row] = source.agg(F.count(F.lit(1)).alias("n"),
                       F.slice(F.array_sort(F.collect_list(F.col(rid))), 1, MAX_MERGE_IDS + 1).alias("ids")).collect()
    ids = list(row["ids"] or [])
    if row["n"] == 0 or len(ids) > MAX_MERGE_IDS or any(i is None for i in ids):
        return None, entry
    ranges = row_id_ranges(ids)
    condition = ranges_condition(col(ROW_ID_COLUMN), ranges)
    kept = len(target.where(to_spark(condition)).inputFiles())
    if kept >= total:
        return None, entry
    entry.update(keys=[f"{ROW_ID_COLUMN}: {len(ranges)} range(s) of {len(ids)} id(s)"], files=kept)
    return ranges_condition(col(ROW_ID_COLUMN, "t"), ranges), entry


def by_row_id(df: Any, settings: Any) -> Any:
    """``df`` range-partitioned by row id: each file it writes covers a narrow slice of the id space."""
    ranges = settings.conf.get(ROW_ID_RANGES, None)
    rid = F.col(f"`{ROW_ID_COLUMN}`")
    return df.repartitionByRange(int(ranges), rid) if ranges else df.repartitionByRange(rid)


def clustering_columns(spark: Any, location: str) -> list[str]:
    """The table's clustering columns (Delta's ``DESCRIBE DETAIL``), [] when it is not clustered."""
    return list(spark.sql(f"DESCRIBE DETAIL delta.`{location}`").first()["clusteringColumns"] or [])


def cluster_by(spark: Any, location: str, columns: Sequence[str]) -> bool:
    """Declare the table's clustering (a metadata-only commit); False when Delta refuses (a clustering column
    without statistics: beyond the first 32 columns)."""
    names = ", ".join(f"`{c}`" for c in columns)
    try:
        spark.sql(f"ALTER TABLE delta.`{location}` CLUSTER BY ({names})")
    except Exception as e:  # noqa: BLE001 - only the missing statistics are expected; others re-raised
        if "CLUSTERING_COLUMN_MISSING_STATS" not in str(e):
            raise
        return False
    return True
