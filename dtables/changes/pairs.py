"""The update pairs of a change read the driver holds as Arrow (``shared_reads.held_table``), compared without Spark.

An updated row appears in a redundant delta as a DELETE (its values at the start) and an INSERT (at the end) under
one row id. ``moved`` asks which columns some pair changed; ``reader.redundant_delta`` leaves out the pairs that
agree on the columns a reader uses. Both compare the two halves column by column as Arrow arrays, where Spark
needs a window per row id (an exchange and a sort inside the refresh's job).

Values compare NULL-safe; a NaN differs from itself here (Spark counts it equal): the safe side, a pair is only
ever taken as changed when it is not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from differentiation.vocabulary import ACTION, DELETE, INSERT, ROW_ID


@dataclass(frozen=True)
class UpdatePairs:
    """``ids``: the row ids with exactly one DELETE and one INSERT, in order; ``starts`` and ``ends``: their DELETE
    and INSERT rows in that order; ``whole``: some row is no such pair (an id of one row, or NULL: a row inserted
    or deleted outright)."""

    ids: Any
    starts: Any
    ends: Any
    whole: bool

    def same(self, column: str) -> Any:
        """Per pair, whether its two halves hold the same value of ``column`` (NULL-safe)."""
        a, b = self.starts.column(column), self.ends.column(column)
        return pc.if_else(pc.and_(pc.is_null(a), pc.is_null(b)), True, pc.fill_null(pc.equal(a, b), False))


def update_pairs(table: Any) -> UpdatePairs:
    """The update pairs of ``table`` (a redundant delta's rows: its columns, ``__action``, ``__row_id``)."""
    ids = table.column(ROW_ID)
    whole = ids.null_count > 0
    table = table.filter(pc.is_valid(ids))
    per_id = table.group_by(ROW_ID).aggregate([(ACTION, "count"), (ACTION, "min"), (ACTION, "max")])
    paired = pc.and_(pc.equal(per_id.column(f"{ACTION}_count"), 2),
                     pc.and_(pc.equal(per_id.column(f"{ACTION}_min"), DELETE),
                             pc.equal(per_id.column(f"{ACTION}_max"), INSERT)))
    if per_id.num_rows and not pc.all(paired).as_py():
        whole = True
    pairs = table.filter(pc.is_in(table.column(ROW_ID), value_set=per_id.filter(paired).column(ROW_ID)))
    pairs = pairs.sort_by([(ROW_ID, "ascending"), (ACTION, "ascending")])  # DELETE (the start) before INSERT
    starts, ends = (pairs.take(pa.array(range(first, pairs.num_rows, 2), pa.int64())) for first in (0, 1))
    return UpdatePairs(starts.column(ROW_ID), starts, ends, whole)


def unchanged_ids(table: Any, columns: Sequence[str]) -> Any:
    """The row ids of ``table``'s update pairs whose halves agree on every one of ``columns`` (its names)."""
    pairs = update_pairs(table)
    same = pa.array([True] * len(pairs.ids), pa.bool_())
    for c in columns:
        same = pc.and_(same, pairs.same(c))
    return pairs.ids.filter(same)
