"""The warehouse context every engine module works in: Spark (with Delta), the warehouse's URI, the state store and
the catalog.

``dtables.session.Session`` is a ``Warehouse`` plus the user-facing methods (``sql()``, ``table()``, ``changes()``,
``refresh()``...); the modules below the statement executor take a ``Warehouse`` and never the session, so they
cannot call back up into statement dispatch.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from dtables.catalog import Catalog
from dtables.errors import DtablesError
from dtables.state import StateStore


def warehouse_uri(warehouse: str | os.PathLike[str]) -> str:
    """A URI for the warehouse: plain paths become ``file:`` URIs; ``s3a://``, ``abfss://``... stay as given."""
    text = os.fspath(warehouse)
    if urlparse(text).scheme and not (len(text) > 1 and text[1] == ":"):  # not a Windows drive letter
        return text.rstrip("/")
    return Path(text).expanduser().resolve().as_uri()


def default_state_store(uri: str) -> Path:
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        raise DtablesError(
            f"warehouse {uri} is not on the local file system; the SQLite state store needs a local path: "
            "pass state_store='/path/to/state.sqlite' (or set it in dtables.yml)")
    return Path(parsed.path) / "_dtables" / "state.sqlite"


class Warehouse:
    """Spark, the warehouse URI, the state store and the catalog of one connection to a warehouse."""

    def __init__(self, spark: Any, uri: str, store: StateStore, catalog: Catalog | None = None):
        self.spark = spark
        self.uri = uri
        self.store = store
        self.catalog = catalog if catalog is not None else Catalog(spark, store, uri)

    def with_spark(self, spark: Any) -> Warehouse:
        """The same warehouse (state store and catalog) seen through another Spark session, e.g. a clone that
        carries per-write settings."""
        return Warehouse(spark, self.uri, self.store, self.catalog)
