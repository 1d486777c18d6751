"""File-system calls on storage URIs: local paths with Python, anything else (``s3a:``, ``abfss:``, ``hdfs:``...)
through the Hadoop FileSystem of the Spark session's JVM, so the credentials and settings Spark uses apply.

A Spark Connect client has no JVM: it reaches local paths (the server must see the same files, as on one machine
or a shared mount) and refuses other schemes with :class:`RemoteStorageError`.
"""

from __future__ import annotations

import os
import shutil
from typing import Any
from urllib.parse import unquote, urlparse

from dtables.errors import DtablesError
from dtables.spark.jvm import jvm_class


class RemoteStorageError(DtablesError):
    """A storage URI this process cannot reach: not local, and no JVM to go through (Spark Connect)."""


def is_local(uri: str) -> bool:
    return urlparse(uri).scheme in ("", "file")


def local_path(uri: str) -> str:
    """``file:/a/b%20c`` -> ``/a/b c``; plain paths unchanged."""
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


def hadoop(spark: Any, uri: str) -> tuple[Any, Any]:
    """The Hadoop FileSystem and Path of a non-local ``uri``, with the session's settings."""
    jsession = getattr(spark, "_jsparkSession", None)
    if jsession is None:
        raise unreachable_over_connect(uri)
    path = jvm_class(spark, "org.apache.hadoop.fs.Path")(uri)
    return path.getFileSystem(jsession.sessionState().newHadoopConf()), path


def unreachable_over_connect(uri: str) -> RemoteStorageError:
    return RemoteStorageError(
        f"{uri} is not on a local file system, and over Spark Connect dtables has no Hadoop FileSystem to reach "
        "it (it reads Delta logs and manages table folders from this process): keep the warehouse on a path "
        "both this process and the Connect server see (a local folder or a shared mount), or connect with a "
        "classic Spark session (spark.master)")


def exists(spark: Any, uri: str) -> bool:
    if is_local(uri):
        return os.path.exists(local_path(uri))
    fs, path = hadoop(spark, uri)
    return bool(fs.exists(path))


def delete(spark: Any, uri: str) -> bool:
    """Delete ``uri`` recursively; False when it did not exist."""
    if not is_local(uri):
        fs, path = hadoop(spark, uri)
        return bool(fs.delete(path, True))
    path = local_path(uri)
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)
    else:
        return False
    return True
