"""A dtables session: Spark with Delta, a warehouse, a catalog and a state store; ``sql()`` runs dtables SQL."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sqlglot import exp

import differentiation as diff
from differentiation.vocabulary import ChangeFormat
from dtables.catalog import quote
from dtables.catalog.warehouse import Warehouse, default_state_store, warehouse_uri
from dtables.change_queries import Bounds, changes_of, explain_changes_clause, table_schemas
from dtables.dynamic.errors import RefreshFailed
from dtables.dynamic.executor import refresh
from dtables.dynamic.history import dataframe
from dtables.errors import DtablesError
from dtables.spark.builder import build_spark
from dtables.spark.fs import is_local, unreachable_over_connect
from dtables.sql.dialect import parse_one
from dtables.sql.executor import execute_script
from dtables.sql.references import table_names
from dtables.sql.views import expand_views
from dtables.state import StateStore
from dtables.streams.vacuum import vacuum
from scheduler.vocabulary import RefreshState


class Session(Warehouse):
    """One connection to a warehouse: a :class:`Warehouse` plus the user-facing methods. Create with
    :func:`dtables.connect`."""

    def __init__(self, spark: Any, warehouse: str, store: StateStore, owns_spark: bool):
        super().__init__(spark, warehouse, store)
        self._owns_spark = owns_spark
        self.catalog.detach_foreign_objects()

    @property
    def warehouse(self) -> str:
        """The warehouse's URI."""
        return self.uri

    def sql(self, text: str) -> Any:
        """Run one statement or a ``;``-separated script; return the Spark DataFrame of the last statement."""
        return execute_script(self, text)

    def table(self, name: str) -> Any:
        """The current contents of a table or view as a DataFrame (a dynamic table's visible columns)."""
        obj = self.catalog.lookup(name)
        if obj is not None and obj["kind"] == "DYNAMIC_TABLE":
            return self.sql(f"SELECT * FROM {quote(obj['name'])}")
        self.catalog.ensure_registered([name])
        return self.spark.table(name)

    def changes(self, table: str, start: Any = None, end: Any = None, *, before: Any = None,
                information: str = ChangeFormat.DEFAULT) -> Any:
        """What changed in a table or view: ``start`` (state at a version int, a timestamp, or a
        ``dtables.changes.Bound``) up to ``end`` (inclusive; default latest). ``before=`` starts just before a
        version instead. Same result as ``SELECT * FROM t CHANGES(INFORMATION => ...) AT(...) END(...)``."""
        if (start is None) == (before is None):
            raise DtablesError("changes() needs exactly one of start= or before=")
        return changes_of(self, table, Bounds.of(start=start, end=end, before=before), information.upper())

    def explain_changes(self, sql: str) -> str:
        """The rewritten change plan of a query (or of the CHANGES clauses of a statement), as text."""
        tree = parse_one(sql)
        if tree.find(exp.Changes) is not None:
            return explain_changes_clause(self, tree, sql)
        query = expand_views(self, tree)
        return diff.explain(query, table_schemas(self, sorted(set(table_names(query)))))

    def refresh(self, names: str | list[str], *, data_timestamp: Any = None, raise_on_failure: bool = True) -> list:
        """Refresh dynamic tables and the dynamic tables they read to one data timestamp (default: now).

        Returns the history records (``dtables.dynamic.history.RefreshRecord``), upstreams first; raises
        ``RefreshFailed`` naming the table and cause when one did not succeed (unless ``raise_on_failure=False``).
        """
        records = refresh(self, [names] if isinstance(names, str) else names, data_timestamp=data_timestamp)
        bad = [r for r in records if r.state != RefreshState.SUCCEEDED]
        if bad and raise_on_failure:
            raise RefreshFailed(bad[-1].error or f"refresh of {bad[-1].name} ended {bad[-1].state}", tuple(records))
        return records

    def create_stream(self, name: str, source: str, *, on: str = "TABLE", append_only: bool = False,
                      show_initial_rows: bool = False, replace: bool = False, comment: str | None = None) -> None:
        """Same as ``CREATE [OR REPLACE] STREAM name ON <on> source [APPEND_ONLY = TRUE]
        [SHOW_INITIAL_ROWS = TRUE]``."""
        parts = [f"CREATE {'OR REPLACE ' if replace else ''}STREAM {name} ON {on} {source}"]
        parts += ["APPEND_ONLY = TRUE"] if append_only else []
        parts += ["SHOW_INITIAL_ROWS = TRUE"] if show_initial_rows else []
        parts += [f"COMMENT = '{comment.replace(chr(39), chr(39) * 2)}'"] if comment else []
        self.sql(" ".join(parts))

    def drop_stream(self, name: str, if_exists: bool = False) -> None:
        self.sql(f"DROP STREAM {'IF EXISTS ' if if_exists else ''}{name}")

    def vacuum(self, table: str, retain_hours: float | None = None, dry_run: bool = False) -> Any:
        """Same as ``VACUUM table [RETAIN retain_hours HOURS] [DRY RUN]``: keeps every removed data file a live
        stream's frontier (up to ``dtables.stream.max_retention``, 14 days by default) or a dynamic table's
        frontier still needs."""
        return vacuum(self, table, retain_hours, dry_run)

    def history(self, name: str | None = None, since: Any = None) -> Any:
        """Refresh history (one row per refresh, oldest first) as a DataFrame; same as ``dtables.refresh_history``."""
        return dataframe(self, name, since)

    def close(self) -> None:
        """Release the session; stops Spark only if this session started it."""
        if self._owns_spark:
            self.spark.stop()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(
    warehouse: str | os.PathLike[str] = "warehouse",
    *,
    master: str | None = None,
    remote: str | None = None,
    spark_conf: Mapping[str, Any] | None = None,
    state_store: str | os.PathLike[str] | None = None,
    spark: Any = None,
) -> Session:
    """Open a session on ``warehouse`` (a path or URI; created if missing).

    ``master`` is a Spark master URL (default ``local[*]``), ``remote`` a Spark Connect address (``sc://host``);
    ``spark`` reuses an existing SparkSession (Delta must be configured on it). ``state_store`` is the SQLite
    file (default ``<warehouse>/_dtables/state.sqlite`` for local warehouses).
    """
    uri = warehouse_uri(warehouse)
    if remote and spark is None and not is_local(uri):
        raise unreachable_over_connect(uri)  # over Connect the warehouse must be a path the server shares
    store = StateStore(Path(state_store) if state_store else default_state_store(uri))
    owns = spark is None
    if spark is None:
        spark = build_spark(uri, master=master, remote=remote, conf=spark_conf)
    return Session(spark, uri, store, owns_spark=owns)
