"""The 22 TPC-H queries: the original text (`queries/qNN.sql`) and the dynamic-table variant (`qNN.dt.sql`).

A variant starts with comment lines explaining its rewrite; its `-- read:` line holds the ORDER BY / LIMIT that
the dynamic table drops and a reader applies (`Query.read_sql`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

QUERY_DIR = Path(__file__).parent / "queries"
ALL = tuple(range(1, 23))


@dataclass(frozen=True)
class Query:
    number: int
    original: str  # the TPC-H text, ORDER BY and LIMIT included
    dynamic: str  # the dynamic table's SELECT (comments stripped)
    read_clause: str  # "order by ... [limit n]" applied when reading the dynamic table, or ""
    rewrite: str  # the variant's comment: what was rewritten and why

    @property
    def name(self) -> str:
        return f"q{self.number:02d}"

    def read_sql(self, table: str, columns: list[str]) -> str:
        """SELECT the query's columns (not the row id) from `table` with the dropped ORDER BY / LIMIT."""
        return f"SELECT {', '.join(columns)} FROM {table} {self.read_clause}".strip()


def load(number: int) -> Query:
    name = f"q{number:02d}"
    original = (QUERY_DIR / f"{name}.sql").read_text().strip()
    text = (QUERY_DIR / f"{name}.dt.sql").read_text()
    comments = [line[2:].strip() for line in text.splitlines() if line.startswith("--")]
    body = "\n".join(line for line in text.splitlines() if not line.startswith("--")).strip()
    read = next((c[len("read:"):].strip() for c in comments if c.startswith("read:")), "")
    rewrite = " ".join(c for c in comments if not c.startswith("read:"))
    return Query(number, original, body, read, re.sub(r"\s+", " ", rewrite))


def select(numbers: str | None) -> list[Query]:
    """Queries by a comma-separated list of numbers ("1,3,6"), or all 22."""
    chosen = ALL if not numbers else tuple(int(n) for n in numbers.split(",") if n.strip())
    bad = [n for n in chosen if n not in ALL]
    if bad:
        raise SystemExit(f"no TPC-H query {bad[0]}: choose among 1..22")
    return [load(n) for n in chosen]
