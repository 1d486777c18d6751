"""The one error differentiation raises: a query (or a part of it) it cannot handle."""

from __future__ import annotations


class UnsupportedQuery(Exception):
    """A construct that cannot be built into the plan IR or cannot be differentiated.

    `construct` names the operator or function (e.g. "window function", "LIMIT", "rand()");
    `position` is "line L, column C" in the original SQL text, or "" when unknown (a plan or an
    expression built without source positions). Callers fall back to full recompute and show
    `str(error)` to the user.
    """

    def __init__(self, message: str, construct: str, position: str = "") -> None:
        where = f" at {position}" if position else ""
        super().__init__(f"{message}{where}")
        self.message = message
        self.construct = construct
        self.position = position
