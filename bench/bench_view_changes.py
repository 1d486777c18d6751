"""Changes of views: the differentiated plan against recomputing both snapshots and diffing them.

What it measures: a join view (facts JOIN dims) and an aggregate view (GROUP BY over facts) over a table of
``--rows`` rows. Mixed changes (60% updates of ``v``, 20% deletes, 20% inserts, each its own commit) touching 0.1%
and 1% of the rows are applied, each after taking a timestamp. For every (view, change %) it times

- dtables: ``SELECT * FROM <view> CHANGES(INFORMATION => DEFAULT) AT(TIMESTAMP => ts)`` (planning included),
  written to Spark's ``noop`` sink;
- baseline: the view's query at the tables' versions as of ``ts`` (``VERSION AS OF``) and now, diffed as
  ``(old EXCEPT ALL new) UNION ALL (new EXCEPT ALL old)``, written to ``noop``,

and prints the ratio baseline / dtables (above 1: the differentiated plan is faster). Before timing, both are
counted by action (DELETE / INSERT rows) as a sanity check; the counts must agree.

Changes come in two patterns, because the change read scans whole data files the interval touched:
``clustered`` (updates and deletes hit contiguous id ranges, as corrections to recent data do; few files) and
``scattered`` (rows picked by hash across the table; nearly every file is rewritten). Clustered runs first, so the
table's file layout is still ordered by id when it does.

Run (from the repository root)::

    .venv/bin/python bench/bench_view_changes.py                       # 2,000,000 rows
    .venv/bin/python bench/bench_view_changes.py --rows 200000 --repeat 3

Speed is measured here, never asserted in tests; times are best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dtables  # noqa: E402

DIM_KEYS = 10_000
ROWS_PER_FILE = 50_000
FRACTIONS = (0.001, 0.01)
PATTERNS = ("clustered", "scattered")
UPDATE_SHARE, DELETE_SHARE, INSERT_SHARE = 0.6, 0.2, 0.2

# {facts} and {dims} become table names for the views and time-travel references for the baseline.
VIEWS: dict[str, str] = {
    "join": "SELECT f.id, f.v, d.name FROM {facts} f JOIN {dims} d ON f.k = d.k",
    "aggregate": "SELECT k, count(*) AS n, sum(v) AS s FROM {facts} GROUP BY k",
}


@dataclass(frozen=True)
class Result:
    view: str
    pattern: str
    fraction: float
    rows: int
    changed_rows: int
    dtables_s: float
    baseline_s: float

    @property
    def ratio(self) -> float:
        return self.baseline_s / self.dtables_s


# -- set-up ---------------------------------------------------------------------------------------------------------


def fact_rows(session: Any, start: int, count: int) -> Any:
    """Rows ``id`` in [start, start + count): ``k`` spreads over the dimension keys, ``v`` is an integral double
    (sums stay exact, so snapshots recomputed in any order compare equal)."""
    return session.spark.range(start, start + count).selectExpr(
        "id", f"cast(id % {DIM_KEYS} as int) as k", "cast(floor(rand(1) * 1000) as double) as v")


def load(session: Any, rows: int) -> None:
    session.sql("""
        DROP VIEW IF EXISTS j; DROP VIEW IF EXISTS a; DROP TABLE IF EXISTS facts; DROP TABLE IF EXISTS dims;
        CREATE TABLE facts (id BIGINT, k INT, v DOUBLE);
        CREATE TABLE dims (k INT, name STRING)
    """)
    session.spark.range(DIM_KEYS).selectExpr("cast(id as int) as k", "concat('name-', id) as name") \
        .coalesce(1).write.format("delta").mode("append").saveAsTable("dims")
    fact_rows(session, 0, rows).write.format("delta").mode("append") \
        .option("maxRecordsPerFile", ROWS_PER_FILE).saveAsTable("facts")
    session.sql(f"CREATE VIEW j AS {VIEWS['join'].format(facts='facts', dims='dims')}")
    session.sql(f"CREATE VIEW a AS {VIEWS['aggregate'].format(facts='facts', dims='dims')}")


def warm_up(session: Any) -> None:
    session.spark.range(1000).selectExpr("sum(id)").collect()
    session.sql("SELECT count(*) FROM dims").collect()


def timestamp_between_commits() -> str:
    """A moment strictly between the last commit and the next one (commit timestamps are in milliseconds)."""
    time.sleep(1.1)
    ts = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    time.sleep(1.1)
    return ts


# -- changes --------------------------------------------------------------------------------------------------------


def pick(pattern: str, count: int, rows: int, rng: random.Random, salt: int) -> str:
    """A predicate on ``id`` matching about ``count`` of the original ``rows`` rows."""
    if pattern == "clustered":
        start = rng.randrange(0, max(1, rows - count))
        return f"id >= {start} AND id < {start + count}"
    per_million = max(1, round(count / rows * 1_000_000))
    return f"pmod(xxhash64(id, {salt}), 1000000) < {per_million}"


def apply_changes(session: Any, pattern: str, fraction: float, rows: int, next_id: int, rng: random.Random) -> int:
    """Mixed changes touching ``fraction`` of the rows, one commit each; returns the next unused id."""
    changed = max(3, round(rows * fraction))
    updates, deletes, inserts = (max(1, round(changed * s)) for s in (UPDATE_SHARE, DELETE_SHARE, INSERT_SHARE))
    session.sql(f"UPDATE facts SET v = v + 1 WHERE {pick(pattern, updates, rows, rng, rng.randrange(1 << 30))}")
    session.sql(f"DELETE FROM facts WHERE {pick(pattern, deletes, rows, rng, rng.randrange(1 << 30))}")
    fact_rows(session, next_id, inserts).write.format("delta").mode("append").saveAsTable("facts")
    return next_id + inserts


# -- the two ways to compute a view's changes -----------------------------------------------------------------------


def dtables_changes(session: Any, view: str, ts: str) -> Any:
    return session.sql(f"SELECT * FROM {view_name(view)} CHANGES(INFORMATION => DEFAULT) AT(TIMESTAMP => '{ts}')")


def version_at(session: Any, table: str, ts: str) -> int:
    """The table's version at ``ts``: its last commit at or before it (``TIMESTAMP AS OF`` refuses a moment after
    the latest commit, which is where an unchanged table such as ``dims`` is)."""
    from delta.tables import DeltaTable

    history = DeltaTable.forName(session.spark, table).history()
    return history.where(f"timestamp <= timestamp'{ts}'").selectExpr("max(version)").first()[0]


def baseline_diff(session: Any, view: str, versions: dict[str, int]) -> Any:
    old = VIEWS[view].format(**{t: f"{t} VERSION AS OF {v}" for t, v in versions.items()})
    new = VIEWS[view].format(facts="facts", dims="dims")
    return session.spark.sql(f"""
        SELECT *, 'DELETE' AS action FROM (({old}) EXCEPT ALL ({new}))
        UNION ALL
        SELECT *, 'INSERT' AS action FROM (({new}) EXCEPT ALL ({old}))
    """)


def view_name(view: str) -> str:
    return {"join": "j", "aggregate": "a"}[view]


def counts_by_action(df: Any, column: str) -> dict[str, int]:
    return {row[0]: row[1] for row in df.groupBy(column).count().collect()}


def best_time(run: Callable[[], Any], repeat: int) -> float:
    """Best wall-clock seconds of ``repeat`` runs of building the DataFrame and writing it to the noop sink."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run().write.format("noop").mode("overwrite").save()
        times.append(time.perf_counter() - start)
    return min(times)


def measure(session: Any, view: str, pattern: str, fraction: float, rows: int, ts: str, repeat: int) -> Result:
    ours = counts_by_action(dtables_changes(session, view, ts), "METADATA$ACTION")
    versions = {t: version_at(session, t, ts) for t in ("facts", "dims")}
    theirs = counts_by_action(baseline_diff(session, view, versions), "action")
    check = "ok" if ours == theirs else "MISMATCH"
    print(f"  check {view:9} {pattern:9} {fraction:.1%}: dtables {ours}  diff {theirs}  {check}", flush=True)
    dtables_s = best_time(lambda: dtables_changes(session, view, ts), repeat)
    baseline_s = best_time(lambda: baseline_diff(session, view, versions), repeat)
    return Result(view, pattern, fraction, rows, sum(ours.values()), dtables_s, baseline_s)


# -- report ---------------------------------------------------------------------------------------------------------


def print_table(results: list[Result]) -> None:
    header = f"{'view':10} {'pattern':10} {'change':>7} {'rows':>10} {'changed':>9} " \
             f"{'dtables s':>10} {'baseline s':>11} {'baseline/dtables':>17}"
    print(header)
    print("-" * len(header))
    for r in results:
        print(f"{r.view:10} {r.pattern:10} {r.fraction:>7.1%} {r.rows:>10,} {r.changed_rows:>9,} "
              f"{r.dtables_s:>10.2f} {r.baseline_s:>11.2f} {r.ratio:>16.2f}x")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000, help="rows in the fact table (default 2,000,000)")
    parser.add_argument("--warehouse", help="warehouse folder (default: a temporary folder, deleted afterwards)")
    parser.add_argument("--repeat", type=int, default=1, help="timed runs per measurement; the best counts")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--seed", type=int, default=7, help="seed for choosing the changed rows")
    return parser.parse_args(argv)


def run(args: argparse.Namespace, warehouse: str) -> list[Result]:
    rng = random.Random(args.seed)
    with dtables.connect(warehouse, master=args.master) as session:
        session.spark.sparkContext.setLogLevel("ERROR")
        load(session, args.rows)
        warm_up(session)
        results, next_id = [], args.rows
        for pattern in PATTERNS:
            for fraction in FRACTIONS:
                ts = timestamp_between_commits()
                next_id = apply_changes(session, pattern, fraction, args.rows, next_id, rng)
                for view in VIEWS:
                    results.append(measure(session, view, pattern, fraction, args.rows, ts, args.repeat))
        return results


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    warehouse = args.warehouse or tempfile.mkdtemp(prefix="dtables-bench-")
    try:
        results = run(args, warehouse)
    finally:
        if not args.warehouse:
            shutil.rmtree(warehouse, ignore_errors=True)
    print(f"\n{args.rows:,} rows, {DIM_KEYS:,} dimension keys, master {args.master}, best of {args.repeat}; "
          "mixed changes: 60% updates, 20% deletes, 20% inserts")
    print_table(results)


if __name__ == "__main__":
    main()
