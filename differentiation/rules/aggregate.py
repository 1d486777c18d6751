"""Δ of GROUP BY and scalar aggregates by recomputing the affected groups (paper 3.2.1)."""

from __future__ import annotations

from dataclasses import dataclass

from differentiation.delta_nodes import At, Delta, KeySet, Restrict, Signed, Sum
from differentiation.plan import Aggregate, Node
from differentiation.rewrite import DeriveContext
from differentiation.rules.aggregate_algebraic import (
    AggregateChange, algebraic_ok, arg_type, derive_aggregate_algebraic,
)
from differentiation.types import sum_type
from differentiation.vocabulary import DELETE, INSERT


@dataclass(frozen=True)
class AggregateFromEnd(AggregateChange):
    """Δγk of COUNT / SUM / AVG over exact numbers, each touched group's values at I0 taken from those at I1.

    Q|I0 = Q|I1 − ΔQ as multisets (ΔQ a change set of Q, consolidated or not), so a group's row count, sums and
    non-null counts at I0 are those at I1 less ΔQ's signed ones: `end` (Q|I1 ⋉k K, K the keys of ΔQ) is read
    once, grouped, and Q|I0 never. Each group comes out as a DELETE of its row at I0 (when it had rows) and an
    INSERT of its row at I1 (when it has rows). Integers and decimals only: their sums subtract exactly, where a
    DOUBLE's would round differently from a recompute at I0. Grouped aggregates only: a scalar one keeps the
    recompute (its one row is re-emitted whatever changed).
    """

    agg: Aggregate
    end: Node
    delta: Node

    def children(self) -> tuple[Node, ...]:
        return (self.end, self.delta)

    def label(self) -> str:
        return f"Δγ at I0 from I1 {self.agg.label()}"


def _exact(agg: Aggregate) -> bool:
    if not agg.keys or not algebraic_ok(agg):
        return False
    summed = [a.arg for _, a in agg.aggs if a.func in ("SUM", "AVG") and a.arg is not None]
    return all(sum_type(arg_type(agg, arg)) not in (None, "DOUBLE") for arg in summed)


def derive_aggregate(node: Delta, *, ctx: DeriveContext) -> Node:
    """Δγk(Q) = π−(γk(Q|I0 ⋉k ΔQ)) + π+(γk(Q|I1 ⋉k ΔQ)).

    Valid for every aggregate (MIN/MAX/COUNT DISTINCT included). Unchanged groups produce equal
    DELETE/INSERT rows with equal ids that consolidation cancels; a group whose rows all left has
    no π+ row, so it disappears. A scalar aggregate (no keys) restricts on "ΔQ is not empty" and
    always has one row per side, so its DELETE/INSERT pair shares the constant id.
    Example: Δγ[oid](items) -> π−(γ[oid](items@I0 ⋉ Δitems.oid)) + π+(γ[oid](items@I1 ⋉ Δitems.oid)).

    Grouped COUNT / SUM / AVG of integers and decimals read Q at I1 only (`AggregateFromEnd`): TPC-H's nested
    aggregates over lineitem (Q17's average per part, Q18's sum per order) then scan it once, not twice. Not with
    APPEND_ONLY change reads, which leave out some of ΔQ's rows.
    """
    agg = node.child
    assert isinstance(agg, Aggregate)
    key_exprs = tuple(k for _, k in agg.keys)
    keys = KeySet((Delta(agg.child),), (key_exprs,))
    if _exact(agg) and not ctx.append_only:
        return AggregateFromEnd(agg, Restrict(At(agg.child, "end"), (key_exprs,), keys), Delta(agg.child))

    def side(when: str, action: str) -> Node:
        return Signed(agg.copy(child=Restrict(At(agg.child, when), (key_exprs,), keys)), action)

    return Sum((side("start", DELETE), side("end", INSERT)))


def derive_aggregate_any(node: Delta, *, ctx: DeriveContext) -> Node:
    """The aggregate rule: algebraic from a stored state when possible, else affected keys."""
    return derive_aggregate_algebraic(node, ctx=ctx) or derive_aggregate(node, ctx=ctx)
