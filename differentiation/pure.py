"""Whether a derivative is *pure*: every DELETE row it emits is a row of Q|I0 and every INSERT row a row of Q|I1
(row id and values alike), though a DELETE and an INSERT of the same row may cancel and rows may repeat.

A pure change set needs no consolidation to be applied by row id, as a dynamic table's refresh applies it (one row
per id: its INSERT if it has one, else its DELETE). Row ids are unique in each snapshot, and the change set sums to
Q|I1 − Q|I0. An id with an INSERT takes that row, which is the id's row at I1. An id with only DELETEs was at I0
and is not at I1: had it a row at I1 (changed or not), the sum would need an INSERT of that row. An id without
rows is unchanged. So consolidation (a shuffle of the whole change set on every column) can be skipped there; the
write still leaves out an id whose DELETE and INSERT are equal (``dtables.dynamic.apply``).

Per rule (``differentiation.rules``), the Δ it builds is pure when:

- a base table's change read: always (``Sources.changes``: DELETE rows from the start, INSERT rows at the end);
- σ, π, explode, UNION ALL: their inputs' Δ are;
- aggregates, DISTINCT, windows, full outer joins and outer joins of two changed sides: always, they recompute the
  touched keys at both ends (π− of Q|I0 rows, π+ of Q|I1 rows; the algebraic aggregate deletes the stored row and
  inserts old + ΣΔ, the row at I1);
- a left or right join with one changed side: when that side's Δ is (ΔP ⟕ N with N the same at both ends, or the
  matched rows P ⋈ ΔN plus padded rows of P|I0 = P|I1 by their verdict at each end, as for anti joins below);
- inner and cross joins: L|I0 ⋈ ΔR pairs a new R row with an old L row that may be gone at I1, so the join of two
  changed sides is not; one changed side is when its Δ is (the other side is the same at both ends); a term left
  by declared keys (``rules.join.proved_term``) is when ΔF is: after inserts only, P|I1 ⋈ ΔF's DELETE rows pair an
  old F row with the P row its key referenced at I0, which is still there and unique at I1; the same at I0 after
  deletes only (the RELY contract);
- semi and anti joins: ΔL ⋉ R|I1 tests an old L row against the new R, so both sides changed is not; with L
  unchanged a row of L|I0 = L|I1 comes out as a DELETE when it is in the result at I0, as an INSERT when at I1
  (recomputed at both ends, or judged by counts at both ends: ``rules.semi_join.CountedSemiJoinDelta``).

Pure functions over plan trees; no I/O.
"""

from __future__ import annotations

from differentiation.plan import Aggregate, Distinct, Filter, Generate, Join, Node, Project, Scan, UnionAll, Window
from differentiation.rewrite import DeriveContext
from differentiation.rules.join import proved_term


def is_pure(plan: Node, ctx: DeriveContext) -> bool:
    """Whether the Δ of ``plan`` the default rules build (with ``ctx``) is pure (module docstring). False for what it
    does not know, so a caller that skips consolidation on it never misapplies a change set."""
    if not ctx.has_changes(plan):
        return True  # Δ = ∅
    if isinstance(plan, Scan):
        return True
    if isinstance(plan, (Filter, Project, Generate)):
        return is_pure(plan.child, ctx)
    if isinstance(plan, UnionAll):
        return all(is_pure(c, ctx) for c in plan.children())
    if isinstance(plan, (Aggregate, Distinct, Window)):
        return True
    if isinstance(plan, Join):
        return _join_is_pure(plan, ctx)
    return False


def _join_is_pure(join: Join, ctx: DeriveContext) -> bool:
    left, right = ctx.has_changes(join.left), ctx.has_changes(join.right)
    if join.kind in ("left", "right", "full"):
        return join.kind == "full" or (left and right) or is_pure(join.left if left else join.right, ctx)
    if join.kind in ("semi", "anti"):
        return not left or (not right and is_pure(join.left, ctx))
    proved = proved_term(join, ctx)
    if proved is not None:
        return is_pure(join.right if proved[0] == "left" else join.left, ctx)
    if left and right:
        return False
    return is_pure(join.left if left else join.right, ctx)
