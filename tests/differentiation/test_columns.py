"""`columns_read`: the base-table columns a plan reads, which change reads compare (an UPDATE of others is no
change to the plan)."""

from __future__ import annotations

from differentiation import build_plan, columns_read

SCHEMA = {"r": {"k": "INT", "v": "INT", "note": "STRING"}, "s": {"k": "INT", "w": "INT", "note": "STRING"}}


def _read(sql: str) -> dict[str, set[str]]:
    return {t: set(c) for t, c in columns_read(build_plan(sql, SCHEMA)).items()}


def test_columns_read_by_expressions_outputs_and_whole_rows() -> None:
    assert _read("SELECT r.k, s.w FROM r JOIN s ON r.k = s.k WHERE r.v > 0") == {"r": {"k", "v"}, "s": {"k", "w"}}
    assert _read("SELECT count(*) AS n FROM r") == {"r": set()}
    assert _read("SELECT k, sum(v) AS t FROM r GROUP BY k") == {"r": {"k", "v"}}
    assert _read("SELECT DISTINCT k FROM r") == {"r": {"k"}}
    assert _read("SELECT k FROM r UNION SELECT w FROM s") == {"r": {"k"}, "s": {"w"}}
    # an output a derived table computes but nothing above reads is not read
    assert _read("SELECT k FROM (SELECT k, v + 1 AS x FROM r) t") == {"r": {"k"}}
    # the scans of one table under two aliases: what either reads
    assert _read("SELECT a.v, b.note FROM r a JOIN r b ON a.k = b.k") == {"r": {"k", "v", "note"}}
    assert _read("SELECT k, v FROM r WHERE EXISTS (SELECT 1 FROM s WHERE s.k = r.k AND s.note IS NULL)") == {
        "r": {"k", "v"}, "s": {"k", "note"}}
    assert _read("SELECT k, rank() OVER (PARTITION BY k ORDER BY v) AS rk FROM r") == {"r": {"k", "v"}}
