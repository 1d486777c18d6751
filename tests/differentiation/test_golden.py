"""Golden files, one per rule family: plan text before and after differentiation.

Each case in golden/<family>.txt is `== <sql>` (optionally `-- stats: table=inserts|deletes|none`),
followed by the expected text. Set DT_UPDATE_GOLDEN=1 to rewrite the files after reviewing a change.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from differentiation import ChangeStats, build_plan, differentiate

GOLDEN = Path(__file__).parent / "golden"
SCHEMA = {"r": {"k": "INT", "v": "INT"}, "s": {"k": "INT", "w": "INT"}}
_STATS = {"inserts": ChangeStats(True, False), "deletes": ChangeStats(False, True), "none": ChangeStats(False, False)}


def _parse(path: Path) -> list[tuple[str, str, str]]:
    """(sql, stats line, expected text) per case."""
    cases: list[tuple[str, str, str]] = []
    for block in path.read_text().split("== ")[1:]:
        header, _, expected = block.partition("\n")
        sql, _, stats = header.partition(" -- stats: ")
        cases.append((sql.strip(), stats.strip(), expected.rstrip("\n")))
    return cases


def _render(sql: str, stats: str) -> str:
    parsed = dict(item.split("=") for item in stats.split(",")) if stats else {}
    plan = build_plan(sql, SCHEMA)
    d = differentiate(plan, stats={t: _STATS[v] for t, v in parsed.items()})
    return f"{plan.to_text()}\n=>\n{d.to_text()}"


FAMILIES = sorted(p.stem for p in GOLDEN.glob("*.txt"))


@pytest.mark.parametrize("family", FAMILIES)
def test_golden(family: str) -> None:
    path = GOLDEN / f"{family}.txt"
    cases = _parse(path)
    assert cases, f"{path} has no cases"
    if os.environ.get("DT_UPDATE_GOLDEN"):
        text = "".join(f"== {sql}{' -- stats: ' + st if st else ''}\n{_render(sql, st)}\n\n" for sql, st, _ in cases)
        path.write_text(text)
        return
    for sql, stats, expected in cases:
        assert _render(sql, stats) == expected, f"golden mismatch for {sql!r}"
