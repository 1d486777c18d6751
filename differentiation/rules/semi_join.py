"""Δ of semi and anti joins (EXISTS / IN and NOT EXISTS / NOT IN): changes on the left pass through the filter
against the new right side; changes on the right re-evaluate only the left rows they can reach."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from differentiation.delta_nodes import At, Delta, KeySet, Restrict, Signed, Sum
from differentiation.plan import Join, Node, Scalar
from differentiation.rewrite import DeriveContext
from differentiation.support import equi_keys
from differentiation.vocabulary import DELETE, INSERT


@dataclass(frozen=True)
class KeyEqualities:
    """A join condition that is only equalities of a left key with a right key (`null_safe`: `<=>`)."""

    left: tuple[Scalar, ...]
    right: tuple[Scalar, ...]
    null_safe: tuple[bool, ...]


def key_equalities(join: Join) -> KeyEqualities | None:
    """The condition of `join` as key equalities, or None when some conjunct is anything else (NOT IN's
    `OR (a = b) IS NULL`, a residual comparison between the sides)."""
    if join.condition is None:
        return None
    conjuncts = join.condition.expr.flatten() if isinstance(join.condition.expr, exp.And) else [join.condition.expr]
    left_cols, right_cols = set(join.left.columns()), set(join.right.columns())
    found: list[tuple[Scalar, Scalar, bool]] = []
    for conj in conjuncts:
        if not isinstance(conj, (exp.EQ, exp.NullSafeEQ)):
            return None
        a, b = Scalar(conj.this.copy()), Scalar(conj.expression.copy())
        if not a.columns() or not b.columns():
            return None
        if a.columns() <= right_cols and b.columns() <= left_cols:
            a, b = b, a
        if not (a.columns() <= left_cols and b.columns() <= right_cols):
            return None
        found.append((a, b, isinstance(conj, exp.NullSafeEQ)))
    return KeyEqualities(tuple(a for a, _, _ in found), tuple(b for _, b, _ in found),
                         tuple(n for _, _, n in found))


@dataclass(frozen=True)
class CountedSemiJoinDelta(Node):
    """Δ(L ⋉k R) (or ▷k) with R changed, each row's verdict judged by R's row count per key, read at I1 only.

    A row of L matches R at an end when R holds a row with its key there. R|I0 = R|I1 − ΔR as multisets (ΔR is a
    change set of R, consolidated or not), so R's count of a key at I0 is its count at I1 less ΔR's signed count:
    `ends` (R|I1 restricted to the keys of ΔR and of ΔL) is read once, grouped by key, and R|I0 never. Rows of
    `old` (L|I0 ⋉k K, K the keys of ΔR) whose verdict changed come out as a DELETE (in the result at I0) or an
    INSERT (at I1); rows of `changed` (ΔL, when L changed too) keep their action when they match at I1 (semi) or
    do not (anti), which is ΔL ⋉ R|I1.
    """

    old: Node
    ends: Node
    right_delta: Node
    keys: KeyEqualities
    anti: bool
    changed: Node | None = None

    def __post_init__(self) -> None:
        if self.old.is_delta or self.ends.is_delta or not (self.right_delta.is_delta or
                                                             isinstance(self.right_delta, Delta)):
            raise ValueError("old and ends are states, right_delta a change set")
        if self.changed is not None and self.changed.columns() != self.old.columns():
            raise ValueError("ΔL and L|I0 have the same columns")

    def columns(self) -> tuple[str, ...]:
        return self.old.columns()

    @property
    def is_delta(self) -> bool:
        return True

    def label(self) -> str:
        on = " AND ".join(f"{a} {'<=>' if n else '='} {b}"
                          for a, b, n in zip(self.keys.left, self.keys.right, self.keys.null_safe))
        return f"Δ{'▷' if self.anti else '⋉'} by counts at I1 ON {on}"


def _counted(join: Join, keys: KeyEqualities, ctx: DeriveContext) -> Node:
    right_keys = KeySet((Delta(join.right),), (keys.right,))
    old = Restrict(At(join.left, "start"), (keys.left,), right_keys)
    changed = Delta(join.left) if ctx.has_changes(join.left) else None
    read = right_keys if changed is None else KeySet((Delta(join.right), changed), (keys.right, keys.left))
    ends = Restrict(At(join.right, "end"), (keys.right,), read)
    return CountedSemiJoinDelta(old, ends, Delta(join.right), keys, join.kind == "anti", changed)


def derive_semi_join(node: Delta, *, ctx: DeriveContext) -> Node:
    """Δ(L ⋉θ R) = ΔL ⋉θ R|I1 + π−(L|I0 ⋉k K ⋉θ R|I0) + π+(L|I0 ⋉k K ⋉θ R|I1), K = πk(ΔR); the same with ▷.

    L1 ⋉ R1 − L0 ⋉ R0 = ΔL ⋉ R1 + (L0 ⋉ R1 − L0 ⋉ R0), and a row of L0 changes its verdict only when it meets
    θ with a changed row of R, inserted or deleted. K holds the keys of θ's equalities over ΔR (no equality: one
    empty tuple, so every row of L0 is re-evaluated when R changed at all), a superset of those rows; the rows of
    it whose verdict did not change cancel in consolidation (same row id, same values). Old rows are checked
    against the old right side, new rows against the new one, as design.md's lessons ask. R is restricted to K
    as well: no other row of R can meet a row of L0 ⋉k K.
    Example: Δ(orders ⋉[o.k = l.k] lineitem) -> Δorders ⋉ lineitem@I1 + π−(orders@I0 ⋉ K ⋉ lineitem@I0 ⋉ K)
    + π+(orders@I0 ⋉ K ⋉ lineitem@I1 ⋉ K), K = Δlineitem.k.

    When θ is only key equalities and R changed, the three terms are one `CountedSemiJoinDelta`, which reads R at
    I1 once instead of at both ends (and again for ΔL): on TPC-H Q4 after deleting orders with their lines, two
    full scans of lineitem fewer. Not for APPEND_ONLY change reads: they leave out some of ΔR's rows, and the
    counts need all of them.
    """
    join = node.child
    assert isinstance(join, Join)
    keys = key_equalities(join)
    if ctx.has_changes(join.right) and keys is not None and not ctx.append_only:
        return _counted(join, keys, ctx)
    terms: list[Node] = []
    if ctx.has_changes(join.left):
        terms.append(join.copy(left=Delta(join.left), right=At(join.right, "end")))
    if ctx.has_changes(join.right):
        left_keys, right_keys = equi_keys(join)
        keyset = KeySet((Delta(join.right),), (right_keys,))
        old_left = Restrict(At(join.left, "start"), (left_keys,), keyset)

        def verdict(when: str, action: str) -> Node:
            right = Restrict(At(join.right, when), (right_keys,), keyset) if right_keys else At(join.right, when)
            return Signed(join.copy(left=old_left, right=right), action)

        terms += [verdict("start", DELETE), verdict("end", INSERT)]
    return terms[0] if len(terms) == 1 else Sum(tuple(terms))
