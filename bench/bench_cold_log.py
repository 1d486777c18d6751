"""What a longer checkpoint interval costs a dynamic table's readers: the first read from a cold log cache.

    .venv/bin/python bench/bench_cold_log.py

A 50-row table is overwritten once per commit (as a small dynamic table is by its refreshes) with Delta's checkpoint
interval at 10 and at 100; after ``DeltaLog.clearCache()`` the script times a sum over the table (median of 12 after
3), right after a checkpoint and with 9 or 99 commits after the last one, all in one process.
"""

from __future__ import annotations

import statistics
import tempfile
import time

from dtables.spark.builder import build_spark


def main() -> None:
    spark = build_spark(tempfile.mkdtemp(), master="local[2]")
    spark.sparkContext.setLogLevel("ERROR")

    def table(interval: int, commits: int) -> str:
        path = tempfile.mkdtemp() + "/t"
        spark.range(50).selectExpr("id", "CAST(id AS DOUBLE) AS v").write.format("delta").save(path)
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.checkpointInterval' = '{interval}')")
        for i in range(commits - 2):
            spark.range(50).selectExpr("id", f"CAST(id + {i} AS DOUBLE) AS v").write.format("delta") \
                .mode("overwrite").save(path)
        return path

    def cold_read(path: str) -> float:
        seconds = []
        for _ in range(15):
            spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
            start = time.perf_counter()
            spark.read.format("delta").load(path).agg({"v": "sum"}).collect()
            seconds.append(time.perf_counter() - start)
        return statistics.median(seconds[3:])

    for interval, commits in ((10, 101), (100, 101), (10, 110), (100, 200)):
        tail = (commits - 1) % interval
        print(f"interval {interval:>3}, {commits} commits, {tail:>2} after the last checkpoint: "
              f"cold read {cold_read(table(interval, commits)) * 1000:.0f} ms", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
