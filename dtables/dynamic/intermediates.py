"""Nested aggregates kept as dynamic tables of their own (intermediate dynamic tables).

A GROUP BY that a query reads through a join or another aggregate (a CTE, a derived table, or a correlated scalar
subquery that decorrelation turned into a grouped derived table) has no state of its own in the query's table:
each refresh re-aggregates every group its change touches from the source at the new end, so a change to a few
thousand groups of a big table reads the big table again (TPC-H Q13, Q15, Q17, Q20). Kept as a dynamic table, the
aggregate is maintained from its stored state (old + ΣΔ per group, as any top-level aggregate), and the query
reads its few changed rows as it reads any upstream dynamic table's.

An intermediate is created with the table that reads it (``parent``), refreshes with it (TARGET_LAG = DOWNSTREAM;
``executor.refresh`` refreshes upstreams first, to the same data timestamp), and is dropped, suspended, resumed and
replaced with it. It is left out of SHOW DYNAMIC TABLES unless a LIKE pattern names it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from differentiation import UnsupportedQuery, prepare
from dtables.catalog import STATE_PREFIX
from dtables.dynamic.frontier import SourceVersion
from dtables.dynamic.plan import incremental_support, plan_schema
from dtables.sql.dialect import to_spark

# true at CREATE: keep nested aggregates as intermediates. Off by default: at TPC-H SF 1 they paid only where the
# aggregate is much smaller than its input (Q15: 10,000 suppliers) and cost more where it is not (Q20: 800,000 pairs
# merged at each refresh), see bench/README.md.
SWITCH = "spark.dtables.intermediates"


@dataclass(frozen=True)
class Intermediate:
    """One nested aggregate to keep: the dynamic table ``name`` computing ``query``."""

    name: str
    query: exp.Query


def enabled(spark: Any) -> bool:
    return str(spark.conf.get(SWITCH, "false")).strip().lower() == "true"


def name_for(parent: str, n: int) -> str:
    """The hidden table's name: ``db.__dtables_<parent>_<n>``, in the parent's database."""
    db, short = parent.split(".")
    return f"{db}.{STATE_PREFIX}{short}_{n}"


def split(query: str, parent: str, sources: Mapping[str, SourceVersion]
          ) -> tuple[exp.Expr, list[Intermediate]] | None:
    """The parent's query reading its nested aggregates from intermediate tables, and those tables; None when the
    query has none that can be maintained incrementally on its own (or cannot be prepared)."""
    try:
        tree = prepare(query, plan_schema(sources))
    except UnsupportedQuery:
        return None
    found: list[Intermediate] = []

    def keep(select: exp.Select) -> str | None:
        name = name_for(parent, len(found) + 1)
        child = select.copy()
        if incremental_support(to_spark(child), sources)[1] is not None:
            return None
        found.append(Intermediate(name, child))
        return name

    _replace_ctes(tree, keep)
    _replace_derived_tables(tree, keep)
    return (tree, found) if found else None


def _table(name: str, alias: str) -> exp.Table:
    db, short = name.split(".")
    return exp.Table(this=exp.to_identifier(short, quoted=True), db=exp.to_identifier(db, quoted=True),
                     alias=exp.TableAlias(this=exp.to_identifier(alias)))


def _replace_ctes(tree: exp.Expr, keep: Callable[[exp.Select], str | None]) -> None:
    """Top-level CTEs that are nested aggregates: every reference reads the intermediate, the CTE goes."""
    with_ = tree.args.get("with_") or tree.args.get("with")
    if with_ is None:
        return
    for cte in list(with_.expressions):
        name = cte.alias_or_name
        shadowed = any(c is not cte and c.alias_or_name == name for c in tree.find_all(exp.CTE))
        if shadowed or not _nested_aggregate(cte.this):
            continue
        kept = keep(cte.this)
        if kept is None:
            continue
        for table in list(tree.find_all(exp.Table)):
            if not table.args.get("db") and table.name == name:
                table.replace(_table(kept, table.alias_or_name))
        cte.pop()
    if not with_.expressions:
        with_.pop()


def _replace_derived_tables(tree: exp.Expr, keep: Callable[[exp.Select], str | None]) -> None:
    """Derived tables (FROM or JOIN items) that are nested aggregates, outermost first (an inner one inside a kept
    one is the intermediate's own to keep)."""
    for sub in list(tree.find_all(exp.Subquery)):
        if sub.parent is None or not isinstance(sub.parent, (exp.From, exp.Join)) or not sub.alias:
            continue
        if isinstance(sub.parent, exp.Join) and (sub.parent.kind or "").upper() in ("SEMI", "ANTI"):
            continue  # an IN / EXISTS subquery: its semi join reads only which keys exist
        if not _nested_aggregate(sub.this) or sub.root() is not tree:
            continue  # not a candidate, or inside one kept already (detached from the tree)
        kept = keep(sub.this)
        if kept is not None:
            sub.replace(_table(kept, sub.alias))


def _nested_aggregate(q: exp.Expr) -> bool:
    """A grouped SELECT whose rows are its groups (no HAVING, window, DISTINCT, LIMIT), reading only tables (no CTE
    of the enclosing query) and no column from outside."""
    if not isinstance(q, exp.Select) or q.args.get("group") is None:
        return False
    if any(q.args.get(k) for k in ("having", "limit", "offset", "qualify", "distinct", "laterals", "with_", "with")):
        return False
    if q.find(exp.Window) is not None or any(not t.args.get("db") for t in q.find_all(exp.Table)):
        return False
    inner = {t.alias_or_name for t in q.find_all(exp.Table)} | {s.alias for s in q.find_all(exp.Subquery) if s.alias}
    return all(not c.table or c.table in inner for c in q.find_all(exp.Column))
