"""A generic, immutable DAG over hashable keys, on networkx.

Edges point the way data flows: ``upstream -> downstream`` (a downstream table reads its upstream). The caller
derives each node's upstreams from its definition (the tables its SQL reads) and passes only the nodes the scheduler
manages (dynamic tables); base tables are not nodes. Every traversal returns results in a deterministic order (ties
broken by ``str(key)``) so plans, renderings and error messages are stable across runs.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Generic, TypeVar

import networkx as nx

from scheduler.errors import CycleError, UnknownTableError

K = TypeVar("K", bound=Hashable)


def _sorted(keys: Iterable[K]) -> list[K]:
    return sorted(keys, key=str)


class DAG(Generic[K]):
    """Nodes and their upstreams; construction rejects unknown upstreams and cycles.

    >>> dag = DAG({"raw_orders": [], "daily": ["raw_orders"], "report": ["daily"]})
    >>> dag.topological_order()
    ['raw_orders', 'daily', 'report']
    """

    def __init__(self, upstreams: Mapping[K, Iterable[K]]) -> None:
        graph: nx.DiGraph = nx.DiGraph()
        graph.add_nodes_from(upstreams)
        for node, ups in upstreams.items():
            for up in ups:
                if up not in upstreams:
                    raise UnknownTableError(f"{node} reads {up}, which is not a table of this DAG")
                graph.add_edge(up, node)
        _reject_cycles(graph)
        self._graph = graph
        self._order: list[K] = list(nx.lexicographical_topological_sort(graph, key=str))
        self._position = {node: i for i, node in enumerate(self._order)}

    # -- basic queries -------------------------------------------------------------------------------------------
    @property
    def nodes(self) -> frozenset[K]:
        return frozenset(self._graph.nodes)

    def __contains__(self, node: object) -> bool:
        return node in self._graph

    def __len__(self) -> int:
        return len(self._graph)

    def upstreams(self, node: K) -> list[K]:
        """The tables ``node`` reads directly."""
        self._check(node)
        return _sorted(self._graph.predecessors(node))

    def downstreams(self, node: K) -> list[K]:
        """The tables that read ``node`` directly."""
        self._check(node)
        return _sorted(self._graph.successors(node))

    def topological_order(self, nodes: Iterable[K] | None = None) -> list[K]:
        """All nodes (or the given subset), every upstream before its downstreams."""
        if nodes is None:
            return list(self._order)
        subset = set(nodes)
        self._check(*subset)
        return sorted(subset, key=self._position.__getitem__)

    # -- closures ------------------------------------------------------------------------------------------------
    def upstream_closure(self, nodes: Iterable[K]) -> list[K]:
        """``nodes`` and everything they read, transitively, in topological order ("refresh these and their
        upstreams")."""
        found: set[K] = set()
        for node in nodes:
            self._check(node)
            found.add(node)
            found |= nx.ancestors(self._graph, node)
        return self.topological_order(found)

    def downstream_closure(self, nodes: Iterable[K]) -> list[K]:
        """``nodes`` and everything that reads them, transitively, in topological order."""
        found: set[K] = set()
        for node in nodes:
            self._check(node)
            found.add(node)
            found |= nx.descendants(self._graph, node)
        return self.topological_order(found)

    def generations(self, nodes: Iterable[K] | None = None) -> list[list[K]]:
        """Dependency-ordered batches of ``nodes`` (default: all): every node's upstreams *within the subset* sit
        in earlier batches, so the nodes of one batch may run in parallel."""
        subset = self.nodes if nodes is None else set(nodes)
        self._check(*subset)
        sub = self._graph.subgraph(subset)
        return [self.topological_order(gen) for gen in nx.topological_generations(sub)]

    def independent_branches(self, nodes: Iterable[K] | None = None) -> list[list[K]]:
        """Groups of ``nodes`` (default: all) that share no dependency path: a failure or a slow refresh in one
        group never holds up another. Each group is in topological order; groups ordered by their first node."""
        subset = self.nodes if nodes is None else set(nodes)
        self._check(*subset)
        sub = self._graph.subgraph(subset)
        groups = [self.topological_order(c) for c in nx.weakly_connected_components(sub)]
        return sorted(groups, key=lambda g: self._position[g[0]])

    def subdag(self, nodes: Iterable[K]) -> DAG[K]:
        """The DAG induced on ``nodes`` (edges to nodes outside are dropped)."""
        subset = set(nodes)
        self._check(*subset)
        return DAG({n: [u for u in self._graph.predecessors(n) if u in subset] for n in subset})

    # -- rendering -----------------------------------------------------------------------------------------------
    def to_text(self, label: Callable[[K], str] | None = None) -> str:
        """One line per node in topological order: ``name [label] <- upstream, ...``."""
        lines = []
        for node in self._order:
            extra = f"  [{label(node)}]" if label else ""
            ups = self.upstreams(node)
            reads = f"  <- {', '.join(map(str, ups))}" if ups else ""
            lines.append(f"{node}{extra}{reads}")
        return "\n".join(lines)

    def to_mermaid(self, label: Callable[[K], str] | None = None) -> str:
        """A mermaid ``flowchart LR`` with stable node ids (n0, n1, ... in topological order)."""
        ids = {node: f"n{i}" for i, node in enumerate(self._order)}
        lines = ["flowchart LR"]
        for node in self._order:
            text = f"{node}<br/>{label(node)}" if label else str(node)
            lines.append(f'    {ids[node]}["{_escape(text, quote="#quot;")}"]')
        for up, down in self._edges():
            lines.append(f"    {ids[up]} --> {ids[down]}")
        return "\n".join(lines)

    def to_dot(self, label: Callable[[K], str] | None = None) -> str:
        """A Graphviz digraph, left to right."""
        lines = ["digraph dtables {", "    rankdir=LR;", "    node [shape=box];"]
        for node in self._order:
            text = f"{node}\\n{label(node)}" if label else str(node)
            lines.append(f'    "{_escape(str(node))}" [label="{_escape(text)}"];')
        for up, down in self._edges():
            lines.append(f'    "{_escape(str(up))}" -> "{_escape(str(down))}";')
        lines.append("}")
        return "\n".join(lines)

    # -- helpers -------------------------------------------------------------------------------------------------
    def _edges(self) -> list[tuple[K, K]]:
        return sorted(self._graph.edges, key=lambda e: (self._position[e[0]], self._position[e[1]]))

    def _check(self, *nodes: K) -> None:
        missing = [n for n in nodes if n not in self._graph]
        if missing:
            raise UnknownTableError(f"not a table of this DAG: {', '.join(map(str, _sorted(missing)))}")

    def __repr__(self) -> str:
        return f"DAG({len(self)} nodes, {self._graph.number_of_edges()} edges)"


def _escape(text: str, quote: str = '\\"') -> str:
    return text.replace('"', quote)


def _reject_cycles(graph: nx.DiGraph) -> None:
    """Raise CycleError naming one cycle in "reads" direction, rotated to start at its smallest node (stable)."""
    try:
        edges = nx.find_cycle(graph)
    except nx.NetworkXNoCycle:
        return
    # Edges run upstream -> downstream; the message reads "a -> b" as "a reads b", so walk the cycle backwards.
    flow = [u for u, _ in edges]
    reads = list(reversed(flow))
    start = min(range(len(reads)), key=lambda i: str(reads[i]))
    rotated = reads[start:] + reads[:start]
    raise CycleError(tuple(rotated + [rotated[0]]))
