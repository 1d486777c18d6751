"""Minimal file access for a table's location: list a folder, read a small text file, test existence.

Local tables (``file:`` URIs or plain paths) are read with Python directly: no JVM round trip, no Spark job. Any
other scheme (s3a:, abfss:, hdfs:, ...) goes through the Hadoop FileSystem of the Spark session's JVM
(``dtables.spark.fs``), so the same credentials and settings Spark uses apply; over Spark Connect only local tables
can be read here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from dtables.spark.fs import hadoop, is_local, local_path


@dataclass(frozen=True)
class FileEntry:
    """One file in a listing: its name (no folder) and modification time in epoch milliseconds (None where the
    listing was asked for names only and the time would have cost a call of its own)."""

    name: str
    mtime_ms: int | None


def join(base: str, relative: str) -> str:
    """Join a table location and a path from the Delta log (which may itself be absolute)."""
    if urlparse(relative).scheme:
        return relative
    return base.rstrip("/") + "/" + relative


def _local_entry(entry: os.DirEntry[str], times: bool = True) -> FileEntry | None:
    """A listed local file, or None when it is not a file or is gone by the time it is looked at: writers rename
    their temporary files (Delta's ``.<version>.json.<uuid>.tmp`` and its checksum) while others list the folder,
    and a vanished name must not fail a reader of the log (it once failed a channel's commit check; issue 16).
    Without ``times`` no file is stat'ed (``is_file`` reads the folder entry's type): a name may then be one that
    vanished just after the listing, as it may a moment after any listing."""
    try:
        if not entry.is_file():
            return None
        return FileEntry(entry.name, int(entry.stat().st_mtime * 1000) if times else None)
    except FileNotFoundError:
        return None


class Storage:
    """File operations on one table location; ``spark`` is only used for non-local schemes."""

    def __init__(self, spark: Any, location: str):
        self.location = location.rstrip("/")
        self._spark = spark
        self._local = is_local(location)

    def _hadoop(self, uri: str) -> tuple[Any, Any]:
        return hadoop(self._spark, uri)

    def list_dir(self, relative: str, times: bool = True) -> list[FileEntry]:
        """Files directly inside ``location/relative``; empty when the folder does not exist. ``times`` false: a
        local folder's files come without their times (a stat each: 12-15 ms of a 0.4 s refresh that lists a
        few logs of a few hundred files); an object store's listing carries them anyway."""
        uri = join(self.location, relative)
        if self._local:
            folder = local_path(uri)
            if not os.path.isdir(folder):
                return []
            return [entry for e in os.scandir(folder) if (entry := _local_entry(e, times)) is not None]
        fs, path = self._hadoop(uri)
        if not fs.exists(path):
            return []
        return [
            FileEntry(s.getPath().getName(), int(s.getModificationTime()))
            for s in fs.listStatus(path)
            if s.isFile()
        ]

    def modified_ms(self, relative: str) -> int | None:
        """The file's modification time in epoch milliseconds, or None when it does not exist."""
        uri = join(self.location, relative)
        if self._local:
            try:
                return int(os.stat(local_path(uri)).st_mtime * 1000)
            except FileNotFoundError:
                return None
        fs, path = self._hadoop(uri)
        return int(fs.getFileStatus(path).getModificationTime()) if fs.exists(path) else None

    def read_text(self, relative: str) -> str | None:
        """The file's text, or None when it does not exist."""
        uri = join(self.location, relative)
        if self._local:
            try:
                with open(local_path(uri), encoding="utf-8") as f:
                    return f.read()
            except FileNotFoundError:
                return None
        fs, path = self._hadoop(uri)
        if not fs.exists(path):
            return None
        stream = fs.open(path)
        try:
            reader = self._spark._jvm.java.io.BufferedReader(
                self._spark._jvm.java.io.InputStreamReader(stream, "UTF-8")
            )
            lines = []
            line = reader.readLine()
            while line is not None:
                lines.append(line)
                line = reader.readLine()
            return "\n".join(lines)
        finally:
            stream.close()

    def read_bytes(self, uri: str, start: int, length: int) -> bytes:
        """``length`` bytes of an absolute file URI from ``start`` (fewer when the file ends first): deletion vectors
        are read this way, a few bytes at an offset of a file that holds many."""
        if self._local:
            with open(local_path(uri), "rb") as f:
                f.seek(start)
                return f.read(length)
        fs, path = self._hadoop(uri)
        stream = fs.open(path)
        try:
            stream.seek(start)
            available = max(0, min(length, int(fs.getFileStatus(path).getLen()) - start))
            # one call for the whole range (py4j hands byte[] back as bytes), not one per byte
            return bytes(self._spark._jvm.org.apache.commons.io.IOUtils.toByteArray(stream, available))
        finally:
            stream.close()

    def exists(self, uri: str) -> bool:
        """Whether an absolute file URI (as built by :func:`join`) exists."""
        if self._local:
            return os.path.exists(local_path(uri))
        fs, path = self._hadoop(uri)
        return bool(fs.exists(path))
