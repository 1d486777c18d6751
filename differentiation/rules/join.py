"""Δ of inner and cross joins (outer joins are delegated to `outer_join`, semi and anti joins to `semi_join`)."""

from __future__ import annotations

from differentiation.constraints import referenced_side
from differentiation.delta_nodes import At, Delta, Empty, Sum
from differentiation.plan import Join, Node
from differentiation.rewrite import DeriveContext
from differentiation.rules.outer_join import derive_outer_join
from differentiation.rules.semi_join import derive_semi_join


def derive_join(node: Delta, *, ctx: DeriveContext) -> Node:
    """Δ(Q⋈R) = Q|I0 ⋈ ΔR + ΔQ ⋈ R|I1 (one side pre-change, so ΔQ⋈ΔR is counted once).

    Example: Δ(people ⋈ items) -> people@I0 ⋈ Δitems + Δpeople ⋈ items@I1. A term whose Δ side has
    no changed base table is dropped. Row id = hash(left id, right id), the same in every term and in
    the snapshot, so consolidation can cancel pairs across terms.

    When a declared RELY foreign key makes one side P the referenced side and P's table had only inserts (or only
    deletes), the term over ΔP is empty (`differentiation.constraints`) and only P|I1 ⋈ ΔF (or P|I0 ⋈ ΔF) is left.
    """
    join = node.child
    assert isinstance(join, Join)
    if join.kind in ("left", "right", "full"):
        return derive_outer_join(node, ctx=ctx)
    if join.kind in ("semi", "anti"):
        return derive_semi_join(node, ctx=ctx)
    dropped = _term_proved_empty(join, ctx)
    if dropped is not None:
        return dropped
    terms: list[Node] = []
    if ctx.has_changes(join.right):
        terms.append(join.copy(left=At(join.left, "start"), right=Delta(join.right)))
    if ctx.has_changes(join.left):
        terms.append(join.copy(left=Delta(join.left), right=At(join.right, "end")))
    return terms[0] if len(terms) == 1 else Sum(tuple(terms))


def proved_term(join: Join, ctx: DeriveContext) -> tuple[str, str] | None:
    """``(side, when)`` when declared keys prove the term over the referenced side P's change empty: P is ``side``
    and the one term left joins P at ``when`` ("end" after inserts only, "start" after deletes only) with ΔF."""
    side = None if ctx.append_only else referenced_side(join, ctx.constraints, ctx.changed)
    if side is None:
        return None
    p_side = join.left if side == "left" else join.right
    p_tables = [t for t in p_side.base_tables() if t in ctx.changed]
    if len(p_tables) != 1:
        return None
    if p_tables[0] in ctx.inserts_only:
        return side, "end"  # ΔP ⋈ F|I0 = ∅: new keys were referenced by no old row
    if p_tables[0] in ctx.deletes_only:
        return side, "start"  # ΔP ⋈ F|I1 = ∅: gone keys are referenced by no remaining row
    return None


def _term_proved_empty(join: Join, ctx: DeriveContext) -> Node | None:
    """Δjoin without the term over the referenced side's change, when its keys prove that term empty; else None."""
    proved = proved_term(join, ctx)
    if proved is None:
        return None
    side, when = proved
    p_side, f_side = (join.left, join.right) if side == "left" else (join.right, join.left)
    if not ctx.has_changes(f_side):
        return Empty(join)
    p_state, f_delta = At(p_side, when), Delta(f_side)
    return join.copy(left=p_state, right=f_delta) if side == "left" else join.copy(left=f_delta, right=p_state)
