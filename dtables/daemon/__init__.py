"""The scheduler daemon of a warehouse: ``scheduler/`` (when, at which data timestamp) wired to the state store and
the refresh executor (how). ``WarehouseDaemon`` runs it; ``status`` reports each table's lag and failures."""

from __future__ import annotations

from dtables.daemon.refresher import ScheduledRefresher, is_transient
from dtables.daemon.service import DaemonOptions, WarehouseDaemon, warehouse_base_period_s

__all__ = ["DaemonOptions", "ScheduledRefresher", "WarehouseDaemon", "is_transient", "warehouse_base_period_s"]
