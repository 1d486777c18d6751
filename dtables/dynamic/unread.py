"""Sources whose interval only updated columns the table's query does not read: to the refresh, unchanged.

The log tells a refresh that a source removed and added rows; it cannot tell whether the values the query reads
moved. Where they did not (TPC-H's update batch of prices and statuses, under a query of quantities and dates),
planning the source as changed builds every join term over its change, which then reads and joins its way to
nothing. ``dtables.changes.moved`` says which columns moved (one Spark job per interval, shared by every table over
it), and such a source is planned as unchanged: its snapshot is read at whichever end, which is the same in every
column the query reads, under the same row ids (updates keep them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, MutableMapping
from typing import Any

from differentiation import ChangeStats, columns_read
from differentiation.plan import Node, Scan
from dtables.changes import Interval
from dtables.changes.moved import moved_columns
from dtables.dynamic.definition import Definition
from dtables.dynamic.frontier import SourceVersion
from dtables.dynamic.plan import Support, incremental_support

# false plans every source the log says changed as changed, as before (to compare).
SKIP_UNREAD_UPDATES = "spark.dtables.refresh.skipUnreadUpdates"


def drop_unread_updates(spark: Any, definition: Definition, sources: Mapping[str, SourceVersion],
                        stats: MutableMapping[str, ChangeStats], support: Support | None = None) -> tuple[str, ...]:
    """Mark unchanged in ``stats`` the sources whose interval moved no column the query reads, and name them.
    Only sources that both removed and added rows (an UPDATE or MERGE; inserts or deletes alone are changes to
    every reader) of tables that already hold contents, and not columns the query reads all of in one read. Of these
    sources whose interval only updated rows in place, ``stats`` records which columns moved (``ChangeStats.moved``):
    a part of the query that reads none of them is unchanged (Q17's average quantity after a price update).
    ``support``: ``incremental_support`` of the query over ``sources``, where the caller has it."""
    candidates = [n for n, s in stats.items() if s.inserts and s.deletes and n in definition.frontier]
    if not candidates or not definition.initialized \
            or str(spark.conf.get(SKIP_UNREAD_UPDATES, "true")).lower() == "false":
        return ()
    plan, _ = support if support is not None else incremental_support(definition.query, sources)
    if plan is None:
        return ()
    read = columns_read(plan)
    unread = []
    for name in candidates:
        src = sources[name]
        compared = read.get(name)
        if compared is None:
            continue
        # A query that reads every column of the table sees every update, in every part that reads the table
        # once; only a second read (a self-join, a subquery) may read fewer.
        if {c.lower() for c, _ in src.schema} <= {c.lower() for c in compared} and _reads(plan, name) < 2:
            continue
        interval = Interval(name, definition.frontier[name], src.version, src.location)
        moved = moved_columns(spark, interval, src.identity)
        if not moved.touch(compared):
            stats[name] = ChangeStats(inserts=False, deletes=False)
            unread.append(name)
        elif not moved.rows:  # updates in place only: the plan's subplans that read none of these are unchanged
            stats[name] = dataclasses.replace(stats[name], moved=frozenset(c.lower() for c in moved.columns))
    return tuple(unread)


def _reads(plan: Node, table: str) -> int:
    """How many places of ``plan`` read ``table``."""
    return sum(1 for n in plan.walk() if isinstance(n, Scan) and n.table == table)
