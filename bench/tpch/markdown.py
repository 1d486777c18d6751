"""A results.csv of `python -m bench.tpch` as Markdown tables, one per batch (how bench/README.md's tables are made).

    .venv/bin/python -m bench.tpch.markdown /tmp/tpch-sf1-xyz/results.csv
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path


def _num(text: str) -> float | None:
    return float(text) if text not in ("", "None") else None


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if not a or not b else f"{a / b:.2f}"


def tables(path: Path) -> str:
    rows = list(csv.DictReader(path.open()))
    out = []
    for batch in dict.fromkeys(r["batch"] for r in rows):
        part = [r for r in rows if r["batch"] == batch]
        out += [f"**{batch}**", "",
                "| query | action | INCREMENTAL s (jobs, rows written) | FULL s (jobs) | pipelines flow s "
                "| FULL / INC | pipelines / INC | files read by key (of the version's) |",
                "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in part:
            inc, full, sdp = _num(r["inc_s"]), _num(r["full_s"]), _num(r["sdp_s"])
            out.append(f"| {r['query']} | {r['action']} | {_s(inc)} ({r['inc_jobs']}, {int(r['inc_rows']):,}) "
                       f"| {_s(full)} ({r['full_jobs'] or '-'}) | {_s(sdp)} | {_ratio(full, inc)} "
                       f"| {_ratio(sdp, inc)} | {r.get('inc_pruned') or '-'} |")
        inc_all = sum(_num(r["inc_s"]) or 0 for r in part)
        full_all = sum(_num(r["full_s"]) or 0 for r in part)
        sdp_all = sum(_num(r["sdp_s"]) or 0 for r in part) or None
        out += [f"| all | | {inc_all:.2f} | {full_all:.2f} | {_s(sdp_all)} | {_ratio(full_all, inc_all)} "
                f"| {_ratio(sdp_all, inc_all)} | |", ""]
    return "\n".join(out)


if __name__ == "__main__":
    print(tables(Path(sys.argv[1])))
