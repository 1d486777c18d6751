"""The words of refreshes the scheduler shares with ``dtables``, defined once here (``dtables`` imports them; the
scheduler cannot import ``dtables``).

Enums mix in ``str`` so a member equals the plain word stored in the state store's refresh history and shown to
users, and prints as that word (``str()``, f-strings and ``json.dumps`` give ``"SUCCEEDED"``).
"""

from __future__ import annotations

from differentiation.vocabulary import Word as _Word  # one definition of how a word prints and pickles


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
