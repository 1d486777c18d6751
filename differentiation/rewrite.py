"""The generic rewriter: push Δ down a plan by applying the rule registered for each node type."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from differentiation.columns import columns_read
from differentiation.constraints import Constraints
from differentiation.delta_nodes import Delta, Empty
from differentiation.plan import Node


@dataclass(frozen=True)
class DeriveContext:
    """What the rules may know about the interval.

    `changed`: base tables that may hold changes (others have Δ = ∅). `append_only`: base change
    reads keep only fresh inserts. `state`: the caller stores the previous result of the *top*
    aggregate with its helper columns (`Sources.state()`; used by the algebraic aggregate rule).
    """

    changed: frozenset[str]
    append_only: bool = False
    state: bool = False
    top: Node | None = None
    # Declared RELY keys, and the changed tables that had only inserts / only deletes: together they prove some
    # join terms empty (`constraints.referenced_side`).
    constraints: Constraints = Constraints()
    inserts_only: frozenset[str] = frozenset()
    deletes_only: frozenset[str] = frozenset()
    # (table, columns moved) of the changed tables whose interval only updated rows in place (`ChangeStats.moved`).
    moved: tuple[tuple[str, frozenset[str]], ...] = ()

    def has_changes(self, plan: Node) -> bool:
        """Whether `plan` may differ between the ends: it reads a changed table, and not only columns of it that no
        update moved. A subplan over an updated table that reads none of the moved columns holds the same rows under
        the same ids at both ends (every row kept its id and, in what the subplan reads, its values): TPC-H Q17's
        average quantity per part after an update of prices."""
        tables = [t for t in plan.base_tables() if t in self.changed]
        moved = dict(self.moved)
        if not tables or not any(t in moved for t in tables):
            return bool(tables)
        read = columns_read(plan)
        return any(t not in moved or not moved[t].isdisjoint(c.lower() for c in read.get(t, ())) for t in tables)


Rule = Callable[..., Node]  # rule(delta: Delta, *, ctx: DeriveContext) -> Node


def map_children(node: Node, fn: Callable[[Node], Node]) -> Node:
    """A copy of `node` with `fn` applied to each direct child (fields or tuples of nodes)."""
    changes: dict[str, object] = {}
    for f in dataclasses.fields(node):  # type: ignore[arg-type]
        value = getattr(node, f.name)
        if isinstance(value, Node) and value in node.children():
            changes[f.name] = fn(value)
        elif isinstance(value, tuple) and value and all(isinstance(v, Node) for v in value):
            changes[f.name] = tuple(fn(v) for v in value)
    return node.copy(**changes) if changes else node


def map_bottom_up(plan: Node, fn: Callable[[Node], Node]) -> Node:
    """`plan` with `fn` applied to each node after its children were rewritten: once per distinct node, so a
    subplan the plan shares is rewritten once and stays shared."""
    done: dict[Node, Node] = {}

    def rewrite(node: Node) -> Node:
        if node not in done:
            done[node] = fn(map_children(node, rewrite))
        return done[node]

    return rewrite(plan)


def replace(node: Node, rules: Mapping[type[Node], Rule], ctx: DeriveContext) -> Node:
    """Rewrite every Δ in `node` until none is left.

    Pre-order on purpose: a rule turns Δ(op(x)) into op'(Δ(x), x@I0, ...) and the new inner Δ
    nodes are then rewritten as children of the result. A Δ over a subplan with no changed base
    table becomes ∅ without consulting any rule.
    """
    while isinstance(node, Delta):
        if not ctx.has_changes(node.child):
            node = Empty(node.child)
            break
        rule = rules.get(type(node.child))
        if rule is None:
            raise TypeError(f"no derivative rule for {type(node.child).__name__}")
        node = rule(node, ctx=ctx)
    return map_children(node, lambda c: replace(c, rules, ctx))
