"""SQL for `AlgebraicAggregateDelta`: signed sums of the change set merged into the stored state."""

from __future__ import annotations

from collections.abc import Callable

from differentiation.plan import Node
from differentiation.render import hash_values, q
from differentiation.rules.aggregate_algebraic import AlgebraicAggregateDelta, arg_type, helper_args
from differentiation.types import avg_expression, sum_type


def render_algebraic(node: AlgebraicAggregateDelta, render: Callable[[Node], str]) -> str:
    """DELETE the stored row of every key the change set touches, INSERT old + ΣΔ (when rows remain).

    A scalar aggregate has exactly one stored row and always re-emits it (COUNT 0, SUM NULL when
    empty); unchanged pairs cancel in consolidation.
    """
    agg = node.agg
    keys = [k.sql for _, k in agg.keys]
    args = helper_args(agg)
    summed = {a.arg for _, a in agg.aggs if a.func in ("SUM", "AVG")}
    sign = "CASE WHEN __action = 'INSERT' THEN 1 ELSE -1 END"
    d_items = [f"{k} AS __key{j}" for j, k in enumerate(keys)] + [f"SUM({sign}) AS __dcnt"]
    for i, a in enumerate(args):
        if a in summed:
            d_items.append(f"SUM(CASE WHEN __action = 'INSERT' THEN {a.sql} ELSE -({a.sql}) END) AS __dsum_{i}")
        d_items.append(f"SUM(CASE WHEN {a.sql} IS NULL THEN 0 ELSE {sign} END) AS __dnn_{i}")
    group = f" GROUP BY {', '.join(keys)}" if keys else ""
    d = f"SELECT {', '.join(d_items)} FROM ({render(node.delta)}) AS t{group}"
    on = " AND ".join(f"o.__key{j} <=> d.__key{j}" for j in range(len(keys))) or "true"

    merged = [f"d.__key{j} AS __key{j}" for j in range(len(keys))]
    merged.append("coalesce(o.__cnt, 0) + coalesce(d.__dcnt, 0) AS __cnt")
    for i, a in enumerate(args):
        if a in summed:
            st = sum_type(arg_type(agg, a))
            merged.append(f"CAST(coalesce(o.__sum_{i}, 0) + coalesce(d.__dsum_{i}, 0) AS {st}) AS __sum_{i}")
        merged.append(f"coalesce(o.__nn_{i}, 0) + coalesce(d.__dnn_{i}, 0) AS __nn_{i}")
    new = f"SELECT {', '.join(merged)} FROM ({d}) AS d LEFT OUTER JOIN ({node.state}) AS o ON {on}"
    old = f"SELECT o.* FROM ({node.state}) AS o LEFT SEMI JOIN ({d}) AS d ON {on}"

    def outputs(alias: str) -> str:
        items = [f"{alias}.__key{j} AS {q(n)}" for j, (n, _) in enumerate(agg.keys)]
        for name, call in agg.aggs:
            if call.arg is None:
                items.append(f"{alias}.__cnt AS {q(name)}")
                continue
            i = args.index(call.arg)
            nn = f"{alias}.__nn_{i}"
            if call.func == "COUNT":
                items.append(f"{nn} AS {q(name)}")
            elif call.func == "SUM":
                items.append(f"CASE WHEN {nn} = 0 THEN NULL ELSE {alias}.__sum_{i} END AS {q(name)}")
            else:
                avg = avg_expression(arg_type(agg, call.arg), f"{alias}.__sum_{i}", nn)
                items.append(f"CASE WHEN {nn} = 0 THEN NULL ELSE {avg} END AS {q(name)}")
        row_id = hash_values([f"{alias}.__key{j}" for j in range(len(keys))])
        return ", ".join(items) + f", {row_id} AS __row_id"

    keep = " WHERE n.__cnt > 0" if keys else ""
    return (f"(SELECT {outputs('o')}, 'DELETE' AS __action FROM ({old}) AS o) UNION ALL "
            f"(SELECT {outputs('n')}, 'INSERT' AS __action FROM ({new}) AS n{keep})")
