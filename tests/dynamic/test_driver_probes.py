"""Key probes of held change rows computed on the driver (`keys._probed_on_driver`): the same rows as Spark's
`probe_query` over the same change rows, and no Spark job for a refresh whose change reads the driver holds."""

from __future__ import annotations

import datetime
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import oracle_rows, table_rows

from differentiation import KeyProbe
from differentiation.vocabulary import ACTION, DELETE, INSERT
from dtables.changes import keys
from dtables.sql.dialect import to_spark
from dtables.testing import assert_same_rows

_TYPES = {"bigint": st.integers(-5, 40), "int": st.integers(-3, 12),
          "date": st.dates(datetime.date(1999, 12, 25), datetime.date(2000, 1, 8))}
_ROWS = st.lists(st.tuples(st.none() | st.just(0), st.sampled_from([INSERT, DELETE])), max_size=30)


@st.composite
def _cases(draw: Any) -> tuple[str, dict[str, list[tuple[Any, str]]], list[KeyProbe]]:
    type_ = draw(st.sampled_from(sorted(_TYPES)))
    values = _TYPES[type_]
    tables = {t: [(draw(st.none() | values), a) for _, a in draw(_ROWS)] for t in ("a", "b", "p")}
    probes = []
    for _ in range(draw(st.integers(1, 3))):
        reads = tuple((t, "k") for t in draw(st.lists(st.sampled_from(["a", "b"]), min_size=1, max_size=2,
                                                      unique=True)))
        absent = (("p", "k"),) if draw(st.booleans()) else ()
        settled = (("p", "k"),) if draw(st.booleans()) else ()
        probes.append(KeyProbe(reads, type_, absent, draw(st.sampled_from(["start", "end"])), settled))
    return type_, tables, probes


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_cases())
def test_keys_found_on_the_driver_are_those_spark_finds(spark: Any, case: Any) -> None:
    # NULL keys, duplicates, both actions, keys proved absent and settled by another table's change, every end
    type_, tables, probes = case
    frames = {t: spark.createDataFrame(rows, f"k {type_}, {ACTION} string") for t, rows in tables.items()}
    for t, df in frames.items():
        df.createOrReplaceTempView(f"probe_{t}")
    expected = [r.asDict() for r in spark.sql(to_spark(keys.probe_query(probes, lambda t: f"probe_{t}"))).collect()]
    rows = {t: [tuple(r) for r in df.collect()] for t, df in frames.items()}
    found = keys._probed_on_driver(probes, lambda t, columns: rows.get(t) if columns == ["k"] else None)
    assert found is not None
    assert sorted(found, key=lambda r: r["probe"]) == sorted(expected, key=lambda r: r["probe"])
    # rows the driver does not have, or keys of a type it does not order as Spark does, are left to Spark
    assert keys._probed_on_driver(probes, lambda t, columns: None) is None
    assert keys._probed_on_driver([KeyProbe((("a", "k"),), "string")], lambda t, c: rows.get(t)) is None


def test_a_refresh_over_change_rows_the_driver_has_probes_without_a_job(dt: Any) -> None:
    # RELY keys make the probes inexact from the statistics (keys settled by the orders' change), so they read keys
    dt.spark.conf.set(keys.MIN_BYTES, "0")
    dt.spark.conf.set(keys.MAX_FRACTION, "1")
    try:
        dt.sql("CREATE TABLE o (ok BIGINT NOT NULL, st STRING, PRIMARY KEY (ok) RELY)")
        dt.sql("CREATE TABLE l (lk BIGINT, qty INT, CONSTRAINT l_o FOREIGN KEY (lk) REFERENCES o RELY)")
        for b in range(4):  # files of disjoint ranges of even keys, so that the keys skip some and odd ones are new
            dt.sql(f"INSERT INTO o SELECT id * 2, IF(id % 3 = 0, 'F', 'O') FROM range({b * 500}, {(b + 1) * 500})")
            dt.sql(f"INSERT INTO l SELECT (id DIV 3) * 2, CAST(id % 11 AS INT) FROM range({b * 1500}, "
                   f"{(b + 1) * 1500})")
        dt.sql("CREATE DYNAMIC TABLE j TARGET_LAG = '1 minute' REFRESH_MODE = INCREMENTAL AS "
               "SELECT o.ok, o.st, l.qty FROM o JOIN l ON o.ok = l.lk WHERE l.qty > 3")
        seen = []
        spied = keys._probed_on_driver

        def spy(probes: Any, held: Any) -> Any:
            seen.append(spied(probes, held))
            return seen[-1]

        keys._probed_on_driver = spy  # type: ignore[assignment]
        try:
            # orders with their lines deleted (rows the driver picks by deletion vector and holds), then inserted
            # (new files, read by pyarrow)
            for dml in ("DELETE FROM o WHERE ok IN (4, 2404); DELETE FROM l WHERE lk IN (4, 2404)",
                        "INSERT INTO o VALUES (7, 'N'), (2407, 'N'); INSERT INTO l VALUES (7, 5), (2407, 6), (7, 9)"):
                dt.sql(dml)
                seen.clear()
                [record] = dt.refresh("j")
                assert (record.state, record.action) == ("SUCCEEDED", "INCREMENTAL"), record.error
                assert_same_rows(table_rows(dt, "j"), oracle_rows(dt, "j"))
                assert seen and all(rows is not None for rows in seen), (dml, seen)
                reads = {(r["table"], r["at"]): (r["files"], r["of"]) for r in json.loads(record.pruning or "[]")}
                assert reads and all(files < of for files, of in reads.values()), reads
        finally:
            keys._probed_on_driver = spied  # type: ignore[assignment]
    finally:
        dt.spark.conf.unset(keys.MIN_BYTES)
        dt.spark.conf.unset(keys.MAX_FRACTION)
