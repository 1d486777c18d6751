"""The Hadoop configuration's record of where each setting came from, dropped from the driver's copy.

Every file scan Spark plans broadcasts the session's Hadoop configuration to its tasks (``ParquetFileFormat``'s
reader: ``SerializableConfiguration.broadcast``), and every write ships it inside its job description. Hadoop
serializes a ``Configuration`` setting by setting, and with each one the names of the files or calls that set it
(``Configuration.write``: its ``updatingResource``, written through a GZIP stream opened per setting). With the 1,100
settings of Hadoop's default files that costs about 6 ms to write and 8 ms to broadcast per scan on the 2-core
benchmark machine, and more to read back in each task: a scan of a 50-row Parquet file took 14 ms to make its RDD,
4 ms without the record (bench/README.md, "Hadoop's setting sources"). An incremental refresh of a small table
plans several scans and a write and runs in about 0.4 s, so the record was about a twentieth of it.

The record serves diagnostics only (``Configuration.getPropertySources``, which then answers None); no setting's
value changes. It is emptied once in the driver's base configuration, from which every session copies its own.
Hadoop refills it where it reloads its default files (a default file added later by a class first loaded then):
that costs only the time above again. ``spark.dtables.hadoopConf.dropSources = false`` keeps it.
"""

from __future__ import annotations

from typing import Any

DROP_SOURCES = "spark.dtables.hadoopConf.dropSources"
_CONFIGURATION = "org.apache.hadoop.conf.Configuration"
_FIELD = "updatingResource"


def drop_property_sources(spark: Any) -> bool:
    """Empty the setting-source record of ``spark``'s base Hadoop configuration (classic Spark; not over Spark
    Connect, whose server holds it). Returns whether it was emptied: False where the setting keeps it or this
    Hadoop has no such record (its field is private: a Hadoop that renames it is left as it is)."""
    jsc = getattr(spark, "_jsc", None)
    if jsc is None or str(spark.conf.get(DROP_SOURCES, "true")).lower() == "false":
        return False
    conf = jsc.hadoopConfiguration()
    try:
        field = spark._jvm.java.lang.Class.forName(_CONFIGURATION).getDeclaredField(_FIELD)
        field.setAccessible(True)
        sources = field.get(conf)
    except Exception:  # py4j's Py4JJavaError (NoSuchFieldException, InaccessibleObjectException)
        return False
    if sources is None:
        return False
    sources.clear()
    return True
