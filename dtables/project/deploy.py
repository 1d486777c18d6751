"""``dtables plan`` and ``dtables apply``: what it takes to make the warehouse match the project folder.

The plan is data (a tuple of ``PlannedChange``), built first without touching anything, then executed by
``apply_plan``: sources are created (and seeded when new), dynamic tables created or replaced in dependency order
(a changed definition is reinitialized), streams created, and dynamic tables no longer in the folder dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import differentiation as diff
from dtables.catalog import quote
from dtables.dynamic import definition as defs
from dtables.dynamic.definition import qualify_sources, query_sql
from dtables.dynamic.measure import estimate_next
from dtables.project.config import ProjectError
from dtables.project.loader import DynamicTableSpec, Project
from dtables.project.seeds import seed_frame
from dtables.project.validate import check_project
from dtables.sql.dialect import parse_one
from dtables.sql.dynamic_syntax import RefreshMode

NEW, CHANGED, UNCHANGED, REMOVED = "NEW", "CHANGED", "UNCHANGED", "REMOVED"


@dataclass(frozen=True)
class PlannedChange:
    kind: str            # source | dynamic table | stream
    name: str
    status: str          # NEW | CHANGED | UNCHANGED | REMOVED
    refresh: str = ""    # INCREMENTAL | FULL (dynamic tables)
    reason: str = ""     # why that refresh mode, or what changed
    estimate: str = ""   # AUTO's cost model on the next refresh of an existing table (dtables.dynamic.measure)


def _normalized_query(query: str) -> str:
    return query_sql(qualify_sources(parse_one(query))[0])


def _reprinted(stored: str) -> str:
    """A stored query as this version prints it: a change of how names are quoted (reserved words) is not a
    change of the query, which would recompute the table."""
    try:
        return _normalized_query(stored)
    except Exception:  # noqa: BLE001 - text this version cannot parse compares as it is
        return stored


def _refresh_mode(spec: DynamicTableSpec, schema: dict[str, dict[str, str]]) -> tuple[str, str]:
    if spec.refresh_mode == RefreshMode.FULL:
        return RefreshMode.FULL, "REFRESH_MODE = FULL was requested"
    if any(t not in schema for t in spec.reads):
        return "?", "decided at creation (a source's columns are known only once it exists)"
    try:
        reason = diff.incremental_reason(diff.build_plan(_normalized_query(spec.query), schema))
    except diff.UnsupportedQuery as e:
        reason = str(e)
    if reason is None:
        return RefreshMode.INCREMENTAL, "every operator of the query can be maintained incrementally"
    if spec.refresh_mode == RefreshMode.INCREMENTAL:
        return "ERROR", f"REFRESH_MODE = INCREMENTAL is not possible: {reason}"
    return RefreshMode.FULL, f"AUTO chose FULL: {reason}"


def _what_changed(spec: DynamicTableSpec, stored: Any) -> str:
    changes = []
    if _normalized_query(spec.query) != _reprinted(stored.text):
        changes.append("query (reinitialized)")
    if spec.target_lag.upper() != stored.target_lag.upper():
        changes.append(f"target lag {stored.target_lag} -> {spec.target_lag}")
    if spec.refresh_mode != stored.refresh_mode:
        changes.append(f"refresh mode {stored.refresh_mode} -> {spec.refresh_mode}")
    return ", ".join(changes)


def plan_project(session: Any, project: Project) -> tuple[PlannedChange, ...]:
    project, schema = check_project(project)
    out: list[PlannedChange] = []
    for source in project.sources:
        exists = session.catalog.lookup(source.name) is not None
        seeded = f" (seeded from {source.seed.name})" if source.seed and not exists else ""
        out.append(PlannedChange("source", source.name, UNCHANGED if exists else NEW, reason=seeded.strip()))
    for name in project.dag().topological_order():
        spec = project.dynamic_table(name)
        mode, why = _refresh_mode(spec, schema)
        stored = defs.load(session.store, name)
        if stored is None:
            out.append(PlannedChange("dynamic table", name, NEW, mode, why))
            continue
        changed = _what_changed(spec, stored)
        out.append(PlannedChange("dynamic table", name, CHANGED if changed else UNCHANGED, mode,
                                 f"{changed}; {why}" if changed else why,
                                 "" if changed else estimate_next(session, name)))
    wanted = {d.name for d in project.dynamic_tables}
    for stored in defs.load_all(session.store):
        if stored.name not in wanted and stored.parent is None:  # intermediates go with their table
            out.append(PlannedChange("dynamic table", stored.name, REMOVED, reason="not in the project folder"))
    for stream in project.streams:
        exists = session.catalog.lookup(stream.name) is not None or _stream_exists(session, stream.name)
        out.append(PlannedChange("stream", stream.name, UNCHANGED if exists else NEW))
    return tuple(out)


def _stream_exists(session: Any, name: str) -> bool:
    try:
        rows = session.store.query("SELECT 1 FROM streams WHERE name = ?", (name,))
    except Exception:  # noqa: BLE001 - no streams table: streams are not installed in this store
        return False
    return bool(rows)


def _seed(session: Any, table: str, path: Any) -> None:
    seed_frame(session.spark, session.table(table).schema, path).write.format("delta").mode("append") \
        .saveAsTable(table)


def _describe(changes: list[PlannedChange]) -> str:
    return ", ".join(f"{c.kind} {c.name} ({c.status.lower()})" for c in changes) or "nothing"


def _carry_out(session: Any, project: Project, change: PlannedChange) -> None:
    if change.kind == "source":
        spec = next(s for s in project.sources if s.name == change.name)
        session.sql(spec.statement)
        if spec.seed is not None:
            try:
                _seed(session, spec.name, spec.seed)
            except Exception:
                # unseeded, the table would be UNCHANGED on the next apply and never get its first rows
                session.sql(f"DROP TABLE IF EXISTS {quote(spec.name)}")
                raise
    elif change.kind == "dynamic table" and change.status in (NEW, CHANGED):
        session.sql(project.dynamic_table(change.name).create_statement())
    elif change.kind == "dynamic table" and change.status == REMOVED:
        session.sql(f"DROP DYNAMIC TABLE IF EXISTS {quote(change.name)}")
    elif change.kind == "stream":
        session.sql(next(s.statement for s in project.streams if s.name == change.name))


def apply_plan(session: Any, project: Project, plan: tuple[PlannedChange, ...]) -> list[PlannedChange]:
    """Carry out a plan; returns the changes made.

    Nothing is changed when a change of the plan is known to fail (REFRESH_MODE = INCREMENTAL on a query that
    cannot be maintained). Each object is made by one statement that either takes effect or leaves nothing (a
    source whose seed fails is dropped again), so a failure stops the apply with an error naming the object, the
    cause and what was made before it; rerunning apply after the fix finds those UNCHANGED and carries on.
    """
    refused = [c for c in plan if c.refresh == "ERROR"]
    if refused:
        raise ProjectError("nothing applied: " + "; ".join(
            f"{project.dynamic_table(c.name).path}: dynamic table {c.name}: {c.reason}" for c in refused))
    steps = [c for c in plan if c.status != UNCHANGED and not (c.kind == "dynamic table" and c.status == REMOVED)]
    # dynamic tables no longer in the folder go last, downstream first
    steps += [c for c in reversed(plan) if c.kind == "dynamic table" and c.status == REMOVED]
    done: list[PlannedChange] = []
    for change in steps:
        try:
            _carry_out(session, project, change)
        except Exception as e:  # noqa: BLE001 - any failure stops the apply; the message says where it got to
            raise ProjectError(
                f"apply stopped at {change.kind} {change.name}: {e}\n"
                f"made before it: {_describe(done)}\n"
                f"not made: {_describe([c for c in steps if c is not change and c not in done])}\n"
                "fix the cause and run apply again: what was made is UNCHANGED then and the rest is carried out"
            ) from e
        done.append(change)
    return done
