"""File-system calls on storage URIs through Hadoop's FileSystem (so ``file:``, ``s3a:``, ``abfss:`` all work)."""

from __future__ import annotations

from typing import Any


def _fs_and_path(spark: Any, uri: str) -> tuple[Any, Any] | None:
    jvm = getattr(spark, "_jvm", None) or getattr(getattr(spark, "sparkContext", None), "_jvm", None)
    if jvm is None:  # Spark Connect: no JVM on this side
        return None
    path = jvm.org.apache.hadoop.fs.Path(uri)
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    return path.getFileSystem(conf), path


def exists(spark: Any, uri: str) -> bool:
    fp = _fs_and_path(spark, uri)
    return bool(fp and fp[0].exists(fp[1]))


def delete(spark: Any, uri: str) -> bool:
    """Delete ``uri`` recursively; False when it did not exist or this is a Spark Connect session."""
    fp = _fs_and_path(spark, uri)
    return bool(fp and fp[0].delete(fp[1], True))
