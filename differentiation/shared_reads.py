"""One restricted read of a table for every alias a change plan reads it under, at each end of the interval.

A query that reads a table under several aliases (TPC-H Q21: lineitem as l1, l2 and l3) has a change plan that
reads it restricted to affected keys once per alias and key set: after deleting orders with their lines, Q21's
refresh scanned lineitem eight times, each a full scan (the deleted keys span every file), where a recompute
scans it three times. Two pure rewrites of a pushed plan (`compile.push_at`: snapshots are leaves) share them:

* `unify_restrictions` restricts every snapshot of one table on one key column (any alias, either end) to the
  union of the key sets it is restricted by, each widened to the keys of the change reads it comes from
  (`prune.keys_of_reads`). A restriction picks the rows a derivation re-evaluates at both ends (groups,
  partitions, semi-join verdicts) or the rows a join term can meet: more keys only add rows that are the same at
  both ends and cancel, or rows the join drops (see `prune.widen_key_sets`). One key set for every end keeps
  both ends of each re-evaluation restricted alike.
* `canonical_read` names a restricted snapshot under a neutral alias, so that the compiler computes the reads
  that differ only by alias once and renames columns for each reader (`Compiler.source`).

For small changes only (the caller decides): the shared read is kept once (a shuffle of its rows), cheap when the
keys are a few thousand, dearer than the scans it saves when they cover much of the table.

`held_read` describes a restricted read whose keys are those of change reads alone by what decides its rows (the
table, the end, the literal key filters, the key column, and the change reads and columns its keys come from), so
that a caller (`Sources.held`) can compute it once for every plan that reads the same: after a batch, the queries
of a DAG that join orders with lineitem each read lineitem restricted to the changed orders' keys at the same
versions.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from differentiation.delta_nodes import ChangeRead, KeyFilter, KeySet, Restrict, Snapshot
from differentiation.plan import Node, Scalar, Scan, each_once
from differentiation.prune import restrict_alike, typed_reads
from differentiation.sql import col

SHARED_ALIAS = "__shared"


def _key_column(node: Node) -> tuple[str, str] | None:
    """(table, base column) of a snapshot restricted on one bare column of it, else None."""
    if not (isinstance(node, Restrict) and isinstance(node.child, Snapshot) and len(node.alternatives) == 1
            and node.keys.width == 1):
        return None
    [[key]] = node.alternatives
    scan = node.child.scan
    if not isinstance(key.expr, exp.Column) or key.expr.name not in scan.columns():
        return None
    return scan.table, key.expr.name[len(scan.alias) + 1:]


def _union(nodes: list[Restrict], wider: list[KeySet]) -> KeySet | None:
    """One key set holding every key of `wider`'s change reads; None when they are of several types, or when some
    snapshot of the group is already narrowed by literal key filters (`prune.prune_keys`: files skipped by them,
    which a wider key set would read again)."""
    if any(n.child.keys for n in nodes):  # type: ignore[attr-defined]
        return None
    reads = []
    for keys in wider:
        for read, expr in zip(keys.inputs, keys.exprs):
            reads.append((read, expr[0].expr.name))
    distinct = tuple(dict.fromkeys(reads))
    if len({t for _, _, t in typed_reads(distinct)}) != 1:  # type: ignore[arg-type]
        return None
    return KeySet(tuple(r for r, _ in distinct), tuple((Scalar(col(c)),) for _, c in distinct))


def unify_restrictions(plan: Node) -> Node:
    """`plan` with the restricted snapshots of each table and key column restricted to one key set (module doc).
    A group with literal key filters or a key set that cannot be traced to change reads is left alone whole, so
    that both ends of every re-evaluation stay alike."""
    return restrict_alike(plan, _key_column, _union)  # type: ignore[arg-type]


def canonical_read(node: Node) -> Restrict | None:
    """A snapshot restricted on one bare column, read under `SHARED_ALIAS` (None for any other node)."""
    found = _key_column(node)
    if found is None:
        return None
    assert isinstance(node, Restrict) and isinstance(node.child, Snapshot)
    scan = node.child.scan
    shared = Scan(scan.table, SHARED_ALIAS, scan.schema)
    return Restrict(node.child.copy(scan=shared), ((Scalar(col(f"{SHARED_ALIAS}.{found[1]}")),),), node.keys)


def shared_reads(plan: Node) -> dict[Node, Restrict]:
    """Each restricted snapshot of `plan` whose canonical read another alias of its table reads too -> that read."""
    readers: dict[Restrict, set[Node]] = {}
    for node in each_once(plan):
        canonical = canonical_read(node)
        if canonical is not None:
            readers.setdefault(canonical, set()).add(node)
    return {n: c for c, nodes in readers.items() if len(nodes) > 1 for n in nodes}


@dataclass(frozen=True)
class KeyRead:
    """The keys of one change read: the distinct values of `column` (a base column) in the changes of `table`, of
    its freshly inserted rows only where `append_only` (`ChangeRead`)."""

    table: str
    column: str
    append_only: bool = False


@dataclass(frozen=True)
class HeldRead:
    """What decides the rows of a restricted snapshot whose keys come from change reads alone: the rows of `table`
    at `when` passing `filters` whose `column` (a base column) is NULL-safe equal to a key of one of `keys` (in a
    canonical order). Two plans whose reads have equal descriptions over the same intervals read the same rows."""

    table: str
    when: str
    filters: tuple[KeyFilter, ...]
    column: str
    keys: tuple[KeyRead, ...]


def held_read(node: Node) -> HeldRead | None:
    """`node`'s description if it is a snapshot restricted on one bare column to the keys of change reads alone
    (bare columns of them), else None."""
    found = _key_column(node)
    if found is None:
        return None
    assert isinstance(node, Restrict) and isinstance(node.child, Snapshot)
    reads = []
    for child, (key,) in zip(node.keys.inputs, node.keys.exprs):
        if not (isinstance(child, ChangeRead) and isinstance(key.expr, exp.Column)
                and key.expr.name in child.scan.columns()):
            return None
        reads.append(KeyRead(child.scan.table, key.expr.name[len(child.scan.alias) + 1:], child.append_only))
    ordered = tuple(sorted(set(reads), key=lambda r: (r.table, r.column, r.append_only)))
    return HeldRead(found[0], node.child.when, node.child.keys, found[1], ordered)
