"""Syntax of the change-tracking switch of a table, in both spellings, parsed into
``dtables.sql.expressions.SetChangeTracking``::

    ALTER TABLE t SET CHANGE_TRACKING = TRUE | FALSE                      (Snowflake)
    ALTER TABLE t SET PROPERTIES ('change_tracking' = 'true' | 'false')   (Singdata, the prerequisite of its streams)
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.parser import Parser
from sqlglot.tokens import TokenType

from dtables.sql.expressions import SetChangeTracking


def _at_end(p: Parser) -> bool:
    # sqlglot's parser marks the end with a sentinel token, not None.
    return p._index >= len(p._tokens) or p._curr.token_type == TokenType.SEMICOLON


def parse_set_change_tracking(p: Parser) -> exp.Expr | None:
    if not p._match_text_seq("ALTER", "TABLE"):
        return None
    table = p._parse_table_parts()
    if not p._match_text_seq("SET", "CHANGE_TRACKING"):
        return None
    p._match(TokenType.EQ)
    value = p._parse_var(any_token=True)
    if value is None or value.name.upper() not in ("TRUE", "FALSE"):
        p.raise_error("CHANGE_TRACKING must be TRUE or FALSE")
        return None
    return SetChangeTracking(this=table, enabled=exp.Boolean(this=value.name.upper() == "TRUE"))


def parse_set_properties_change_tracking(p: Parser) -> exp.Expr | None:
    """Singdata's ``ALTER TABLE t SET PROPERTIES ('change_tracking' = 'true')``, the prerequisite of its streams."""
    if not p._match_text_seq("ALTER", "TABLE"):
        return None
    table = p._parse_table_parts()
    if not p._match_text_seq("SET", "PROPERTIES") or not p._match(TokenType.L_PAREN):
        return None
    if not p._match(TokenType.STRING) or p._prev.text.lower() != "change_tracking":
        return None
    p._match(TokenType.EQ)
    if not p._match(TokenType.STRING) or p._prev.text.upper() not in ("TRUE", "FALSE"):
        p.raise_error("'change_tracking' must be 'true' or 'false'")
    enabled = p._prev.text.upper() == "TRUE"
    if not p._match(TokenType.R_PAREN) or not _at_end(p):
        return None
    return SetChangeTracking(this=table, enabled=exp.Boolean(this=enabled))
