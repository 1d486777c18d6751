"""Benchmark: how many dynamic tables one daemon keeps within their target lag, and the scheduling cost per tick.

    .venv/bin/python bench/bench_scheduler.py --lag 60 --sizes 4,8,16,32 --duration 300

Part 1, overhead per tick: with N fresh tables, the time the daemon spends per tick outside refreshes (re-reading
definitions, measured durations and failure state from the state store, probing refresh locks, planning the tick)
is timed and printed as a ratio to one NO_DATA refresh timed in the same run (the cheapest refresh there is: no
Spark job, only Delta-log reads and history I/O); so is writing a history record per table (a tick that skips).

Part 2, capacity: N independent dynamic tables (``SELECT k, count(*), sum(v) FROM src_i GROUP BY k``, spread over
a few source tables) with the same target lag, while a writer thread inserts into the sources at a steady rate
(``--change-every`` seconds). The daemon runs ``--duration`` seconds per N; afterwards the refresh history gives each
table's share of time within its lag (``scheduler.lag``), counted from the moment every table had its first refresh.
N grows until the mean share drops below ``--within``; the largest N above it is the answer on this machine.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from typing import Any

import dtables
from dtables.daemon import DaemonOptions, WarehouseDaemon
from dtables.daemon.failures import record_not_refreshed
from dtables.dynamic import definition as defs
from dtables.dynamic import history
from dtables.dynamic.executor import refresh
from scheduler.lag import RefreshRecord, lag_metrics
from scheduler.runner import TableRunResult, TickResult
from scheduler.vocabulary import RefreshState

SOURCES = 4


def _setup(spark: Any, tables: int, lag_s: int) -> Any:
    """A fresh warehouse (on the run's one Spark) with the sources and ``tables`` dynamic tables."""
    session = dtables.connect(tempfile.mkdtemp(prefix="bench-scheduler-") + "/wh", spark=spark)
    for i in range(SOURCES):
        session.sql(f"CREATE TABLE src_{i} (k INT, v DOUBLE)")
        session.sql(f"INSERT INTO src_{i} SELECT CAST(id % 50 AS INT), CAST(id AS DOUBLE) FROM range(1000)")
    for j in range(tables):
        session.sql(f"CREATE DYNAMIC TABLE dt_{j} TARGET_LAG = '{lag_s} seconds' INITIALIZE = ON_SCHEDULE AS "
                    f"SELECT k, count(*) AS n, sum(v) AS total FROM src_{j % SOURCES} GROUP BY k")
    return session


def _tick_overhead_s(daemon: WarehouseDaemon, reps: int) -> tuple[float, float]:
    """Mean seconds of the daemon's own work per tick: (re-read the store + probe locks + plan, write one history
    record per table as a tick where every table is SKIPPED does)."""
    names = daemon.snapshot.dag.topological_order()
    planning, recording = [], []
    for _ in range(reps):
        start = time.perf_counter()
        daemon._reload()
        states = daemon._load_states()
        plan = daemon.planner.plan_tick(states)
        planned = time.perf_counter()
        result = TickResult(plan.data_timestamp, "SCHEDULED",
                            tuple(TableRunResult(n, RefreshState.SKIPPED, error="bench") for n in names))
        record_not_refreshed(daemon.session.store, result, result.results)
        planning.append(planned - start)
        recording.append(time.perf_counter() - planned)
    return statistics.mean(planning), statistics.mean(recording)


def overhead(spark: Any, args: argparse.Namespace) -> None:
    print("scheduling overhead per tick, against one NO_DATA refresh: plan = re-read definitions, durations and "
          "failure state,\nprobe refresh locks, plan; record = one history record per table (a tick of SKIPPED tables)")
    print(f"{'tables':>7} {'plan ms':>8} {'plan/NO_DATA':>13} {'record ms/table':>16} {'NO_DATA ms':>11}")
    for n in (int(s) for s in args.overhead_sizes.split(",")):
        session = _setup(spark, n, args.lag)
        at = defs.now_utc()
        refresh(session, [f"dt_{j}" for j in range(n)], trigger="SCHEDULED", data_timestamp=at)  # all fresh
        baseline = []
        for _ in range(5):
            start = time.perf_counter()
            [record] = refresh(session, ["dt_0"], trigger="SCHEDULED", with_upstreams=False)
            baseline.append(time.perf_counter() - start)
            assert record.action == "NO_DATA", record
        daemon = WarehouseDaemon(session, DaemonOptions(base_period_s=1.0))
        plan_s, record_s = _tick_overhead_s(daemon, reps=10)
        no_data_s = statistics.mean(baseline)
        print(f"{n:>7} {plan_s * 1000:>8.1f} {plan_s / no_data_s:>13.2f} {record_s * 1000 / n:>16.2f} "
              f"{no_data_s * 1000:>11.1f}")
        daemon.runner.close()


def _writer(session: Any, every_s: float, stop: threading.Event) -> None:
    i = 0
    while not stop.wait(every_s):
        session.sql(f"INSERT INTO src_{i % SOURCES} VALUES ({i % 50}, {i}.5)")
        i += 1


def capacity(spark: Any, args: argparse.Namespace) -> None:
    print(f"\ncapacity: independent tables with TARGET_LAG = {args.lag} s, one INSERT every {args.change_every:g} s, "
          f"{args.duration:g} s per size, max parallel {args.max_parallel}")
    print(f"{'tables':>7} {'mean within':>12} {'min within':>11} {'mean lag s':>11} {'max lag s':>10} "
          f"{'refreshes':>10} {'skipped':>8}")
    best = 0
    for n in (int(s) for s in args.sizes.split(",")):
        session = _setup(spark, n, args.lag)
        daemon = WarehouseDaemon(session, DaemonOptions(max_parallel=args.max_parallel,
                                                        base_period_s=args.base_period))
        stop = threading.Event()
        writer = threading.Thread(target=_writer, args=(session, args.change_every, stop), daemon=True)
        runner = threading.Thread(target=daemon.run, daemon=True)
        writer.start()
        runner.start()
        time.sleep(args.duration)
        end = defs.now_utc()
        daemon.stop()
        stop.set()
        runner.join()
        writer.join()
        shares, means, maxes, count, skipped = [], [], [], 0, 0
        records = {f"default.dt_{j}": history.records(session.store, f"dt_{j}") for j in range(n)}
        firsts = [next((r.ended_at for r in rs if r.state == "SUCCEEDED"), None) for rs in records.values()]
        if any(f is None for f in firsts) or max(firsts) >= end:  # type: ignore[type-var,operator]
            print(f"{n:>7}  not every table got its first refresh within {args.duration:g} s")
            break
        start = max(firsts)  # type: ignore[type-var]
        for rs in records.values():
            m = lag_metrics([RefreshRecord(r.data_timestamp, r.ended_at, r.state) for r in rs if r.ended_at],
                            window_start=start, now=end, target_lag_s=float(args.lag))
            shares.append(m.within_target_share or 0.0)
            means.append(m.mean_lag_s or 0.0)
            maxes.append(m.max_lag_s or 0.0)
            count += m.refreshes_in_window
            skipped += sum(1 for r in rs if r.state == "SKIPPED")
        mean_share = statistics.mean(shares)
        print(f"{n:>7} {mean_share:>12.1%} {min(shares):>11.1%} {statistics.mean(means):>11.1f} {max(maxes):>10.1f} "
              f"{count:>10} {skipped:>8}")
        if mean_share < args.within:
            break
        best = n
    print(f"largest size tried with mean share within lag >= {args.within:.0%}: {best} table(s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lag", type=int, default=60, help="target lag of every table, seconds")
    parser.add_argument("--sizes", default="4,8,16,32,64", help="numbers of tables for the capacity part")
    parser.add_argument("--overhead-sizes", default="1,10,30", help="numbers of tables for the overhead part")
    parser.add_argument("--duration", type=float, default=300.0, help="seconds the daemon runs per size")
    parser.add_argument("--change-every", type=float, default=2.0, help="seconds between source INSERTs")
    parser.add_argument("--within", type=float, default=0.95, help="mean share within lag that counts as kept")
    parser.add_argument("--max-parallel", type=int, default=2)
    parser.add_argument("--base-period", type=float, default=None, help="default: chosen from the lag")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--skip-capacity", action="store_true")
    args = parser.parse_args()
    root = dtables.connect(tempfile.mkdtemp(prefix="bench-scheduler-") + "/wh", master=args.master,
                           spark_conf={"spark.sql.shuffle.partitions": "2"})
    root.spark.sparkContext.setLogLevel("ERROR")
    overhead(root.spark, args)
    if not args.skip_capacity:
        capacity(root.spark, args)
    root.close()


if __name__ == "__main__":
    main()
