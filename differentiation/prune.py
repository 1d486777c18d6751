"""Key pruning: a join term ΔQ ⋈ R reads of R only the rows whose join key some row of ΔQ carries.

In Δ(orders ⋈ lineitem) = orders@I0 ⋈ Δlineitem + Δorders ⋈ lineitem@I1, the second term needs of lineitem only
the lines of the changed orders. The keys of a change set are cheap to find when they come straight from change
reads (the small part of a refresh), so the caller reads them first (`key_probes` says what to read), and the
plan is rewritten (`prune_keys`) so that the snapshot of R is read with literal predicates on its key column:
predicates Delta's file statistics and Parquet's row-group and page indexes can use, which a join cannot.

Both steps are pure rewrites of a pushed plan (`compile.push_at`: snapshots are leaves). A probe may over-state the
keys (it ignores filters and reads every change of every term of a sum): the filter only has to keep every row
that can match. The filter is placed on the snapshot leaf itself, so the path from the join to the leaf may only
cross operators a filter on that column commutes with (filters, projections of the bare column, the matching
side of inner joins and the preserved side of outer joins, group keys, DISTINCT, unions, semi-join restrictions).
Besides join terms, a state restricted to the keys a change touched (`state ⋉k K`: the right side of a semi or anti
join, the groups of an aggregate, the values of a DISTINCT) is pruned the same way by the change reads K comes
from.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass

from sqlglot import exp

from differentiation.constraints import Constraints, equalities, passed_through
from differentiation.delta_nodes import (
    BothEnds, ChangeRead, Consolidate, Empty, KeyFilter, KeyProbe, KeySet, Restrict, Signed, Snapshot, StoredState,
    Sum,
)
from differentiation.plan import (
    Aggregate, Distinct, Filter, Generate, Join, Node, Project, Scalar, Scan, UnionAll, Window, each_once,
)
from differentiation.restrict import push_restrictions
from differentiation.rules.aggregate_algebraic import AggregateChange
from differentiation.rules.semi_join import CountedSemiJoinDelta
from differentiation.rewrite import map_bottom_up, map_children
from differentiation.sql import col


@dataclass(frozen=True)
class PruneSite:
    """A join term that a probe can prune: the snapshot `table` (read at `when`) it would restrict on `column`."""

    probe: KeyProbe
    table: str
    when: str
    column: str


def _base(scan_alias: str, column: str) -> str:
    return column[len(scan_alias) + 1:]


def _reads_of(node: Node, column: str) -> tuple[tuple[ChangeRead, str], ...] | None:
    """Every change read (and its column) whose values include those of `column` in `node`; None when some values
    may come from a snapshot (finding them would cost a scan). A state restricted to the keys of change reads
    (`state ⋉k K`, as every term that re-evaluates affected rows has) holds in its key column only values K took
    from those reads, and so does every row built from it."""
    if isinstance(node, ChangeRead):
        return ((node, column),)
    if isinstance(node, Empty):
        return ()
    if isinstance(node, Restrict) and not node.child.is_delta:
        return _restricted_reads(node, column)
    if isinstance(node, (Filter, Consolidate, Restrict, Signed, Distinct)):
        return _reads_of(node.child, column)
    if isinstance(node, Generate):
        return _reads_of(node.child, column) if column in node.child.columns() else None
    if isinstance(node, Project):
        source = passed_through(node, column)
        return None if source is None else _reads_of(node.child, source)
    if isinstance(node, Join):
        side = node.left if column in node.left.columns() else node.right
        if side.is_delta:
            return _reads_of(side, column)
        # an inner join's row holds, in a state side's column, the value of the change side's column it equals
        other = node.right if side is node.left else node.left
        if node.kind == "inner" and other.is_delta:
            for a, b in equalities(node.condition.expr if node.condition is not None else None):
                partner = b if a == column else a if b == column else None
                if partner is not None and partner in other.columns():
                    through = _reads_of(other, partner)
                    if through is not None:
                        return through
        # else the side's own values, where the join pads none of its columns with NULLs
        padded = {"left": side is node.right, "right": side is node.left, "full": True}.get(node.kind, False)
        return None if padded else _reads_of(side, column)
    if isinstance(node, Aggregate):  # a group key's values are its input's
        key = dict(node.keys).get(column)
        return _reads_of(node.child, key.expr.name) if key is not None and isinstance(key.expr, exp.Column) else None
    if isinstance(node, AggregateChange):  # its groups are those of its input change with rows in them
        key = dict(node.agg.keys).get(column)
        return _reads_of(node.delta, key.expr.name) if key is not None and isinstance(key.expr, exp.Column) else None
    if isinstance(node, CountedSemiJoinDelta):  # rows of L|I0 restricted to ΔR's keys, and of ΔL
        reads = _reads_of(node.old, column)
        more = () if node.changed is None else _reads_of(node.changed, column)
        return None if reads is None or more is None else reads + more
    if isinstance(node, (Sum, UnionAll)):
        inputs = node.terms if isinstance(node, Sum) else node.inputs
        position = node.columns().index(column)
        found: list[tuple[ChangeRead, str]] = []
        for child in inputs:
            reads = _reads_of(child, child.columns()[position])
            if reads is None:
                return None
            found += reads
        return tuple(found)
    return None


def _restricted_reads(restrict: Restrict, column: str) -> tuple[tuple[ChangeRead, str], ...] | None:
    """`_reads_of` a state restricted to a key set: the reads K's key takes `column`'s values from, where
    `column` is a key of the (only) alternative; else those of the state itself."""
    if len(restrict.alternatives) == 1:
        for i, key in enumerate(restrict.alternatives[0]):
            if isinstance(key.expr, exp.Column) and key.expr.name == column:
                found = _key_reads(restrict.keys, i)
                if found is not None:
                    return found
    return _reads_of(restrict.child, column)


def _key_reads(keys: KeySet, i: int) -> tuple[tuple[ChangeRead, str], ...] | None:
    """The change reads (and columns) the `i`-th key of `keys` takes its values from, over every input."""
    found: list[tuple[ChangeRead, str]] = []
    for node, exprs in zip(keys.inputs, keys.exprs):
        reads = _reads_of(node, exprs[i].expr.name) if isinstance(exprs[i].expr, exp.Column) else None
        if reads is None:
            return None
        found += reads
    return tuple(found)


def _change_reads(node: Node, column: str) -> tuple[tuple[str, str, str], ...] | None:
    """(table, column, type) of every change read whose values include those of `column` in change set `node`."""
    reads = _reads_of(node, column)
    return None if reads is None else typed_reads(reads)


def typed_reads(reads: tuple[tuple[ChangeRead, str], ...]) -> tuple[tuple[str, str, str], ...]:
    """(table, base column, type) of each change read and column."""
    out = []
    for read, name in reads:
        base = _base(read.scan.alias, name)
        out.append((read.scan.table, base, dict(read.scan.schema)[base]))
    return tuple(out)


LeafRewrite = Callable[[Snapshot, str], Node]


@dataclass(frozen=True)
class Absence:
    """What proves keys absent from a snapshot: the plan's RELY keys and the scans of the tables that changed.
    Rows of T|I1 whose foreign key column holds a key P lost over the interval cannot exist (the key must be in
    P|I1), nor rows of T|I0 with a key P gained; P's change read says which keys those are (`KeyProbe.absent`).
    `lost` and `gained`: the tables whose change can have lost keys (deleted rows) and gained some (inserted)."""

    constraints: Constraints
    lost: Mapping[str, Scan]
    gained: Mapping[str, Scan]

    @staticmethod
    def of(plan: Node, constraints: Constraints, source: Node | None = None,
           inserted: frozenset[str] | None = None, deleted: frozenset[str] | None = None) -> Absence:
        """Over the tables `plan` reads changes of (each may have gained and lost keys) and, given the query
        (`source`) and its tables' change kinds, over every changed table it scans: a term of P's change that the
        keys proved empty (TPC-H RF2: orders' deleted rows joined with lineitem at I1) is gone from the plan, but
        P's change still proves which keys are gone from the tables referencing it."""
        read = {n.scan.table: n.scan for n in plan.walk() if isinstance(n, ChangeRead)}
        scans = {n.table: n for n in (() if source is None else source.walk()) if isinstance(n, Scan)}
        lost = {**{t: s for t, s in scans.items() if t in (deleted or ())}, **read}
        gained = {**{t: s for t, s in scans.items() if t in (inserted or ())}, **read}
        return Absence(constraints, lost, gained)

    def probe(self, reads: set[tuple[str, str]], leaf: Snapshot, base: str, kind: str) -> KeyProbe:
        """The probe of `reads` for a filter on `leaf`'s column `base` (of type `kind`). The keys a referenced
        table lost are absent at the end, those it gained absent at the start; the keys it gained are settled at
        the end (the pruned table's rows with one are all new: its change inserted them), those it lost at the
        start (its change deleted them all). A unique key of the pruned table references itself."""
        table = leaf.scan.table
        referenced = set(self.constraints.referenced_keys(table, base))
        if (table, (base,)) in self.constraints.unique:
            referenced.add((table, base))
        lost, gained = (self.lost, self.gained) if leaf.when == "end" else (self.gained, self.lost)

        def among(changed: Mapping[str, Scan]) -> tuple[tuple[str, str], ...]:
            return tuple(sorted((t, k) for t, k in referenced if t in changed
                                and dict(changed[t].schema).get(k) == kind))

        absent, settled = among(lost), among(gained)
        # a key P lost and gained (an update of P's row) is neither: it stays in the snapshot's keys
        return KeyProbe(tuple(sorted(reads)), kind, absent, leaf.when if absent or settled else "end", settled)


def _restrict_state(node: Node, column: str, at_leaf: LeafRewrite) -> Node | None:
    """`node` with the snapshot leaf that `column` comes from replaced by `at_leaf(leaf, base column)`; None when
    a filter on `column` does not commute with some operator on the way (or the column is computed)."""
    def down(child: Node, name: str) -> Node | None:
        new = _restrict_state(child, name, at_leaf)
        return None if new is None else map_children(node, lambda c: new if c is child else c)

    if isinstance(node, Snapshot):
        return at_leaf(node, _base(node.scan.alias, column))
    if isinstance(node, (Filter, Distinct, Restrict)):
        return down(node.child, column)
    if isinstance(node, Project):
        source = passed_through(node, column)
        return None if source is None else down(node.child, source)
    if isinstance(node, Aggregate):
        keys = dict(node.keys)
        if column not in keys or not isinstance(keys[column].expr, exp.Column):
            return None
        return down(node.child, keys[column].expr.name)
    if isinstance(node, Generate):  # a filter on a column of the row keeps or drops all its elements
        return down(node.child, column) if column in node.child.columns() else None
    if isinstance(node, Window):  # a filter on a partition key keeps or drops whole partitions
        if column not in {k.expr.name for k in node.partition if isinstance(k.expr, exp.Column)}:
            return None
        return down(node.child, column)
    if isinstance(node, Join) and not node.is_delta:
        in_left = column in node.left.columns()
        preserved = {"inner": True, "cross": True, "left": in_left, "right": not in_left, "full": False,
                     "semi": True, "anti": True}  # a semi or anti join outputs its left side's columns only
        if not preserved[node.kind]:
            return None
        return down(node.left if in_left else node.right, column)
    if isinstance(node, UnionAll) and not node.is_delta:
        position = node.columns().index(column)
        inputs = []
        for child in node.inputs:
            new = _restrict_state(child, child.columns()[position], at_leaf)
            if new is None:
                return None
            inputs.append(new)
        return node.copy(inputs=tuple(inputs))
    return None


def _leaf_of(state: Node, column: str) -> tuple[Snapshot, str] | None:
    found: list[tuple[Snapshot, str]] = []

    def note(leaf: Snapshot, base: str) -> Node:
        found.append((leaf, base))
        return leaf

    return found[0] if _restrict_state(state, column, note) is not None and len(found) == 1 else None


def _term_keys(join: Join) -> list[tuple[Node, Node, str, str]]:
    """(delta side, state side, delta column, state column) of each equality of a join term ΔQ ⋈ R (inner, semi or
    anti: a filter on R's key commutes with it); none for other joins."""
    if join.kind not in ("inner", "semi", "anti") or join.left.is_delta == join.right.is_delta:
        return []
    delta, state = (join.left, join.right) if join.left.is_delta else (join.right, join.left)
    found = []
    for a, b in equalities(join.condition.expr if join.condition is not None else None):
        if a in state.columns():
            a, b = b, a
        if a in delta.columns() and b in state.columns():
            found.append((delta, state, a, b))
    return found


def _sites(join: Join, absence: Absence) -> list[tuple[str, Snapshot, str, KeyProbe]]:
    """(state-side column, the snapshot leaf it comes from and its column there, the probe of its keys) for each
    equality of `join`
    whose keys change reads give and whose state side a filter on the column can restrict."""
    sites = []
    for delta, state, a, b in _term_keys(join):
        reads = _change_reads(delta, a)
        leaf = _leaf_of(state, b) if reads is not None else None
        if reads is None or leaf is None:
            continue
        kind = dict(leaf[0].scan.schema)[leaf[1]]
        if any(t != kind for _, _, t in reads):
            continue  # a literal cast between types could drop rows that match
        sites.append((b, leaf[0], leaf[1], absence.probe({(t, c) for t, c, _ in reads}, leaf[0], leaf[1], kind)))
    return sites


def _restrict_sites(restrict: Restrict, absence: Absence) -> list[tuple[str, Snapshot, str, KeyProbe]]:
    """The same for a state restricted to affected keys (`state ⋉k K`): each key column of the state that a filter
    reaches, probed by the change-read columns K's key comes from in every input."""
    if len(restrict.alternatives) != 1 or restrict.child.is_delta:
        return []
    sites = []
    for i, key in enumerate(restrict.alternatives[0]):
        if not isinstance(key.expr, exp.Column):
            continue
        reads = _key_reads(restrict.keys, i)
        found = typed_reads(reads) if reads is not None else None
        leaf = _leaf_of(restrict.child, key.expr.name) if found else None
        if not found or leaf is None:
            continue
        kind = dict(leaf[0].scan.schema)[leaf[1]]
        if any(t != kind for _, _, t in found):
            continue
        sites.append((key.expr.name, leaf[0], leaf[1],
                      absence.probe({(t, c) for t, c, _ in found}, leaf[0], leaf[1], kind)))
    return sites


def _site_nodes(plan: Node) -> list[Join | Restrict]:
    seen: dict[Node, None] = {}
    for n in plan.walk():
        if isinstance(n, (Join, Restrict)):
            seen.setdefault(n, None)
    return list(seen)  # type: ignore[arg-type]


def _sites_of(node: Node, absence: Absence) -> list[tuple[str, Snapshot, str, KeyProbe]]:
    if isinstance(node, Join):
        return _sites(node, absence)
    return _restrict_sites(node, absence) if isinstance(node, Restrict) else []


def key_probes(plan: Node, absence: Absence | None = None) -> tuple[PruneSite, ...]:
    """The join terms and key restrictions of a pushed change plan whose snapshot side a probe of change reads
    can prune (less the keys `absence` proves absent there; by default the plan's own change reads under no
    constraint)."""
    absence = absence or Absence.of(plan, Constraints())
    sites = {PruneSite(probe, leaf.scan.table, leaf.when, base): None
             for node in _site_nodes(plan) for _, leaf, base, probe in _sites_of(node, absence)}
    return tuple(sites)


def prune_keys(plan: Node, filters: Mapping[KeyProbe, KeyFilter], absence: Absence | None = None) -> Node:
    """`plan` (pushed) with the snapshot side of every join term whose probe has a filter read through it
    (`filters[probe]` holds the values; each leaf gets them on its own column). `absence` as given to
    `key_probes`."""
    absence = absence or Absence.of(plan, Constraints())

    def rewrite(node: Node) -> Node:
        node = map_children(node, rewrite)
        for column, _, _, probe in _sites_of(node, absence):
            if probe not in filters:
                continue
            f = filters[probe]

            def narrow(leaf: Snapshot, base: str, f: KeyFilter = f) -> Node:
                keyed = f.on(base)
                return leaf if keyed in leaf.keys else leaf.copy(keys=leaf.keys + (keyed,))

            if isinstance(node, Restrict):
                node = node.copy(child=_restrict_state(node.child, column, narrow))
                continue
            assert isinstance(node, Join)
            if node.right.is_delta:
                node = node.copy(left=_restrict_state(node.left, column, narrow))
            else:
                node = node.copy(right=_restrict_state(node.right, column, narrow))
        return node

    return rewrite(plan)


def restrict_terms(plan: Node, whole: Callable[[Snapshot], bool] = lambda leaf: False) -> Node:
    """`plan` (pushed) with the state side of every join term ΔQ ⋈ R (inner, semi, anti; R one snapshot, filtered,
    projected, joined with others or grouped by the key, as a key restriction commutes with) whose key comes
    straight from change reads restricted to the keys those reads hold (`R ⋉k πk(reads)`).

    A superset of ΔQ's keys (it ignores filters on the way), so every row of R that can match stays. Meant for
    broadcast key sets (`compile_plan(..., broadcast_keys=True)`): R is then filtered as it is scanned, where Spark,
    unable to size ΔQ without adaptive execution, would shuffle all of R to meet it. Literal key filters
    (`prune_keys`) skip files; this skips the shuffle when the keys are scattered over every file.

    A side whose every snapshot is one the caller reads `whole` (a table so small that Spark broadcasts it as it
    is) stays unrestricted: its restriction would cost a job of its own (the change's distinct keys shuffled and
    broadcast) to narrow a read that costs less."""
    def rewrite(node: Node) -> Node:
        node = map_children(node, rewrite)
        if not isinstance(node, Join):
            return node
        for delta, state, a, b in _term_keys(node):
            reads = _reads_of(delta, a)
            if not reads or _leaf_of(state, b) is None or _all_whole(state, whole):
                continue
            keys = KeySet(tuple(r for r, _ in reads), tuple((Scalar(col(c)),) for _, c in reads))
            restricted = push_restrictions(Restrict(state, ((Scalar(col(b)),),), keys))
            return node.copy(**{"left" if state is node.left else "right": restricted})
        return node

    return rewrite(plan)


def _all_whole(state: Node, whole: Callable[[Snapshot], bool]) -> bool:
    return all(whole(n) for n in each_once(state) if isinstance(n, Snapshot))


def widen_key_sets(plan: Node) -> Node:
    """`plan` (pushed) with each one-key set computed from snapshots (a term's change joined with states, as the
    keys of an aggregate over a join are) replaced by the keys of the change reads its values come from.

    A restriction `state ⋉k K` picks the rows a derivation re-evaluates at both ends of the interval (groups,
    partitions, semi-join verdicts); more keys only add rows that are the same at both ends and cancel, so a
    superset of K serves. Computing K itself would read those snapshots once more (TPC-H Q13: the customers whose
    order counts moved are found by joining orders' changes with both customer and orders again), where the change
    reads' keys cost nothing. Key sets computed from change reads alone are kept: filters and joins with other
    changes make them smaller than the reads' keys."""
    def widen(node: Node) -> Node:
        if isinstance(node, KeySet) and node.width == 1 and _reads_snapshot(node):
            wider = keys_of_reads(node)
            if wider is None:
                return node
            return wider.copy(inputs=tuple(_as_filtered(read, node.inputs) for read in wider.inputs))
        return node

    return map_bottom_up(plan, widen)


def _as_filtered(read: Node, within: tuple[Node, ...]) -> Node:
    """`read` under the filter every place of `within` reads it through, if one: each key value from it passed
    that filter (TPC-H Q20: lineitem's change read in 1994 only, a fifth of its suppliers), so the set keeps a
    superset of the keys for fewer rows. Else `read` itself."""
    if read in within:  # an input of its own: its keys reach the set unfiltered
        return read
    parents = {n for root in within for n in each_once(root) if read in n.children()}
    if len(parents) == 1:
        [parent] = parents
        if isinstance(parent, Filter) and parent.child == read:
            return parent
    return read


def _reads_snapshot(keys: KeySet) -> bool:
    return any(isinstance(n, (Snapshot, BothEnds, StoredState)) for child in keys.inputs for n in each_once(child))


def keys_of_reads(keys: KeySet) -> KeySet | None:
    found = _key_reads(keys, 0)
    if not found:
        return None
    kinds = {t for _, _, t in typed_reads(found)}
    if len(kinds) != 1:
        return None  # keys of several types would be compared after a cast the key set never made
    distinct = tuple(dict.fromkeys(found))  # the terms of a sum read the same changes
    return KeySet(tuple(r for r, _ in distinct), tuple((Scalar(col(c)),) for _, c in distinct))


# A rule for `restrict_alike`: the key set every restriction of a group takes, from their nodes and the keys of the
# change reads each one's key set comes from; None leaves the group alone.
Merge = Callable[[list[Restrict], list[KeySet]], "KeySet | None"]


def restrict_alike(plan: Node, group: Callable[[Restrict], Hashable | None], merge: Merge) -> Node:
    """`plan` (pushed) with the restricted snapshots that `group` puts together (None: none) restricted to one key
    set, `merge` of the keys of the change reads theirs come from (`keys_of_reads`): a superset of each (see
    `widen_key_sets`), so that the compiler reads them once where Spark read once per key set. A group whose key
    sets are all one already, or where one of them cannot be traced to change reads, is left alone whole."""
    groups: dict[Hashable, list[Restrict]] = {}
    for node in each_once(plan):
        if isinstance(node, Restrict) and isinstance(node.child, Snapshot):
            key = group(node)
            if key is not None:
                groups.setdefault(key, []).append(node)
    unified: dict[Restrict, Restrict] = {}
    for nodes in groups.values():
        if len({n.keys for n in nodes}) < 2:
            continue
        wider = [keys_of_reads(n.keys) if n.keys.width == 1 else None for n in nodes]
        keys = None if any(w is None for w in wider) else merge(nodes, wider)  # type: ignore[arg-type]
        if keys is not None:
            unified.update({n: n.copy(keys=keys) for n in nodes})
    if not unified:
        return plan

    def unify(node: Node) -> Node:
        return unified.get(node, node) if isinstance(node, Restrict) else node

    return map_bottom_up(plan, unify)


def _same(nodes: list[Restrict], wider: list[KeySet]) -> KeySet | None:
    return wider[0] if len(set(wider)) == 1 else None


def unify_key_sets(plan: Node) -> Node:
    """`plan` (pushed) with the restrictions of one snapshot on one key whose key sets come from the same change
    reads by different filters (TPC-H Q13: orders at I1 restricted to the customers of its changed orders, and to
    those of its changed orders without special requests) restricted to the keys of those reads: one restricted
    read where Spark scanned the table once per key set (the compiler computes a restricted snapshot read twice
    once)."""
    return restrict_alike(plan, lambda node: (node.child, node.alternatives), _same)
