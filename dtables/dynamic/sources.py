"""differentiation's ``Sources`` over dtables change reads: temp views in the refresh's own cloned Spark session.

Every relation the rendered SQL reads is a temp view registered on demand in ``spark`` (a ``newSession()`` clone
used for one refresh only), so concurrent refreshes in one process never see each other's views or settings.
Registering a view of a lazy DataFrame runs no Spark job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlglot import exp

from dtables.changes import Interval, redundant_delta, snapshot
from dtables.dynamic.definition import STATE_PREFIX
from dtables.dynamic.frontier import SourceVersion
from dtables.sql.dialect import parse_one, to_spark


def _visible(df: Any) -> Any:
    """A snapshot without the change reader's row id and a dynamic table's hidden columns."""
    return df.drop(*(c for c in df.columns if c == "__row_id" or c.startswith(STATE_PREFIX)))


class RefreshSources:
    """Snapshots at the old (``start``) and new (``end``) frontier and redundant deltas between them."""

    def __init__(self, spark: Any, before: Mapping[str, int], after: Mapping[str, SourceVersion]):
        self.spark = spark
        self.before = before
        self.after = after
        self._views: dict[tuple[str, str], str] = {}
        self._index = {name: i for i, name in enumerate(sorted(after))}

    def _view(self, table: str, kind: str, build: Any) -> str:
        key = (table, kind)
        if key not in self._views:
            name = f"__dt_src{self._index[table]}_{kind}"
            build().createOrReplaceTempView(name)
            self._views[key] = name
        return f"`{self._views[key]}`"

    def snapshot(self, table: str, when: str) -> str:
        src = self.after[table]
        version = src.version if when == "end" else self.before[table]
        return self._view(table, when, lambda: snapshot(self.spark, table, version, location=src.location))

    def changes(self, table: str) -> str:
        src = self.after[table]
        interval = Interval(table, self.before[table], src.version, src.location)
        return self._view(table, "changes", lambda: redundant_delta(self.spark, interval))

    def plain_query(self, query: str) -> str:
        """``query`` with each source replaced by its snapshot at the new frontier (for queries without a plan)."""
        tree = parse_one(query)
        for table in list(tree.find_all(exp.Table)):
            name = f"{table.db}.{table.name}".lower()
            if name not in self.after:
                continue
            src = self.after[name]
            view = self._view(name, "plain", lambda src=src, name=name: _visible(snapshot(
                self.spark, name, src.version, location=src.location)))
            table.replace(exp.Table(this=exp.to_identifier(view.strip("`")),
                                    alias=exp.TableAlias(this=exp.to_identifier(table.alias_or_name))))
        return to_spark(tree)
