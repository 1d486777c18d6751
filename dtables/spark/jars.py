"""Fetch Delta Lake's jars from Maven Central once and cache them, so Spark later starts offline.

Spark's own ``spark.jars.packages`` resolves through Ivy at every start and needs the network each time it cannot
prove its cache is fresh. We run the Ivy that ships inside pyspark once, retrieve the artifacts into a cache folder,
and from then on hand Spark plain jar paths (``spark.jars``). Jars that pyspark already ships (Hadoop, Parquet,
Jackson, ...) are left out so that only one version of each library is ever on the classpath.

A second artifact, GlobalMentor's ``hadoop-bare-naked-local-fs``, gives Hadoop a local file system that asks Java
for permissions and file status instead of starting ``chmod`` and ``readlink`` processes (see
``dtables.spark.builder.LOCAL_FILE_SYSTEM``); it goes on the driver's class path.

Run ``python -m dtables.spark.jars`` to fetch (it prints the cache folders).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pyspark

from dtables.errors import DtablesError

# Maven Central does not carry io.delta:delta-spark_4.2_2.13:4.4.1 (the newest build for Spark 4.2 there is 4.4.0;
# the Python package delta-spark==4.4.1 is a thin wrapper and works with it). Pinned, so every machine gets the same.
DELTA_GROUP = "io.delta"
DELTA_ARTIFACT = "delta-spark_4.2_2.13"
DELTA_VERSION = os.environ.get("DTABLES_DELTA_JAR_VERSION", "4.4.0")
# One 9 KB jar with no dependencies of its own (Hadoop is pyspark's); 0.1.0 is its only release.
LOCAL_FS = ("com.globalmentor", "hadoop-bare-naked-local-fs", "0.1.0")


class JarFetchError(DtablesError, RuntimeError):
    """The Delta jars could not be fetched; the message names what is missing."""


def cache_root() -> Path:
    """Where fetched jars live: ``$DTABLES_HOME`` or ``~/.cache/dtables``."""
    return Path(os.environ.get("DTABLES_HOME", Path.home() / ".cache" / "dtables"))


def jar_dir(version: str = DELTA_VERSION) -> Path:
    return cache_root() / "jars" / f"{DELTA_ARTIFACT}-{version}"


def _pyspark_jars() -> Path:
    return Path(pyspark.__file__).parent / "jars"


def _artifact_name(jar: str) -> str:
    """``org.apache.parquet_parquet-column-1.16.0.jar`` -> ``parquet-column``."""
    stem = jar.removesuffix(".jar")
    stem = stem.split("_", 1)[1] if "_" in stem.split("-")[0] else stem
    return re.sub(r"-\d[\w.\-]*$", "", stem)


def _missing_from_pyspark(jars: list[Path]) -> list[Path]:
    shipped = {_artifact_name(p.name) for p in _pyspark_jars().glob("*.jar")}
    return [j for j in jars if _artifact_name(j.name) not in shipped]


def delta_jars(version: str = DELTA_VERSION, fetch: bool = True) -> list[Path]:
    """The jar paths to put on ``spark.jars``; fetches them first if the cache is empty."""
    folder = _cached(jar_dir(version), (DELTA_GROUP, DELTA_ARTIFACT, version), fetch)
    return sorted(_missing_from_pyspark(list(folder.glob("*.jar"))))


def local_fs_jar(fetch: bool = True) -> Path:
    """The jar of the process-free local file system (``LOCAL_FS``); fetches it first if the cache is empty."""
    group, artifact, version = LOCAL_FS
    folder = _cached(cache_root() / "jars" / f"{artifact}-{version}", LOCAL_FS, fetch)
    return folder / f"{group}_{artifact}-{version}.jar"


def _cached(folder: Path, coordinates: tuple[str, str, str], fetch: bool) -> Path:
    if not (folder / ".complete").exists():
        if not fetch:
            raise JarFetchError(f"jars of {':'.join(coordinates)} are not cached in {folder}; "
                                "run `python -m dtables.spark.jars` (needs Maven Central once)")
        _fetch(coordinates, folder)
    return folder


def _fetch(coordinates: tuple[str, str, str], folder: Path) -> None:
    group, artifact, version = coordinates
    ivy = next(_pyspark_jars().glob("ivy-*.jar"), None)
    if ivy is None:
        raise JarFetchError(f"pyspark ships no Ivy jar in {_pyspark_jars()}; reinstall pyspark")
    folder.mkdir(parents=True, exist_ok=True)
    cmd = ["java", "-jar", str(ivy), "-cache", str(cache_root() / "ivy-cache"),
           "-dependency", group, artifact, version, "-confs", "default",
           "-retrieve", str(folder / "[organisation]_[artifact]-[revision](-[classifier]).[ext]")]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    except FileNotFoundError as e:
        raise JarFetchError("`java` is not on PATH; Spark needs Java 17") from e
    main_jar = folder / f"{group}_{artifact}-{version}.jar"
    if out.returncode != 0 or not main_jar.exists():
        unresolved = re.findall(r"::\s+(\S+#\S+;\S+): not found", out.stdout + out.stderr)
        what = ", ".join(unresolved) or ":".join(coordinates)
        raise JarFetchError(f"could not fetch {what} from Maven Central (Ivy exit {out.returncode}); "
                            f"last output:\n{(out.stdout + out.stderr)[-1500:]}")
    (folder / ".complete").write_text(version)


def main() -> int:
    try:
        jars = delta_jars()
        local_fs = local_fs_jar()
    except JarFetchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"Delta jars cached in {jar_dir()} ({len(jars)} on the Spark classpath); local file system: {local_fs}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
