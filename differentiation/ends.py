"""One read of a base table for both ends of the interval, where a change plan reads it restricted at both.

Recomputing the groups (or keys, or partitions) a change touched reads the same restricted state at both ends:
Δγ(R) = −γ(R|I0 ⋉ K) + γ(R|I1 ⋉ K), and so do outer joins and windows. Compiled as two snapshots, R is scanned
twice, although with deletion vectors the files are the same at both ends (a DELETE marks rows in place; only the
vectors differ), and without them most are. `share_ends` rewrites each such pair into one read of both ends,
restricted once and computed once, from which each end takes its rows:

    R|I0 ⋉ K, R|I1 ⋉ K   →   EndOf(B, I0), EndOf(B, I1)   with   B = BothEnds(R) ⋉ K

A pair is the same table with the same key filters, restricted by the same key set on the same columns, whose keys
come from no other shared read (Spark cannot plan one shared read defined over another). Pure
rewrite of a pushed plan (`compile.push_at`), applied last, after key pruning and term restriction, for small
changes only: B is kept once (a shuffle of its rows), which is cheap when K is a few keys and costs more than the
second scan it saves when K covers much of R.
"""

from __future__ import annotations

from collections.abc import Hashable

from differentiation.delta_nodes import BothEnds, EndOf, KeySet, Restrict, Snapshot
from differentiation.plan import Node, each_once
from differentiation.rewrite import map_children


def _pair_key(node: Node) -> Hashable | None:
    """What a restricted snapshot shares with its other end: everything but the end."""
    if isinstance(node, Restrict) and isinstance(node.child, Snapshot):
        return node.child.scan, node.child.keys, node.alternatives, node.keys
    return None


def _paired(plan: Node) -> set[Hashable]:
    ends: dict[Hashable, set[str]] = {}
    for node in each_once(plan):
        key = _pair_key(node)
        if key is not None:
            assert isinstance(node, Restrict) and isinstance(node.child, Snapshot)
            ends.setdefault(key, set()).add(node.child.when)
    return {key for key, whens in ends.items() if len(whens) == 2}


def _reads_shared(node: Node) -> bool:
    return any(isinstance(n, EndOf) for n in each_once(node))


def share_ends(plan: Node) -> Node:
    """`plan` with every restricted snapshot whose other end the plan also reads turned into `EndOf` a shared read
    of both ends."""
    paired = _paired(plan)
    if not paired:
        return plan
    done: dict[Node, Node] = {}

    def rewrite(node: Node) -> Node:
        if node not in done:
            if isinstance(node, Restrict) and isinstance(node.child, Snapshot) and _pair_key(node) in paired:
                keys = rewrite(node.keys)
                assert isinstance(keys, KeySet)
                if _reads_shared(keys):
                    # The shared read would be defined over another (its keys come from one): Spark 4.2 fails to
                    # plan such nested shared CTEs (ReplaceCTERefWithRepartition: "previously resolved and now
                    # became unresolved"), so the inner pair is shared and this one read at each end.
                    done[node] = node.copy(keys=keys)
                else:
                    both = Restrict(BothEnds(node.child.scan, node.child.keys), node.alternatives, keys)
                    done[node] = EndOf(both, node.child.when)
            else:
                done[node] = map_children(node, rewrite)
        return done[node]

    return rewrite(plan)
