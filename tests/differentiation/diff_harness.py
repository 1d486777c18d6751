"""Test harness for differentiation: base tables as temp views, a Sources over them, and the oracle.

The oracle: apply the computed change set to Q|I0 (remove DELETE rows by row id + values, add
INSERT rows) and compare with Q|I1 computed from scratch, as multisets both ways. It also checks
the minimum-delta properties (no cancelling pair, ISUPDATE exactly on shared ids, unique ids).
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp

from differentiation import (
    ChangeFormat, ChangeStats, build_plan, changes_query, differentiate, snapshot_query,
)
from differentiation.constraints import Constraints
from dtables.dynamic.apply import one_row_per_id

_counter = itertools.count()

Row = tuple[Any, ...]


from dtables.testing import assert_same_rows  # noqa: E402,F401
from dtables.testing import rows_multiset as multiset  # noqa: E402,F401


@dataclass
class BaseTable:
    """One base table over an interval: states by row id and a redundant delta consistent with them."""

    columns: dict[str, str]
    start: dict[str, Row]
    end: dict[str, Row]
    changes: list[tuple[str, str, Row]] = field(default_factory=list)  # (action, row id, values)

    def stats(self) -> ChangeStats:
        """The change kinds, and, as `dtables.changes.moved` finds them, the columns moved when every row the
        interval touched is at both ends under its id (updates in place only)."""
        actions = {a for a, _, _ in self.changes}
        touched = {i for _, i, _ in self.changes}
        moved = None
        if touched and all(i in self.start and i in self.end for i in touched):
            moved = frozenset(c.lower() for n, c in enumerate(self.columns)
                              if any(self.start[i][n] != self.end[i][n] for i in touched))
        return ChangeStats(inserts="INSERT" in actions, deletes="DELETE" in actions, moved=moved)


def _literal(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return repr(v) if not hasattr(v, "as_tuple") else f"{v}BD"


class ViewSources:
    """A `Sources` over temp views registered by `TableSet.register`."""

    def __init__(self, views: Mapping[str, Mapping[str, str]]) -> None:
        self.views = views
        self.state_view: str | None = None
        self.pure = False  # change reads as Delta's reader gives them: DELETE rows at the start, INSERT rows at the end

    def snapshot(self, table: str, when: str, keys: tuple = ()) -> str:
        return f"`{self.views[table][when]}`"

    def ends(self, table: str, keys: tuple = ()) -> str:
        return f"`{self.views[table]['ends']}`"

    def changes(self, table: str) -> str:
        return f"`{self.views[table]['pure' if self.pure else 'changes']}`"

    def state(self) -> str:
        assert self.state_view is not None, "no stored state registered"
        return f"`{self.state_view}`"


@dataclass
class ChangeResult:
    rows: list[tuple[Any, ...]]  # query columns + action, isupdate, row id
    start: list[tuple[Any, ...]]  # query columns + __row_id
    end: list[tuple[Any, ...]]
    shape: str
    sql: str
    plan: str = ""  # the change plan's text


class TableSet:
    """Registers base tables as uniquely named temp views and runs differentiation against them."""

    def __init__(self, spark: Any, tables: Mapping[str, BaseTable]) -> None:
        self.spark = spark
        self.tables = dict(tables)
        self.views: dict[str, dict[str, str]] = {}
        n = next(_counter)
        for name, t in self.tables.items():
            ddl = ", ".join(f"`{c}` {ty}" for c, ty in t.columns.items())
            names = {k: f"dt_{name}_{k}_{n}" for k in ("start", "end", "changes", "plain", "ends", "pure")}
            self._view(names["start"], [v + (i,) for i, v in t.start.items()], f"{ddl}, __row_id STRING")
            self._view(names["end"], [v + (i,) for i, v in t.end.items()], f"{ddl}, __row_id STRING")
            self._view(names["plain"], list(t.end.values()), ddl)
            self._view(names["changes"], [v + (a, i) for a, i, v in t.changes],
                       f"{ddl}, __action STRING, __row_id STRING")
            self._view(names["pure"], pure_changes(t), f"{ddl}, __action STRING, __row_id STRING")
            # both ends, a row each end holds once per end (what Sources.ends allows)
            self.spark.sql(f"CREATE OR REPLACE TEMP VIEW `{names['ends']}` AS "
                           f"SELECT *, true AS __at_start, false AS __at_end FROM `{names['start']}` "
                           f"UNION ALL SELECT *, false, true FROM `{names['end']}`")
            self.views[name] = names
        self.sources = ViewSources(self.views)

    def _view(self, name: str, rows: list[Row], ddl: str) -> None:
        # Inline VALUES instead of createDataFrame: no Python worker round trip per query.
        cols = [c.strip().split(" ", 1) for c in ddl.split(", ")]
        casts = ", ".join(f"CAST(c{i} AS {ty}) AS {col}" for i, (col, ty) in enumerate(cols))
        if rows:
            values = ", ".join("(" + ", ".join(_literal(v) for v in r) + ")" for r in rows)
            body = f"SELECT {casts} FROM VALUES {values} AS v({', '.join(f'c{i}' for i in range(len(cols)))})"
        else:
            body = f"SELECT {casts} FROM (SELECT {', '.join(f'NULL AS c{i}' for i in range(len(cols)))}) WHERE false"
        self.spark.sql(f"CREATE OR REPLACE TEMP VIEW `{name}` AS {body}")

    def schema(self) -> dict[str, dict[str, str]]:
        return {n: dict(t.columns) for n, t in self.tables.items()}

    def stats(self) -> dict[str, ChangeStats]:
        return {n: t.stats() for n, t in self.tables.items()}

    def run_original_at_end(self, sql: str) -> list[tuple[Any, ...]]:
        """The query itself, evaluated by Spark over the end state (tables renamed to plain views)."""
        tree = sqlglot.parse_one(sql, read="spark")
        ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
        for t in tree.find_all(exp.Table):
            if t.name in self.views and t.name not in ctes:
                alias = t.alias_or_name
                t.replace(exp.to_table(self.views[t.name]["plain"]).as_(alias))
        return [tuple(r) for r in self.spark.sql(tree.sql(dialect="spark")).collect()]

    def changes(self, sql: str, information: ChangeFormat = ChangeFormat.DEFAULT,
                use_stats: bool = True, use_state: bool = False, constraints: Constraints = Constraints()) -> ChangeResult:
        plan = build_plan(sql, self.schema())
        if use_state:  # a dynamic table's stored previous result: the snapshot at I0 with helper columns
            self.sources.state_view = f"dt_state_{next(_counter)}"
            state = snapshot_query(plan, self.sources, "start", with_state_columns=True)
            self.spark.sql(f"CREATE OR REPLACE TEMP VIEW `{self.sources.state_view}` AS {state.sql('spark')}")
        d = differentiate(plan, information, self.stats() if use_stats else None, state=use_state,
                          constraints=constraints)
        if use_state and d.shape != "NO_DATA":
            assert "algebraic" in d.to_text(), "the algebraic aggregate rule did not apply"
        # every other check compiles as a refresh with a small change does: key sets broadcast, join terms' states
        # restricted to the change reads' keys (prune.restrict_terms; every other time of those, tables whose name
        # sorts first read whole, as a refresh reads the tables it finds small), tables restricted at both ends
        # read once; and half of those with a stored state of a few groups (shuffled with the change's sums, not
        # probed by their broadcast)
        turn = next(_counter)
        small = turn % 2 == 0
        whole = (lambda leaf: leaf.scan.table < "s") if turn % 4 == 0 else (lambda leaf: False)
        change_sql = changes_query(d, self.sources, broadcast_keys=small, broadcast_state=turn % 4 != 2,
                                   share_ends=small, whole=whole).sql("spark")
        rows = [tuple(r) for r in self.spark.sql(change_sql).collect()]
        start = [tuple(r) for r in self.spark.sql(snapshot_query(plan, self.sources, "start").sql("spark")).collect()]
        end = [tuple(r) for r in self.spark.sql(snapshot_query(plan, self.sources, "end").sql("spark")).collect()]
        return ChangeResult(rows, start, end, d.shape, change_sql, d.plan.to_text())

    def row_id_changes(self, sql: str, use_stats: bool = True, use_state: bool = False,
                       constraints: Constraints = Constraints()) -> list[tuple[Any, ...]] | None:
        """The change set a dynamic table's refresh writes by row id (`differentiate(minimal=False)`), over change
        reads as Delta's reader makes them (`pure_changes`); None when it is the consolidated one. Call after
        `changes` (it reuses the stored state that registered)."""
        plan = build_plan(sql, self.schema())
        d = differentiate(plan, ChangeFormat.DEFAULT, self.stats() if use_stats else None, state=use_state,
                          constraints=constraints, minimal=False)
        if d.minimal:
            return None
        self.sources.pure = True
        try:
            changes = changes_query(d, self.sources, broadcast_keys=True)
        finally:
            self.sources.pure = False
        # the dynamic table's own choice of one row per id (dtables.dynamic.apply), run by Spark
        query = one_row_per_id(changes, d.columns(), d.minimal)
        width = len(d.columns()) + 3
        return [tuple(r)[:width] for r in self.spark.sql(query.sql("spark")).collect()]


def pure_changes(t: BaseTable) -> list[Row]:
    """The redundant delta Delta's change reader gives for `t`: each row the interval touched, its DELETE as at the
    start and its INSERT as at the end (a row updated back to its values keeps both, as its row version moved)."""
    touched = sorted({i for _, i, _ in t.changes})
    return ([t.start[i] + ("DELETE", i) for i in touched if i in t.start]
            + [t.end[i] + ("INSERT", i) for i in touched if i in t.end])


def apply_changes(start: Sequence[tuple[Any, ...]], changes: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Q|I0 (values + row id) with DELETE rows removed by row id + values and INSERT rows added."""
    state = multiset(start)
    for *values, action, _is_update, row_id in changes:
        key = tuple(values) + (row_id,)
        if action == "DELETE":
            if state[key] <= 0:
                raise AssertionError(f"DELETE of a row not in Q|I0: {key}")
            state[key] -= 1
        else:
            state[key] += 1
    return list(state.elements())


def apply_by_row_id(start: Sequence[tuple[Any, ...]], changes: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """What a dynamic table's write does with one row per row id (`row_id_changes`): an INSERT sets the id's row to
    its values, a DELETE removes the id's row (which must be that row of Q|I0: the change set is pure)."""
    state = {r[-1]: tuple(r[:-1]) for r in start}
    ids = [r[-1] for r in changes]
    assert len(ids) == len(set(ids)), "more than one row for a row id"
    for *values, action, _is_update, row_id in changes:
        if action == "DELETE":
            assert state.pop(row_id, None) == tuple(values), f"DELETE of a row not in Q|I0: {values} {row_id}"
        else:
            state[row_id] = tuple(values)
    return [v + (i,) for i, v in state.items()]


def check_minimum_delta(changes: Sequence[tuple[Any, ...]]) -> None:
    """No cancelling pair; ISUPDATE true exactly when a DELETE and an INSERT share a row id."""
    by_values: dict[tuple[Any, ...], set[str]] = collections.defaultdict(set)
    by_id: dict[str, set[str]] = collections.defaultdict(set)
    for *values, action, _u, row_id in changes:
        by_values[tuple(values) + (row_id,)].add(action)
        by_id[row_id].add(action)
    cancelling = [k for k, acts in by_values.items() if len(acts) == 2]
    assert not cancelling, f"cancelling pairs in a minimum delta: {cancelling}"
    for *_values, _action, is_update, row_id in changes:
        assert is_update == (len(by_id[row_id]) == 2), f"wrong ISUPDATE for row id {row_id}"


def check_oracle(ts: TableSet, sql: str, information: ChangeFormat = ChangeFormat.DEFAULT,
                 use_stats: bool = True, use_state: bool = False, constraints: Constraints = Constraints()) -> ChangeResult:
    """Run the full oracle for `sql` over `ts`; returns the result for further assertions."""
    res = ts.changes(sql, information, use_stats, use_state, constraints)
    for snap in (res.start, res.end):
        ids = [r[-1] for r in snap]
        assert len(ids) == len(set(ids)), "row ids are not unique in a snapshot"
    # snapshot_query must be the query itself: compare its values with Spark's own evaluation.
    assert_same_rows([r[:-1] for r in res.end], ts.run_original_at_end(sql))
    if information is ChangeFormat.DEFAULT:
        check_minimum_delta(res.rows)
        assert_same_rows(apply_changes(res.start, res.rows), res.end)
        # the unconsolidated change set a dynamic table writes by row id, where `differentiation.pure` allows it
        by_row_id = ts.row_id_changes(sql, use_stats, use_state, constraints)
        if by_row_id is not None:
            assert_same_rows(apply_by_row_id(res.start, by_row_id), res.end)
    return res
