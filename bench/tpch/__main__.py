"""python -m bench.tpch --sf 1 [--queries 1,3,...] [--batches rf1,rf2,update] [--skip-pipelines]

Generates TPC-H data, loads it through dtables, creates a dynamic table per query (AUTO, plus a FULL twin) and a
Spark Declarative Pipelines project with the same queries as materialized views, then for each batch applies it,
refreshes each mode's tables in a pass of its own (AUTO, the INCREMENTAL twins, the FULL twins, each starting from
what the process kept before the batch), runs the pipelines, checks every dynamic table against its query
evaluated from scratch, and reports seconds, Spark jobs, rows touched and ratios (stdout table, CSV, PNG). With
`--repeat N` the batches are applied N times and each query's median is reported; the modes' passes take turns at
refreshing first after a batch.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import dtables
from bench.tpch import datagen, dynamic, load, pipelines, refresh_functions, report, workload
from dtables.changes import scan, shared_reads
from dtables.dynamic.definition import now_utc
from dtables.spark.builder import LOCAL_DEFAULTS


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.tpch", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sf", type=float, default=1.0, help="scale factor (0.01, 0.1, 1, 10...)")
    p.add_argument("--queries", help="comma-separated query numbers (default: all 22)")
    p.add_argument("--batches", default=",".join(refresh_functions.BATCHES),
                   help="comma-separated batches, in order: rf1, rf2, update")
    p.add_argument("--skip-pipelines", action="store_true", help="leave out Spark Declarative Pipelines")
    p.add_argument("--rewritten", action="store_true",
                   help="the hand-rewritten variants (queries/qNN.dt.sql) instead of TPC-H's text, for comparison")
    p.add_argument("--no-keys", action="store_true",
                   help="leave the specification's keys undeclared (by default they are declared RELY)")
    p.add_argument("--incremental-twin", action="store_true",
                   help="also a REFRESH_MODE = INCREMENTAL twin per query, to compare AUTO (and its cost model) "
                        "with the faster of INCREMENTAL and FULL in the same run")
    p.add_argument("--warmup", nargs="?", type=int, const=1, default=0, metavar="ROUNDS",
                   help="apply the batches ROUNDS times first (1 if not given; other rows), refresh every table and "
                        "check it after the last round, and report only the batches after them: both modes then run "
                        "warm (Spark's generated classes compiled, the JIT warm), as a warehouse refreshed on a "
                        "schedule does; without it every INCREMENTAL refresh of a batch kind is its first. The JIT "
                        "keeps compiling Spark's code for about ten refreshes of a table (bench/README.md, \"Steady "
                        "state\"), so more rounds come closer to a warehouse refreshed all day")
    p.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="apply the batches N times (other rows each time) and report each query's median over the N "
                        "(results.csv; every round in rounds.csv). A single pass per batch measures each sub-second "
                        "refresh once, and at SF 1 two passes of the same plans differ by -30%% to +60%% per query. "
                        "The order of the passes turns round from batch to batch and round to round, so no mode "
                        "always refreshes first after a batch. Tables are checked after the last round's batches")
    p.add_argument("--skip-check", action="store_true", help="leave out the equality check after each batch")
    p.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "tpch-data",
                   help="where generated data is cached (one folder per scale factor)")
    p.add_argument("--work-dir", type=Path, help="warehouse, pipeline project and results (default: a new /tmp dir)")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default=LOCAL_DEFAULTS["spark.driver.memory"],
                   help="driver memory of the dtables session and of the pipelines' Connect server (e.g. 12g at SF 10)")
    p.add_argument("--shuffle-partitions", type=int, default=int(LOCAL_DEFAULTS["spark.sql.shuffle.partitions"]),
                   help="spark.sql.shuffle.partitions for both systems (more at SF 10 so partitions fit in memory)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="a Spark setting for the dtables session (repeatable), e.g. to compare dtables options")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error("--repeat takes a count of at least 1")
    for c in args.conf:
        if "=" not in c:
            p.error(f"--conf takes KEY=VALUE, not {c!r}")
    for b in args.batches.split(","):
        if b not in refresh_functions.BATCHES:
            p.error(f"unknown batch {b!r}: choose among {', '.join(refresh_functions.BATCHES)}")
    return args


def _say(text: str) -> None:
    print(text, flush=True)


def _check(session: object, query: workload.Query, name: str, batch: str, failures: list[str]) -> None:
    """The table equals its query from scratch, else a failure recorded and said."""
    try:
        dynamic.check(session, query, name)
    except AssertionError as e:
        failures.append(f"{batch} {name}: {str(e)[:500]}")
        _say(f"  EQUALITY FAILED {failures[-1]}")


Pass = tuple[str, Callable[[workload.Query], str]]


def _passes(incremental_twin: bool) -> list[Pass]:
    """Each mode's pass: its name and the table it refreshes for a query."""
    return [("auto", lambda q: dynamic.names(q)[0]),
            *((("forced", dynamic.incremental_twin),) if incremental_twin else ()),
            ("full", lambda q: dynamic.names(q)[1])]


def _rotated(passes: list[Pass], turn: int) -> list[Pass]:
    """The passes in the order of `turn`: the first goes last once per turn."""
    k = turn % len(passes)
    return passes[k:] + passes[:k]


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix=f"tpch-sf{args.sf:g}-"))
    work.mkdir(parents=True, exist_ok=True)
    queries = workload.select(args.queries, args.rewritten)
    batches = args.batches.split(",")

    t = time.perf_counter()
    data = datagen.generate(args.sf, args.data_dir)
    _say(f"data: SF {args.sf:g} in {data} ({time.perf_counter() - t:.1f} s)")
    # Spark's scratch space inside the work folder: other jobs on a shared machine may clean /tmp
    session = dtables.connect(work / "warehouse", master=args.master,
                              spark_conf={"spark.local.dir": str(work / "spark-local"),
                                          "spark.driver.memory": args.driver_memory,
                                          "spark.sql.shuffle.partitions": str(args.shuffle_partitions),
                                          **dict(c.split("=", 1) for c in args.conf)})
    t = time.perf_counter()
    counts = load.load(session, data, keys=not args.no_keys)
    _say(f"loaded {sum(counts.values()):,} rows ({counts['lineitem']:,} lineitem) in {time.perf_counter() - t:.1f} s")

    modes: dict[str, tuple[str, str | None]] = {}
    for q in queries:
        t = time.perf_counter()
        dynamic.create(session, q, forced_incremental=args.incremental_twin)
        modes[q.name] = dynamic.chosen_mode(session, q.name)
        _say(f"{q.name}: AUTO chose {modes[q.name][0]}{' (' + modes[q.name][1] + ')' if modes[q.name][1] else ''}; "
             f"created with its FULL twin in {time.perf_counter() - t:.1f} s")

    spec = None
    if not args.skip_pipelines:
        locations = {t: session.catalog.lookup(t)["location"] for t in counts}
        spec = pipelines.write_project(work / "pipeline", queries, locations, args.shuffle_partitions)
        first = pipelines.run(spec, "initial", args.driver_memory)
        _say(f"spark-pipelines initial run: {first.seconds:.1f} s, exit {first.returncode} {first.error}")

    rows: list[report.Row] = []
    batch_rows: dict[str, int] = {}
    sdp_totals: dict[str, list[float]] = {}
    failures: list[str] = []
    for r in range(args.warmup):
        last = r == args.warmup - 1
        for i, batch in enumerate(batches):
            t = time.perf_counter()
            refresh_functions.apply(session, batch, seed=2000 + 100 * r + i)
            at = now_utc()
            for q in queries:
                twin = (dynamic.incremental_twin(q),) if args.incremental_twin else ()
                for name in dynamic.names(q) + twin:
                    dynamic.refresh(session, name, at)
                    if last and not args.skip_check:
                        _check(session, q, name, f"warm-up {batch}", failures)
            _say(f"warm-up {r + 1} {batch}: applied and refreshed in {time.perf_counter() - t:.1f} s")
    for r, (i, batch) in ((r, b) for r in range(args.repeat) for b in enumerate(batches)):
        last = r == args.repeat - 1
        t = time.perf_counter()
        changed = refresh_functions.apply(session, batch, seed=1000 + 100 * r + i)
        batch_rows[batch] = changed.rows
        _say(f"\n{batch}{f' (round {r + 1} of {args.repeat})' if args.repeat > 1 else ''}: {changed.orders:,} orders "
             f"and {changed.lineitems:,} lineitems in {time.perf_counter() - t:.1f} s")
        at = now_utc()
        # Each mode refreshes every query in a pass of its own, and what the pass kept for the batch's intervals
        # (change reads, snapshot plans, facts about versions: ``shared_reads``; decoded deletion vectors) is
        # forgotten before the next one: every mode pays the batch's first reads, as a warehouse that holds only
        # that mode's tables would. The passes take turns at going first: the first after a batch also pays what
        # the process learns once per source version (the Delta logs' new snapshots), which no forgetting undoes.
        before, vectors = shared_reads.remembered(session.spark), scan.vectors_decoded()
        passes: dict[str, dict[str, dynamic.Refresh]] = {}
        for mode, table_of in _rotated(_passes(args.incremental_twin), r + i):
            passes[mode] = {q.name: dynamic.refresh(session, table_of(q), at) for q in queries}
            shared_reads.forget_since(session.spark, before)
            scan.forget_vectors_since(vectors)
        done = []
        for q in queries:
            auto, full = dynamic.names(q)
            inc, rec, forced = passes["auto"][q.name], passes["full"][q.name], passes.get("forced", {}).get(q.name)
            if last and not args.skip_check:
                for name in (auto, full) + ((dynamic.incremental_twin(q),) if forced else ()):
                    _check(session, q, name, batch, failures)
            size = session.table(auto).count()
            done.append((q, inc, rec, size, forced))
            _say(f"  {q.name}: {inc.action} {inc.seconds:.2f} s ({inc.jobs} jobs, {inc.rows_touched} rows) | "
                 f"FULL {rec.seconds:.2f} s ({rec.jobs} jobs)" + (f" | files read by key: {inc.pruned}"
                                                                   if inc.pruned else "")
                 + (f" | INCREMENTAL twin {forced.seconds:.2f} s ({forced.jobs} jobs)" if forced else ""))
        sdp = None
        if spec is not None:
            sdp = pipelines.run(spec, batch, args.driver_memory)
            sdp_totals.setdefault(batch, []).append(sdp.seconds)
            _say(f"  spark-pipelines run: {sdp.seconds:.1f} s, exit {sdp.returncode} {sdp.error}")
        for q, inc, rec, size, forced in done:
            rows.append(report.Row(
                batch, q.name, modes[q.name][0], inc.action, modes[q.name][1] or inc.reason or "", inc.seconds,
                inc.jobs, inc.rows_touched, rec.seconds, rec.jobs, rec.rows_touched,
                sdp.flows.get(q.name) if sdp else None, size, inc.pruned,
                forced.seconds if forced else None, forced.action if forced else None, r + 1))

    title = f"TPC-H SF {args.sf:g}, {args.master}"
    medians = report.medians(rows)
    if args.repeat > 1:
        _say(f"\nmedians over {args.repeat} rounds")
    report.print_table(medians, batch_rows, {b: statistics.median(s) for b, s in sdp_totals.items()})
    report.print_auto(medians, rows)
    report.write_csv(medians, work / "results.csv")
    report.write_png(medians, work / "results.png", title)
    if args.repeat > 1:
        report.write_csv(rows, work / "rounds.csv")
    _say(f"\nCSV {work / 'results.csv'}{'' if args.repeat == 1 else ' (every round: rounds.csv)'}; "
         f"chart {work / 'results.png'}")
    not_incremental = sorted({r.query for r in rows if r.action != "INCREMENTAL"})
    if not_incremental:
        _say(f"did not refresh INCREMENTAL: {', '.join(not_incremental)}")
    for f in failures:
        _say(f"EQUALITY FAILED {f}")
    session.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
