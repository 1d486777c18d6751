"""Which nested aggregates CREATE keeps as intermediate dynamic tables (``intermediates.split``; no Spark): the
TPC-H queries as written, and the shapes that stay inside the query."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # bench/ is a folder of scripts, not an installed package

from bench.tpch import workload  # noqa: E402
from bench.tpch.schema import TABLES, columns  # noqa: E402
from dtables.dynamic.definition import qualify_sources  # noqa: E402
from dtables.dynamic.frontier import SourceVersion  # noqa: E402
from dtables.dynamic.intermediates import split  # noqa: E402
from dtables.sql.dialect import to_spark  # noqa: E402

SCHEMAS = {**{t: tuple(columns(t)) for t in TABLES}, "a": (("k", "int"), ("v", "int")),
           "b": (("k", "int"), ("w", "int"))}
SOURCES = {f"default.{t}": SourceVersion(f"default.{t}", f"/tmp/{t}", 1, "id", cols, False)
           for t, cols in SCHEMAS.items()}


def _split(query: str, parent: str = "default.p") -> tuple[str, list[str]] | None:
    tree, _ = qualify_sources(sqlglot.parse_one(query, read="spark"))
    found = split(to_spark(tree), parent, SOURCES)
    if found is None:
        return None
    rewritten, kept = found
    return to_spark(rewritten), [to_spark(k.query) for k in kept]


@pytest.mark.parametrize("number, aggregate", [
    (2, "MIN(`partsupp`.`ps_supplycost`)"),          # correlated MIN per part, decorrelated
    (13, "COUNT(`orders`.`o_orderkey`)"),            # derived table aggregated again
    (15, "SUM(`lineitem`.`l_extendedprice`"),        # CTE joined, and its MAX taken
    (17, "0.2 * AVG(`lineitem`.`l_quantity`)"),      # correlated AVG per part
    (20, "0.5 * SUM(`lineitem`.`l_quantity`)"),      # correlated SUM per part and supplier, inside IN subqueries
])
def test_tpch_nested_aggregates_are_kept(number: int, aggregate: str) -> None:
    found = _split(workload.load(number).dynamic, f"default.q{number:02d}")
    assert found is not None
    parent, [child] = found
    assert aggregate in child and "GROUP BY" in child
    assert f"`default`.`__dtables_q{number:02d}_1`" in parent
    assert aggregate not in parent  # read from the intermediate, not computed again


@pytest.mark.parametrize("number", [1, 3, 4, 9, 11, 18, 21, 22])
def test_tpch_queries_without_nested_groups_keep_none(number: int) -> None:
    # Q1/Q3: the query's own GROUP BY; Q9: a derived table without one; Q11/Q22: ungrouped scalar subqueries;
    # Q18: GROUP BY ... HAVING inside IN; Q4/Q21: EXISTS subqueries (semi and anti joins)
    assert _split(workload.load(number).dynamic) is None


def test_an_inner_aggregate_of_a_kept_one_is_left_to_it() -> None:
    query = ("SELECT y.k, y.n, b.w FROM (SELECT x.k, count(*) AS n FROM (SELECT k, sum(v) AS s FROM a GROUP BY k) x "
             "GROUP BY x.k) y JOIN b ON b.k = y.k")
    found = _split(query)
    assert found is not None
    parent, [child] = found
    assert "SUM(" in child and "COUNT(" in child  # the child keeps its own nested aggregate (split when created)
    assert "GROUP BY" not in parent


@pytest.mark.parametrize("query", [
    "SELECT k, sum(v) AS s FROM a GROUP BY k",  # the query's own aggregate: stored state already
    "SELECT b.k FROM b JOIN (SELECT k, sum(v) AS s FROM a GROUP BY k HAVING sum(v) > 1) t ON t.k = b.k",
    "SELECT b.k FROM b WHERE b.k IN (SELECT k FROM a GROUP BY k)",  # a semi join reads which keys exist
    "SELECT b.k FROM b JOIN (SELECT DISTINCT k, sum(v) AS s FROM a GROUP BY k) t ON t.k = b.k",
    "WITH t AS (SELECT k, sum(v) AS s FROM a GROUP BY k), u AS (SELECT k, sum(s) AS s FROM t GROUP BY k) "
    "SELECT b.k FROM b JOIN u ON u.k = b.k JOIN t ON t.k = b.k",  # u reads CTE t: t is kept, u stays
])
def test_shapes_that_stay_in_the_query(query: str) -> None:
    found = _split(query)
    if found is None:
        return
    parent, kept = found
    assert len(kept) == 1 and "`u` AS" in parent  # only the last case keeps one: t, not u
    assert not any(isinstance(t, exp.Table) and t.name == "t" and not t.db
                   for t in sqlglot.parse_one(parent, read="spark").find_all(exp.Table))
