"""Sources whose interval only updated columns the table's query does not read: to the refresh, unchanged.

The log tells a refresh that a source removed and added rows; it cannot tell whether the values the query reads
moved. Where they did not (TPC-H's update batch of prices and statuses, under a query of quantities and dates),
planning the source as changed builds every join term over its change, which then reads and joins its way to
nothing. ``dtables.changes.moved`` says which columns moved (one Spark job per interval, shared by every table over
it), and such a source is planned as unchanged: its snapshot is read at whichever end, which is the same in every
column the query reads, under the same row ids (updates keep them).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

from differentiation import ChangeStats, columns_read
from dtables.changes import Interval
from dtables.changes.moved import moved_columns
from dtables.dynamic.definition import Definition
from dtables.dynamic.frontier import SourceVersion
from dtables.dynamic.plan import incremental_support

# false plans every source the log says changed as changed, as before (to compare).
SKIP_UNREAD_UPDATES = "spark.dtables.refresh.skipUnreadUpdates"


def drop_unread_updates(spark: Any, definition: Definition, sources: Mapping[str, SourceVersion],
                        stats: MutableMapping[str, ChangeStats]) -> tuple[str, ...]:
    """Mark unchanged in ``stats`` the sources whose interval moved no column the query reads, and name them.
    Only sources that both removed and added rows (an UPDATE or MERGE; inserts or deletes alone are changes to
    every reader) of tables that already hold contents, and not columns the query reads all of."""
    candidates = [n for n, s in stats.items() if s.inserts and s.deletes and n in definition.frontier]
    if not candidates or not definition.initialized \
            or str(spark.conf.get(SKIP_UNREAD_UPDATES, "true")).lower() == "false":
        return ()
    plan, _ = incremental_support(definition.query, sources)
    if plan is None:
        return ()
    read = columns_read(plan)
    unread = []
    for name in candidates:
        src = sources[name]
        compared = read.get(name)
        if compared is None or {c.lower() for c, _ in src.schema} <= {c.lower() for c in compared}:
            continue
        interval = Interval(name, definition.frontier[name], src.version, src.location)
        if not moved_columns(spark, interval, src.identity).touch(compared):
            stats[name] = ChangeStats(inserts=False, deletes=False)
            unread.append(name)
    return tuple(unread)
