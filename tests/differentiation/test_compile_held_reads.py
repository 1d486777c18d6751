"""Restricted reads a caller holds (`Sources.held`): which reads qualify, what describes them, and the SQL of a plan
reading one (no Spark)."""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from differentiation import HeldRead, KeyRead, build_plan, changes_query, differentiate
from differentiation.compile import pushed
from differentiation.delta_nodes import ChangeRead, KeySet, Restrict, Snapshot
from differentiation.plan import Filter, Scalar
from differentiation.shared_reads import SHARED_ALIAS, held_read
from differentiation.sql import col

SCHEMA = {"r": {"k": "INT", "v": "INT"}, "s": {"k": "INT", "w": "INT"}}
JOIN = "SELECT r.v, s.w FROM r JOIN s ON r.k = s.k"


class Holding:
    """Sources that hold every read asked for (or none), recording the reads and the queries they were given."""

    def __init__(self, holds: bool = True) -> None:
        self.holds = holds
        self.asked: dict[HeldRead, str] = {}

    def snapshot(self, table: str, when: str, keys: tuple = ()) -> str:
        return f"`snap_{table}_{when}`"

    def ends(self, table: str, keys: tuple = ()) -> str:
        return f"`ends_{table}`"

    def changes(self, table: str) -> str:
        return f"`changes_{table}`"

    def held(self, read: HeldRead, query: Callable[[], exp.Select]) -> str | None:
        self.asked[read] = query().sql(dialect="spark")
        return f"`held_{read.table}_{read.when}`" if self.holds else None


def _sql(sources: Holding, broadcast_keys: bool = True) -> str:
    return changes_query(differentiate(build_plan(JOIN, SCHEMA)), sources, broadcast_keys=broadcast_keys).sql(
        dialect="spark")


def test_each_join_term_reads_the_other_side_as_held_by_the_caller() -> None:
    sources = Holding()
    sql = _sql(sources)
    assert set(sources.asked) == {HeldRead("s", "end", (), "k", (KeyRead("r", "k"),)),
                                  HeldRead("r", "start", (), "k", (KeyRead("s", "k"),))}
    assert "`held_s_end`" in sql and "`held_r_start`" in sql
    assert "`snap_s_end`" not in sql and "`snap_r_start`" not in sql
    # what the caller computes: the snapshot restricted to the change's keys, under the neutral alias
    standalone = sources.asked[HeldRead("s", "end", (), "k", (KeyRead("r", "k"),))]
    assert "`snap_s_end`" in standalone and "`changes_r`" in standalone and f"{SHARED_ALIAS}.k" in standalone


def test_a_read_the_caller_does_not_hold_is_compiled_into_the_plan() -> None:
    sources = Holding(holds=False)
    sql = _sql(sources)
    assert sources.asked and "`snap_s_end`" in sql and "held_" not in sql
    unasked = Holding()
    assert "held_" not in _sql(unasked, broadcast_keys=False) and not unasked.asked  # large changes: no holding


def test_only_reads_restricted_to_the_keys_of_change_reads_are_described() -> None:
    d = differentiate(build_plan(JOIN, SCHEMA))
    plan = pushed(d.plan)
    [r_read] = [n for n in plan.walk() if isinstance(n, ChangeRead) and n.scan.table == "r"][:1]
    [s_end] = [n for n in plan.walk() if isinstance(n, Snapshot) and n.scan.table == "s" and n.when == "end"][:1]
    r_key, s_key = Scalar(col(f"{r_read.scan.alias}.k")), Scalar(col(f"{s_end.scan.alias}.k"))
    by_changes = Restrict(s_end, ((s_key,),), KeySet((r_read,), ((r_key,),)))
    assert held_read(by_changes) == HeldRead("s", "end", (), "k", (KeyRead("r", "k"),))
    # keys of a filtered change read, or of a snapshot, are no change read's alone
    filtered = Filter(r_read, Scalar(exp.GT(this=r_key.expr.copy(), expression=exp.Literal.number(1))))
    assert held_read(by_changes.copy(keys=KeySet((filtered,), ((r_key,),)))) is None
    r_start = Snapshot(r_read.scan, "start")
    assert held_read(by_changes.copy(keys=KeySet((r_start,), ((r_key,),)))) is None
    assert held_read(s_end) is None
