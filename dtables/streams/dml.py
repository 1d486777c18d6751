"""UPDATE and DELETE that read a stream through ``IN (SELECT ...)``, run as the equivalent MERGE.

Delta (open source) refuses subqueries in UPDATE and DELETE conditions, yet that is how such statements read a
stream (``DELETE FROM t WHERE id IN (SELECT id FROM s)``). The form ``keys IN (SELECT ...) [AND conditions
without subqueries]`` is a semi-join, which MERGE expresses exactly::

    UPDATE t SET c = e WHERE k IN (SELECT x FROM s) AND p
    ==  MERGE INTO t USING (SELECT DISTINCT * FROM (SELECT x FROM s) AS q(__dtables_k0)) AS __dtables_in
        ON t.k = __dtables_in.__dtables_k0 WHEN MATCHED AND p THEN UPDATE SET c = e

DISTINCT makes every target row match at most one source row (as IN does), and ``=`` is as false as IN on NULLs.
Other subquery forms are refused with the MERGE to write instead.
"""

from __future__ import annotations

from sqlglot import exp

from dtables.errors import SqlError
from dtables.sql.dialect import parse_one, to_spark

_IN = "__dtables_in"


def _conjuncts(condition: exp.Expr) -> list[exp.Expr]:
    return list(condition.flatten()) if isinstance(condition, exp.And) else [condition]


def _has_subquery(e: exp.Expr) -> bool:
    return e.find(exp.Subquery, exp.Exists, exp.Select) is not None


def in_subquery_as_merge(tree: exp.Expr, statement: str) -> exp.Expr:
    """``tree`` unchanged unless it is an UPDATE/DELETE whose condition holds a subquery; then the MERGE above."""
    if not isinstance(tree, (exp.Update, exp.Delete)):
        return tree
    where = tree.args.get("where")
    if where is None or not _has_subquery(where):
        return tree
    conjuncts = _conjuncts(where.this)
    ins = [c for c in conjuncts if isinstance(c, exp.In) and c.args.get("query") is not None]
    rest = [c for c in conjuncts if not any(c is i for i in ins)]
    verb = "UPDATE" if isinstance(tree, exp.Update) else "DELETE"
    if len(ins) != 1 or any(_has_subquery(c) for c in rest):
        raise SqlError(f"{verb} with this subquery cannot run on Delta tables: dtables runs `key IN (SELECT ...)` "
                       "[AND conditions without subqueries]; write other forms as MERGE INTO target USING (...) ON "
                       f"... WHEN MATCHED THEN {verb}", statement)
    found = ins[0]
    keys = found.this.expressions if isinstance(found.this, exp.Tuple) else [found.this]
    names = [f"__dtables_k{i}" for i in range(len(keys))]
    query = found.args["query"]
    inner = query.this if isinstance(query, exp.Subquery) else query
    on = " AND ".join(f"{to_spark(k)} = {_IN}.{n}" for k, n in zip(keys, names))
    condition = f" AND {' AND '.join(to_spark(c) for c in rest)}" if rest else ""
    if isinstance(tree, exp.Update):
        action = "UPDATE SET " + ", ".join(to_spark(e) for e in tree.expressions)
    else:
        action = "DELETE"
    merge = (f"MERGE INTO {to_spark(tree.this)} USING (SELECT DISTINCT * FROM ({to_spark(inner)}) AS "
             f"{_IN}_q({', '.join(names)})) AS {_IN} ON {on} WHEN MATCHED{condition} THEN {action}")
    return parse_one(merge)
