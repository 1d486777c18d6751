"""The words of refreshes the scheduler shares with ``dtables``, defined once here (``dtables`` imports them; the
scheduler cannot import ``dtables``).

Enums mix in ``str`` so a member equals the plain word stored in the state store's refresh history and shown to
users, and prints as that word (``str()``, f-strings and ``json.dumps`` give ``"SUCCEEDED"``).
"""

from __future__ import annotations

from enum import Enum


class _Word(str, Enum):
    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, format_spec: str) -> str:
        return format(str(self.value), format_spec)

    def __reduce_ex__(self, protocol: object) -> tuple[type[str], tuple[str]]:
        # pickled (to Spark, to another process) as the plain word: the other side need not import this module
        return str, (str(self.value),)


class RefreshState(_Word):
    """Where a refresh is: EXECUTING while it runs, then how it ended."""

    EXECUTING = "EXECUTING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"  # stopped, or never started (suspended table, scheduler shutting down)
    UPSTREAM_FAILED = "UPSTREAM_FAILED"  # not run: an upstream did not succeed
    SKIPPED = "SKIPPED"  # not run in this tick (the previous refresh still running)


class SchedulingState(_Word):
    """Whether the scheduler refreshes a table (``dynamic_tables.state``; a tick leaves SUSPENDED tables out)."""

    ACTIVE = "ACTIVE"
    SUSPENDED = "SUSPENDED"


class Trigger(_Word):
    """What started a refresh."""

    MANUAL = "MANUAL"  # ALTER DYNAMIC TABLE ... REFRESH, `dtables refresh`
    SCHEDULED = "SCHEDULED"  # the daemon's tick
    CREATION = "CREATION"  # the initial refresh of CREATE DYNAMIC TABLE
