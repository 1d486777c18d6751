"""The 22 TPC-H queries as dynamic tables: the original text (`queries/qNN.sql`) with its top-level ORDER BY /
LIMIT moved to the read side (a dynamic table is a bag of rows; `Query.read_sql` applies them when reading).

`queries/qNN.dt.sql` keeps the hand rewrites dtables needed before it maintained subqueries (EXISTS / IN as
joins with DISTINCT keys, scalar subqueries as joins with aggregates), for comparison only (`load(rewritten=True)`,
`python -m bench.tpch --rewritten`). A variant starts with comment lines explaining its rewrite; its `-- read:`
line holds the ORDER BY / LIMIT it drops.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import sqlglot

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


def _split_order(text: str) -> tuple[str, str]:
    """(the query without its top-level ORDER BY / LIMIT, that ORDER BY / LIMIT); TPC-H writes them last."""
    tree = sqlglot.parse_one(text, read="spark")
    if tree.args.get("order") is None and tree.args.get("limit") is None:
        return text, ""
    at = text.lower().rfind("order by") if tree.args.get("order") is not None else text.lower().rfind("limit")
    body, tail = text[:at].rstrip(), " ".join(text[at:].split())
    assert sqlglot.parse_one(body, read="spark").args.get("order") is None, "ORDER BY not last"
    return body, tail


def load(number: int, rewritten: bool = False) -> Query:
    name = f"q{number:02d}"
    original = (QUERY_DIR / f"{name}.sql").read_text().strip()
    if not rewritten:
        body, read = _split_order(original.rstrip(";"))
        return Query(number, original, body, read, "")
    text = (QUERY_DIR / f"{name}.dt.sql").read_text()
    comments = [line[2:].strip() for line in text.splitlines() if line.startswith("--")]
    body = "\n".join(line for line in text.splitlines() if not line.startswith("--")).strip()
    read = next((c[len("read:"):].strip() for c in comments if c.startswith("read:")), "")
    rewrite = " ".join(c for c in comments if not c.startswith("read:"))
    return Query(number, original, body, read, re.sub(r"\s+", " ", rewrite))


def select(numbers: str | None, rewritten: bool = False) -> list[Query]:
    """Queries by a comma-separated list of numbers ("1,3,6"), or all 22."""
    chosen = ALL if not numbers else tuple(int(n) for n in numbers.split(",") if n.strip())
    bad = [n for n in chosen if n not in ALL]
    if bad:
        raise SystemExit(f"no TPC-H query {bad[0]}: choose among 1..22")
    return [load(n, rewritten) for n in chosen]
