"""Opening and dropping a channel: reconcile the store with the log, bump the epoch, fence older handles.

Open (and reopen), from any process:

1. Read the channel's row. None: look for the channel in the log (a lost store, or a name used before); nothing
   there or a DROP: a new incarnation with a fresh app id. A row: reconcile it with the log, i.e. adopt the app's
   commits after the row's ``log_version`` (a process killed between its commit and its store update).
2. Claim epoch + 1 in the store (compare-and-set on the epoch read in 1; a concurrent open makes us start over).
   From now on every older handle fails its pre-commit epoch check.
3. If the channel existed before, write the FENCE commit (``txnVersion = epoch << 32``): an older handle that passed
   its epoch check just before 2 cannot commit after the fence (Delta skips or rejects its lower txnVersion).
4. Reconcile again after the fence: whatever an older handle committed before it is adopted, so the token
   returned is exactly the last one the log holds. What older handles buffered and did not commit is lost to them,
   as seed 004 specifies for a reopen.

Drop: bump the epoch as in 2, write a DROP fence, delete the row. A later open of that name starts afresh.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from dtables.catalog.warehouse import Warehouse
from dtables.changes.log import DeltaLog
from dtables.ingest import commits
from dtables.ingest import store as cs
from dtables.ingest.commits import ChannelCommit, FoundCommit
from dtables.ingest.errors import IngestError
from dtables.ingest.store import ChannelState, utc_now
from dtables.ingest.target import Target

_ATTEMPTS = 8


def _adopt(state: ChannelState, newest: FoundCommit | None, newest_rows: FoundCommit | None) -> ChannelState:
    if newest is not None and newest.meta.seq >= state.seq:
        state = state.with_(seq=newest.meta.seq, log_version=max(state.log_version, newest.version))
    if newest_rows is not None:
        state = state.with_(offset_token=newest_rows.meta.token, committed_at=newest_rows.committed_at,
                            rows_committed=newest_rows.meta.rows_total)
    return state


def reconcile(spark: Any, target: Target, state: ChannelState) -> ChannelState:
    """``state`` with the commits of its app found in the log after ``state.log_version``."""
    found = commits.read_app(spark, target.location, state.app_id, state.log_version)
    return _adopt(state, found.newest, found.newest_rows)


def _from_log(warehouse: Warehouse, target: Target, name: str, on_error: str) -> ChannelState:
    """The channel as the log knows it, for a channel without a store row (a fresh incarnation if none)."""
    now = utc_now()
    found = commits.find_channel(warehouse.spark, target.location, target.name, name)
    newest = found.newest
    if newest is None or newest.meta.kind == "DROP":
        latest = DeltaLog(warehouse.spark, target.location).latest_version
        app = f"dtables-ingest:{name}:{uuid.uuid4().hex[:16]}"
        return ChannelState(target.name, name, app, 0, 0, latest, None, None, 0, on_error, now, now)
    base = ChannelState(target.name, name, newest.meta.app, newest.meta.epoch, 0, newest.version, None, None, 0,
                        on_error, now, now)
    return _adopt(base, newest, found.newest_rows)


def _fence(warehouse: Warehouse, target: Target, state: ChannelState, kind: str) -> None:
    """Write a fence commit at ``state.epoch``; a conflicting commit of an older handle makes us try again."""
    meta = ChannelCommit(target.name, state.name, state.app_id, commits.txn_version(state.epoch, 0), kind,
                         state.offset_token, 0, state.rows_committed)
    for attempt in range(_ATTEMPTS):
        try:
            commits.write(warehouse.spark, target.location, target.schema, [], meta)
            return
        except Exception as e:  # noqa: BLE001 - a concurrent commit of the app (ConcurrentTransactionException)
            if commits.read_app(warehouse.spark, target.location, state.app_id, state.log_version).at(meta.seq):
                return  # it did land
            if attempt + 1 == _ATTEMPTS:
                raise IngestError(f"channel {state.name} on {target.name}: cannot write its fence commit: "
                                  f"{str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}"
                                  ) from e
            time.sleep(0.05 * (attempt + 1))


def open_state(warehouse: Warehouse, target: Target, name: str, on_error: str) -> ChannelState:
    """Open channel ``name`` on ``target`` at a new epoch; the returned state holds the last committed token."""
    for _ in range(_ATTEMPTS):
        old = cs.get(warehouse.store, target.name, name)
        if old is None:
            base = _from_log(warehouse, target, name, on_error)
        else:
            base = reconcile(warehouse.spark, target, old)
        epoch = max(base.epoch, commits.epoch_of(base.seq)) + 1
        claimed = base.with_(epoch=epoch, on_error=on_error, opened_at=utc_now())
        if not cs.claim(warehouse.store, claimed, old.epoch if old is not None else None):
            continue  # another open won the race: start over from its row
        if epoch == 1:
            return claimed  # a new channel: no older handle to fence
        _fence(warehouse, target, claimed, "FENCE")
        final = reconcile(warehouse.spark, target, claimed)
        cs.record_commit(warehouse.store, final)  # fails only if yet another open came after us: it reconciles too
        return final
    raise IngestError(f"channel {name} on {target.name}: could not open it, other processes kept reopening it")


def drop_state(warehouse: Warehouse, target: Target, name: str) -> None:
    """Drop channel ``name``: older handles everywhere are fenced and its offset token is forgotten."""
    for _ in range(_ATTEMPTS):
        old = cs.get(warehouse.store, target.name, name)
        if old is None:
            raise IngestError(f"channel {name} on {target.name} does not exist")
        base = reconcile(warehouse.spark, target, old)
        claimed = base.with_(epoch=max(base.epoch, commits.epoch_of(base.seq)) + 1)
        if not cs.claim(warehouse.store, claimed, old.epoch):
            continue
        _fence(warehouse, target, claimed, "DROP")
        cs.delete(warehouse.store, target.name, name)
        return
    raise IngestError(f"channel {name} on {target.name}: could not drop it, other processes kept reopening it")
