"""Δ of window functions by recomputing the partitions the interval touched."""

from __future__ import annotations

from differentiation.delta_nodes import At, Delta, KeySet, Restrict, Signed, Sum
from differentiation.plan import Node, Window
from differentiation.rewrite import DeriveContext
from differentiation.vocabulary import DELETE, INSERT


def derive_window(node: Delta, *, ctx: DeriveContext) -> Node:
    """Δω(Q) = π−(ω(Q|I0 ⋉p K)) + π+(ω(Q|I1 ⋉p K)), K = πp(ΔQ) over the PARTITION BY keys p.

    A window function sees only its row's partition, so the rows of a partition no change reached are the same
    at I0 and I1; a touched partition is computed again at both ends, and its rows whose values (rank, running
    sum, neighbour) did not move cancel in consolidation (same row id, same values), as MIN/MAX groups do.
    Example: Δω[rank() over (partition by r.k order by r.v)](r) -> π−(ω(r@I0 ⋉ K)) + π+(ω(r@I1 ⋉ K)), K = Δr.k.
    """
    window = node.child
    assert isinstance(window, Window)
    keys = KeySet((Delta(window.child),), (window.partition,))

    def side(when: str, action: str) -> Node:
        return Signed(window.copy(child=Restrict(At(window.child, when), (window.partition,), keys)), action)

    return Sum((side("start", DELETE), side("end", INSERT)))
