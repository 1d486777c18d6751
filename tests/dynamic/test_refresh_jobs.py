"""The Spark jobs a small refresh of a small aggregate launches: a budget, held here so that a change to the plan or
the write that adds one (a broadcast is a job of its own) is seen. The shape is bench/bench_dynamic.py's: a fact
joined to a dimension, grouped into a few groups whose sums the table stores, written by one REWRITE."""

from __future__ import annotations

from typing import Any

from oracle import oracle_rows, table_rows
from dtables.testing import assert_same_rows

QUERY = ("SELECT d.region, count(*) AS n, sum(f.amount) AS total, avg(f.amount) AS mean FROM jf AS f "
         "JOIN jd AS d ON f.dim = d.dim GROUP BY d.region")


def _refreshed(dt: Any) -> Any:
    [record] = dt.refresh(["jagg"])
    assert (record.state, record.action, record.write_kind) == ("SUCCEEDED", "INCREMENTAL", "REWRITE"), record
    assert_same_rows(table_rows(dt, "jagg"), oracle_rows(dt, "jagg"))
    return record


def test_an_append_to_a_small_aggregate_is_one_job_and_so_is_a_one_row_update(dt: Any) -> None:
    dt.sql("CREATE TABLE jd (dim INT, region STRING)")
    dt.sql("INSERT INTO jd SELECT CAST(id AS INT), concat('r', CAST(id % 5 AS STRING)) FROM range(40)")
    dt.sql("CREATE TABLE jf (id BIGINT, dim INT, amount DOUBLE)")
    dt.sql("INSERT INTO jf SELECT id, CAST(id % 40 AS INT), CAST(id % 97 AS DOUBLE) FROM range(2000)")
    dt.sql(f"CREATE DYNAMIC TABLE jagg TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS {QUERY}")
    for start in (2000, 2100):  # the second refresh is the one counted: the first may pay one-time work
        dt.sql(f"INSERT INTO jf SELECT id, CAST(id % 40 AS INT), CAST(id AS DOUBLE) FROM range({start}, {start + 100})")
        appended = _refreshed(dt)
    # the change read, the dimension, the stored state and the write in one job: the 5 stored groups are
    # shuffled with the change's sums, not probed by a broadcast of them (a job more)
    assert appended.spark_jobs == 1, appended
    for i in (1, 2):
        dt.sql(f"UPDATE jf SET amount = amount + 1 WHERE id = {i * 17}")
        updated = _refreshed(dt)
    # the updated row's change data compared on the driver (``change_data``: no job) and held by it (``driver_delta``:
    # no job); the write's job reads the held rows
    assert updated.spark_jobs == 1, updated
