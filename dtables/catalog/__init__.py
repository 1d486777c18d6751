"""The dtables catalog: which tables and views a warehouse holds, persisted in the state store.

Spark's default (in-memory) catalog forgets everything when the process ends, and a Hive/Derby metastore admits
one process at a time. So dtables records each table (name -> Delta location) and view (name -> definition) in the
state store and registers them with Spark lazily, the first time a statement names them: every table is registered
as an *external* table at its location, so unregistering never deletes data.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dtables.errors import SqlError
from dtables.sql.names import DEFAULT_DB, normalize, qualified, quote, quote_column
from dtables.sql.references import referenced_tables
from dtables.sql.spark_errors import first_sentences
from dtables.state import StateStore

# Kinds of catalog objects stored as Delta tables (the rest, VIEW, are re-created from their definition).
TABLE_KINDS = ("TABLE", "DYNAMIC_TABLE")
# Every column a dynamic table stores for dtables' own use starts with this prefix (the row id, and the aggregate
# state of tables maintained as old + ΣΔ); users never see them and may not name a column so.
STATE_PREFIX = "__dtables_"


def without_state_columns(df: Any) -> Any:
    """A dynamic table's rows, or a change read of them, as users see them: without the ``STATE_PREFIX`` columns."""
    hidden = [c for c in df.columns if c.startswith(STATE_PREFIX)]
    return df.drop(*hidden) if hidden else df

# Table properties that turn on change tracking: Change Data Feed, and row tracking for stable row ids.
CHANGE_TRACKING_PROPERTIES = {
    "delta.enableChangeDataFeed": "true",
    "delta.enableRowTracking": "true",
}
# Deletion vectors: a DELETE / UPDATE / MERGE marks the rows it removes instead of rewriting whole files, and change
# reads take exactly the marked rows (dtables.changes.deletion_vectors). ``spark.dtables.deletionVectors=false``
# keeps tables dtables creates copy-on-write, as before issue 18.
DELETION_VECTORS_SETTING = "spark.dtables.deletionVectors"


def set_change_tracking(spark: Any, target: str, enabled: bool = True) -> Any:
    """``ALTER TABLE target`` turning change tracking on (row tracking and Change Data Feed) or off (Change Data
    Feed only: Delta cannot drop row tracking from a table's protocol); ``target`` is a quoted name or path."""
    props = CHANGE_TRACKING_PROPERTIES if enabled else {"delta.enableChangeDataFeed": "false"}
    rendered = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
    return spark.sql(f"ALTER TABLE {target} SET TBLPROPERTIES ({rendered})")


def new_table_properties(spark: Any, change_tracking: bool = True) -> dict[str, str]:
    """The Delta properties of a table dtables creates (CREATE TABLE, CTAS, a dynamic table's storage); without
    ``change_tracking`` (the storage of a dynamic table nothing reads the changes of yet: dynamic/tracking.py)."""
    on = str(spark.conf.get(DELETION_VECTORS_SETTING, "true")).strip().lower() != "false"
    tracking = CHANGE_TRACKING_PROPERTIES if change_tracking else {}
    return {**tracking, "delta.enableDeletionVectors": "true" if on else "false"}


class Catalog:
    def __init__(self, spark: Any, store: StateStore, warehouse_uri: str):
        self.spark = spark
        self.store = store
        self.warehouse_uri = warehouse_uri.rstrip("/")
        self._registered: set[str] = set()

    # -- what the warehouse holds -------------------------------------------------------------------------------

    def managed_location(self, name: str) -> str:
        """Where a new table dtables creates lives: ``tables/<db>/<name>``, or ``<name>.2``, ``.3``... when a renamed
        table still lives there (a rename keeps the files where they are)."""
        db, table = normalize(name).split(".")
        base = f"{self.warehouse_uri}/tables/{db}/{table}"
        taken = {o["location"].rstrip("/") for o in self.objects() if o["location"]}
        location, n = base, 1
        while location in taken:
            n += 1
            location = f"{base}.{n}"
        return location

    def lookup(self, name: str) -> dict[str, Any] | None:
        rows = self.store.query("SELECT * FROM objects WHERE name = ?", (normalize(name),))
        return dict(rows[0]) if rows else None

    def objects(self, kind: str | None = None) -> list[dict[str, Any]]:
        sql, params = "SELECT * FROM objects", ()  # type: tuple[str, tuple[str, ...]]
        if kind:
            sql, params = sql + " WHERE kind = ?", (kind,)
        return [dict(r) for r in self.store.query(sql + " ORDER BY name", params)]

    def record_table(self, name: str, location: str, managed: bool, kind: str = "TABLE") -> None:
        assert kind in TABLE_KINDS
        self.store.execute(
            "INSERT OR REPLACE INTO objects(name, kind, location, managed) VALUES (?, ?, ?, ?)",
            (normalize(name), kind, location, int(managed)))
        self._registered.add(normalize(name))

    def record_view(self, name: str, definition: str) -> None:
        self.store.execute("INSERT OR REPLACE INTO objects(name, kind, definition) VALUES (?, 'VIEW', ?)",
                           (normalize(name), definition))
        self._registered.add(normalize(name))

    def rename(self, conn: Any, old: str, new: str, definition: str | None = None) -> None:
        """Record ``old`` under the name ``new`` (a view with its new ``definition``), inside the caller's state-store
        transaction ``conn`` so that what follows the rename (streams) moves in the same transaction."""
        conn.execute("UPDATE objects SET name = ?, definition = COALESCE(?, definition) WHERE name = ?",
                     (normalize(new), definition, normalize(old)))
        self._registered.discard(normalize(old))
        self._registered.add(normalize(new))

    def forget(self, name: str) -> None:
        self.store.execute("DELETE FROM objects WHERE name = ?", (normalize(name),))
        self._registered.discard(normalize(name))

    # -- registration with Spark --------------------------------------------------------------------------------

    def ensure_registered(self, names: Iterable[str], _seen: frozenset[str] = frozenset()) -> None:
        """Register with Spark every recorded object among ``names`` that this Spark session does not know yet."""
        for name in names:
            key = normalize(name)
            if key in self._registered or key in _seen:
                continue
            obj = self.lookup(key)
            if obj is None:
                continue  # not ours: Spark resolves it (or reports it missing)
            db, _ = key.split(".")
            if db != DEFAULT_DB:
                self.spark.sql(f"CREATE DATABASE IF NOT EXISTS `{db}`")
            if obj["kind"] in TABLE_KINDS:
                self.spark.sql(f"CREATE TABLE IF NOT EXISTS {quote(key)} USING DELTA LOCATION '{obj['location']}'")
            else:
                self.ensure_registered(referenced_tables(obj["definition"]), _seen | {key})
                try:
                    self.spark.sql(obj["definition"])
                except Exception as e:  # noqa: BLE001 - e.g. a table it reads was renamed or dropped
                    raise SqlError(f"view {key} cannot be used: its query fails: "
                                   f"{first_sentences(getattr(e, 'desc', None) or str(e))}") from e
            self._registered.add(key)

    def ensure_all_registered(self) -> None:
        """Register every object; a view whose query fails now (a table it reads was renamed or dropped) is left
        out, so that it fails only statements that name it."""
        for o in self.objects():
            try:
                self.ensure_registered([o["name"]])
            except SqlError:
                continue

    def detach_foreign_objects(self) -> None:
        """Unregister tables and views a previous dtables session of this Spark left behind for another warehouse.

        One SparkSession may serve several warehouses one after the other (tests, notebooks); its catalog is
        process-wide. Tables are external, so this drops registrations only, never data.
        """
        mine = {o["name"] for o in self.objects()}
        for db in [d.name for d in self.spark.catalog.listDatabases()]:
            # SHOW TABLES / SHOW VIEWS read names only; catalog.listTables loads every table's metadata (a Delta
            # snapshot each: a second per connect once a long-lived Spark has served a few warehouses)
            quoted = quote_column(db)
            views = {r["viewName"] for r in self.spark.sql(f"SHOW VIEWS IN {quoted}").collect() if not r["isTemporary"]}
            for t in self.spark.sql(f"SHOW TABLES IN {quoted}").collect():
                if t["isTemporary"] or qualified(db, t["tableName"]).lower() in mine:
                    continue
                kind = "VIEW" if t["tableName"] in views else "TABLE"
                self.spark.sql(f"DROP {kind} IF EXISTS {quoted}.{quote_column(t['tableName'])}")
        self._registered.clear()


__all__ = ["CHANGE_TRACKING_PROPERTIES", "DEFAULT_DB", "DELETION_VECTORS_SETTING", "STATE_PREFIX", "TABLE_KINDS",
           "Catalog", "new_table_properties", "normalize", "qualified", "quote", "quote_column", "set_change_tracking",
           "without_state_columns"]
