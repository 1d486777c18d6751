"""Benchmark (issue 18): users' DML with deletion vectors against copy-on-write, and change reads against a scan.

    .venv/bin/python bench/bench_deletion_vectors.py                  # 10M rows, 0.1% changed, 5 rounds per kind
    .venv/bin/python bench/bench_deletion_vectors.py --rows 1000000 --rounds 3

Two tables with the same ``--rows`` rows, created through dtables: one with deletion vectors (the default), one
copy-on-write (``delta.enableDeletionVectors = false``). For each DML kind (a scattered UPDATE, a scattered DELETE,
``--fraction`` of the rows) and each round, the same statement runs on both (timed), then the change read of that
commit on each table is counted (``SELECT count(*) FROM t CHANGES(...)``, timed), beside a read of the whole table
(``sum`` of a column, so the files are read: what a read that ignores the change would cost). The first round of
every kind warms up and is not counted; the script prints medians and ratios, and EXPLAIN of the last change read
of each table.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from typing import Any

import dtables

KINDS = ("update", "delete")


def _timed(action: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = action()
    return time.perf_counter() - start, result


def _latest_version(session: Any, table: str) -> int:
    return int(session.sql(f"DESCRIBE HISTORY {table} LIMIT 1").first()["version"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--fraction", type=float, default=0.001, help="share of rows each statement changes")
    parser.add_argument("--rounds", type=int, default=5, help="counted rounds per kind (after one warm-up)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="6g")
    args = parser.parse_args()

    session = dtables.connect(tempfile.mkdtemp(prefix="bench-dv-") + "/wh", master=args.master,
                              spark_conf={"spark.driver.memory": args.driver_memory})
    session.spark.sparkContext.setLogLevel("ERROR")
    tables = {"vectors": "t_dv", "copy-on-write": "t_cow"}
    session.sql("CREATE TABLE t_dv (id BIGINT, k INT, amount DOUBLE)")
    session.sql("CREATE TABLE t_cow (id BIGINT, k INT, amount DOUBLE) "
                "TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')")
    for table in tables.values():
        session.sql(f"INSERT INTO {table} SELECT id, CAST(id % 1000 AS INT), CAST(id % 97 AS DOUBLE) "
                    f"FROM range({args.rows})")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"commit {commit}; {args.rows:,} rows, {args.fraction:.2%} changed per statement, scattered; median of "
          f"{args.rounds} rounds after a warm-up")
    step = max(1, int(1 / args.fraction))
    header = (f"{'DML':<7} {'table':<14} | {'DML s':>6} | {'changes s':>9} {'rows':>7} | {'scan s':>6} | "
              f"{'scan/changes':>12}")
    print(header)
    print("-" * len(header))
    explained = {}
    for kind in KINDS:
        runs: dict[str, list[tuple[float, float, int, float]]] = {label: [] for label in tables}
        for i in range(args.rounds + 1):
            where = f"id % {step} = {(i * 7 + (0 if kind == 'update' else 3)) % step}"
            statement = ("UPDATE {t} SET amount = amount + 1 WHERE " if kind == "update" else
                         "DELETE FROM {t} WHERE ") + where
            for label, table in tables.items():
                before = _latest_version(session, table)
                dml_s, _ = _timed(lambda t=table, s=statement: session.sql(s.format(t=t)))
                changes = (f"SELECT count(*) FROM {table} CHANGES(INFORMATION => DEFAULT) "
                           f"AT(VERSION => {before})")
                changes_s, rows = _timed(lambda q=changes: session.sql(q).first()[0])
                # a column is summed so the files are read (a count may be answered from the log's statistics)
                scan_s, _ = _timed(lambda t=table: session.sql(f"SELECT sum(amount) FROM {t}").first()[0])
                if i:
                    runs[label].append((dml_s, changes_s, rows, scan_s))
                explained[label] = session.sql(f"EXPLAIN {changes}").first()[0]
        for label, measured in runs.items():
            dml, read, rows, scan = (statistics.median(m[j] for m in measured) for j in range(4))
            print(f"{kind:<7} {label:<14} | {dml:>6.2f} | {read:>9.2f} {rows:>7.0f} | {scan:>6.2f} | "
                  f"{scan / read:>12.2f}")
    for label, text in explained.items():
        print(f"\nEXPLAIN of the last change read, {label}:\n{text}")
    session.close()


if __name__ == "__main__":
    main()
