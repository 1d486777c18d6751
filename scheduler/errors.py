"""The errors the scheduler raises on purpose.

The scheduler sits below ``dtables`` and must not import it, so these do not derive from ``DtablesError``; the
session layer wraps them (their messages are already written for users: they name the table and the problem).
"""

from __future__ import annotations


class SchedulerError(Exception):
    """Base class of every error the scheduler raises on purpose."""


class CycleError(SchedulerError):
    """The dependency graph has a cycle. ``path`` is the cycle, first node repeated at the end."""

    def __init__(self, path: tuple[object, ...]) -> None:
        self.path = path
        shown = " -> ".join(str(node) for node in path)
        super().__init__(f"dependency cycle: {shown} (each table reads the next one)")


class UnknownTableError(SchedulerError):
    """A name given to the scheduler is not a node of the DAG."""


class TargetLagError(SchedulerError, ValueError):
    """A TARGET_LAG value that cannot be parsed or is out of range."""


class DaemonLockedError(SchedulerError):
    """Another daemon already holds the single-instance lock of this warehouse."""
