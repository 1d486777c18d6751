"""Δ of scans, filters, projections and LATERAL VIEW generators: the derivative commutes with row-wise operators."""

from __future__ import annotations

from differentiation.delta_nodes import ChangeRead, Delta
from differentiation.plan import Filter, Generate, Node, Project, Scan
from differentiation.rewrite import DeriveContext


def derive_scan(node: Delta, *, ctx: DeriveContext) -> Node:
    """Δ(T) = changes(T). Example: Δ(people) -> Changes people AS people."""
    assert isinstance(node.child, Scan)
    return ChangeRead(node.child, append_only=ctx.append_only)


def derive_filter(node: Delta, *, ctx: DeriveContext) -> Node:
    """Δσ(Q) = σ(ΔQ); row ids unchanged. Example: Δ(σ[a>1] T) -> σ[a>1] Δ(T)."""
    child = node.child
    assert isinstance(child, Filter)
    return child.copy(child=Delta(child.child))


def derive_project(node: Delta, *, ctx: DeriveContext) -> Node:
    """Δπ(Q) = π(ΔQ); row ids unchanged. Example: Δ(π[a] T) -> π[a] Δ(T)."""
    child = node.child
    assert isinstance(child, Project)
    return child.copy(child=Delta(child.child))


def derive_generate(node: Delta, *, ctx: DeriveContext) -> Node:
    """Δ explode(Q) = explode(ΔQ): a row's elements come and go with it, under the same ids (row id, position)."""
    child = node.child
    assert isinstance(child, Generate)
    return child.copy(child=Delta(child.child))
