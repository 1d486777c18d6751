"""Dynamic tables: declaration, incremental refresh with delayed view semantics, and refresh history.

A dynamic table is a change-tracked Delta table at the catalog's managed location whose contents equal its query
over its sources as of its *data timestamp*. Definitions and refresh history live in the state store; the Delta
commit of each refresh carries the new frontier in its user metadata (design.md section 2), so a crash between the
write and the store update is repaired from the log. See ``executor.refresh`` for the refresh contract.
"""

from __future__ import annotations

from dtables.dynamic.definition import ROW_ID_COLUMN
from dtables.dynamic.errors import DynamicTableError, RefreshFailed

__all__ = ["ROW_ID_COLUMN", "DynamicTableError", "RefreshFailed"]
