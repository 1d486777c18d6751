"""The daemon's failure policy made durable: consecutive failures, suspensions and the history records of tables a
tick did not refresh.

``scheduler.runner`` counts consecutive failed scheduled refreshes in a ``FailureState`` and suspends a table (and
everything downstream of it) after N of them. Here that state is persisted in the ``scheduler_failures`` table of
the state store, and a suspension sets ``dynamic_tables.state = SUSPENDED`` (what ``ALTER DYNAMIC TABLE ... SUSPEND``
does) in the same SQLite transaction, so a restarted daemon, ``dtables status`` and ``dtables dag`` all see it.
``ALTER DYNAMIC TABLE ... RESUME`` is noticed at the next tick: the table and the downstream tables suspended
because of it resume, and their failure counts start again from zero. So is a successful manual refresh
(``dtables refresh``, ``ALTER ... REFRESH``) of a table that is failing but not yet suspended: it shows the cause
was fixed, so its count starts again from zero rather than suspending it at the next scheduled failure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from dtables.catalog import normalize
from dtables.dynamic import definition as defs
from dtables.dynamic import history
from dtables.state import StateStore
from scheduler.dag import DAG
from scheduler.runner import FailureState, TableRunResult, TickResult
from scheduler.vocabulary import RefreshState, SchedulingState, Trigger


class FailureStore:
    """Reads and writes the scheduler's failure state of one warehouse."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    def load(self) -> FailureState:
        rows = self.store.query("SELECT name, consecutive_failures, suspended_reason FROM scheduler_failures")
        return FailureState(
            consecutive_failures={r["name"]: int(r["consecutive_failures"]) for r in rows
                                  if r["consecutive_failures"]},
            suspended={r["name"]: r["suspended_reason"] for r in rows if r["suspended_reason"]},
        )

    def suspension_reasons(self) -> dict[str, str]:
        """Suspensions the daemon made (tables suspended with ALTER have none)."""
        return self.load().suspended

    def save(self, failures: FailureState, newly_suspended: tuple[str, ...] = ()) -> None:
        """Persist ``failures`` and mark ``newly_suspended`` SUSPENDED, in one transaction."""
        names = set(failures.consecutive_failures) | set(failures.suspended)
        now = defs.to_iso(defs.now_utc())
        with self.store.connect() as conn:
            conn.execute("DELETE FROM scheduler_failures")
            for name in sorted(names):
                conn.execute(
                    "INSERT INTO scheduler_failures(name, consecutive_failures, suspended_reason, updated_at) "
                    "VALUES (?, ?, ?, ?)",
                    (name, failures.consecutive_failures.get(name, 0), failures.suspended.get(name), now))
            for name in newly_suspended:
                # defs.set_fields would commit on its own connection; the suspension and its reason go together.
                conn.execute("UPDATE dynamic_tables SET state = ? WHERE name = ?",
                             (SchedulingState.SUSPENDED, normalize(name)))

    def sync_resumed(self, failures: FailureState, dag: DAG[str],
                     definitions: Mapping[str, defs.Definition]) -> list[str]:
        """Apply ``ALTER DYNAMIC TABLE ... RESUME``s and successful manual refreshes made since the last tick (and
        forget dropped tables).

        Only suspensions already persisted count: the runner suspends in memory a moment before ``save`` writes
        the SUSPENDED state, and that window must not look like a RESUME.
        """
        persisted = self.suspension_reasons()
        changed = False
        for name in list(failures.consecutive_failures):
            if name not in definitions:
                failures.consecutive_failures.pop(name, None)
                changed = True
        for name in list(failures.suspended):
            if name not in definitions:
                failures.suspended.pop(name, None)
                changed = True
        for name in list(failures.consecutive_failures):
            if name not in failures.suspended and _refreshed_manually_since(self.store, name):
                failures.consecutive_failures.pop(name)
                changed = True
        resumed: list[str] = []
        for name in dag.topological_order():
            if name in persisted and name in failures.suspended and definitions[name].state == SchedulingState.ACTIVE:
                resumed += failures.resume(dag, name)
        if resumed or changed:
            self.save(failures)
            with self.store.connect() as conn:
                for name in resumed:
                    conn.execute("UPDATE dynamic_tables SET state = ? WHERE name = ?", (SchedulingState.ACTIVE, name))
        return resumed


def _refreshed_manually_since(store: StateStore, name: str) -> bool:
    """Whether the table's newest refresh is a successful one the daemon did not run (its failures are older)."""
    last = history.latest(store, name)
    return last is not None and last.state == RefreshState.SUCCEEDED and last.trigger != Trigger.SCHEDULED


def record_not_refreshed(store: StateStore, result: TickResult, results: Iterable[TableRunResult]) -> dict[str, str]:
    """A history record for each of ``results`` (tables of the tick the refresher never ran: SKIPPED,
    UPSTREAM_FAILED, CANCELLED), trigger as the tick's; returns their refresh ids by table."""
    written = {}
    for r in results:
        if r.attempts > 0:
            continue  # the executor wrote this refresh's record itself
        rid = history.new_refresh_id()
        history.start(store, r.name, rid, result.trigger, result.data_timestamp, None, state=r.state)
        history.update(store, rid, state=r.state, error=r.error)
        written[r.name] = rid
    return written


def record_suspensions(store: StateStore, result: TickResult, failures: FailureState,
                       refresh_ids: Mapping[str, str]) -> None:
    """Say in history why each newly suspended table was suspended: on its record of this tick when it has one,
    else (a downstream table that was not due) on a new UPSTREAM_FAILED record."""
    for name in result.newly_suspended:
        reason = f"dynamic table {name} suspended by the scheduler: {failures.suspended.get(name, '')}; " \
                 f"ALTER DYNAMIC TABLE {name} RESUME resumes it"
        rid = refresh_ids.get(name)
        if rid is None:
            rid = history.new_refresh_id()
            history.start(store, name, rid, result.trigger, result.data_timestamp, None,
                          state=RefreshState.UPSTREAM_FAILED)
            history.update(store, rid, state=RefreshState.UPSTREAM_FAILED, error=failures.suspended.get(name))
        history.update(store, rid, reason=reason)

