"""The two sides of an interval read commit by commit (``commits``), as one SQL statement.

The states of the start that die inside the interval (their row commit version is at most the start), with
``__gone_at`` the commit that deleted or replaced them; and the states born inside the interval that do not die
inside it. A death names its state by (row id, row commit version), so a state is matched to its own death only:
a row updated twice, updated back, or inserted then updated or deleted leaves no trace of its intermediate states.

Deaths come from change data (deletes, update preimages) and from the rows deletes without change data removed;
births from change data (update postimages) and from the files that introduced rows (appends, MERGE's inserts).
The file scans are the statement's frames (``dtables.spark.statement``); the rest is one sqlglot tree of CTEs, so
Spark analyses the read once however many parts it has.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import types as T
from sqlglot import exp

from differentiation.vocabulary import ACTION, DELETE, INSERT, ROW_ID
from dtables.changes.scan import (
    CHANGE_TYPE,
    FILE,
    FRESH,
    RCV,
    RID,
    change_data_frame,
    change_rows,
    column,
    map_expr,
    scan_files,
    table_schema,
    try_element_at,
)
from dtables.changes.change_data import CHANGE_TYPES, one_commit
from dtables.changes.log import FileAction
from dtables.changes.shapes import ChangePlan
from dtables.spark.statement import frame_name, run_statement

GONE_AT = "__gone_at"
_CHANGED, _DIED, _BORN, _GONE, _ALIVE, _LATER = "__changed", "__died", "__born", "__gone", "__alive", "__later"
# On the deaths of an interval of several commits: the state died was born by the start, known from its file
# (``_by_birth``), so its row commit version need not be compared with the start
_SETTLED = "__settled"


@dataclass
class CommitSides:
    """The CTEs of one interval's sides and the DataFrames they read; ``gone`` and ``alive`` name the two sides
    (table columns, ``__rid``, ``__rcv``, and on the gone side ``__gone_at``)."""

    plan: ChangePlan
    frames: dict[str, DataFrame] = field(default_factory=dict)
    ctes: list[tuple[str, exp.Query]] = field(default_factory=list)
    ran: bool = False

    @property
    def columns(self) -> list[str]:
        return [f.name for f in table_schema(self.plan.metadata).fields]

    def frame(self, df: DataFrame) -> str:
        name = frame_name()
        self.frames[name] = df
        return name

    def run(self, spark: Any, body: exp.Query) -> DataFrame:
        query = body
        for name, cte in self.ctes:  # the first statement takes the trees as they are (copies cost milliseconds)
            query = query.with_(name, as_=cte.copy() if self.ran else cte, copy=False)
        self.ran = True
        return run_statement(spark, query, self.frames)


def commit_sides(spark: Any, plan: ChangePlan, only: frozenset[str] | None = None) -> CommitSides:
    """The sides of ``plan``'s interval (module docstring): its file scans as frames, the rest as CTEs. ``only``:
    the table columns the caller reads, as ``scan.scan_files``'s ``columns``."""
    reads, location, start = plan.commit_reads, plan.interval.location, plan.interval.start_version
    assert reads is not None
    sides = CommitSides(plan)
    keep = [*[column(c) for c in sides.columns], column(RID), column(RCV)]
    deaths: list[exp.Select] = []
    births: list[exp.Select] = []
    if reads.change_files:
        raw = sides.frame(change_data_frame(spark, location, plan.metadata, reads.change_files))
        sides.ctes.append((_CHANGED, change_rows(location, plan.metadata, reads.change_files, raw)))
        change_type = column(CHANGE_TYPE)
        deaths.append(exp.select(*keep, _at(plan.removed_at)).from_(_CHANGED).where(
            change_type.isin(exp.Literal.string("delete"), exp.Literal.string("update_preimage"))))
        births.append(exp.select(*keep).from_(_CHANGED).where(
            exp.EQ(this=change_type, expression=exp.Literal.string("update_postimage"))))
    if reads.new_rows is not None:  # appends, and MERGE's inserts: the rows these files introduced
        rows = sides.frame(scan_files(spark, location, plan.metadata, reads.new_rows))
        births.append(exp.select(*keep).from_(rows).where(column(FRESH)))
    # Several commits whose deaths may include states born inside the interval (commits.CommitReads); otherwise
    # the read is planned as one commit's (below)
    several = plan.interval.end_version != start + 1 and not reads.deaths_born_by_start
    if several:  # the change data's deaths may have been born inside the interval: compared row by row
        deaths = [d.select(_settled(False)) for d in deaths]
    for gone in reads.gone:
        for files, settled in _by_birth(gone.scan.files, start) if several else ((gone.scan.files, None),):
            rows = sides.frame(scan_files(spark, location, plan.metadata, gone.scan.restricted(files), only))
            death = exp.select(*keep, _at(gone.versions)).from_(rows)
            deaths.append(death.select(_settled(settled)) if settled is not None else death)
    sides.ctes.append((_DIED, _union(spark, sides, deaths, with_version=True, settled=several)))
    sides.ctes.append((_BORN, _union(spark, sides, births, with_version=False)))
    if not several:
        # One commit, or commits that removed rows only from files added by the start: every state they removed was
        # there at the start, so none of their births died inside the interval (the anti join below, and the
        # broadcast job of its deaths, would find nothing), and every death was born by the start. Without the
        # version in the statement its generated code is the same at every refresh, so Spark's cache of compiled
        # classes serves it (Spark writes a number into the code it generates: the filter compiled two classes per
        # refresh, 40-60 ms each, and the JIT compiled them again).
        sides.ctes.append((_GONE, exp.select("*").from_(_DIED)))
        sides.ctes.append((_ALIVE, exp.select("*").from_(_BORN)))
        return sides
    born, start_version = _padded_version(column(RCV)), exp.Literal.string(_padded(start))
    gone_columns = [*[column(c) for c in sides.columns], column(RID), column(RCV), column(GONE_AT)]
    sides.ctes.append((_GONE, exp.select(*gone_columns).from_(_DIED).where(
        exp.or_(column(_SETTLED), exp.LTE(this=born, expression=start_version)))))
    later = exp.select(exp.alias_(column(RID), "__d_rid", quoted=True),
                       exp.alias_(column(RCV), "__d_rcv", quoted=True)).from_(_DIED)
    later = later.where(exp.and_(exp.not_(column(_SETTLED)), exp.GT(this=born.copy(), expression=start_version.copy())))
    sides.ctes.append((_LATER, later))
    same = exp.and_(exp.EQ(this=exp.column(RID, _BORN, quoted=True), expression=column("__d_rid")),
                    exp.EQ(this=exp.column(RCV, _BORN, quoted=True), expression=column("__d_rcv")))
    sides.ctes.append((_ALIVE, exp.select(exp.Star()).from_(_BORN).join(_LATER, on=same, join_type="left anti")))
    return sides


def gone_and_alive(spark: Any, plan: ChangePlan) -> tuple[DataFrame, DataFrame]:
    """The two sides as DataFrames (for CHANGES, which pairs them by row id)."""
    sides = commit_sides(spark, plan)
    return sides.run(spark, exp.select("*").from_(_GONE)), sides.run(spark, exp.select("*").from_(_ALIVE))


def delta_rows(spark: Any, plan: ChangePlan, only: frozenset[str] | None = None) -> DataFrame:
    """The redundant delta of the interval (table columns, ``__action``, ``__row_id``): the gone side as DELETEs
    and the alive side as INSERTs, in one statement; ``only`` as for ``commit_sides``."""
    sides = commit_sides(spark, plan, only)
    row_id = exp.alias_(row_id_sql(plan.metadata.table_id, column(RID)), ROW_ID, quoted=True)
    columns = [column(c) for c in sides.columns]
    if one_commit(plan):
        # One commit's change data alone: each change row is a DELETE or an INSERT by its type, in one pass over the
        # files (the union of the two sides scans them twice: two stages of tasks in the plan that reads them)
        action = exp.case().when(exp.EQ(this=column(CHANGE_TYPE), expression=exp.Literal.string("update_postimage")),
                                 exp.Literal.string(INSERT)).else_(exp.Literal.string(DELETE))
        changed = column(CHANGE_TYPE).isin(*(exp.Literal.string(t) for t in CHANGE_TYPES))
        return sides.run(spark, exp.select(*columns, exp.alias_(action, ACTION, quoted=True), row_id)
                         .from_(_CHANGED).where(changed))
    parts = [exp.select(*columns, exp.alias_(exp.Literal.string(action), ACTION, quoted=True), row_id).from_(side)
             for side, action in ((_GONE, DELETE), (_ALIVE, INSERT))]
    return sides.run(spark, exp.union(*parts, distinct=False))


def row_id_sql(table_id: str, row_id: exp.Expr) -> exp.Expr:
    """The opaque ``METADATA$ROW_ID`` / ``__row_id`` of a row-tracking id: ``md5('<Delta table id>:' || id)``."""
    text = exp.Cast(this=row_id, to=exp.DataType.build("string"))
    return exp.func("md5", exp.func("concat", exp.Literal.string(table_id + ":"), text))


# Versions compared as zero-padded strings (a long has at most 19 digits): Spark writes a number literal into the
# code it generates and refers to a string, so the statement of an interval of several commits generates the same
# code at every start version (as a number, its filters compiled new classes at every refresh). Spark's optimizer
# would turn a cast to a wider number back into a number comparison; it leaves ``lpad`` alone.
_VERSION_DIGITS = 20


def _padded(version: int) -> str:
    return str(version).rjust(_VERSION_DIGITS, "0")


def _padded_version(version: exp.Expr) -> exp.Expr:
    text = exp.Cast(this=version, to=exp.DataType.build("string"))
    return exp.func("lpad", text, exp.Literal.number(_VERSION_DIGITS), exp.Literal.string("0"))


def _at(versions: tuple[tuple[str, int], ...]) -> exp.Expr:
    """``__gone_at``: the version of the commit that removed the row's file, by file name."""
    return exp.alias_(try_element_at(map_expr(list(versions), T.LongType()), column(FILE)), GONE_AT, quoted=True)


def _settled(settled: bool) -> exp.Expr:
    return exp.alias_(exp.true() if settled else exp.false(), _SETTLED, quoted=True)


def _by_birth(files: tuple[FileAction, ...], start: int) -> list[tuple[tuple[FileAction, ...], bool]]:
    """``files`` in two groups: those added by the start version (``True``: every row in them was born by then),
    and the others (``False``), leaving out an empty group.

    A row's commit version is that of the last commit that wrote it, so no row of a file is younger than the file;
    per the row-tracking spec a file's ``defaultRowCommitVersion`` is the first version that added its path. So the
    rows of a file whose ``defaultRowCommitVersion`` is at most the start need no comparison: a DELETE's vectors
    pick rows out of every file of the table, and comparing each row's version (a map lookup of its file and the
    padded text) on both sides of the interval cost seconds on 10M rows."""
    born_by_start = [f.default_row_commit_version is not None and f.default_row_commit_version <= start
                     for f in files]
    old = tuple(f for f, by_start in zip(files, born_by_start) if by_start)
    new = tuple(f for f, by_start in zip(files, born_by_start) if not by_start)
    return [(group, settled) for group, settled in ((old, True), (new, False)) if group]


def _union(spark: Any, sides: CommitSides, parts: list[exp.Select], *, with_version: bool,
           settled: bool = False) -> exp.Query:
    if not parts:  # an empty relation with the side's columns and types
        ids = [RID, RCV, GONE_AT] if with_version else [RID, RCV]
        fields = table_schema(sides.plan.metadata).fields + [T.StructField(c, T.LongType()) for c in ids]
        fields += [T.StructField(_SETTLED, T.BooleanType())] if settled else []
        return exp.select("*").from_(sides.frame(spark.createDataFrame([], T.StructType(fields))))
    return parts[0] if len(parts) == 1 else exp.union(*parts, distinct=False)
