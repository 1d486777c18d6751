"""`differentiate`: a plan -> its change plan in a chosen format, with the shape paper 4.2 names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from differentiation.constraints import Constraints
from differentiation.delta_nodes import Consolidate, Delta, Empty
from differentiation.errors import UnsupportedQuery
from differentiation.monotonic import non_monotonic_operator
from differentiation.plan import Node
from differentiation.pure import is_pure
from differentiation.rewrite import DeriveContext, Rule, replace
from differentiation.rules import RULES
from differentiation.support import incremental_reason
from differentiation.vocabulary import ChangeFormat, ChangeStats, Shape


@dataclass(frozen=True)
class Derivative:
    """A differentiated plan: `plan` is a change set (minimum delta when shape is MINIMIZE and `minimal`; else a pure
    one, whose cancelling pairs only a write by row id may take: `differentiation.pure`)."""

    source: Node
    plan: Node
    shape: Shape
    information: ChangeFormat
    minimal: bool = True
    constraints: Constraints = Constraints()  # the RELY keys it was derived under (key pruning uses them too)
    # the base tables whose change may have inserted rows, and those whose change may have deleted rows: a
    # referenced table's change proves keys absent only where it can have gained or lost some (`prune.Absence`)
    inserted: frozenset[str] = frozenset()
    deleted: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.shape not in tuple(Shape) or not self.plan.is_delta:
            raise ValueError("a derivative is a change set of a known shape")

    def columns(self) -> tuple[str, ...]:
        return self.source.columns()

    def to_text(self) -> str:
        return f"{self.information.value} shape={self.shape}\n{self.plan.to_text()}"


def _shape(plan: Node, changed: frozenset[str], stats: Mapping[str, ChangeStats], append_only: bool) -> Shape:
    if not changed:
        return Shape.NO_DATA
    if append_only or non_monotonic_operator(plan) is not None:
        return Shape.ADDED_ONLY if append_only else Shape.MINIMIZE
    kinds = [stats.get(t, ChangeStats()) for t in changed]
    if all(not k.deletes for k in kinds):
        return Shape.ADDED_ONLY
    if all(not k.inserts for k in kinds):
        return Shape.REMOVED_ONLY
    return Shape.MINIMIZE


def differentiate(
    plan: Node,
    information: ChangeFormat = ChangeFormat.DEFAULT,
    stats: Mapping[str, ChangeStats] | None = None,
    *,
    state: bool = False,
    rules: tuple[tuple[type, Rule], ...] = RULES,
    constraints: Constraints = Constraints(),
    minimal: bool = True,
) -> Derivative:
    """Δ plan over an interval. `stats` per base table (missing = may have inserts and deletes).

    `state`: the caller stores the previous result with its helper columns (see
    `snapshot_query(..., with_state_columns=True)`) and its `Sources.state()` names it; when the plan is
    Project(Aggregate) of
    COUNT/SUM/AVG, the aggregate is maintained algebraically from it (new = old + ΣΔ); otherwise
    it is ignored and the affected-keys rule recomputes touched groups from Q|I0 and Q|I1.

    `constraints`: the RELY keys of the plan's tables; with `stats`, they drop join terms that must be empty.

    `minimal=False`: the caller applies the change set by row id (a dynamic table's refresh), so a MINIMIZE
    derivative is left unconsolidated where it is pure (`differentiation.pure`); `Derivative.minimal` says which.

    Raises UnsupportedQuery when the plan cannot be maintained incrementally, or when APPEND_ONLY is
    asked of a non-monotonic plan (naming the operator).
    """
    reason = incremental_reason(plan)
    if reason is not None:
        raise UnsupportedQuery(reason, "incremental")
    append_only = information is ChangeFormat.APPEND_ONLY
    if append_only:
        op = non_monotonic_operator(plan)
        if op is not None:
            raise UnsupportedQuery(f"APPEND_ONLY changes need a monotonic query, but it contains {op}", op)
    stats = dict(stats or {})
    changed = frozenset(t for t in plan.base_tables() if stats.get(t, ChangeStats()).changed)
    kinds = {t: stats.get(t, ChangeStats()) for t in changed}
    ctx = DeriveContext(changed=changed, append_only=append_only, state=state, top=plan, constraints=constraints,
                        inserts_only=frozenset(t for t, k in kinds.items() if not k.deletes),
                        deletes_only=frozenset(t for t, k in kinds.items() if not k.inserts),
                        moved=tuple(sorted((t, k.moved) for t, k in kinds.items() if k.moved is not None)))
    shape = _shape(plan, changed, stats, append_only) if ctx.has_changes(plan) else Shape.NO_DATA
    inserted = frozenset(t for t, k in kinds.items() if k.inserts)
    deleted = frozenset(t for t, k in kinds.items() if k.deletes)

    def derivative(delta: Node, minimal: bool = True) -> Derivative:
        return Derivative(plan, delta, shape, information, minimal=minimal, constraints=constraints,
                          inserted=inserted, deleted=deleted)

    if shape == Shape.NO_DATA:
        return derivative(Empty(plan))
    delta = replace(Delta(plan), dict(rules), ctx)
    if shape != Shape.MINIMIZE:
        return derivative(delta)
    if not minimal and rules is RULES and is_pure(plan, ctx):  # is_pure knows the default rules
        return derivative(delta, minimal=False)
    return derivative(Consolidate(delta))
