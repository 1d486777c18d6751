"""The caller-implemented access to base tables: snapshots and redundant change reads, as relation names."""

from __future__ import annotations

from typing import Literal, Protocol

from collections.abc import Callable

from sqlglot import exp

from differentiation.delta_nodes import KeyFilter
from differentiation.shared_reads import HeldRead

When = Literal["start", "end"]


class Sources(Protocol):
    """Where the rendered SQL reads base tables from. Implementations do the I/O; the compiler only
    names what they return (a quoted view name)."""

    def snapshot(self, table: str, when: When, keys: tuple[KeyFilter, ...] = ()) -> str:
        """A relation with the table's columns plus `__row_id` STRING (unique, stable across updates),
        as of the interval start ("start" = I0) or end ("end" = I1). `keys` (from key pruning): the query
        keeps only rows passing them, so the relation may leave out files whose statistics rule them out. A
        filter with `from_change` (which only an implementation's own key probes make) holds keys whose rows the
        relation must take from the table's change, its files being chosen by the filter's other keys alone."""
        ...

    def ends(self, table: str, keys: tuple[KeyFilter, ...] = ()) -> str:
        """A relation with the table's columns, `__row_id` and `__at_start`, `__at_end` BOOLEAN: every row the
        table holds at either end of the interval, flagged by the ends holding it (the rows with `__at_start` are
        exactly `snapshot(table, "start")`'s; a row both ends hold comes once with both flags, or once per end).
        Read once where a plan needs both ends
        (`ends.share_ends`); `keys` as for `snapshot`."""
        ...

    def changes(self, table: str) -> str:
        """A relation with the table's columns plus `__action` ('INSERT'|'DELETE') and `__row_id`:
        a redundant delta of the table over the interval (may hold cancelling pairs). For a derivative built with
        `minimal=False` its DELETE rows must be rows of the table at the start and its INSERT rows rows at the end
        (no row born and gone inside the interval), as Delta's change reader gives them (`differentiation.pure`)."""
        ...


class StateSources(Sources, Protocol):
    """Sources of a caller that also stores the previous result of a maintained aggregate (`StoredState`)."""

    def state(self) -> str:
        """A relation with the stored helper columns (`__key<j>`, `__cnt`, `__sum_<i>`, `__nn_<i>`)."""
        ...


class HeldSources(Sources, Protocol):
    """Sources of a caller that can compute a restricted read once for every plan that reads the same rows."""

    def held(self, read: HeldRead, query: Callable[[], exp.Select]) -> str | None:
        """A relation with the rows of `query()` (a SELECT of the restricted read `read` describes, its columns
        named under `shared_reads.SHARED_ALIAS`, and `__row_id`), computed once for the plans that read what `read`
        describes over the same intervals; or None, where the plan is to compute it itself (the read too large
        to hold, say). `query` is called at most once, and only when the rows are not held already."""
        ...
