"""Δ of COUNT / SUM / AVG aggregates from signed sums of the change set: new = old + ΣΔ."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from differentiation.delta_nodes import Delta, StoredState
from differentiation.plan import AggCall, Aggregate, Node, Project, Scalar
from differentiation.rewrite import DeriveContext
from differentiation.types import avg_expression, column_types, expression_type, sum_type


def helper_args(agg: Aggregate) -> tuple[Scalar, ...]:
    """Distinct arguments of the aggregate calls, in order: helper column i is about argument i."""
    return tuple(dict.fromkeys(a.arg for _, a in agg.aggs if a.arg is not None))


def algebraic_ok(agg: Aggregate) -> bool:
    """COUNT(*), COUNT(x), SUM(x), AVG(x) without DISTINCT, where x is a column or an arithmetic expression whose
    Spark type we can tell (``types.expression_type``) and whose SUM/AVG types we model."""
    types = column_types(agg.child)
    for _, call in agg.aggs:
        if call.distinct or call.func not in ("COUNT", "SUM", "AVG"):
            return False
        if call.func in ("SUM", "AVG"):
            assert call.arg is not None
            t = expression_type(call.arg.expr, types) or ""
            if sum_type(t) is None or avg_expression(t, exp.column("s"), exp.column("n")) is None:
                return False
    return True


def arg_type(agg: Aggregate, arg: Scalar) -> str:
    """The Spark type of a SUM/AVG argument (callers checked `algebraic_ok`)."""
    t = expression_type(arg.expr, column_types(agg.child))
    assert t is not None, arg.sql
    return t


def with_state_columns(plan: Node) -> Node:
    """`plan` whose output also carries the helper columns the algebraic rule reads back:
    `__key<j>` (group keys), `__cnt` (rows), `__sum_<i>` (SUM/AVG arguments), `__nn_<i>` (non-null)."""
    agg = state_aggregate(plan)
    if agg is None:
        raise ValueError("state columns exist only for Project(Aggregate) of COUNT/SUM/AVG")
    assert isinstance(plan, Project)
    extra: list[tuple[str, AggCall]] = [("__cnt", AggCall("COUNT", None))]
    summed = {a.arg for _, a in agg.aggs if a.func in ("SUM", "AVG")}
    for i, arg in enumerate(helper_args(agg)):
        if arg in summed:
            extra.append((f"__sum_{i}", AggCall("SUM", arg)))
        extra.append((f"__nn_{i}", AggCall("COUNT", arg)))
    new_agg = agg.copy(aggs=agg.aggs + tuple(extra))
    passthrough = tuple((n, Scalar.column(n)) for n in [k for k, _ in agg.keys] + [n for n, _ in extra])
    return plan.copy(child=new_agg, outputs=plan.outputs + passthrough)


def stored_state(agg: Aggregate) -> StoredState:
    """The helper columns a stored state of `agg` holds (as `with_state_columns` adds them)."""
    names = [f"__key{j}" for j in range(len(agg.keys))] + ["__cnt"]
    summed = {a.arg for _, a in agg.aggs if a.func in ("SUM", "AVG")}
    for i, arg in enumerate(helper_args(agg)):
        names += ([f"__sum_{i}"] if arg in summed else []) + [f"__nn_{i}"]
    return StoredState(tuple(names))


def state_aggregate(plan: Node) -> Aggregate | None:
    """The aggregate whose previous result a stored state holds: plan must be Project(Aggregate)."""
    if isinstance(plan, Project) and isinstance(plan.child, Aggregate) and algebraic_ok(plan.child):
        return plan.child
    return None


class AggregateChange(Node):
    """A change set of an aggregate `agg` built from its input's change set `delta` (not from `agg` itself, whose
    scans are not leaves of the change plan: `children` names the inputs)."""

    agg: Aggregate
    delta: Node

    def columns(self) -> tuple[str, ...]:
        return self.agg.columns()

    @property
    def is_delta(self) -> bool:
        return True


@dataclass(frozen=True)
class AlgebraicAggregateDelta(AggregateChange):
    """Change set of `agg` computed as DELETE old row + INSERT (old + ΣΔ) row per affected key.

    `state` reads the previous result with helper columns (`__key<j>`, `__cnt`, `__sum_<i>`, `__nn_<i>`); this
    node is only built when the caller has one.
    """

    agg: Aggregate
    delta: Node
    state: StoredState

    def __post_init__(self) -> None:
        if not self.delta.is_delta and not isinstance(self.delta, Delta):
            raise ValueError("the input of an algebraic aggregate delta is a change set")

    def children(self) -> tuple[Node, ...]:
        return (self.delta, self.state)

    def label(self) -> str:
        return f"Δγ algebraic (old from state) {self.agg.label()}"


def derive_aggregate_algebraic(node: Delta, *, ctx: DeriveContext) -> Node | None:
    """Δγk(Q) = π−(old|K) + π+(old|K + γk(signed ΔQ)), K = keys of ΔQ, for COUNT/SUM/AVG.

    Applies to the stored-state aggregate only; returns None where the affected-keys rule must be
    used instead. Example: Δγ[k](SUM v) with state -> π−(state ⋉ K) + π+(state ⟕ ΣΔ).
    """
    agg = node.child
    if not ctx.state or not isinstance(agg, Aggregate) or ctx.top is None or state_aggregate(ctx.top) != agg:
        return None
    return AlgebraicAggregateDelta(agg, Delta(agg.child), stored_state(agg))
