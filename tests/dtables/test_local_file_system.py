"""A local Spark that dtables starts reads and writes its files without starting processes (dtables.spark.builder,
LOCAL_FILE_SYSTEM): files still get their permissions, Delta's log is written through the same file system, and
commits from several threads of the JVM to one table all land."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path
from typing import Any

from dtables.spark.builder import LOCAL_FILE_SYSTEM, local_file_system_settings
from dtables.spark.jars import local_fs_jar
from dtables.spark.servers import connect_server_command


def _file_system(spark: Any) -> Any:
    jvm = spark.sparkContext._jvm
    return jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI("file:///"), spark._jsc.hadoopConfiguration())


def test_the_session_uses_the_process_free_file_system_and_log_store(spark: Any, tmp_path: Path) -> None:
    assert _file_system(spark).getClass().getName() == LOCAL_FILE_SYSTEM["spark.hadoop.fs.file.impl"]
    jvm = spark.sparkContext._jvm
    log_store = jvm.org.apache.spark.sql.delta.storage.DelegatingLogStore(spark._jsc.hadoopConfiguration())
    delegate = log_store.getDelegate(jvm.org.apache.hadoop.fs.Path(tmp_path.as_uri()))
    assert delegate.logStoreImpl().getClass().getName() == "io.delta.storage.LocalLogStore"


def _processes_started(spark: Any, tmp_path: Path, work: Any) -> list[str]:
    """The commands of the processes the JVM started while ``work()`` ran (a JFR recording of jdk.ProcessStart)."""
    jvm = spark.sparkContext._jvm
    recording = jvm.jdk.jfr.Recording()
    recording.enable("jdk.ProcessStart")
    recording.start()
    try:
        work()
    finally:
        recording.stop()
    path = jvm.java.io.File(str(tmp_path / "processes.jfr")).toPath()
    recording.dump(path)
    recording.close()
    return [str(event.getString("command")) for event in jvm.jdk.jfr.consumer.RecordingFile.readAllEvents(path)]


def test_writing_and_committing_a_delta_table_starts_no_process(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")

    def write(path: str = path) -> None:
        spark.range(3).write.format("delta").save(path)
        spark.range(3, 5).write.format("delta").mode("append").save(path)
        spark.sql(f"UPDATE delta.`{path}` SET id = id + 10 WHERE id = 1")

    write(str(tmp_path / "first"))  # once first: a JVM's first task asks `getconf PAGESIZE` once for its metrics
    assert _processes_started(spark, tmp_path, write) == []
    assert sorted(r.id for r in spark.read.format("delta").load(path).collect()) == [0, 2, 3, 4, 11]
    # the recording does see a process Hadoop starts
    gateway = spark.sparkContext._gateway
    command = gateway.new_array(gateway.jvm.java.lang.String, 1)
    command[0] = "true"
    started = _processes_started(spark, tmp_path, lambda: gateway.jvm.org.apache.hadoop.util.Shell.execCommand(command))
    assert started == ["true"]


def test_files_written_get_hadoops_permissions(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    spark.range(3).write.format("delta").save(str(path))
    files = [p for p in path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".parquet" for p in files) and any(p.name.endswith(".json") for p in files)
    # 0666 less Hadoop's umask (022 by default), set through java.nio rather than a `chmod` process
    assert {stat.S_IMODE(p.stat().st_mode) for p in files} == {0o644}
    jvm = spark.sparkContext._jvm
    parquet = next(p for p in files if p.suffix == ".parquet")
    _file_system(spark).setPermission(jvm.org.apache.hadoop.fs.Path(parquet.as_uri()),
                                      jvm.org.apache.hadoop.fs.permission.FsPermission(0o600))
    assert stat.S_IMODE(parquet.stat().st_mode) == 0o600


def test_commits_from_many_threads_to_one_table_all_land(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    spark.range(0).selectExpr("CAST(id AS INT) AS writer", "CAST(id AS INT) AS n").write.format("delta").save(path)
    errors: list[BaseException] = []

    def append(writer: int) -> None:
        try:
            for n in range(4):
                spark.createDataFrame([(writer, n)], "writer INT, n INT").write.format("delta").mode("append").save(path)
        except BaseException as e:  # noqa: BLE001  (reported below)
            errors.append(e)

    threads = [threading.Thread(target=append, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    rows = sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())
    assert rows == [(w, n) for w in range(3) for n in range(4)]
    versions = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").select("version").collect()
    assert sorted(r.version for r in versions) == list(range(13))


def test_a_class_path_given_is_kept_before_the_jar() -> None:
    settings = local_file_system_settings("/opt/extra.jar")
    assert settings["spark.driver.extraClassPath"] == os.pathsep.join(["/opt/extra.jar", str(local_fs_jar())])
    assert local_file_system_settings()["spark.driver.extraClassPath"] == str(local_fs_jar())


def test_a_local_connect_server_gets_the_file_system_and_a_cluster_one_does_not() -> None:
    local = " ".join(connect_server_command(15002))
    assert f"spark.hadoop.fs.file.impl={LOCAL_FILE_SYSTEM['spark.hadoop.fs.file.impl']}" in local
    assert str(local_fs_jar()) in local
    remote = " ".join(connect_server_command(15002, master="spark://somewhere:7077"))
    assert "spark.hadoop.fs.file.impl" not in remote and str(local_fs_jar()) not in remote
