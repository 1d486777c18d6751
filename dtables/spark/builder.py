"""Build a SparkSession with Delta Lake configured.

One builder for every entry point (library, CLI, tests) so that all of them run Spark the same way: Delta's SQL
extension and catalog, jars from the local cache, a warehouse directory, quiet logs, and defaults chosen for where
Spark runs: few shuffle partitions on a local master (the default 200 cost seconds per query on small tables),
settings for a cluster on any other master. A Spark Connect server is configured when it starts (its static
settings cannot change from here): only session settings are sent, and the server must have Delta.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import Any

from pyspark import SparkContext
from pyspark.sql import SparkSession

from dtables.errors import DtablesError
from dtables.secrets import SPARK_REDACTION_REGEX, register, secret_values
from dtables.spark.hadoop_sources import drop_property_sources
from dtables.spark.jars import delta_jars, local_fs_jar

DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}

# Spark keeps the classes it generates for query stages in a cache of 100 by default. An incremental refresh
# generates 40-100 of them (its change plan has many small stages), the same ones at every refresh of the same kind
# of change, so a warehouse of a few dynamic tables evicted them all between two refreshes and every refresh compiled
# again: 1-2 s of Janino per refresh on TPC-H's queries, which the FULL twin, with few stages, mostly did not pay.
# A table whose changes come in a few kinds (appends, deletes, updates) needs about 200; at about 40 KB of metaspace
# per class (measured at TPC-H SF 1: 548 classes, 23 MB) 4,096 hold twenty such tables' plans in at most 160 MB.
CODEGEN_CACHE = {"spark.sql.codegen.cache.maxEntries": "4096"}

LOCAL_DEFAULTS = {
    **CODEGEN_CACHE,
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

# Hadoop's local file system starts a process for what Java can do itself: `chmod` after it creates any file (every
# Parquet part, every commit and checksum of Delta's log, and each one's .crc) and `readlink` for both sides of every
# rename through FileContext, which Delta's default log store and Spark's checkpoint files use: 22 process starts in
# a one-group refresh, about 10 ms each inside a write (a one-row INSERT took 531-544 ms with them, 297-420 ms
# without; bench/README.md). GlobalMentor's BareLocalFileSystem (the
# checksummed local file system with permissions and file status through java.nio) removes the `chmod`s; Delta's
# LocalLogStore and Spark's FileSystem-based checkpoint manager write through it instead of through FileContext,
# whose local implementation cannot be swapped. On a local disk both log stores commit by checking that the next
# version is absent and then renaming (neither is atomic across processes); dtables' own writers to one table are
# serialized by its lock files. Only for a JVM this process starts on a local master: the class must be on the
# driver's class path before Spark reads its first file, and on a cluster it would have to be on every executor's.
LOCAL_FILE_SYSTEM = {
    "spark.hadoop.fs.file.impl": "com.globalmentor.apache.hadoop.fs.BareLocalFileSystem",
    "spark.delta.logStore.file.impl": "io.delta.storage.LocalLogStore",
    "spark.sql.streaming.checkpointFileManagerClass":
        "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
}


def local_file_system_settings(extra_class_path: str | None = None) -> dict[str, str]:
    """``LOCAL_FILE_SYSTEM`` with its jar added to the driver's class path (after ``extra_class_path``, if any)."""
    class_path = os.pathsep.join(p for p in (extra_class_path, str(local_fs_jar())) if p)
    return {**LOCAL_FILE_SYSTEM, "spark.driver.extraClassPath": class_path}


# Any non-local master (standalone, YARN, Kubernetes). AQE coalesces shuffle partitions, so a moderate start
# serves small and large refreshes; Delta's 50 snapshot partitions are tasks paid on every snapshot of a small log.
# Executors get this process's Python (the one with dtables' dependencies), not whatever `python3` is on their PATH:
# override spark.pyspark.python where workers install Python elsewhere.
CLUSTER_DEFAULTS = {
    **CODEGEN_CACHE,
    "spark.sql.shuffle.partitions": "32",
    "spark.sql.adaptive.enabled": "true",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.databricks.delta.snapshotPartitions": "8",
    "spark.pyspark.python": sys.executable,
}

# Settings of a Connect server's own start; sending them from a client only draws warnings.
STATIC_SETTINGS = ("spark.sql.extensions", "spark.sql.catalog.spark_catalog", "spark.sql.warehouse.dir",
                   "spark.jars", "spark.driver.memory", "spark.ui.enabled", "spark.redaction.regex")


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
    builder = SparkSession.builder.appName(app_name)
    settings: dict[str, Any] = {**DELTA_CONF, "spark.sql.warehouse.dir": warehouse_uri}
    starts_local_jvm = False
    if remote:
        require_connect_client()
        builder = builder.remote(remote)
        settings = {"spark.sql.session.timeZone": "UTC"}
    else:
        master = master or os.environ.get("DTABLES_SPARK_MASTER") or "local[*]"
        starts_local_jvm = master.startswith("local") and SparkContext._active_spark_context is None
        builder = builder.master(master)
        settings = {**(LOCAL_DEFAULTS if master.startswith("local") else CLUSTER_DEFAULTS), **settings}
        settings["spark.jars"] = ",".join(str(p) for p in delta_jars())
        # PySpark's call-site capture costs four Py4J round trips per DataFrame function call (a configuration
        # read, then setting and clearing the origin); a change read builds hundreds of Columns, so this was a
        # third of its driver time. Errors still carry Spark's own SQL context.
        settings["spark.python.sql.dataFrameDebugging.enabled"] = "false"
        # Spark's UI, event logs and SET output hide the settings dtables treats as secret (dtables.secrets)
        settings["spark.redaction.regex"] = SPARK_REDACTION_REGEX
    settings.update({k: v for k, v in (conf or {}).items() if not (remote and k in STATIC_SETTINGS)})
    if starts_local_jvm:
        settings = {**local_file_system_settings(settings.get("spark.driver.extraClassPath")),
                    **{k: v for k, v in settings.items() if k != "spark.driver.extraClassPath"}}
    register(secret_values(dict(conf or {})))
    for key, value in settings.items():
        builder = builder.config(key, str(value))
    quiet_logs()
    spark = builder.getOrCreate()
    if remote:
        _require_delta(spark, remote)
    else:
        spark.sparkContext.setLogLevel("ERROR")
        drop_property_sources(spark)
    return spark


def require_connect_client() -> None:
    """Raise a DtablesError naming the extra to install when PySpark's Spark Connect client cannot load."""
    # not pyspark's check_dependencies(): run from `python -c` it takes itself for a doctest and exits the process
    try:
        from pyspark.sql.connect import utils  # lazy: the Connect client packages are optional (extra [connect])

        for require in (utils.require_minimum_pandas_version, utils.require_minimum_pyarrow_version,
                        utils.require_minimum_grpc_version, utils.require_minimum_grpcio_status_version,
                        utils.require_minimum_googleapis_common_protos_version,
                        utils.require_minimum_zstandard_version):
            require()
    except Exception as e:  # PySparkImportError (a missing package), or ImportError itself
        raise DtablesError(f"Spark Connect needs its client packages ({e}): pip install 'dtables[connect]'") from e


def _require_delta(spark: Any, remote: str) -> None:
    extensions = spark.conf.get("spark.sql.extensions", "") or ""
    if "io.delta.sql.DeltaSparkSessionExtension" not in extensions:
        raise DtablesError(
            f"the Spark Connect server at {remote} does not run Delta Lake (spark.sql.extensions is "
            f"{extensions or 'unset'}): start it with Delta's jars and settings, for example "
            "`python -m dtables.spark.servers connect` (README, \"Spark Connect\")")
