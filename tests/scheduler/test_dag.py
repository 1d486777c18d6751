from __future__ import annotations

import pytest

from scheduler.dag import DAG
from scheduler.errors import CycleError, UnknownTableError

# raw -> clean -> daily -> report ; events -> sessions (an independent branch)
NODES = {
    "raw": [],
    "clean": ["raw"],
    "daily": ["clean"],
    "report": ["daily", "clean"],
    "events": [],
    "sessions": ["events"],
}


def test_topological_order_puts_upstreams_first_and_is_deterministic() -> None:
    dag = DAG(NODES)
    order = dag.topological_order()
    for node, ups in NODES.items():
        assert all(order.index(u) < order.index(node) for u in ups)
    assert order == DAG(dict(reversed(list(NODES.items())))).topological_order()


def test_cycle_is_rejected_with_its_path() -> None:
    with pytest.raises(CycleError) as err:
        DAG({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]})
    assert err.value.path == ("a", "b", "c", "a")
    assert "a -> b -> c -> a" in str(err.value)


def test_self_reference_is_a_cycle() -> None:
    with pytest.raises(CycleError, match="t -> t"):
        DAG({"t": ["t"]})


def test_unknown_upstream_is_named() -> None:
    with pytest.raises(UnknownTableError, match="clean reads missing"):
        DAG({"clean": ["missing"]})


def test_closures() -> None:
    dag = DAG(NODES)
    assert dag.upstream_closure(["report"]) == ["raw", "clean", "daily", "report"]
    assert dag.upstream_closure(["sessions", "clean"]) == ["events", "raw", "clean", "sessions"]
    assert dag.downstream_closure(["clean"]) == ["clean", "daily", "report"]
    with pytest.raises(UnknownTableError, match="nope"):
        dag.downstream_closure(["nope"])


def test_generations_and_independent_branches() -> None:
    dag = DAG(NODES)
    assert dag.generations() == [["events", "raw"], ["clean", "sessions"], ["daily"], ["report"]]
    # Within a subset only the subset's own edges count.
    assert dag.generations(["raw", "daily", "report"]) == [["raw", "daily"], ["report"]]
    assert dag.independent_branches() == [["events", "sessions"], ["raw", "clean", "daily", "report"]]


def test_subdag_keeps_internal_edges_only() -> None:
    sub = DAG(NODES).subdag(["clean", "daily", "report"])
    assert sub.upstreams("report") == ["clean", "daily"]
    assert sub.upstreams("clean") == []


def test_renderings_carry_labels_and_edges() -> None:
    dag = DAG({"raw": [], "clean": ["raw"]})
    labels = {"raw": 'lag 1 minute, "SUCCEEDED"', "clean": "DOWNSTREAM, never"}
    assert dag.to_text(labels.__getitem__) == (
        'raw  [lag 1 minute, "SUCCEEDED"]\nclean  [DOWNSTREAM, never]  <- raw'
    )
    assert dag.to_mermaid(labels.__getitem__) == (
        "flowchart LR\n"
        '    n0["raw<br/>lag 1 minute, #quot;SUCCEEDED#quot;"]\n'
        '    n1["clean<br/>DOWNSTREAM, never"]\n'
        "    n0 --> n1"
    )
    dot = dag.to_dot(labels.__getitem__)
    assert '"raw" -> "clean";' in dot
    assert '"raw" [label="raw\\nlag 1 minute, \\"SUCCEEDED\\""];' in dot
