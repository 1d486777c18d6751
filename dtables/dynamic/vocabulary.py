"""The words of dynamic-table refreshes, defined once. The refresh states, triggers and scheduling states the
scheduler shares are in ``scheduler.vocabulary``; the REFRESH_MODE and INITIALIZE settings in
``dtables.sql.dynamic_syntax``, whose parser sits below this package.

Enums mix in ``str`` so a member equals the plain word stored in the state store and shown to users, and prints as
that word.
"""

from __future__ import annotations

from differentiation.vocabulary import Word


class Action(Word):
    """What a refresh does (``refresh_history.action``)."""

    NO_DATA = "NO_DATA"  # no source changed: nothing to write
    INCREMENTAL = "INCREMENTAL"  # apply the change set of the query
    FULL = "FULL"  # recompute the query
    REINITIALIZE = "REINITIALIZE"  # recompute: the definition or a source's identity changed


class Write(Word):
    """How a refresh writes the new contents (``refresh_history.write_kind``): nothing, a plain append of inserts,
    a MERGE on the row id, one overwrite of the old contents patched with the change set (small tables), an
    overwrite with the recomputed query."""

    NONE = "NONE"
    APPEND = "APPEND"
    MERGE = "MERGE"
    REWRITE = "REWRITE"
    OVERWRITE = "OVERWRITE"
