"""Plan nodes that only appear in derivatives: change reads, snapshots, signs, sums, key restriction.

Every relation carries a hidden `__row_id`; change sets (`is_delta`) also carry `__action`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from differentiation.plan import Node, Scalar, Scan
from differentiation.vocabulary import ACTIONS, DELETE

WHENS = ("start", "end")


class Leaf(Node):
    """A node computed from what it describes (a table, an interval, a stored state), not from input nodes."""

    def children(self) -> tuple[Node, ...]:
        return ()


@dataclass(frozen=True)
class Delta(Node):
    """Δ child: a derivative still to be rewritten by the rules (never rendered)."""

    child: Node

    def __post_init__(self) -> None:
        if self.child.is_delta:
            raise ValueError("Δ of a change set")

    def columns(self) -> tuple[str, ...]:
        return self.child.columns()

    @property
    def is_delta(self) -> bool:
        return True

    def label(self) -> str:
        return "Δ"


@dataclass(frozen=True)
class ChangeRead(Leaf):
    """The redundant delta of a base table over the interval; `append_only` keeps only rows whose id
    has no DELETE in the interval (freshly inserted, never updated nor deleted)."""

    scan: Scan
    append_only: bool = False

    def columns(self) -> tuple[str, ...]:
        return self.scan.columns()

    @property
    def is_delta(self) -> bool:
        return True

    def label(self) -> str:
        mode = " append-only" if self.append_only else ""
        return f"Changes{mode} {self.scan.table} AS {self.scan.alias}"


@dataclass(frozen=True)
class At(Node):
    """child|I0 (when="start") or child|I1 (when="end"): a state, rendered over base snapshots."""

    child: Node
    when: str

    def __post_init__(self) -> None:
        if self.when not in WHENS or self.child.is_delta:
            raise ValueError(f"At needs a state and one of {WHENS}")

    def columns(self) -> tuple[str, ...]:
        return self.child.columns()

    @property
    def is_delta(self) -> bool:
        return False

    def label(self) -> str:
        return "@I0" if self.when == "start" else "@I1"


@dataclass(frozen=True)
class Empty(Leaf):
    """∅: the change set of a subplan whose base tables did not change."""

    like: Node

    def columns(self) -> tuple[str, ...]:
        return self.like.columns()

    @property
    def is_delta(self) -> bool:
        return True

    def label(self) -> str:
        return "∅ (" + ", ".join(self.like.columns()) + ")"


@dataclass(frozen=True)
class Signed(Node):
    """π− / π+: every row of a state as a DELETE or an INSERT."""

    child: Node
    action: str

    def __post_init__(self) -> None:
        if self.action not in ACTIONS or self.child.is_delta:
            raise ValueError("Signed needs a state and INSERT or DELETE")

    def columns(self) -> tuple[str, ...]:
        return self.child.columns()

    @property
    def is_delta(self) -> bool:
        return True

    def label(self) -> str:
        return "π−" if self.action == DELETE else "π+"


@dataclass(frozen=True)
class Sum(Node):
    """+ of change sets with equal columns; row ids pass through unchanged (no branch tags)."""

    terms: tuple[Node, ...]

    def __post_init__(self) -> None:
        if len(self.terms) < 2 or not all(t.is_delta for t in self.terms):
            raise ValueError("a sum needs two or more change sets")
        if len({t.columns() for t in self.terms}) != 1:
            raise ValueError("terms of a sum must have the same columns")

    def columns(self) -> tuple[str, ...]:
        return self.terms[0].columns()

    def label(self) -> str:
        return "+"


@dataclass(frozen=True)
class KeySet(Node):
    """Distinct key tuples (`__k0`, `__k1`, ...) taken from change sets: the affected keys."""

    inputs: tuple[Node, ...]
    exprs: tuple[tuple[Scalar, ...], ...]

    def __post_init__(self) -> None:
        if len(self.inputs) != len(self.exprs) or not self.inputs:
            raise ValueError("one key expression tuple per input")
        if len({len(e) for e in self.exprs}) != 1:
            raise ValueError("key tuples of one key set have one width")
        for node, keys in zip(self.inputs, self.exprs):
            for k in keys:
                missing = k.columns() - set(node.columns())
                if missing:
                    raise ValueError(f"key {k} references unknown columns {sorted(missing)}")

    @property
    def width(self) -> int:
        return len(self.exprs[0])

    def columns(self) -> tuple[str, ...]:
        return tuple(f"__k{i}" for i in range(self.width))

    @property
    def is_delta(self) -> bool:
        return False

    def label(self) -> str:
        return "Keys " + " | ".join("(" + ", ".join(str(k) for k in ks) + ")" for ks in self.exprs)


@dataclass(frozen=True)
class Restrict(Node):
    """⋉k: rows of child whose key tuple, for any of the alternatives, is in `keys` (NULL-safe)."""

    child: Node
    alternatives: tuple[tuple[Scalar, ...], ...]
    keys: KeySet

    def __post_init__(self) -> None:
        if not self.alternatives or any(len(a) != self.keys.width for a in self.alternatives):
            raise ValueError("each alternative must match the key set's width")
        for alt in self.alternatives:
            for k in alt:
                missing = k.columns() - set(self.child.columns())
                if missing:
                    raise ValueError(f"key {k} references unknown columns {sorted(missing)}")

    def columns(self) -> tuple[str, ...]:
        return self.child.columns()

    @property
    def is_delta(self) -> bool:
        return self.child.is_delta

    def label(self) -> str:
        alts = " | ".join("(" + ", ".join(str(k) for k in a) + ")" for a in self.alternatives)
        return f"⋉ on {alts}"


@dataclass(frozen=True)
class Consolidate(Node):
    """Redundant delta -> minimum delta: net sign per (row id, values); |n| copies of the survivors."""

    child: Node

    def __post_init__(self) -> None:
        if not self.child.is_delta:
            raise ValueError("only a change set can be consolidated")

    def columns(self) -> tuple[str, ...]:
        return self.child.columns()

    def label(self) -> str:
        return "Consolidate"


@dataclass(frozen=True)
class KeyProbe:
    """The values of one key: the union of these base-table columns over their change reads."""

    reads: tuple[tuple[str, str], ...]  # (base table, column)
    type: str  # the Spark SQL type every read column and the pruned column share
    # (P, key) of changed tables whose change proves keys absent at `at`: the pruned column holds a RELY foreign key
    # to P's unique key, so a key P lost (deleted, not inserted: at the end) or gained (at the start) has no rows
    absent: tuple[tuple[str, str], ...] = ()
    at: str = "end"
    # (P, key) of changed tables whose change settles keys at `at` the other way: a key P gained (at the end) or
    # lost (at the start) has, in the pruned snapshot, exactly the rows the pruned table's own change inserted or
    # deleted with it (none can be left over from the other end), so those rows are read from that change
    settled: tuple[tuple[str, str], ...] = ()


_INTEGRAL = ("tinyint", "smallint", "int", "integer", "bigint", "byte", "short", "long")


def _literal_of(type_: str) -> Callable[[str], exp.Expr]:
    """Spark SQL literal texts of `type_` as expressions: an integer as a number (a cast of a string per value costs
    sqlglot and Spark's analyzer 20-50x more, felt in IN lists of thousands of keys), others cast from the text."""
    if type_.strip().lower() in _INTEGRAL:
        return exp.Literal.number
    to = exp.DataType.build(type_, dialect="spark")
    return lambda text: exp.Cast(this=exp.Literal.string(text), to=to.copy())


@dataclass(frozen=True)
class KeyFilter:
    """A literal predicate on a snapshot's column: `values` (an IN list) when given, else any of the inclusive
    `ranges`. Values are Spark SQL literal texts of `type`; no values and no ranges keep no row."""

    column: str
    type: str
    values: tuple[str, ...] | None = None
    ranges: tuple[tuple[str, str], ...] = ()
    # NULL is one of the keys: a NULL-safe restriction (an outer join's padded rows, the NULL group of an
    # aggregate) must keep the rows whose column is NULL; an equi-join term would drop them anyway
    nulls: bool = False
    # keys whose rows at this end are those the table's own change inserted (at the end) or deleted (at the
    # start) with them (`KeyProbe.settled`, whose referenced tables and keys `settled_by` names): the snapshot's
    # files are chosen by the keys above alone, and the rows of the keys those tables' changes settle (exactly;
    # `from_change` is a literal superset of them) come from the change instead
    from_change: KeyFilter | None = None
    settled_by: tuple[tuple[str, str], ...] = ()

    def label(self) -> str:
        either = " or NULL" if self.nulls else ""
        changed = "" if self.from_change is None else f", from the change: {self.from_change.label()}"
        if self.values is not None:
            return f"{self.column} IN ({len(self.values)} values){either}{changed}"
        spans = ", ".join(f"{lo}..{hi}" for lo, hi in self.ranges[:3]) + (", ..." if len(self.ranges) > 3 else "")
        return f"{self.column} IN [{spans}]{either}{changed}"

    def condition(self, column: exp.Expr) -> exp.Expr:
        literal = _literal_of(self.type)
        if self.values is not None:
            found: exp.Expr = (exp.In(this=column.copy(), expressions=[literal(v) for v in self.values])
                               if self.values else exp.false())
        elif not self.ranges:
            found = exp.false()
        else:
            found = exp.or_(*(exp.EQ(this=column.copy(), expression=literal(lo)) if lo == hi else
                              exp.Between(this=column.copy(), low=literal(lo), high=literal(hi))
                              for lo, hi in self.ranges))
        if self.nulls:
            found = exp.or_(found, exp.Is(this=column.copy(), expression=exp.Null()))
        return found if self.from_change is None else exp.or_(found, self.from_change.condition(column))

    def whole(self) -> KeyFilter:
        """The same keys as one literal filter, the settled ones read from the snapshot too (a superset)."""
        if self.from_change is None:
            return self
        mine, theirs = self, self.from_change
        if mine.values is not None and theirs.values is not None:
            return KeyFilter(self.column, self.type, values=tuple(sorted({*mine.values, *theirs.values})),
                             nulls=self.nulls)
        spans = tuple(r for f in (mine, theirs) for r in (
            tuple((v, v) for v in f.values) if f.values is not None else f.ranges))
        return KeyFilter(self.column, self.type, ranges=spans, nulls=self.nulls)

    def on(self, column: str) -> KeyFilter:
        """The same keys on another column (a snapshot leaf's own)."""
        changed = None if self.from_change is None else self.from_change.on(column)
        return dataclasses.replace(self, column=column, from_change=changed)


@dataclass(frozen=True)
class Snapshot(Leaf):
    """A base table read at one end of the interval: what `At` becomes once pushed into the leaves (`push_at`)."""

    scan: Scan
    when: str
    keys: tuple[KeyFilter, ...] = ()  # rows kept: those passing every filter (`prune.prune_keys`)

    def __post_init__(self) -> None:
        if self.when not in WHENS:
            raise ValueError(f"a snapshot is taken at one of {WHENS}")

    def columns(self) -> tuple[str, ...]:
        return self.scan.columns()

    @property
    def is_delta(self) -> bool:
        return False

    def label(self) -> str:
        pruned = "".join(f" keys {k.label()}" for k in self.keys)
        return f"{self.scan.label()} @{'I0' if self.when == 'start' else 'I1'}{pruned}"


# The flags of a `BothEnds` read: whether the table holds the row at I0, at I1.
AT_START, AT_END = "__at_start", "__at_end"


@dataclass(frozen=True)
class BothEnds(Leaf):
    """A base table read once for both ends of the interval: every row it holds at I0 or I1, flagged by the ends
    holding it (`AT_START`, `AT_END`); `EndOf` picks one end (`ends.share_ends`)."""

    scan: Scan
    keys: tuple[KeyFilter, ...] = ()  # as `Snapshot.keys`, for both ends

    def columns(self) -> tuple[str, ...]:
        return self.scan.columns() + (AT_START, AT_END)

    @property
    def is_delta(self) -> bool:
        return False

    def label(self) -> str:
        pruned = "".join(f" keys {k.label()}" for k in self.keys)
        return f"{self.scan.label()} @I0+I1{pruned}"


@dataclass(frozen=True)
class EndOf(Node):
    """The rows of a `BothEnds` read (restricted) that the table holds at one end, without the flags."""

    child: Node
    when: str

    def __post_init__(self) -> None:
        if self.when not in WHENS or not {AT_START, AT_END} <= set(self.child.columns()):
            raise ValueError(f"EndOf needs a read of both ends and one of {WHENS}")

    def columns(self) -> tuple[str, ...]:
        return tuple(c for c in self.child.columns() if c not in (AT_START, AT_END))

    def label(self) -> str:
        return f"@{'I0' if self.when == 'start' else 'I1'} of"


@dataclass(frozen=True)
class StoredState(Leaf):
    """The previous result of a maintained aggregate as stored, with its helper columns (`__key<j>`, `__cnt`,
    `__sum_<i>`, `__nn_<i>`): the caller's `Sources.state()` says where it lives."""

    names: tuple[str, ...]

    def columns(self) -> tuple[str, ...]:
        return self.names

    @property
    def is_delta(self) -> bool:
        return False

    def label(self) -> str:
        return "Stored state (" + ", ".join(self.names) + ")"
