"""The driver's Hadoop configuration without its record of setting sources (dtables.spark.hadoop_sources)."""

from __future__ import annotations

from typing import Any

from dtables.spark.hadoop_sources import DROP_SOURCES, drop_property_sources


def _sources(spark: Any) -> Any:
    field = spark._jvm.java.lang.Class.forName("org.apache.hadoop.conf.Configuration").getDeclaredField(
        "updatingResource")
    field.setAccessible(True)
    return field.get(spark._jsc.hadoopConfiguration())


def _serialized_bytes(conf: Any, spark: Any) -> int:
    out = spark._jvm.java.io.ByteArrayOutputStream()
    conf.write(spark._jvm.java.io.DataOutputStream(out))
    return int(out.size())


def test_a_session_serializes_its_settings_without_their_sources(spark: Any, tmp_path: Any) -> None:
    base = spark._jsc.hadoopConfiguration()
    # build_spark dropped them; the file scans since (Delta's, the run's other tests) did not bring them back
    assert _sources(spark).size() == 0
    spark.range(5).write.parquet(str(tmp_path / "p"))
    assert spark.read.parquet(str(tmp_path / "p")).count() == 5
    assert _sources(spark).size() == 0
    # every value is still there (a default from core-default.xml, one Spark set)
    assert base.size() > 500
    assert base.get("io.file.buffer.size") == "65536"
    # a session's own copy, as each scan broadcasts it: the values alone, each without a GZIP'd list of sources
    copy = spark._jsparkSession.sessionState().newHadoopConf()
    with_sources = spark._jvm.org.apache.hadoop.conf.Configuration()  # loads the defaults, sources included
    assert copy.getPropertySources("io.file.buffer.size") is None
    assert list(with_sources.getPropertySources("io.file.buffer.size")) == ["core-default.xml"]
    assert _serialized_bytes(copy, spark) < 0.8 * _serialized_bytes(with_sources, spark)


def test_the_setting_keeps_the_sources(spark: Any) -> None:
    spark.conf.set(DROP_SOURCES, "false")
    try:
        assert drop_property_sources(spark) is False
    finally:
        spark.conf.unset(DROP_SOURCES)
    assert drop_property_sources(spark) is True
