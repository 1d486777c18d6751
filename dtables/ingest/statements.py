"""SQL handlers of ingestion statements: ``SHOW CHANNELS`` (``HANDLERS`` joins the executor's mapping)."""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from dtables.catalog import normalize
from dtables.catalog.warehouse import Warehouse
from dtables.ingest import store as cs
from dtables.sql.expressions import ShowChannels

LISTING = ("created_on STRING, name STRING, database_name STRING, table_name STRING, client_sequencer BIGINT, "
           "offset_token STRING, committed_at STRING, rows_committed BIGINT, on_error STRING, opened_at STRING")


def show_channels(warehouse: Warehouse, tree: exp.Expr, statement: str) -> Any:
    """One row per channel, from the state store (which every open reconciles with the Delta log)."""
    like = tree.args.get("like")
    table, database = tree.args.get("table"), tree.args.get("database")
    states = cs.listing(warehouse.store, normalize(table.this) if table is not None else None,
                        like.this if like is not None else None)
    if database is not None:
        states = [s for s in states if s.table.split(".")[0] == database.this]
    rows = [(s.created_at, s.name, s.table.split(".")[0], s.table.split(".")[1], s.epoch, s.offset_token,
             s.committed_at, s.rows_committed, s.on_error, s.opened_at) for s in states]
    return warehouse.spark.createDataFrame(rows, LISTING)


HANDLERS: dict[type[exp.Expr], Any] = {ShowChannels: show_channels}
