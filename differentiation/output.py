"""The public outputs: change sets with METADATA$ columns and snapshots with __row_id (sqlglot queries), explain
text."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from sqlglot import exp

from differentiation.build import build_plan
from differentiation import ends, prune, shared_reads
from differentiation.compile import compile_plan, pushed
from differentiation.merge_state import compile_merge, merged_aggregate
from differentiation.delta_nodes import At, KeyFilter, KeyProbe, Snapshot
from differentiation.derive import Derivative, differentiate
from differentiation.plan import Node
from differentiation.prune import PruneSite
from differentiation.rules.aggregate_algebraic import with_state_columns as with_state_columns_of
from differentiation.sources import Sources, StateSources, When
from differentiation.sql import alias, col, ident
from differentiation.vocabulary import (
    ACTION, METADATA_ACTION, METADATA_ISUPDATE, METADATA_ROW_ID, ROW_ID, ChangeFormat, Shape,
)


def absence(d: Derivative, plan: Node) -> prune.Absence:
    """What proves keys absent from `d`'s snapshots (`plan`: `d.plan` pushed): its RELY keys, the changes it
    reads, and those of the other changed tables of its query."""
    return prune.Absence.of(plan, d.constraints, d.source, d.inserted, d.deleted)


def key_probes(d: Derivative) -> tuple[PruneSite, ...]:
    """The join terms of `d` whose snapshot side can be pruned by the keys of change reads (`prune.py`)."""
    plan = pushed(d.plan)
    return prune.key_probes(plan, absence(d, plan))


def changes_query(d: Derivative, sources: Sources, keys: Mapping[KeyProbe, KeyFilter] | None = None, *,
                  broadcast_keys: bool = False, broadcast_state: bool = True, share_ends: bool = False,
                  share_aliases: bool = True,
                  whole: Callable[[Snapshot], bool] = lambda leaf: False) -> exp.Select:
    """A SELECT of the query's columns, METADATA$ACTION, METADATA$ISUPDATE, METADATA$ROW_ID.

    ISUPDATE is computed last, over the minimum delta: true exactly when a DELETE and an INSERT
    share a row id. Shapes without consolidation (ADDED_ONLY, REMOVED_ONLY, NO_DATA) hold one action
    only, so ISUPDATE is false there, as it always is for APPEND_ONLY. `keys`: the values the caller read for
    the probes of `key_probes(d)`; the snapshot side of each such join term keeps only rows with those keys.
    `broadcast_keys`: the change is small, so the key sets that restrict snapshots are broadcast (a hint), and
    the state side of a join term is restricted to the keys of the change reads, unless its snapshots are all
    ones to read `whole` (tables Spark broadcasts as they are: `prune.restrict_terms`). `broadcast_state`
    (with `broadcast_keys`): a stored aggregate state's touched groups are found by broadcasting the change's sums
    into its scan; False for a state of a few groups, which is shuffled with them in the same job instead.
    `share_ends`: a table the plan reads restricted at both ends of the interval is read once for both
    (`ends.py`; `Sources.ends`), for small changes too. `share_aliases`: with small changes, a table the plan
    reads restricted under several aliases (a self-join, EXISTS over the same table) is read once per end, restricted
    to the union of its key sets (`shared_reads.py`).
    """
    aliases = broadcast_keys and share_aliases
    plan = _prepared(d, keys, broadcast_keys=broadcast_keys, share_ends=share_ends, share_aliases=aliases,
                     whole=whole)
    compiler, body = compile_plan(plan, sources, broadcast_keys=broadcast_keys,
                                  broadcast_state=broadcast_state, share_aliases=aliases)
    if d.shape == Shape.MINIMIZE and d.information is ChangeFormat.DEFAULT:
        def over_row_id(fn: type[exp.Func]) -> exp.Window:
            return exp.Window(this=fn(this=col(ACTION)), partition_by=[col(ROW_ID)])
        is_update: exp.Expr = exp.NEQ(this=over_row_id(exp.Min), expression=over_row_id(exp.Max))
    else:
        is_update = exp.false()
    select = exp.select(*(col(c) for c in d.columns()), alias(col(ACTION), METADATA_ACTION),
                        alias(is_update, METADATA_ISUPDATE), alias(col(ROW_ID), METADATA_ROW_ID)).from_(
        exp.Table(this=ident(body)))
    return compiler.query(select)


def _prepared(d: Derivative, keys: Mapping[KeyProbe, KeyFilter] | None, *, broadcast_keys: bool, share_ends: bool,
              share_aliases: bool, whole: Callable[[Snapshot], bool]) -> Node:
    """`d`'s plan as it is compiled: pushed, its join terms pruned and restricted (`changes_query`'s options)."""
    plan = pushed(d.plan)  # once: the rewrites below keep it pushed, and compile_plan's own push is then a no-op
    if keys:
        plan = prune.prune_keys(plan, keys, absence(d, plan))
    plan = prune.widen_key_sets(plan)
    if broadcast_keys:
        plan = prune.restrict_terms(plan, whole)
    plan = prune.unify_key_sets(plan)
    if share_aliases:
        plan = shared_reads.unify_restrictions(plan)
    if share_ends:
        plan = ends.share_ends(plan)
    return plan


def merges_state(d: Derivative) -> bool:
    """Whether `d`'s new rows can be computed by merging its stored aggregate state with the change's sums
    (`state_merge_query`): a projection of a grouped aggregate kept from a stored state."""
    return merged_aggregate(pushed(d.plan)) is not None


def state_merge_query(d: Derivative, sources: StateSources, carry: Sequence[tuple[str, str]],
                      keys: Mapping[KeyProbe, KeyFilter] | None = None, *, broadcast_keys: bool = False,
                      share_ends: bool = False, share_aliases: bool = True,
                      whole: Callable[[Snapshot], bool] = lambda leaf: False) -> exp.Select:
    """The rows of `d`'s query after the change, where `merges_state(d)`: every group of the stored state
    (`sources.state()`, which also holds the columns `carry` names) or of the change, with the query's columns,
    `__row_id`, whether the change touched it (`merge_state.TOUCHED`), whether it has rows left (`KEPT`) and the
    carried state columns (`merge_state.compile_merge`). Options as `changes_query`'s."""
    aliases = broadcast_keys and share_aliases
    plan = _prepared(d, keys, broadcast_keys=broadcast_keys, share_ends=share_ends, share_aliases=aliases,
                     whole=whole)
    return compile_merge(plan, sources, carry, broadcast_keys=broadcast_keys, share_aliases=aliases)


def snapshot_query(plan: Node, sources: Sources, when: When = "end", *, with_state_columns: bool = False) -> exp.Select:
    """A SELECT of the query's columns and `__row_id` at I0 ("start") or I1 ("end"), ids as in changes.

    `with_state_columns` appends the helper columns a stored state needs for the algebraic
    aggregate rule (`__key<j>`, `__cnt`, `__sum_<i>`, `__nn_<i>`); ValueError if the plan has none.
    """
    names = list(plan.columns())
    if with_state_columns:
        full = with_state_columns_of(plan)
        names += [c for c in full.columns() if c not in plan.columns()]
        plan = full
    compiler, body = compile_plan(At(plan, when), sources)
    return compiler.query(exp.select(*(col(c) for c in names), col(ROW_ID)).from_(exp.Table(this=ident(body))))


def explain(query: str | exp.Expr | Node, schema: Mapping[str, Mapping[str, str]] | None = None,
            information: ChangeFormat = ChangeFormat.DEFAULT, stats: Mapping[str, object] | None = None, *,
            state: bool = False) -> str:
    """Text of the plan and of its derivative (the rewritten change plan); ``state``: the plan's top aggregate is
    maintained from a stored state (as a dynamic table that keeps one is refreshed)."""
    plan = query if isinstance(query, Node) else build_plan(query, schema or {})
    d = differentiate(plan, information, stats, state=state)  # type: ignore[arg-type]
    return f"plan:\n{plan.to_text()}\nchanges ({d.information.value}, shape {d.shape}):\n{d.plan.to_text()}"
