"""The ``Sources`` of one dynamic-table refresh: the shared ``IntervalSources`` between the stored frontier and the
sources resolved at the new data timestamp, plus the query's own text over the new snapshots (FULL without a plan).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlglot import exp

from differentiation import Derivative, state_merge_query
from differentiation.vocabulary import ROW_ID
from dtables.catalog import qualified, quote_column
from dtables.changes import Interval, snapshot
from dtables.changes.sources import IntervalSources
from dtables.catalog import STATE_PREFIX
from dtables.dynamic.frontier import SourceVersion
from dtables.dynamic.plan import STATE_VIEW
from dtables.sql.dialect import parse_one, to_spark
from dtables.sql.references import aliased_table, replace_table


def _visible(df: Any) -> Any:
    """A snapshot without the change reader's row id and a dynamic table's hidden columns."""
    return df.drop(*(c for c in df.columns if c == ROW_ID or c.startswith(STATE_PREFIX)))


class RefreshSources(IntervalSources):
    """Intervals (stored frontier, version at the data timestamp] of every source; a new source starts at its end."""

    def __init__(self, spark: Any, before: Mapping[str, int], after: Mapping[str, SourceVersion],
                 settings: Any = None, readers: Callable[[str], frozenset[str] | None] | None = None):
        super().__init__(spark, {n: Interval(n, before.get(n, s.version), s.version, s.location)
                                 for n, s in after.items()}, settings, {n: s.identity for n, s in after.items()},
                         readers)

    def state(self) -> str:
        """The table's stored aggregate state, registered by the refresh as ``STATE_VIEW``."""
        return quote_column(STATE_VIEW)

    def state_merge_query(self, derivative: Derivative, carry: Sequence[tuple[str, str]]) -> exp.Select:
        """The rows of ``derivative``'s query after the change, merged from the stored state (``state``;
        ``differentiation.state_merge_query``, where ``differentiation.merges_state``), the state's columns
        ``carry`` names passed through; its join terms pruned as ``changes_query``'s."""
        return state_merge_query(derivative, self, carry, **self.options(derivative))

    def plain_query(self, query: str) -> str:
        """``query`` with each source replaced by its snapshot at the new frontier (for queries without a plan)."""
        tree = parse_one(query)
        for table in list(tree.find_all(exp.Table)):
            name = qualified(table.db, table.name).lower()
            if name not in self.intervals:
                continue
            i = self.intervals[name]

            def plain(i: Any = i) -> Any:
                return _visible(snapshot(self.spark, i.table, i.end_version, location=i.location))

            view = self._view(name, "plain", plain)
            replace_table(table, aliased_table(view.strip("`"), table.alias_or_name))
        return to_spark(tree)
