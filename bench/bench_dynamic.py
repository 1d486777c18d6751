"""Benchmark: INCREMENTAL vs FULL refresh of one dynamic table (fact JOIN dimension, GROUP BY) after small changes.

    .venv/bin/python bench/bench_dynamic.py --rows 2000000 --keys 50000

Two dynamic tables with the same query are created over the same sources, one REFRESH_MODE = INCREMENTAL and one
REFRESH_MODE = FULL. For each change fraction (0.01%, 0.1%, 1%, 10% of the fact rows: half updated in one clustered
range, half inserted) both are refreshed to the same data timestamp and timed side by side; the script prints the
ratio FULL / INCREMENTAL, checks both hold the same rows, and times a NO_DATA refresh.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from typing import Any

import dtables

QUERY = ("SELECT f.k, d.region, count(*) AS n, sum(f.amount) AS total, avg(f.amount) AS mean "
         "FROM fact f JOIN dims d ON f.dim = d.dim GROUP BY f.k, d.region")


def _timed(session: Any, name: str, at: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    [record] = session.refresh([name], data_timestamp=at)
    return time.perf_counter() - start, record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000, help="fact rows")
    parser.add_argument("--keys", type=int, default=50_000, help="groups of the GROUP BY")
    parser.add_argument("--dims", type=int, default=1000, help="dimension rows")
    parser.add_argument("--fractions", default="0.0001,0.001,0.01,0.1")
    parser.add_argument("--master", default="local[*]")
    args = parser.parse_args()

    session = dtables.connect(tempfile.mkdtemp(prefix="bench-dynamic-") + "/wh", master=args.master,
                              spark_conf={"spark.sql.shuffle.partitions": "8"})
    spark = session.spark
    spark.sparkContext.setLogLevel("ERROR")
    session.sql("CREATE TABLE dims (dim INT, region STRING)")
    session.sql(f"INSERT INTO dims SELECT CAST(id AS INT), concat('r', CAST(id % 17 AS STRING)) "
                f"FROM range({args.dims})")
    session.sql("CREATE TABLE fact (id BIGINT, k INT, dim INT, amount DOUBLE)")
    session.sql(f"INSERT INTO fact SELECT id, CAST(id % {args.keys} AS INT), CAST(id % {args.dims} AS INT), "
                f"CAST(id % 97 AS DOUBLE) FROM range({args.rows})")
    t0 = time.perf_counter()
    session.sql(f"CREATE DYNAMIC TABLE agg_inc TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS {QUERY}")
    t1 = time.perf_counter()
    session.sql(f"CREATE DYNAMIC TABLE agg_full TARGET_LAG = '1 hour' REFRESH_MODE = FULL AS {QUERY}")
    print(f"rows={args.rows:,} keys={args.keys:,} dims={args.dims:,}; initial refresh {t1 - t0:.1f}s")

    next_id = args.rows
    print(f"{'changed':>9} {'rows':>9} {'INCREMENTAL s':>14} {'FULL s':>8} {'FULL/INC':>9}  write")
    for fraction in (float(f) for f in args.fractions.split(",")):
        changed = max(2, int(args.rows * fraction))
        start = (next_id * 7919) % max(1, args.rows - changed)  # a clustered range, different each time
        session.sql(f"UPDATE fact SET amount = amount + 1 WHERE id >= {start} AND id < {start + changed // 2}")
        session.sql(f"INSERT INTO fact SELECT id, CAST(id % {args.keys} AS INT), CAST(id % {args.dims} AS INT), "
                    f"1.0 FROM range({next_id}, {next_id + changed - changed // 2})")
        next_id += changed
        at = dtables.dynamic.definition.now_utc()
        inc_s, inc = _timed(session, "agg_inc", at)
        full_s, full = _timed(session, "agg_full", at)
        assert (inc.action, full.action) == ("INCREMENTAL", "FULL"), (inc.action, inc.error, full.action, full.error)
        a = session.table("agg_inc").drop("__dtables_row_id")
        b = session.table("agg_full").drop("__dtables_row_id")
        assert a.exceptAll(b).isEmpty() and b.exceptAll(a).isEmpty(), "INCREMENTAL and FULL disagree"
        last = spark.sql(f"DESCRIBE HISTORY delta.`{session.catalog.lookup('agg_inc')['location']}` LIMIT 1").first()
        print(f"{fraction:>9.2%} {changed:>9,} {inc_s:>14.2f} {full_s:>8.2f} {full_s / inc_s:>9.2f}  "
              f"{last['operation']}")
    no_data_s, rec = _timed(session, "agg_inc", dtables.dynamic.definition.now_utc())
    assert rec.action == "NO_DATA"
    print(f"NO_DATA refresh: {no_data_s * 1000:.0f} ms ({no_data_s / inc_s:.3f} of the last INCREMENTAL)")
    session.close()


if __name__ == "__main__":
    import dtables.dynamic.definition  # noqa: F401  (now_utc)

    main()
