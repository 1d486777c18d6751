"""The public SQL outputs: change sets with METADATA$ columns, snapshots with __row_id, explain text."""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from differentiation.build import build_plan
from differentiation.delta_nodes import At
from differentiation.derive import ChangeFormat, Derivative, differentiate
from differentiation.plan import Node
from differentiation.render import q, render_plan
from differentiation.rules.aggregate_algebraic import with_state_columns as with_state_columns_of
from differentiation.sources import Sources, When


def render_changes(d: Derivative, sources: Sources) -> str:
    """A SELECT of the query's columns, METADATA$ACTION, METADATA$ISUPDATE, METADATA$ROW_ID.

    ISUPDATE is computed last, over the minimum delta: true exactly when a DELETE and an INSERT
    share a row id. Shapes without consolidation (ADDED_ONLY, REMOVED_ONLY, NO_DATA) hold one action
    only, so ISUPDATE is false there, as it always is for APPEND_ONLY.
    """
    body = render_plan(d.plan, sources)
    cols = ", ".join(q(c) for c in d.columns())
    if d.shape == "MINIMIZE" and d.information is ChangeFormat.DEFAULT:
        is_update = ("(MIN(__action) OVER (PARTITION BY __row_id) <> "
                     "MAX(__action) OVER (PARTITION BY __row_id))")
    else:
        is_update = "false"
    return (f"SELECT {cols}, __action AS `METADATA$ACTION`, {is_update} AS `METADATA$ISUPDATE`, "
            f"__row_id AS `METADATA$ROW_ID` FROM ({body}) AS changes")


def render_snapshot(plan: Node, sources: Sources, when: When = "end", *, with_state_columns: bool = False) -> str:
    """A SELECT of the query's columns and `__row_id` at I0 ("start") or I1 ("end"), ids as in changes.

    `with_state_columns` appends the helper columns a stored state needs for the algebraic
    aggregate rule (`__key<j>`, `__cnt`, `__sum_<i>`, `__nn_<i>`); ValueError if the plan has none.
    """
    cols = ", ".join(q(c) for c in plan.columns())
    if with_state_columns:
        full = with_state_columns_of(plan)
        helpers = [c for c in full.columns() if c not in plan.columns()]
        cols += ", " + ", ".join(q(c) for c in helpers)
        plan = full
    return f"SELECT {cols}, __row_id FROM ({render_plan(At(plan, when), sources)}) AS snapshot"


def explain(query: str | exp.Expression | Node, schema: Mapping[str, Mapping[str, str]] | None = None,
            information: ChangeFormat = ChangeFormat.DEFAULT, stats: Mapping[str, object] | None = None) -> str:
    """Text of the plan and of its derivative (the rewritten change plan)."""
    plan = query if isinstance(query, Node) else build_plan(query, schema or {})
    d = differentiate(plan, information, stats)  # type: ignore[arg-type]
    return f"plan:\n{plan.to_text()}\nchanges ({d.information.value}, shape {d.shape}):\n{d.plan.to_text()}"
