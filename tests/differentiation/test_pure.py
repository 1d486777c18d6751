"""Which derivatives a dynamic table may write by row id without consolidating them (`differentiation.pure`), and
the oracle for that write: applied per row id to Q|I0 it gives Q|I1 (`diff_harness.apply_by_row_id`, which
`check_oracle` runs for every pure derivative of every property test)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings

from diff_harness import BaseTable, TableSet, check_oracle
from differentiation import ChangeStats, build_plan, differentiate
from differentiation.constraints import Constraints, ForeignKey
from differentiation.delta_nodes import Consolidate
from dml_strategies import two_tables

SCHEMA = {"r": {"k": "INT", "v": "INT"}, "s": {"k": "INT", "w": "INT"}}
BOTH, INSERTS, NONE = ChangeStats(True, True), ChangeStats(True, False), ChangeStats(False, False)
KEYS = Constraints(unique=(("s", ("k",)),), foreign=(ForeignKey("r", ("k",), "s", ("k",)),))


def _minimal(sql: str, constraints: Constraints = Constraints(), **stats: ChangeStats) -> bool:
    d = differentiate(build_plan(sql, SCHEMA), stats=stats, constraints=constraints, minimal=False)
    assert d.minimal == isinstance(d.plan, Consolidate)
    return d.minimal


@pytest.mark.parametrize("sql", [
    "SELECT k, v + 1 AS v1 FROM r WHERE v > 0",
    "SELECT r.k, COUNT(*) AS c, SUM(s.w) AS sw FROM r JOIN s ON r.k = s.k GROUP BY r.k",
    "SELECT DISTINCT r.v, s.w FROM r JOIN s ON r.k = s.k",
    "SELECT r.k, r.v, s.w FROM r LEFT JOIN s ON r.k = s.k",
    "SELECT k, v, rank() OVER (PARTITION BY k ORDER BY v) AS rk FROM r",
    "SELECT k, v FROM r WHERE v > 1 UNION ALL SELECT k, w FROM s",
])
def test_recomputed_keys_and_single_change_reads_need_no_consolidation(sql: str) -> None:
    assert not _minimal(sql, r=BOTH, s=BOTH)


@pytest.mark.parametrize("sql", [
    "SELECT r.k, r.v, s.w FROM r JOIN s ON r.k = s.k",  # r|I1 ⋈ Δs deletes (new r, gone s), never at I0
    "SELECT r.v, s.w FROM r, s WHERE r.v < s.w",
    "SELECT r.k, r.v FROM r WHERE EXISTS (SELECT 1 FROM s WHERE s.k = r.k)",  # ΔL ⋉ s|I1 judges old rows anew
    "SELECT k, v FROM r WHERE v > 1 UNION ALL SELECT r.k, s.w FROM r JOIN s ON r.k = s.k",
])
def test_terms_that_pair_one_end_with_the_other_are_consolidated(sql: str) -> None:
    assert _minimal(sql, r=BOTH, s=BOTH)


def test_a_join_with_one_changed_side_or_a_semi_join_with_the_other_needs_none() -> None:
    assert not _minimal("SELECT r.k, r.v, s.w FROM r JOIN s ON r.k = s.k", r=BOTH, s=NONE)
    assert not _minimal("SELECT r.k, r.v FROM r WHERE EXISTS (SELECT 1 FROM s WHERE s.k = r.k)", r=NONE, s=BOTH)


def test_the_term_declared_keys_leave_is_pure() -> None:
    join = "SELECT r.k, r.v, s.w FROM r JOIN s ON r.k = s.k"
    assert not _minimal(join, KEYS, r=BOTH, s=INSERTS)  # s|I1 ⋈ Δr: an old r row's s row is still there
    assert _minimal(join, r=BOTH, s=INSERTS)


def test_changes_for_users_are_always_consolidated() -> None:
    d = differentiate(build_plan("SELECT k, COUNT(*) AS c FROM r GROUP BY k", SCHEMA), stats={"r": BOTH, "s": NONE})
    assert d.minimal and isinstance(d.plan, Consolidate)


def _moves_what_is_read(table: BaseTable, read: set[str]) -> bool:
    """Whether ``table``'s change is one to a query reading its columns ``read``: rows inserted or deleted outright,
    or an update in place that moved one of them (an update back to the same values moves none: no change)."""
    stats = table.stats()
    return (stats.inserts or stats.deletes) and (stats.moved is None or bool(stats.moved & read))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tables=two_tables())
@example(tables={  # found by hypothesis: s's only row updated in place to its own values, r unchanged
    "r": BaseTable(columns={"k": "INT", "v": "INT"}, start={}, end={}, changes=[]),
    "s": BaseTable(columns={"k": "INT", "w": "INT"}, start={"s0": (None, None)}, end={"s0": (None, None)},
                   changes=[("DELETE", "s0", (None, None)), ("INSERT", "s0", (None, None))])})
def test_the_row_id_write_of_a_pure_change_set_gives_the_end_state(spark: Any, tables: dict[str, BaseTable]) -> None:
    """Groups that did not move (DELETE and INSERT of the same row) and updated-back rows included."""
    ts = TableSet(spark, tables)
    sql = "SELECT r.k, COUNT(*) AS c, MIN(s.w) AS mw FROM r JOIN s ON r.k = s.k GROUP BY r.k"
    check_oracle(ts, sql)
    if _moves_what_is_read(tables["r"], {"k"}) or _moves_what_is_read(tables["s"], {"k", "w"}):
        assert ts.row_id_changes(sql) is not None  # the unconsolidated path ran
