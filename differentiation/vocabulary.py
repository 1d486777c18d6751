"""The words of change sets, defined once: the rest of the code (``dtables`` included) imports them from here.

Enums mix in ``str`` so a member equals the plain word stored in the state store and shown to users, and prints as
that word (``str()``, f-strings and ``json.dumps`` give ``"APPEND_ONLY"``, never ``ChangeFormat.APPEND_ONLY``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

# Hidden columns of the relations a change plan reads and writes: every relation carries ROW_ID (an opaque id,
# stable across updates); a change set also carries ACTION (INSERT or DELETE).
ROW_ID = "__row_id"
ACTION = "__action"
INSERT, DELETE = "INSERT", "DELETE"
ACTIONS = (INSERT, DELETE)

# The columns users see on a change set (CHANGES queries, streams), as in Snowflake.
METADATA_ACTION = "METADATA$ACTION"
METADATA_ISUPDATE = "METADATA$ISUPDATE"
METADATA_ROW_ID = "METADATA$ROW_ID"


class Word(str, Enum):
    """A closed set of words: members compare equal to, and print as, their plain string values."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, format_spec: str) -> str:
        return format(str(self.value), format_spec)

    def __reduce_ex__(self, protocol: object) -> tuple[type[str], tuple[str]]:
        # pickled (to Spark, to another process) as the plain word: the other side need not import this module
        return str, (str(self.value),)


class ChangeFormat(Word):
    """What a change set holds (``CHANGES(INFORMATION => ...)``, a stream's mode)."""

    DEFAULT = "DEFAULT"  # minimum delta, ISUPDATE computed last
    APPEND_ONLY = "APPEND_ONLY"  # fresh inserts only; monotonic plans only


class Shape(Word):
    """The shape of a change plan (paper 4.2), from which kinds of changes its inputs had."""

    NO_DATA = "NO_DATA"  # nothing changed: no Spark job at all
    ADDED_ONLY = "ADDED_ONLY"  # inserts only: no consolidation
    REMOVED_ONLY = "REMOVED_ONLY"  # deletes only
    MINIMIZE = "MINIMIZE"  # both: consolidated by row id into the minimum delta


@dataclass(frozen=True)
class ChangeStats:
    """What kinds of changes a base table had over an interval (both False: unchanged). A change read planned from
    the Delta log also counts the data files it added and removed (0 when unknown)."""

    inserts: bool = True
    deletes: bool = True
    added_files: int = 0
    removed_files: int = 0
    # When known (``dtables.changes.moved``): the interval only updated rows, each keeping its id (none inserted or
    # deleted outright), and these are the columns (lower case) some update gave another value. A subplan that
    # reads none of them is the same at both ends, so its change is empty (`DeriveContext.has_changes`).
    moved: frozenset[str] | None = None

    @property
    def changed(self) -> bool:
        return self.inserts or self.deletes
