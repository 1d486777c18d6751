"""Turn Spark's exceptions into dtables errors whose message names the statement, the object and the problem.

Spark's own message carries an error class, parameters, a SQLSTATE and often a whole logical plan; users need the
first sentence and the object. The raw text stays on the error (``cause``) for debugging.
"""

from __future__ import annotations

import re

from dtables.errors import ObjectNotFound, SqlError

# Error classes (prefixes) and how to say them. Parameters come from getMessageParameters().
_NOT_FOUND = ("TABLE_OR_VIEW_NOT_FOUND", "DELTA_TABLE_NOT_FOUND", "PATH_NOT_FOUND", "SCHEMA_NOT_FOUND",
              "VIEW_NOT_FOUND", "DELTA_MISSING_DELTA_TABLE")
_COLUMN = ("UNRESOLVED_COLUMN", "FIELD_NOT_FOUND", "DELTA_COLUMN_NOT_FOUND")
_TYPE = ("CAST_INVALID_INPUT", "DATATYPE_MISMATCH", "INCOMPATIBLE_DATA_FOR_TABLE", "CAST_OVERFLOW",
         "DELTA_FAILED_TO_MERGE_FIELDS", "INVALID_FORMAT", "DELTA_MERGE_INCOMPATIBLE_DATATYPE",
         "NUMERIC_VALUE_OUT_OF_RANGE", "INSERT_COLUMN_ARITY_MISMATCH")


def short_statement(statement: str, limit: int = 120) -> str:
    one_line = " ".join(statement.split())
    return one_line if len(one_line) <= limit else one_line[: limit - 3] + "..."


def first_sentences(message: str) -> str:
    """The human part of a Spark message: no ``[CLASS]`` prefix, SQLSTATE, position or plan."""
    text = message.strip().split("\n")[0]
    text = re.sub(r"^\[[A-Z0-9_.]+\]\s*", "", text)
    text = re.split(r"\s*SQLSTATE:", text)[0]
    return text.strip().rstrip(";")


def _fragments(error: Exception, params: dict[str, str]) -> list[str]:
    """What Spark points at: its query context's fragment, else the object the error names."""
    found = []
    try:
        found += [c.fragment() for c in error.getQueryContext() or [] if c.fragment()]  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - not every error carries a context
        pass
    found += [params[k] for k in ("objectName", "fieldName", "expression", "sqlExpr") if params.get(k)]
    return found


def position(statement: str, fragments: list[str]) -> str:
    """``at line L, column C`` of the first fragment found in the user's query text (after its first SELECT; Spark
    analysed a rewritten text, so its own offsets do not apply), or "" when none is found."""
    start = re.search(r"\bselect\b", statement, re.IGNORECASE)
    offset = start.start() if start else 0
    for fragment in fragments:
        text = fragment.replace("`", "").strip().strip('"')
        candidates = [text] + ([text.split(".")[-1]] if "." in text else [])
        for candidate in candidates:
            if not candidate:
                continue
            m = re.compile(r"(?<![\w.`])`?" + r"`?\.`?".join(re.escape(p) for p in candidate.split(".")) +
                           r"`?(?![\w`])", re.IGNORECASE).search(statement, offset)
            if m:
                line = statement.count("\n", 0, m.start()) + 1
                column = m.start() - (statement.rfind("\n", 0, m.start()) + 1) + 1
                return f" at line {line}, column {column}"
    return ""


def translate(error: Exception, statement: str) -> SqlError:
    condition = ""
    params: dict[str, str] = {}
    if hasattr(error, "getCondition"):
        try:
            condition = error.getCondition() or ""  # type: ignore[attr-defined]
            params = error.getMessageParameters() or {}  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - some wrapped Java errors carry no class
            pass
    raw = str(error)
    detail = first_sentences(raw)
    where = f"{position(statement, _fragments(error, params))} in statement: {short_statement(statement)}"
    if condition.startswith(_NOT_FOUND):
        name = params.get("relationName") or params.get("tableName") or params.get("schemaName") or ""
        what = f"table or view {name} does not exist" if name else detail
        return ObjectNotFound(f"{what}{where}", statement, raw)
    if condition.startswith(_COLUMN):
        name = params.get("objectName") or params.get("fieldName") or ""
        hint = f" (known columns: {params['proposal']})" if params.get("proposal") else ""
        what = f"column {name} does not exist{hint}" if name else detail
        return SqlError(f"{what}{where}", statement, raw)
    if condition.startswith(_TYPE):
        return SqlError(f"type mismatch: {detail}{where}", statement, raw)
    if condition.startswith("PARSE_SYNTAX_ERROR") or "ParseException" in type(error).__name__:
        return SqlError(f"syntax error: {detail}{where}", statement, raw)
    return SqlError(f"{detail or type(error).__name__}{where}", statement, raw)
