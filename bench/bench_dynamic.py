"""Benchmark: INCREMENTAL beside FULL refresh of one dynamic table (a fact joined to a dimension, grouped).

    .venv/bin/python bench/bench_dynamic.py                       # 10M fact rows, 0.1% changed, 5 rounds per kind
    .venv/bin/python bench/bench_dynamic.py --rows 1000000 --rounds 3
    .venv/bin/python bench/bench_dynamic.py --query join --conf spark.dtables.deletionVectors=false

The shape of issue 17: a fact of ``--rows`` rows joined to a ``--dims``-row dimension, grouped into ``--groups``
groups with COUNT / SUM / AVG. Two dynamic tables with the same query read the same sources, one REFRESH_MODE =
INCREMENTAL and one REFRESH_MODE = FULL. For each change kind (inserts only, updates only, deletes only, mixed, a
one-row update, and range-updates: the rows contiguous in the fact's id) and each round, the change is applied
(``--fraction`` of the fact rows, scattered except for range-updates), then both tables are refreshed to the same
data timestamp, side by side. The script prints, per kind, the median wall seconds of each, the ratio FULL /
INCREMENTAL, the Spark jobs, seconds inside jobs and on the driver, and bytes read (from the refresh history),
checks both tables hold the same rows after every round, and times a NO_DATA refresh. The first ``--warmup`` rounds
of every kind (default 1) warm up and are not counted; ``--cpu`` splits the INCREMENTAL refreshes' CPU by thread.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import dtables
from dtables.dynamic.definition import now_utc

QUERIES = {
    # a small target (one row per group), written by REWRITE
    "aggregate": "SELECT d.region, count(*) AS n, sum(f.amount) AS total, avg(f.amount) AS mean "
                 "FROM fact f JOIN dims d ON f.dim = d.dim GROUP BY d.region",
    # a target as large as the fact, written by MERGE: the dynamic table's own DML with deletion vectors or not
    "join": "SELECT f.id, f.amount, d.region FROM fact f JOIN dims d ON f.dim = d.dim",
}
KINDS = ("inserts", "updates", "deletes", "mixed", "one-row", "range-updates")


@dataclass(frozen=True)
class Timing:
    seconds: float
    action: str
    write: str | None
    jobs: int | None
    job_seconds: float | None
    driver_seconds: float | None
    bytes_read: int | None


def _refresh(session: Any, name: str, at: Any) -> Timing:
    start = time.perf_counter()
    [record] = session.refresh([name], data_timestamp=at)
    seconds = time.perf_counter() - start
    assert record.state == "SUCCEEDED", record.error
    return Timing(seconds, record.action, record.write_kind, record.spark_jobs, record.job_seconds,
                  record.driver_seconds, record.bytes_read)


class Workload:
    """Applies one round of a change kind to the fact table; ids of new rows grow, changed rows are scattered."""

    def __init__(self, session: Any, rows: int, dims: int, fraction: float) -> None:
        self.session, self.rows, self.dims, self.fraction = session, rows, dims, fraction
        self.next_id, self.round = rows, 0

    def _insert(self, n: int) -> None:
        lo, hi = self.next_id, self.next_id + n
        self.session.sql(f"INSERT INTO fact SELECT id, CAST(id % {self.dims} AS INT), CAST(id % 89 AS DOUBLE) "
                         f"FROM range({lo}, {hi})")
        self.next_id = hi

    def _scattered(self, n: int) -> str:
        """A predicate picking about n existing rows spread over the whole table (every file is touched)."""
        self.round += 1
        step = max(1, self.rows // max(1, n))
        return f"id < {self.rows} AND id % {step} = {self.round % step}"

    def apply(self, kind: str) -> None:
        n = max(1, int(self.rows * self.fraction))
        if kind == "inserts":
            self._insert(n)
        elif kind == "updates":
            self.session.sql(f"UPDATE fact SET amount = amount + 1 WHERE {self._scattered(n)}")
        elif kind == "deletes":
            self.session.sql(f"DELETE FROM fact WHERE {self._scattered(n)}")
        elif kind == "mixed":
            self._insert(n // 3)
            self.session.sql(f"UPDATE fact SET amount = amount + 1 WHERE {self._scattered(n // 3)}")
            self.session.sql(f"DELETE FROM fact WHERE {self._scattered(n // 3)}")
        elif kind == "range-updates":  # contiguous in the fact's id (a batch of recent rows corrected)
            self.round += 1
            lo = (self.round * 104_729 * n) % max(1, self.rows - n)
            self.session.sql(f"UPDATE fact SET amount = amount + 1 WHERE id >= {lo} AND id < {lo + n}")
        elif kind == "one-row":
            self.round += 1
            self.session.sql(f"UPDATE fact SET amount = amount + 1 WHERE id = {(self.round * 7919) % self.rows}")
        else:
            raise ValueError(kind)


# Thread groups of the driver's JVM by their names in /proc (Linux): where a refresh's CPU goes besides its jobs.
# "py4j" is the thread that runs the Python side's calls (Spark's analysis, optimization and planning, Delta's
# commits); "JIT" the HotSpot compilers, which keep compiling Spark's own code for many rounds.
_THREAD_GROUPS = (("JIT", ("C1 CompilerThre", "C2 CompilerThre", "Sweeper thread")),
                  ("executors", ("Executor task",)), ("GC", ("GC Thread", "G1 ")), ("py4j", ("Thread-",)))


def _thread_cpu(pid: int) -> dict[str, float] | None:
    """CPU seconds by thread group of process ``pid`` so far (None where /proc cannot tell)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                name, rest = f.read().split(" (", 1)[1].rsplit(") ", 1)
        except OSError:
            continue  # the thread ended
        fields = rest.split()
        group = next((g for g, prefixes in _THREAD_GROUPS if name.startswith(prefixes)), "other JVM")
        out[group] = out.get(group, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


class CpuSplit:
    """CPU seconds of the driver's JVM by thread group, and of this Python process, over the calls it wraps."""

    def __init__(self, session: Any) -> None:
        jvm = session.spark.sparkContext._jvm
        self.pid = int(jvm.java.lang.ProcessHandle.current().pid())
        self.rounds: list[dict[str, float]] = []

    def measure(self, call: Any) -> Any:
        before, py = _thread_cpu(self.pid), time.process_time()
        result = call()
        after = _thread_cpu(self.pid)
        if before is not None and after is not None:
            split = {g: after.get(g, 0.0) - before.get(g, 0.0) for g in after}
            self.rounds.append({**split, "python": time.process_time() - py})
        return result

    def medians(self) -> str:
        if not self.rounds:
            return "-"
        groups = ("py4j", "JIT", "executors", "GC", "other JVM", "python")
        return ", ".join(f"{g} {statistics.median(r.get(g, 0.0) for r in self.rounds):.2f}" for g in groups)


def _same_rows(session: Any) -> None:
    a = session.table("agg_inc").drop("__dtables_row_id")
    b = session.table("agg_full").drop("__dtables_row_id")
    a = a.select(*b.columns)
    assert a.exceptAll(b).isEmpty() and b.exceptAll(a).isEmpty(), "INCREMENTAL and FULL disagree"


def _fmt(v: float | None, spec: str = ".2f") -> str:
    return "-" if v is None else format(v, spec)


def _median(values: list[Any]) -> Any:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000, help="fact rows")
    parser.add_argument("--dims", type=int, default=1000, help="dimension rows")
    parser.add_argument("--groups", type=int, default=50, help="groups of the GROUP BY (regions)")
    parser.add_argument("--fraction", type=float, default=0.001, help="share of fact rows each round changes")
    parser.add_argument("--rounds", type=int, default=5, help="counted rounds per kind (after the warm-up)")
    parser.add_argument("--warmup", type=int, default=1, help="rounds per kind before the counted ones")
    # Where an INCREMENTAL refresh's CPU goes: the driver JVM's threads (py4j, JIT compilers, executors, GC) and
    # this process, from /proc (Linux), median per counted round
    parser.add_argument("--cpu", action="store_true", help="print the CPU split of the INCREMENTAL refreshes")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="6g")
    parser.add_argument("--conf", action="append", default=[], help="KEY=VALUE for the dtables session")
    parser.add_argument("--query", choices=sorted(QUERIES), default="aggregate")
    # A read of a table between two refreshes makes Delta build its snapshot's state, which the next refresh's
    # commit then finds built: "every" hides from the refresh what a table nobody reads in between pays.
    parser.add_argument("--check", choices=("every", "last"), default="every",
                        help="compare the two tables after every round, or after each kind's last round only")
    # Many rounds with --each show when the JVM's JIT has warmed: a daemon refreshes long after its first rounds.
    parser.add_argument("--each", action="store_true", help="print every round's INCREMENTAL and FULL seconds")
    args = parser.parse_args()

    conf = {"spark.driver.memory": args.driver_memory, **dict(c.split("=", 1) for c in args.conf)}
    session = dtables.connect(tempfile.mkdtemp(prefix="bench-dynamic-") + "/wh", master=args.master, spark_conf=conf)
    session.spark.sparkContext.setLogLevel("ERROR")
    session.sql("CREATE TABLE dims (dim INT, region STRING)")
    session.sql(f"INSERT INTO dims SELECT CAST(id AS INT), concat('r', CAST(id % {args.groups} AS STRING)) "
                f"FROM range({args.dims})")
    session.sql("CREATE TABLE fact (id BIGINT, dim INT, amount DOUBLE)")
    session.sql(f"INSERT INTO fact SELECT id, CAST(id % {args.dims} AS INT), CAST(id % 97 AS DOUBLE) "
                f"FROM range({args.rows})")
    query = QUERIES[args.query]
    session.sql(f"CREATE DYNAMIC TABLE agg_inc TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS {query}")
    session.sql(f"CREATE DYNAMIC TABLE agg_full TARGET_LAG = '1 hour' REFRESH_MODE = FULL AS {query}")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    vectors = conf.get("spark.dtables.deletionVectors", "true")
    print(f"commit {commit}; query {args.query}; deletion vectors {vectors}; "
          f"fact {args.rows:,} rows, dims {args.dims:,}, {args.groups} groups, "
          f"{args.fraction:.2%} changed per round, median of {args.rounds} rounds after {args.warmup} warm-up")

    work = Workload(session, args.rows, args.dims, args.fraction)
    header = (f"{'change':<8} | {'INC s':>6} {'jobs':>4} {'in jobs':>7} {'driver':>6} {'MB read':>8} {'write':<8}"
              f" | {'FULL s':>6} {'jobs':>4} | {'FULL/INC':>8}")
    print(header)
    print("-" * len(header))
    last_inc = None
    for kind in args.kinds.split(","):
        inc_runs, full_runs = [], []
        cpu = CpuSplit(session) if args.cpu else None
        for i in range(args.rounds + args.warmup):
            work.apply(kind)
            at = now_utc()
            counted = i >= args.warmup
            inc = (cpu.measure(lambda at=at: _refresh(session, "agg_inc", at)) if cpu is not None and counted
                   else _refresh(session, "agg_inc", at))
            full = _refresh(session, "agg_full", at)
            assert (inc.action, full.action) == ("INCREMENTAL", "FULL"), (inc.action, full.action)
            if args.check == "every" or i == args.rounds + args.warmup - 1:
                _same_rows(session)
            if args.each:
                print(f"{kind:<8}   round {i:>3}: INC {inc.seconds:6.2f} s ({inc.jobs} jobs) "
                      f"FULL {full.seconds:6.2f} s")
            if counted:
                inc_runs.append(inc)
                full_runs.append(full)
        last_inc = inc_runs[-1]
        inc_s, full_s = _median([r.seconds for r in inc_runs]), _median([r.seconds for r in full_runs])
        mb = _median([r.bytes_read for r in inc_runs])
        print(f"{kind:<8} | {inc_s:>6.2f} {_fmt(_median([r.jobs for r in inc_runs]), '.0f'):>4} "
              f"{_fmt(_median([r.job_seconds for r in inc_runs])):>7} "
              f"{_fmt(_median([r.driver_seconds for r in inc_runs])):>6} "
              f"{_fmt(mb / 1e6 if mb is not None else None, '.1f'):>8} {inc_runs[-1].write or '-':<8}"
              f" | {full_s:>6.2f} {_fmt(_median([r.jobs for r in full_runs]), '.0f'):>4} | {full_s / inc_s:>8.2f}")
        if cpu is not None:
            print(f"{'':<8}   CPU s per INCREMENTAL refresh: {cpu.medians()}")
    start = time.perf_counter()
    [record] = session.refresh(["agg_inc"], data_timestamp=now_utc())
    assert record.action == "NO_DATA"
    no_data = time.perf_counter() - start
    print(f"NO_DATA refresh: {no_data * 1000:.0f} ms" + (f" (last INCREMENTAL {last_inc.seconds:.2f} s)"
                                                        if last_inc else ""))
    session.close()


if __name__ == "__main__":
    main()
