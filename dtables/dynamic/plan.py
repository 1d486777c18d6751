"""The refresh decision: what one refresh will do and why, as a frozen record built before anything runs.

``decide`` is a pure function of the table's stored state, the sources resolved at the new data timestamp and the
kinds of changes each changed source had (read from Delta logs). Tests assert on it without running Spark; the
executor runs it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from differentiation import ChangeStats, Derivative, UnsupportedQuery, build_plan, differentiate, incremental_reason
from differentiation.constraints import Constraints
from differentiation.join_order import REORDERED, reordered
from differentiation.plan import Node
from differentiation.rules.aggregate_algebraic import state_aggregate, with_state_columns
from differentiation.vocabulary import Shape
from dtables.catalog import STATE_PREFIX
from dtables.dynamic.definition import Definition
from dtables.dynamic.errors import DynamicTableError
from dtables.dynamic.frontier import SourceVersion
from dtables.dynamic.vocabulary import Action, Write
from dtables.sql.dynamic_syntax import RefreshMode

# Tables up to this size (bytes of their Delta files) take their incremental changes as a REWRITE: reading and
# writing a few megabytes costs less than the passes of a MERGE (`spark.dtables.refresh.rewriteMaxBytes`).
REWRITE_MAX_BYTES = 32 * 1024 * 1024
# The temp view holding the table's stored aggregate state at its last refresh (see ``maintained_plan``); the
# refresh registers it in its own Spark session before running the change plan.
STATE_VIEW = "__dt_state"


@dataclass(frozen=True)
class RefreshAction:
    """What a refresh of ``name`` to ``data_timestamp`` does: ``action`` and ``write``, with ``reason`` in words."""

    name: str
    action: str
    reason: str
    write: str
    data_timestamp: dt.datetime
    frontier_before: Mapping[str, int] = field(hash=False)
    frontier_after: Mapping[str, int] = field(hash=False)
    shape: str | None = None  # the derivative's shape for INCREMENTAL (ADDED_ONLY, REMOVED_ONLY, MINIMIZE)
    plan: Node | None = field(default=None, compare=False, repr=False)  # None: FULL over the query text
    derivative: Derivative | None = field(default=None, compare=False, repr=False)
    contents_hash: str = ""  # what the written contents are computed under (``contents_hash``); "": the definition's

    def __post_init__(self) -> None:
        if self.action not in tuple(Action) or self.write not in tuple(Write):
            raise ValueError(f"unknown refresh action {self.action} / write {self.write}")
        if (self.action == Action.INCREMENTAL) != (self.derivative is not None):
            raise ValueError("an INCREMENTAL refresh carries its derivative, and only it")


def plan_schema(sources: Mapping[str, SourceVersion]) -> dict[str, dict[str, str]]:
    return {name: dict(s.schema) for name, s in sources.items()}


# The query's plan and why it cannot be maintained incrementally (None: it can), as ``incremental_support`` answers
Support = tuple[Node | None, str | None]


def incremental_support(query: str, sources: Mapping[str, SourceVersion]) -> Support:
    """The query's plan and None when it can be maintained incrementally; else (plan or None, why not)."""
    try:
        plan = build_plan(query, plan_schema(sources))
    except UnsupportedQuery as e:
        return None, str(e)
    return plan, incremental_reason(plan)


def maintained_plan(plan: Node | None, refresh_mode: str) -> Node | None:
    """The plan whose output the table stores: for an INCREMENTAL top-level COUNT/SUM/AVG aggregate, the query's
    columns plus the helper columns (row count, sums, non-null counts per group) from which the next refresh
    updates the stored groups as old + ΣΔ without rescanning the base tables; otherwise the query's plan."""
    if plan is not None and refresh_mode == RefreshMode.INCREMENTAL and state_aggregate(plan) is not None:
        return with_state_columns(plan)
    return plan


def contents_hash(definition: Definition, plan: Node | None) -> str:
    """The hash a table's contents are computed under: its definition's, marked when the query's plan had its join
    trees reordered (``differentiation.join_order``), whose row ids differ from those of the query's own order, so
    that a table filled before dtables reordered them is computed again rather than patched under other ids."""
    if plan is None or not reordered(plan):
        return definition.definition_hash
    return hashlib.sha256(f"{definition.definition_hash}:{REORDERED}".encode()).hexdigest()[:16]


def decide(definition: Definition, sources: Mapping[str, SourceVersion], stats: Mapping[str, ChangeStats],
           data_timestamp: dt.datetime, stored_columns: Collection[str] = (), target_bytes: int | None = None,
           rewrite_max_bytes: int = REWRITE_MAX_BYTES, constraints: Constraints = Constraints(),
           untracked: Collection[str] = (), support: Support | None = None) -> RefreshAction:
    """The refresh of ``definition`` to ``data_timestamp`` reading ``sources``.

    ``stats`` holds the change kinds of every source whose version moved since the stored frontier (a source
    without an entry is unchanged); ``stored_columns`` are the columns the table holds now (hidden ones included),
    so a table lacking the aggregate state its plan maintains is reinitialized rather than patched;
    ``target_bytes`` is the table's size now (None: unknown), which chooses between a MERGE and a REWRITE;
    ``constraints`` are the sources' RELY keys, which drop join terms they prove empty; ``untracked`` names upstream
    dynamic tables whose change tracking was off at the frontier (turned on only now), whose changes cannot be read
    from there; ``support``: ``incremental_support(definition.query, sources)`` where the caller has it already
    (the refresh, which asked it which columns the query reads). Raises DynamicTableError when an INCREMENTAL
    table's query can no longer be differentiated (its sources' schemas changed under it).
    """
    after = {name: s.version for name, s in sources.items()}
    before = dict(definition.frontier)

    plan, why_not = support if support is not None else incremental_support(definition.query, sources)
    computed_under = contents_hash(definition, plan)

    def action(kind: str, reason: str, write: str, **more: object) -> RefreshAction:
        return RefreshAction(definition.name, kind, reason, write, data_timestamp, before, after,
                             contents_hash=computed_under, **more)  # type: ignore[arg-type]

    if definition.refresh_mode_chosen == RefreshMode.INCREMENTAL and why_not is not None:
        raise DynamicTableError(f"dynamic table {definition.name}: its query can no longer be refreshed "
                                f"incrementally: {why_not}")
    full_plan = maintained_plan(plan, definition.refresh_mode_chosen)

    def recompute(kind: Action, reason: str) -> RefreshAction:
        return action(kind, reason, Write.OVERWRITE, plan=full_plan)

    if not definition.initialized:
        return recompute(Action.FULL, "initial refresh: the table has no contents yet")
    if definition.initialized_hash != computed_under:
        if definition.initialized_hash == definition.definition_hash:  # filled with the query's own join order
            return recompute(Action.REINITIALIZE, f"the query's plan now has its {REORDERED} (row ids change)")
        return recompute(Action.REINITIALIZE, "the definition changed since the contents were computed")
    for name, src in sources.items():
        old = definition.source_identities.get(name)
        if old is None:
            return recompute(Action.REINITIALIZE, f"{name} is a new source of the query")
        if old.split(":")[0] != src.identity.split(":")[0]:
            return recompute(Action.REINITIALIZE, f"source {name} was dropped and re-created")
        if old != src.identity:
            return recompute(Action.REINITIALIZE, f"the schema of source {name} changed")
        if src.version < before.get(name, src.version):
            return recompute(Action.REINITIALIZE, f"source {name} went back from version {before[name]} to "
                             f"{src.version} (restored?)")
    missing = [c for c in state_columns(full_plan, plan) if stored_name(c) not in set(stored_columns)]
    if missing and stored_columns:
        return recompute(Action.REINITIALIZE, "the table does not store the aggregate state its incremental refresh "
                         f"needs ({', '.join(stored_name(c) for c in missing)})")

    changed = {n: s for n, s in stats.items() if s.changed and after.get(n) != before.get(n)}
    off = sorted(n for n in untracked if n in changed)
    if off:
        return recompute(Action.REINITIALIZE, f"change tracking of upstream {', '.join(off)} was off at the frontier "
                                              "(turned on now): its changes cannot be read from there")
    if not changed:
        moved = sorted(n for n in after if after[n] != before.get(n))
        reason = ("no source changed" if not moved else
                  f"commits on {', '.join(moved)} changed no rows")
        return action(Action.NO_DATA, reason, Write.NONE)
    what = ", ".join(f"{n} ({before[n]} -> {after[n]}: "
                     f"{'+' if s.inserts else ''}{'-' if s.deletes else ''})" for n, s in sorted(changed.items()))
    if definition.refresh_mode_chosen == RefreshMode.FULL:
        return recompute(Action.FULL, f"REFRESH_MODE = FULL ({definition.refresh_mode_reason}); changed: {what}")
    assert plan is not None and full_plan is not None
    all_stats = {n: changed.get(n, ChangeStats(inserts=False, deletes=False)) for n in sources}
    has_state = full_plan is not plan
    derivative = differentiate(full_plan, stats=all_stats, state=has_state, constraints=constraints,
                                minimal=False)  # written by row id: consolidation only where needed
    if derivative.shape == Shape.ADDED_ONLY and not has_state:
        write = Write.APPEND
    elif rewritten_whole(target_bytes, rewrite_max_bytes):
        write = Write.REWRITE
    else:
        write = Write.MERGE
    how = "; aggregate groups updated from their stored state" if has_state else ""
    return action(Action.INCREMENTAL, f"changed: {what}{how}", write, shape=derivative.shape, plan=full_plan,
                  derivative=derivative)


def rewritten_whole(target_bytes: int | None, rewrite_max_bytes: int) -> bool:
    """Whether a table of ``target_bytes`` (None: unknown) is rewritten whole by its incremental refreshes (REWRITE),
    not MERGEd into."""
    return target_bytes is not None and target_bytes <= rewrite_max_bytes


def state_columns(maintained: Node | None, plan: Node | None) -> tuple[str, ...]:
    """The helper columns ``maintained`` adds to the query's own (empty unless it keeps aggregate state)."""
    if maintained is None or plan is None or maintained is plan:
        return ()
    return maintained.columns()[len(plan.columns()):]


def stored_name(helper: str) -> str:
    """The hidden table column holding helper column ``helper`` (``__cnt`` -> ``__dtables_cnt``)."""
    return STATE_PREFIX + helper.lstrip("_")
