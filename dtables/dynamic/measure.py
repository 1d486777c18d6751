"""What AUTO's cost model (``dtables.dynamic.cost``) is given before a refresh, read from the sources' Delta logs and
checksums and the table's refresh history only (no Spark job); and the refresh it turns an INCREMENTAL into.

Rows changed come from each commit's operation metrics (rows a DELETE deleted, an UPDATE updated, a MERGE inserted,
updated and deleted, a write wrote), which count rows as users see them whatever the files did (a one-row UPDATE
rewriting a whole file, or marking the row in a deletion vector, is one row); a commit without them counts the rows
of the files it added and removed. Bytes changed are the sizes of the data files the interval added and removed:
what the change reads read at most. A source's size is its checksum's (the rows from the file list the checksum
carries for tables of few files, else estimated from the bytes per row of the changed files).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from dtables.changes.log import Commit, DeltaLog, FileAction
from dtables.changes.row_counts import commit_rows
from dtables.dynamic import history
from dtables.dynamic.cost import CostDecision, CostInputs, CostSettings, Measured, SourceChange, choose
from dtables.dynamic import definition as defs
from dtables.dynamic.definition import Definition
from dtables.dynamic.errors import DynamicTableError
from dtables.dynamic.frontier import SourceVersion, describe_version
from dtables.dynamic.plan import RefreshAction
from dtables.dynamic.vocabulary import Action, Write
from dtables.sql.dynamic_syntax import RefreshMode
from dtables.state import StateStore
from scheduler.vocabulary import Trigger

COST_MODEL = "spark.dtables.refresh.costModel"  # false: AUTO tables refresh as their mode chosen at CREATE says
FULL_FRACTION = "spark.dtables.refresh.costModel.fullFraction"
MIN_SOURCE_BYTES = "spark.dtables.refresh.costModel.minSourceBytes"
MARGIN = "spark.dtables.refresh.costModel.margin"  # how much cheaper FULL must be estimated (0.1: 10%)
EXPLORE = "spark.dtables.refresh.costModel.explore"  # a borrowed INCREMENTAL estimate tried once up to this x FULL
INCREMENTAL_POINTS = 10  # the incremental refreshes the INCREMENTAL estimate is fitted to (newest)
FULL_POINTS = 3  # the full computations the FULL estimate takes the fastest of (newest)


def settings(spark: Any) -> CostSettings | None:
    """The cost model's settings from the session's Spark conf; None when it is turned off."""
    if str(spark.conf.get(COST_MODEL, "true")).strip().lower() == "false":
        return None
    defaults = CostSettings()
    fraction = _number(spark, FULL_FRACTION, defaults.full_fraction, "a fraction such as 0.5")
    min_bytes = int(_number(spark, MIN_SOURCE_BYTES, defaults.min_source_bytes, "a number of bytes"))
    margin = _number(spark, MARGIN, defaults.margin, "a fraction such as 0.1")
    explore = _number(spark, EXPLORE, defaults.explore, "a factor such as 2 (0: never)")
    return CostSettings(full_fraction=fraction, min_source_bytes=min_bytes, margin=margin, explore=explore)


def _number(spark: Any, key: str, default: float, what: str) -> float:
    value = spark.conf.get(key, None)
    try:
        return float(value) if value is not None else default
    except ValueError as e:
        raise DynamicTableError(f"{key} must be {what}, not {value!r}") from e


def _size(log: DeltaLog, version: int) -> tuple[int | None, int | None]:
    """(bytes, rows or None) of the table at ``version`` from its checksum."""
    files = log.files_at(version)
    if files is None:
        return log.size_at(version), None
    rows = 0
    for f in files:
        if f.num_records is None:
            return sum(x.size or 0 for x in files), None
        rows += f.num_records - (f.deletion_vector.cardinality if f.deletion_vector is not None else 0)
    return sum(f.size or 0 for f in files), rows


def _deleted(f: FileAction) -> int:
    return f.deletion_vector.cardinality if f.deletion_vector is not None else 0


def _file_changes(commit: Commit) -> tuple[int, int, int]:
    """(bytes added, bytes removed, rows those bytes hold) by one commit's data files. A file whose deletion vector
    grew is removed and added again under its own path: only the share of its bytes the newly deleted rows hold
    changed (a DELETE of one row of a 100 MB file marks one row, which counting the file twice made 200 MB)."""
    adds = {f.path: f for f in commit.files if f.kind == "add" and f.data_change}
    added = removed = rows = 0
    for f in commit.files:
        if f.kind != "remove" or not f.data_change:
            continue
        again = adds.pop(f.path, None)
        records = f.num_records or (again.num_records if again is not None else None)
        if again is not None and records:
            newly = max(_deleted(again) - _deleted(f), 0)
            removed += (f.size or again.size or 0) * newly // records
            rows += newly
            continue
        removed += f.size or 0
        rows += f.num_records or 0
    for f in adds.values():
        added += f.size or 0
        rows += f.num_records or 0
    return added, removed, rows


def source_change(spark: Any, source: SourceVersion, old: int | None) -> SourceChange:
    """What changed in ``source`` after version ``old`` (None or not older: nothing), and its size now."""
    log = DeltaLog(spark, source.location, source.name)
    size, rows = _size(log, source.version)
    if old is None or source.version <= old:
        return SourceChange(source.name, rows=rows, bytes=size)
    added = removed = added_bytes = removed_bytes = file_rows = 0
    for version in range(old + 1, source.version + 1):
        commit = log.commit(version)
        a, r = commit_rows(commit)
        added, removed = added + a, removed + r
        a_bytes, r_bytes, rows_of_bytes = _file_changes(commit)
        added_bytes, removed_bytes = added_bytes + a_bytes, removed_bytes + r_bytes
        file_rows += rows_of_bytes
    if rows is None and size is not None and file_rows and added_bytes + removed_bytes:
        rows = round(size * file_rows / (added_bytes + removed_bytes))  # the changed files' bytes per row
    return SourceChange(source.name, added, removed, added_bytes, removed_bytes, rows, size)


def past_refreshes(store: StateStore, spark: Any, name: str, location: str | None
                   ) -> tuple[Measured | None, tuple[Measured, ...]]:
    """The fastest per byte of the table's last few full computations (seconds, bytes of its sources then plus the
    table it wrote) and its newest incremental refreshes (seconds, change bytes), from the history.

    A refresh's time is its cost plus whatever slowed it that time (a cold cache, code not yet compiled, a busy
    machine), never less, so the least of a few measurements is the closest to the cost: TPC-H Q15 at SF 1 took
    1.4 s at CREATE and 1.9 s in a later FULL, and FULL estimated from the last alone (1.9 s) lost to INCREMENTAL's
    1.8 s, where FULL then ran in 1.0 to 1.3 s. The FULL is marked ``at_creation`` while the refresh at CREATE is
    the only full computation among them."""
    fulls: list[Measured] = []
    for r in history.recent(store, name, f"write_kind = '{Write.OVERWRITE}'", FULL_POINTS):
        if r.seconds is None:
            continue
        written = DeltaLog(spark, location).size_at(r.target_version) \
            if location is not None and r.target_version is not None else None
        scale = r.source_bytes + (written or 0) if r.source_bytes is not None else None
        fulls.append(Measured(r.seconds, scale, at_creation=r.trigger == Trigger.CREATION))
    rated = [(m.seconds / m.bytes, m) for m in fulls if m.bytes]
    last_full = min(rated, key=lambda p: p[0])[1] if rated else (fulls[0] if fulls else None)
    if last_full is not None and not all(m.at_creation for m in fulls):  # a later one was measured, if slower
        last_full = dataclasses.replace(last_full, at_creation=False)
    incrementals = tuple(Measured(r.seconds, r.change_bytes) for r in history.recent(
        store, name, f"action = '{Action.INCREMENTAL}' AND change_bytes IS NOT NULL", INCREMENTAL_POINTS)
        if r.seconds is not None)
    return last_full, incrementals


def gather(spark: Any, store: StateStore, d: Definition, sources: Mapping[str, SourceVersion],
           table_bytes: int | None, location: str | None) -> CostInputs:
    changes = tuple(source_change(spark, s, d.frontier.get(n) if d.source_identities.get(n) == s.identity else None)
                    for n, s in sources.items())
    last_full, incrementals = past_refreshes(store, spark, d.name, location)
    borrowed = () if incrementals else tuple(
        r.seconds for r in history.recent(store, d.name, f"action = '{Action.INCREMENTAL}'", INCREMENTAL_POINTS,
                                          other_tables=True) if r.seconds is not None)
    return CostInputs(changes, table_bytes, last_full, incrementals, borrowed)


def history_fields(inputs: CostInputs, decision: CostDecision | None) -> dict[str, Any]:
    """The refresh history's cost columns for one refresh."""
    fields: dict[str, Any] = {"source_bytes": inputs.source_bytes, "change_bytes": inputs.change_bytes}
    if decision is not None:
        fields.update(estimate_incremental_s=decision.estimate_incremental_s,
                      estimate_full_s=decision.estimate_full_s, cost_choice=str(decision.choice),
                      cost_reason=decision.reason)
    return fields


def full_instead(action: RefreshAction, decision: CostDecision) -> RefreshAction:
    """The INCREMENTAL ``action`` as the FULL recompute the cost model chose: the same maintained plan (hidden
    aggregate state included) over the same frontier, overwritten with fresh row ids and state, so the next
    INCREMENTAL refresh continues from it as from the initial refresh."""
    changed = action.reason.split("; aggregate groups")[0]
    return dataclasses.replace(action, action=Action.FULL, write=Write.OVERWRITE, shape=None, derivative=None,
                               reason=f"AUTO cost model: {decision.reason}; {changed}")


def with_cost_model(spark: Any, store: StateStore, d: Definition, sources: Mapping[str, SourceVersion],
                    action: RefreshAction, table_bytes: int | None, location: str | None
                    ) -> tuple[RefreshAction, dict[str, Any]]:
    """``action``, turned FULL when it is an AUTO table's INCREMENTAL refresh and the cost model says FULL is
    cheaper, with the history fields recording what was measured and decided. Measuring never fails a refresh: a
    log that cannot be read leaves the action as it was (the refresh itself then says what is wrong)."""
    if action.action == Action.NO_DATA:
        return action, {}
    deciding = d.refresh_mode == RefreshMode.AUTO and action.action == Action.INCREMENTAL
    model = settings(spark) if deciding else None
    try:
        inputs = gather(spark, store, d, sources, table_bytes, location)
    except Exception as e:  # noqa: BLE001 - the cost model is advice; the refresh goes on without it
        return action, ({"cost_reason": f"INCREMENTAL: cost model skipped ({e})"} if model is not None else {})
    if model is None:
        return action, history_fields(inputs, None)
    decision = choose(inputs, model)
    fields = history_fields(inputs, decision)
    return (full_instead(action, decision) if decision.choice == Action.FULL else action), fields


def estimate_next(session: Any, name: str) -> str:
    """What AUTO's cost model would choose for the next refresh of ``name`` if it ran now, in words, for ``dtables
    plan`` (sources at their latest versions; logs and history only). Empty for a table the model does not decide
    for (REFRESH_MODE = INCREMENTAL or FULL, AUTO that chose FULL, not yet refreshed, or the model turned off)."""
    d = defs.load(session.store, name)
    model = settings(session.spark)
    if d is None or model is None or d.refresh_mode != RefreshMode.AUTO or not d.initialized \
            or d.refresh_mode_chosen != RefreshMode.INCREMENTAL:
        return ""
    sources: dict[str, SourceVersion] = {}
    for source in d.sources:
        obj = session.catalog.lookup(source)
        if obj is None:
            return f"source {source} is missing"
        log = DeltaLog(session.spark, obj["location"], source)
        sources[source] = describe_version(source, log, log.latest_version, obj["kind"] == "DYNAMIC_TABLE")
    table = session.catalog.lookup(name)
    location = str(table["location"]) if table is not None else None
    table_bytes = DeltaLog(session.spark, location).size_at(d.data_version) \
        if location is not None and d.data_version is not None else None
    try:
        inputs = gather(session.spark, session.store, d, sources, table_bytes, location)
    except Exception as e:  # noqa: BLE001 - a plan shows what it can; the refresh will say what is wrong
        return f"no estimate: {e}"
    if not any(s.changed for s in inputs.sources):
        return "no source changed since the last refresh"
    return describe(choose(inputs, model))


def describe(decision: CostDecision) -> str:
    """``FULL: 52% of default.lineitem changed (est. INCREMENTAL 8.1 s, FULL 3.0 s)``: the reason and both estimates."""
    def seconds(s: float | None) -> str:
        return "?" if s is None else f"{s:.1f} s"

    return (f"{decision.reason} (est. INCREMENTAL {seconds(decision.estimate_incremental_s)}, "
            f"FULL {seconds(decision.estimate_full_s)})")
