"""Subqueries in WHERE and expressions, turned into joins the plan IR has (on a qualified sqlglot tree).

* ``[NOT] EXISTS (...)`` and ``x [NOT] IN (SELECT ...)`` conjuncts of a WHERE become LEFT SEMI / LEFT ANTI joins
  of the query's FROM: a correlated subquery (a plain SELECT ... FROM ... WHERE) joins its FROM ON its WHERE, so
  correlations of any form (``l2.l_suppkey <> l1.l_suppkey``) stay exact; an uncorrelated one joins as a derived
  table. ``NOT IN`` keeps SQL's NULL semantics: its anti join rejects on ``x = y OR (x = y) IS NULL``, so a NULL
  in the subquery removes every row and a NULL ``x`` stays only when the subquery is empty (Spark plans this very
  condition as its null-aware anti join).
* Scalar subqueries (and EXISTS / IN under OR) are decorrelated by sqlglot's `unnest_subqueries`: an uncorrelated
  aggregate becomes a cross join with its one row, a correlated aggregate a LEFT JOIN with the aggregate grouped
  by the correlation keys.
  Only aggregates without GROUP BY or HAVING are accepted (exactly one value per outer row, as SQL requires;
  anything else could add or drop rows where SQL would fail or give NULL).

Joins made here carry their origin in `meta["origin"]` so plans can say what they were written as.
"""

from __future__ import annotations

import itertools
from typing import Any

from sqlglot import exp
from sqlglot.optimizer.unnest_subqueries import unnest_subqueries

from differentiation.errors import UnsupportedQuery
from differentiation.support import position_of

ORIGIN = "origin"


def _conjuncts(condition: exp.Expr) -> list[exp.Expr]:
    return list(condition.flatten()) if isinstance(condition, exp.And) else [condition]


def _unwrap(e: exp.Expr) -> tuple[exp.Expr, bool]:
    """`e` without its NOTs and parentheses, and whether an odd number of NOTs was removed."""
    negated = False
    while isinstance(e, (exp.Not, exp.Paren)):
        negated ^= isinstance(e, exp.Not)
        e = e.this
    return e, negated


def _select_of(sub: exp.Expr) -> Any:  # a Select, or a set operation (only uncorrelated ones get this far)
    while isinstance(sub, exp.Subquery):
        sub = sub.this
    return sub


def _own_sources(select: exp.Select) -> list[exp.Expr]:
    from_ = select.args.get("from_")
    items = [from_.this] if from_ is not None else []
    return items + [j.this for j in select.args.get("joins") or []]


def _aliases(tree: exp.Expr) -> set[str]:
    """Every name a FROM item is known by inside `tree` (tables, derived tables, CTEs)."""
    out = {t.alias_or_name for t in tree.find_all(exp.Table)}
    out |= {s.alias for s in tree.find_all(exp.Subquery) if s.alias}
    out |= {c.alias for c in tree.find_all(exp.CTE)}
    return out


def _aliases_outside(root: exp.Expr, inside: exp.Expr) -> set[str]:
    """The names FROM items of `root` are known by, except those within `inside`."""
    skip = {id(n) for n in inside.walk()}
    out: set[str] = set()
    for n in root.walk():
        if id(n) in skip:
            continue
        if isinstance(n, exp.Table) or (isinstance(n, exp.Subquery) and n.alias):
            out.add(n.alias_or_name)
        elif isinstance(n, exp.CTE):
            out.add(n.alias)
    return out


def _external_columns(sub: exp.Expr) -> list[exp.Column]:
    inner = _aliases(sub)
    return [c for c in sub.find_all(exp.Column) if c.table and c.table not in inner]


def _is_plain(select: exp.Expr) -> bool:
    """A SELECT ... FROM ... [WHERE ...] whose rows are its FROM's rows (so it can become a join's right side)."""
    if not isinstance(select, exp.Select) or select.args.get("from_") is None:
        return False
    if any(select.args.get(k) for k in ("group", "having", "limit", "offset", "qualify", "with_", "laterals")):
        return False
    return not any(p.find(exp.AggFunc, exp.Window) for p in select.expressions)


def _rename_sources(select: exp.Select, taken: set[str], fresh: itertools.count) -> None:
    """Give each FROM item of `select` that shares a name with the outer query a fresh one, in every column."""
    for source in _own_sources(select):
        name = source.alias_or_name
        if name not in taken:
            continue
        new = f"{name}__{next(fresh)}"
        source.set("alias", exp.TableAlias(this=exp.to_identifier(new)))
        for c in select.find_all(exp.Column):
            if c.table == name:
                c.set("table", exp.to_identifier(new))


def _right_side(sub: exp.Select) -> exp.Expr:
    """The FROM of a plain subquery as one FROM item: its table, or a parenthesized join of its items."""
    from_ = sub.args["from_"].this.copy()
    joins = [j.copy() for j in sub.args.get("joins") or []]
    if not joins:
        return from_
    from_.set("joins", joins)
    return exp.Subquery(this=from_)


def _membership(x: exp.Expr, y: exp.Expr, negated: bool) -> exp.Expr:
    eq = exp.EQ(this=x.copy(), expression=y.copy())
    if not negated:
        return eq
    return exp.or_(eq, exp.Is(this=exp.Paren(this=eq.copy()), expression=exp.Null()))


def _as_join(predicate: exp.Expr, negated: bool, outer: exp.Select, root: exp.Expr,
             fresh: itertools.count) -> exp.Join:
    """The semi (anti) join an EXISTS or IN predicate of `outer`'s WHERE stands for."""
    is_in = isinstance(predicate, exp.In)
    word = ("NOT " if negated else "") + ("IN" if is_in else "EXISTS")
    sub = _select_of(predicate.args["query"] if is_in else predicate.this)
    if is_in and (isinstance(predicate.this, exp.Tuple) or len(sub.selects) != 1):
        raise UnsupportedQuery(f"{word} over several columns is not supported", f"{word} subquery",
                               position_of(predicate))
    if _external_columns(sub):
        if not _is_plain(sub):
            raise UnsupportedQuery(f"a correlated {word} subquery must be a plain SELECT ... FROM ... WHERE (no "
                                   "GROUP BY, HAVING, aggregates, window functions or LIMIT)", f"{word} subquery",
                                   position_of(predicate))
        sub = sub.copy()
        _rename_sources(sub, _aliases_outside(root, predicate), fresh)
        right = _right_side(sub)
        where = sub.args.get("where")
        conditions = [where.this.copy()] if where is not None else []
        if is_in:
            conditions.append(_membership(predicate.this, sub.selects[0].unalias(), negated))
    else:
        name = f"__sq{next(fresh)}"
        right = exp.Subquery(this=sub.copy(), alias=exp.TableAlias(this=exp.to_identifier(name)))
        conditions = [_membership(predicate.this, exp.column(sub.selects[0].alias_or_name, name), negated)
                      if is_in else exp.true()]
    on = exp.and_(*conditions) if conditions else exp.true()
    join = exp.Join(this=right, side="LEFT", kind="ANTI" if negated else "SEMI", on=on)
    join.meta[ORIGIN] = f"{word} subquery"
    return join


def _predicates_to_joins(root: exp.Expr) -> None:
    fresh = itertools.count(1)
    for select in reversed(list(root.find_all(exp.Select))):  # innermost first
        where = select.args.get("where")
        if where is None:
            continue
        keep, joins = [], []
        for c in _conjuncts(where.this):
            e, negated = _unwrap(c)
            if isinstance(e, exp.Exists) or (isinstance(e, exp.In) and e.args.get("query") is not None):
                joins.append(_as_join(e, negated, select, root, fresh))
            else:
                keep.append(c)
        if not joins:
            continue
        for j in joins:
            select.append("joins", j)
        select.set("where", exp.Where(this=exp.and_(*keep)) if keep else None)


def _check_scalar_subqueries(root: exp.Expr) -> None:
    for sub in root.find_all(exp.Subquery):
        if isinstance(sub.parent, (exp.From, exp.Join)) or sub.parent is None or isinstance(sub.this, exp.Table):
            continue
        if isinstance(sub.parent, (exp.Subquery, exp.SetOperation, exp.In)) or sub.alias:
            continue  # nested parentheses, a set operation's branch, an IN left under OR (refused below)
        select = sub.this
        one_value = (isinstance(select, exp.Select) and len(select.selects) == 1
                     and select.selects[0].find(exp.AggFunc) is not None
                     and not select.args.get("group") and not select.args.get("having")
                     and not select.selects[0].find(exp.Window))
        if not one_value:
            raise UnsupportedQuery("a scalar subquery must be an aggregate without GROUP BY or HAVING (one value "
                                   "per row); write it as a join", "scalar subquery", position_of(sub))


def _check_left(root: exp.Expr) -> None:
    for node in root.walk():
        if isinstance(node, exp.Exists) or (isinstance(node, exp.In) and node.args.get("query") is not None):
            word = "EXISTS" if isinstance(node, exp.Exists) else "IN"
            raise UnsupportedQuery(f"{word} subquery is supported only as a condition of WHERE joined by AND",
                                   f"{word} subquery", position_of(node))
        if isinstance(node, exp.Subquery) and not isinstance(node.parent, (exp.From, exp.Join, exp.Subquery,
                                                                            exp.SetOperation)):
            if not isinstance(node.this, exp.Table) and node.parent is not None:
                raise UnsupportedQuery("this scalar subquery could not be turned into a join (correlated other "
                                       "than by equalities in its WHERE, or in a join condition)", "scalar subquery",
                                       position_of(node))
        if isinstance(node, exp.Anonymous) and str(node.name).upper() in ("ARRAY_ANY", "COLLECT_LIST"):
            raise UnsupportedQuery("a subquery correlated by a non-equality is supported only in EXISTS",
                                   "scalar subquery", position_of(node))


def unnest(tree: exp.Expr) -> exp.Expr:
    """`tree` (qualified) with its subquery predicates and scalar subqueries turned into joins."""
    _predicates_to_joins(tree)
    _check_scalar_subqueries(tree)
    before = {id(j) for j in tree.find_all(exp.Join)}
    tree = unnest_subqueries(tree)
    for j in tree.find_all(exp.Join):
        if id(j) not in before and ORIGIN not in j.meta:
            j.meta[ORIGIN] = "subquery decorrelated by sqlglot"
    _check_left(tree)
    return tree
