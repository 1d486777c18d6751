"""The scheduler's ``Refresher`` for a warehouse: the refresh executor, failures classified, one log line each.

``ScheduledRefresher.refresh`` does what ``dtables.dynamic.executor.DynamicTableRefresher`` does (refresh one table
to the scheduler's data timestamp, without its upstreams, which the tick plan already ordered before it) and adds
what the daemon needs: whether a failure is worth retrying, the refresh id of the record the executor wrote (the
failure policy annotates it), a log line saying what was refreshed, why and how long it took, and the compaction
policy: after an incremental refresh that leaves the table with ``spark.dtables.optimize.smallFiles`` small files
or more (``dtables.dynamic.optimize``), the table is compacted with Delta OPTIMIZE before the next refresh.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import threading
import time

from dtables.catalog.warehouse import Warehouse
from dtables.dynamic import history
from dtables.dynamic.definition import to_iso
from dtables.dynamic.executor import refresh as refresh_tables
from dtables.dynamic.optimize import optimize, wants_compaction
from dtables.dynamic.vocabulary import Action
from dtables.errors import DtablesError
from scheduler.runner import RefreshOutcome
from scheduler.vocabulary import RefreshState

log = logging.getLogger("dtables.daemon")

# Failures another attempt can cure: Delta commit conflicts (a concurrent writer committed first; Delta's own
# advice is "try the operation again") and a lost executor or driver connection. Everything else (bad SQL, a
# missing source, a type error, division by zero) fails the same way again and is a user error.
_TRANSIENT = re.compile(
    r"Transaction conflict detected|Concurrent\w*Exception|by a concurrent update|MetadataChangedException"
    r"|ProtocolChangedException|ExecutorLostFailure|Lost executor|Executor lost|FetchFailed"
    r"|SparkContext was shut down|Py4JNetworkError|Answer from Java side is empty|Connection reset",
    re.IGNORECASE,
)


def is_transient(error: str | None) -> bool:
    """Whether a refresh error is a transient one (retried with backoff) rather than a user error."""
    return bool(error) and _TRANSIENT.search(error or "") is not None


class ScheduledRefresher:
    """Refreshes one table at a time for the tick runner (thread-safe: each call is one executor refresh)."""

    def __init__(self, warehouse: Warehouse, reasons: dict[tuple[str, dt.datetime], str] | None = None) -> None:
        self.warehouse = warehouse
        self.reasons = reasons if reasons is not None else {}  # (table, data timestamp) -> why it is in the plan
        self.refresh_ids: dict[tuple[str, dt.datetime], str] = {}  # the record each refresh wrote
        self.cancelling = threading.Event()  # set at a shutdown past its timeout: failures become CANCELLED

    def refresh(self, name: str, data_timestamp: dt.datetime, trigger: str) -> RefreshOutcome:
        why = self.reasons.get((name, data_timestamp), "requested")
        started = time.monotonic()
        try:
            [record] = refresh_tables(self.warehouse, [name], trigger=trigger, data_timestamp=data_timestamp,
                                      with_upstreams=False)
        except DtablesError as e:  # the table was dropped since the tick was planned
            took = time.monotonic() - started
            log.warning("refresh of %s to %s FAILED after %.2f s (%s): %s", name, to_iso(data_timestamp), took, why, e)
            return RefreshOutcome(RefreshState.FAILED, error=str(e), duration_s=took)
        took = time.monotonic() - started
        self.refresh_ids[(name, data_timestamp)] = record.refresh_id
        state, error = record.state, record.error
        if state == RefreshState.FAILED and self.cancelling.is_set():
            state, error = RefreshState.CANCELLED, f"cancelled at daemon shutdown (timeout); {error}"
            history.update(self.warehouse.store, record.refresh_id, state=state, error=error)
        transient = state == RefreshState.FAILED and is_transient(error)
        _log(name, data_timestamp, why, record, state, error, took, transient)
        if state == RefreshState.SUCCEEDED and record.action == Action.INCREMENTAL:
            self.compact(name)
        return RefreshOutcome(state, action=record.action or "", error=error, transient=transient, duration_s=took)


    def compact(self, name: str) -> None:
        """Compact the table if the policy says so; a failed compaction is logged, never a failed refresh."""
        try:
            if not wants_compaction(self.warehouse, name):
                return
            started = time.monotonic()
            [done] = optimize(self.warehouse, [name])
        except Exception as e:  # noqa: BLE001 - the refresh succeeded; the next one tries again
            log.warning("compaction of %s failed: %s", name, e)
            return
        log.info("compacted %s: %d -> %d files, %.2f s", name, done.files_before, done.files_after,
                 time.monotonic() - started)


def _log(name: str, at: dt.datetime, why: str, record: history.RefreshRecord, state: str, error: str | None,
         took: float, transient: bool) -> None:
    if state == RefreshState.SUCCEEDED:
        rows = ""
        if record.action not in (None, Action.NO_DATA):
            rows = f" +{record.rows_inserted or 0} -{record.rows_deleted or 0} ~{record.rows_updated or 0} rows,"
        log.info("refreshed %s to %s: %s,%s %.2f s (%s)", name, to_iso(at), record.action, rows, took, why)
    elif state == RefreshState.FAILED:
        kind = "transient" if transient else "user error, not retried"
        log.warning("refresh of %s to %s FAILED after %.2f s (%s; %s): %s", name, to_iso(at), took, why, kind, error)
    else:
        log.info("refresh of %s to %s %s after %.2f s (%s): %s", name, to_iso(at), state, took, why, error)
