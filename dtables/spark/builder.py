"""Build a SparkSession with Delta Lake configured.

One builder for every entry point (library, CLI, tests) so that all of them run Spark the same way: Delta's SQL
extension and catalog, jars from the local cache, a warehouse directory, quiet logs and few shuffle partitions on
a local master (the defaults of 200 partitions cost seconds per query on small tables).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from dtables.secrets import SPARK_REDACTION_REGEX, register, secret_values
from dtables.spark.jars import delta_jars

DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}

LOCAL_DEFAULTS = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "4g",
    # Delta: keep tables cheap to create in tests and local warehouses.
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.adaptive.enabled": "true",
}


def quiet_logs() -> None:
    """dtables reports Spark errors as exceptions with readable messages; PySpark would also log each one with a
    full Java stack trace, and sqlglot warns whenever it passes an unknown statement through. Silence both."""
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    logging.getLogger("sqlglot").setLevel(logging.ERROR)


def build_spark(
    warehouse_uri: str,
    master: str | None = None,
    remote: str | None = None,
    app_name: str = "dtables",
    conf: Mapping[str, Any] | None = None,
) -> Any:
    """Return a SparkSession (classic, or Spark Connect when ``remote`` is given) with Delta configured.

    ``warehouse_uri`` becomes ``spark.sql.warehouse.dir`` and the Derby-free in-memory catalog is replaced by a
    persistent one only through Delta paths: tables are registered by the dtables catalog (see
    ``dtables.catalog``) so that reconnecting needs no Hive metastore.
    """
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    settings: dict[str, Any] = {**DELTA_CONF, "spark.sql.warehouse.dir": warehouse_uri}
    if remote:
        builder = builder.remote(remote)
    else:
        master = master or os.environ.get("DTABLES_SPARK_MASTER") or "local[*]"
        builder = builder.master(master)
        if master.startswith("local"):
            settings = {**LOCAL_DEFAULTS, **settings}
        settings["spark.jars"] = ",".join(str(p) for p in delta_jars())
        # PySpark's call-site capture costs four Py4J round trips per DataFrame function call (a configuration
        # read, then setting and clearing the origin); a change read builds hundreds of Columns, so this was a
        # third of its driver time. Errors still carry Spark's own SQL context.
        settings["spark.python.sql.dataFrameDebugging.enabled"] = "false"
        # Spark's UI, event logs and SET output hide the settings dtables treats as secret (dtables.secrets)
        settings["spark.redaction.regex"] = SPARK_REDACTION_REGEX
    settings.update(conf or {})
    register(secret_values(dict(conf or {})))
    for key, value in settings.items():
        builder = builder.config(key, str(value))
    quiet_logs()
    spark = builder.getOrCreate()
    if not remote:
        spark.sparkContext.setLogLevel("ERROR")
    return spark
