"""Syntax of ``SHOW CHANNELS [LIKE '<pattern>'] [IN ACCOUNT | IN DATABASE <db> | IN SCHEMA <db> | IN [TABLE] <t>]``
(Snowflake's spelling; a database and a schema are the same thing in Spark)."""

from __future__ import annotations

import re

from sqlglot import exp
from sqlglot.parser import Parser
from sqlglot.tokens import TokenType

from dtables.sql.expressions import ShowChannels

_SHOW = re.compile(r"^\s*CHANNELS(?:\s+LIKE\s+'(?P<like>[^']*)')?(?:\s+IN\s+(?:(?P<account>ACCOUNT)|"
                   r"(?:DATABASE|SCHEMA)\s+(?P<database>[\w`]+)|(?:TABLE\s+)?(?P<table>[\w.`]+)))?\s*$",
                   re.IGNORECASE)


def parse_show_channels(p: Parser) -> exp.Expr | None:
    # The tokenizer hands over everything after SHOW as one string (as for SHOW STREAMS).
    if not p._match_text_seq("SHOW") or not p._match(TokenType.STRING):
        return None
    text = p._prev.text
    match = _SHOW.match(text)
    if match is None:
        if re.match(r"^\s*CHANNELS\b", text, re.IGNORECASE):
            p.raise_error("expected SHOW CHANNELS [LIKE '<pattern>'] [IN ACCOUNT | DATABASE <db> | SCHEMA <db> | "
                          "[TABLE] <table>]")
        return None
    like, table, database = match.group("like"), match.group("table"), match.group("database")
    return ShowChannels(like=exp.Literal.string(like) if like is not None else None,
                        table=exp.Literal.string(table.replace("`", "")) if table else None,
                        database=exp.Literal.string(database.replace("`", "").lower()) if database else None)


PARSERS = (parse_show_channels,)
