"""Benchmark: CHANGES over an interval vs the naive way (EXCEPT ALL of two full snapshots, both directions).

Builds a row-tracked Delta table of ``--rows`` rows (default 2,000,000) in ``--files`` files, then for each touched
fraction (0.1% and 1%) measures two shapes side by side in one run:
- ADDED_ONLY: an INSERT of that many new rows;
- MINIMIZE: an UPDATE of that many existing rows (copy-on-write rewrites the files holding them).
Prints both times and their ratio. Run: ``python bench/bench_changes.py --rows 200000``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from typing import Any

from dtables.changes import TRACKED_TABLE_PROPERTIES, Bound, read_changes, resolve_interval


def _timed(action: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    result = action()
    return time.perf_counter() - t0, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--files", type=int, default=16)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    from dtables.spark.builder import build_spark

    folder = tempfile.mkdtemp(prefix="bench_changes_")
    spark = build_spark(f"file:{folder}/wh", master=args.master)
    path = f"{folder}/t"
    table = f"delta.`{path}`"
    props = ", ".join(f"'{k}' = '{v}'" for k, v in TRACKED_TABLE_PROPERTIES.items())
    spark.sql(f"CREATE TABLE {table} (id BIGINT, k INT, s STRING, v DOUBLE) USING delta TBLPROPERTIES ({props})")
    spark.range(args.rows).selectExpr("id", "CAST(id % 1000 AS INT) k", "concat('name-', id) s", "rand(7) v") \
        .repartition(args.files).write.format("delta").mode("append").save(path)

    def naive(start: int, end: int) -> int:
        a = spark.read.format("delta").option("versionAsOf", start).load(path)
        b = spark.read.format("delta").option("versionAsOf", end).load(path)
        return a.exceptAll(b).count() + b.exceptAll(a).count()

    def changes(start: int, end: int) -> tuple[str, int]:
        read = read_changes(spark, resolve_interval(spark, table, at=Bound.version(start), end=Bound.version(end)))
        return read.shape, read.df.count()

    print(f"rows={args.rows} files={args.files} master={args.master}")
    print(f"{'fraction':>8} {'shape':>11} {'changed':>9} {'CHANGES s':>10} {'naive s':>9} {'ratio':>7}")
    version = 1
    for fraction in (0.001, 0.01):
        n = max(1, int(args.rows * fraction))
        # ADDED_ONLY: new rows appended.
        spark.range(args.rows + version * n, args.rows + version * n + n).selectExpr(
            "id", "CAST(id % 1000 AS INT) k", "concat('new-', id) s", "rand() v"
        ).write.format("delta").mode("append").save(path)
        version += 1
        # MINIMIZE: existing rows updated (every 1/fraction-th id, so the change is spread over the files).
        spark.sql(f"UPDATE {table} SET v = -v WHERE id % {int(1 / fraction)} = {version % 7}")
        version += 1
        intervals = (("ADDED_ONLY", (version - 2, version - 1)), ("MINIMIZE", (version - 1, version)))
        for shape_label, (start, end) in intervals:
            changes(start, end)  # warm up: the first Spark job of a kind compiles code
            t_changes, (shape, count) = _timed(lambda: changes(start, end))  # noqa: B023 - called at once
            t_naive, naive_count = _timed(lambda: naive(start, end))  # noqa: B023 - called at once
            assert count == naive_count, f"CHANGES gave {count} rows, EXCEPT ALL {naive_count}"
            assert shape == shape_label, shape
            print(f"{fraction:>8.1%} {shape:>11} {count:>9} {t_changes:>10.2f} {t_naive:>9.2f} "
                  f"{t_naive / t_changes:>6.1f}x")
    spark.stop()
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
