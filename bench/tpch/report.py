"""The results: a table on standard output, a CSV, and a PNG chart of time per query for the three systems."""

from __future__ import annotations

import csv
import statistics
from collections import Counter
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Row:
    """One query after one batch, the three systems side by side."""

    batch: str
    query: str
    mode: str  # what AUTO chose (INCREMENTAL or FULL)
    action: str  # what the AUTO table's refresh did
    reason: str
    inc_s: float
    inc_jobs: int
    inc_rows: int  # rows the refresh inserted + deleted + updated in the dynamic table
    full_s: float | None
    full_jobs: int | None
    full_rows: int | None
    sdp_s: float | None  # the query's flow in the pipeline run (None: not run or failed)
    result_rows: int  # rows in the dynamic table after the refresh
    inc_pruned: str = ""  # the INCREMENTAL refresh's snapshot reads narrowed by join keys (files read/of)
    forced_s: float | None = None  # the REFRESH_MODE = INCREMENTAL twin (--incremental-twin)
    forced_action: str | None = None
    round: int = 1  # which application of the batch (--repeat); 0 in a row of medians

    @property
    def best_s(self) -> float | None:
        """The faster of the INCREMENTAL twin and the FULL twin."""
        return min(self.forced_s, self.full_s) if self.forced_s and self.full_s else None

    @property
    def full_over_inc(self) -> float | None:
        return self.full_s / self.inc_s if self.full_s and self.inc_s else None

    @property
    def sdp_over_inc(self) -> float | None:
        return self.sdp_s / self.inc_s if self.sdp_s and self.inc_s else None


def medians(rows: list[Row]) -> list[Row]:
    """One row per batch and query: the median of each measure over the rounds, and what the AUTO table did most
    often (ties: the first round's). A single round's rows come back as they are."""
    if all(r.round == 1 for r in rows):
        return rows
    groups: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        groups.setdefault((r.batch, r.query), []).append(r)
    out = []
    for part in groups.values():
        common = Counter(r.action for r in part).most_common(1)[0][0]
        first = next(r for r in part if r.action == common)
        out.append(replace(first, round=0, **{
            f.name: _median([getattr(r, f.name) for r in part]) for f in fields(Row)
            if f.type in ("float", "int", "float | None", "int | None") and f.name != "round"}))
    return out


def _median(values: list[Any]) -> Any:
    """The median of the values that are there (None if none is); integers stay integers."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    m = statistics.median(present)
    return round(m) if all(isinstance(v, int) for v in present) else m


# Below this many seconds over the faster mode a query is not counted as over by 10%: NO_DATA refreshes take 0.01 to
# 0.09 s, where 10% is a millisecond.
RESOLUTION_S = 0.05


def _fmt(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def print_table(rows: list[Row], batch_rows: dict[str, int], sdp_totals: dict[str, float]) -> None:
    for batch in dict.fromkeys(r.batch for r in rows):
        print(f"\n== {batch}: {batch_rows.get(batch, 0):,} source rows changed; "
              f"spark-pipelines run {_fmt(sdp_totals.get(batch), '.1f')} s in all (JVM start included)")
        print(f"{'query':<6}{'action':<12}{'INC s':>8}{'jobs':>6}{'rows':>8}{'FULL s':>8}{'jobs':>6}{'rows':>9}"
              f"{'SDP s':>8}{'FULL/INC':>10}{'SDP/INC':>9}")
        for r in (r for r in rows if r.batch == batch):
            print(f"{r.query:<6}{r.action:<12}{r.inc_s:>8.2f}{r.inc_jobs:>6}{r.inc_rows:>8,}"
                  f"{_fmt(r.full_s):>8}{_fmt(r.full_jobs, 'd'):>6}{_fmt(r.full_rows, ',d'):>9}{_fmt(r.sdp_s):>8}"
                  f"{_fmt(r.full_over_inc):>10}{_fmt(r.sdp_over_inc):>9}")
        inc = sum(r.inc_s for r in rows if r.batch == batch)
        full = sum(r.full_s or 0 for r in rows if r.batch == batch)
        print(f"{'all':<6}{'':<12}{inc:>8.2f}{'':>6}{'':>8}{full:>8.2f}{'':>6}{'':>9}"
              f"{_fmt(sum(r.sdp_s or 0 for r in rows if r.batch == batch)):>8}{_fmt(full / inc if inc else None):>10}")


def print_auto(rows: list[Row], rounds: list[Row] | None = None) -> None:
    """AUTO against the faster of its INCREMENTAL and FULL twins, per batch (rows with an INCREMENTAL twin). With
    several rounds (`rounds`: every round's rows; `rows` their medians), also what AUTO did in each and the spread of
    the INCREMENTAL twin's time over them (max / min): how far apart two measures of the same plan fall."""
    for batch in dict.fromkeys(r.batch for r in rows if r.best_s):
        part = [r for r in rows if r.batch == batch and r.best_s]
        per_query = {r.query: [x for x in rounds or () if x.batch == batch and x.query == r.query] for r in part}
        several = any(len(v) > 1 for v in per_query.values())
        print(f"\n== {batch}: AUTO against the faster of INCREMENTAL and FULL")
        print(f"{'query':<6}{'AUTO did':<12}{'AUTO s':>8}{'INC s':>8}{'FULL s':>8}{'AUTO/best':>11}"
              + (f"{'INC spread':>12}  AUTO did in each round" if several else ""))
        for r in part:
            line = (f"{r.query:<6}{r.action:<12}{r.inc_s:>8.2f}{_fmt(r.forced_s):>8}{_fmt(r.full_s):>8}"
                    f"{r.inc_s / (r.best_s or 1):>11.2f}")
            if several:
                twin = [x.forced_s for x in per_query[r.query] if x.forced_s]
                spread = max(twin) / min(twin) if twin else None
                line += f"{_fmt(spread):>12}  {' '.join(x.action for x in per_query[r.query])}"
            print(line)
        auto, best = sum(r.inc_s for r in part), sum(r.best_s or 0 for r in part)
        over = [r for r in part if r.inc_s > 1.1 * (r.best_s or 0)]
        print(f"{'all':<6}{'':<12}{auto:>8.2f}{sum(r.forced_s or 0 for r in part):>8.2f}"
              f"{sum(r.full_s or 0 for r in part):>8.2f}{auto / best:>11.2f}")
        print(f"more than 10% over the faster: {', '.join(r.query for r in over) or 'none'}; of these, by more "
              f"than {RESOLUTION_S} s: "
              f"{', '.join(r.query for r in over if r.inc_s - (r.best_s or 0) > RESOLUTION_S) or 'none'}")


def write_csv(rows: list[Row], path: Path) -> None:
    names = [f.name for f in fields(Row)] + ["full_over_inc", "sdp_over_inc", "best_s"]
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=names)
        writer.writeheader()
        for r in rows:
            writer.writerow({**asdict(r), "full_over_inc": r.full_over_inc, "sdp_over_inc": r.sdp_over_inc,
                             "best_s": r.best_s})


def write_png(rows: list[Row], path: Path, title: str) -> None:
    """One panel per batch: grouped bars (INCREMENTAL, FULL, pipelines) of seconds per query."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    batches = list(dict.fromkeys(r.batch for r in rows))
    fig, axes = plt.subplots(len(batches), 1, figsize=(14, 3.6 * len(batches)), squeeze=False)
    for ax, batch in zip(axes[:, 0], batches):
        part = [r for r in rows if r.batch == batch]
        xs = range(len(part))
        width = 0.27
        series = [("dtables INCREMENTAL (AUTO)", [r.inc_s for r in part], "tab:green"),
                  ("dtables FULL", [r.full_s or 0 for r in part], "tab:orange"),
                  ("Spark Declarative Pipelines (flow)", [r.sdp_s or 0 for r in part], "tab:blue")]
        for i, (label, values, color) in enumerate(series):
            ax.bar([x + (i - 1) * width for x in xs], values, width, label=label, color=color)
        ax.set_xticks(list(xs))
        ax.set_xticklabels([r.query + ("" if r.action == "INCREMENTAL" else "*") for r in part])
        ax.set_ylabel("seconds")
        ax.set_title(f"{title}: after {batch}")
        ax.legend(fontsize=8, loc="upper right")
    fig.text(0.01, 0.005, "* the AUTO table did not refresh INCREMENTAL", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
