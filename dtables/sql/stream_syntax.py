"""Syntax of stream and transaction statements, parsed into the classes of ``dtables.sql.expressions``.

Snowflake's spelling::

    CREATE [OR REPLACE] STREAM [IF NOT EXISTS] s ON TABLE | VIEW | DYNAMIC TABLE x
        [AT(...) | BEFORE(...)] [APPEND_ONLY = TRUE] [SHOW_INITIAL_ROWS = TRUE] [COMMENT = '...']
    DROP STREAM [IF EXISTS] s;  SHOW STREAMS [LIKE '...'];  DESCRIBE | DESC STREAM s

Singdata's spelling (streams created this way show ``__change_type``, ``__commit_version``, ``__commit_timestamp``)::

    CREATE TABLE STREAM s ON TABLE t [WITH PROPERTIES ('TABLE_STREAM_MODE' = 'STANDARD' | 'APPEND_ONLY',
        'SHOW_INITIAL_ROWS' = 'TRUE')] [COMMENT '...']
    DROP TABLE STREAM [IF EXISTS] s;  DESC TABLE STREAM s;  SHOW TABLE STREAMS

Transactions: ``BEGIN [TRANSACTION | WORK]``, ``START TRANSACTION``, ``COMMIT [WORK]``, ``ROLLBACK [WORK]``.

``VACUUM t | delta.`path` [RETAIN n HOURS] [DRY RUN]`` is Delta's statement, parsed here so that it runs through
the frontier-aware vacuum (``dtables.streams.vacuum``) instead of straight to Delta.
"""

from __future__ import annotations

import re

from sqlglot import exp
from sqlglot.parser import Parser
from sqlglot.tokens import TokenType

from differentiation.vocabulary import ChangeFormat
from dtables.sql.expressions import BeginTransaction, CommitTransaction, CreateStream, DescribeStream, DropStream, \
    RollbackTransaction, ShowStreams, Vacuum

SOURCE_KINDS = ("TABLE", "VIEW", "DYNAMIC TABLE")
FLAVORS = ("SNOWFLAKE", "SINGDATA")  # which spelling created the stream: decides its metadata columns


def _bool(p: Parser, key: str) -> bool:
    text = "" if _at_end(p) else p._curr.text.upper()
    if text not in ("TRUE", "FALSE"):
        p.raise_error(f"{key} must be TRUE or FALSE, not {text or 'nothing'}")
    p._advance()
    return text == "TRUE"


def _at_end(p: Parser) -> bool:
    # sqlglot's parser marks the end with a sentinel token, not None.
    return p._index >= len(p._tokens) or p._curr.token_type == TokenType.SEMICOLON


def _word(p: Parser) -> str:
    """The next token's text, upper-cased (keywords included), and advance; '' at the end."""
    if _at_end(p):
        return ""
    p._advance()
    return p._prev.text.upper()


def _source_kind(p: Parser) -> str:
    if p._match_text_seq("DYNAMIC", "TABLE"):
        return "DYNAMIC TABLE"
    if p._match_text_seq("TABLE"):
        return "TABLE"
    if p._match_text_seq("VIEW"):
        return "VIEW"
    p.raise_error("expected ON TABLE, ON VIEW or ON DYNAMIC TABLE after the stream's name")
    return ""


def parse_create_stream(p: Parser) -> exp.Expr | None:
    if not p._match_text_seq("CREATE"):
        return None
    replace = p._match_text_seq("OR", "REPLACE")
    if p._match_text_seq("TABLE", "STREAM"):
        flavor = "SINGDATA"
    elif p._match_text_seq("STREAM"):
        flavor = "SNOWFLAKE"
    else:
        return None
    exists = p._match_text_seq("IF", "NOT", "EXISTS")
    name = p._parse_table_parts()
    if not p._match_text_seq("ON"):
        p.raise_error("expected ON TABLE | VIEW | DYNAMIC TABLE <source> after the stream's name")
    kind = _source_kind(p)
    source = p._parse_table_parts()
    mode, initial, comment, at_before = ChangeFormat.DEFAULT.value, False, None, None
    while not _at_end(p):
        if p._curr.text.upper() in ("AT", "BEFORE") and p._index + 1 < len(p._tokens) \
                and p._next.token_type == TokenType.L_PAREN:
            at_before = _parse_at_before(p)
            continue
        if p._match_text_seq("WITH", "PROPERTIES"):
            mode, initial = _parse_properties(p, mode, initial)
            continue
        key = _word(p)
        p._match(TokenType.EQ)
        if key == "APPEND_ONLY":
            mode = (ChangeFormat.APPEND_ONLY if _bool(p, key) else ChangeFormat.DEFAULT).value
        elif key == "SHOW_INITIAL_ROWS":
            initial = _bool(p, key)
        elif key == "INSERT_ONLY":
            p.raise_error("INSERT_ONLY streams (external tables) are not supported; use APPEND_ONLY = TRUE")
        elif key == "COMMENT" and p._match(TokenType.STRING):
            comment = p._prev.text
        else:
            p.raise_error(f"unknown stream setting {key or p._curr.text!r}; expected AT(...), BEFORE(...), "
                          "APPEND_ONLY, SHOW_INITIAL_ROWS, COMMENT or WITH PROPERTIES (...)")
    return CreateStream(this=name, source=source, source_kind=exp.var(kind), mode=exp.var(mode),
                        show_initial_rows=exp.Boolean(this=initial), at_before=at_before,
                        comment=exp.Literal.string(comment) if comment is not None else None,
                        replace=replace, exists=exists, flavor=exp.var(flavor))


def _parse_at_before(p: Parser) -> exp.Expr:
    word = p._curr.text.upper()
    p._advance()
    p._match(TokenType.L_PAREN)
    kind = _word(p)
    if kind not in ("TIMESTAMP", "OFFSET", "VERSION", "STREAM", "STATEMENT"):
        p.raise_error(f"{word}(...) takes TIMESTAMP, OFFSET, VERSION or STREAM =>, not {kind or 'nothing'}")
    if not p._match(TokenType.FARROW):
        p.raise_error(f"expected => after {word}({kind}")
    value = p._parse_bitwise()
    p._match_r_paren()
    return exp.HistoricalData(this=word, kind=kind, expression=value)


_MODES = {"STANDARD": ChangeFormat.DEFAULT.value, **{f.value: f.value for f in ChangeFormat}}


def _parse_properties(p: Parser, mode: str, initial: bool) -> tuple[str, bool]:
    p._match(TokenType.L_PAREN)
    while not p._match(TokenType.R_PAREN):
        if _at_end(p):
            p.raise_error("WITH PROPERTIES (...) is missing its closing parenthesis")
        if not p._match(TokenType.STRING):
            p.raise_error("expected 'KEY' = 'VALUE' in WITH PROPERTIES (...)")
        key = p._prev.text.upper()
        p._match(TokenType.EQ)
        if not p._match(TokenType.STRING):
            p.raise_error(f"the value of property '{key}' must be a string")
        value = p._prev.text.upper()
        if key == "TABLE_STREAM_MODE":
            if value not in _MODES:
                p.raise_error(f"TABLE_STREAM_MODE must be 'STANDARD' or 'APPEND_ONLY', not '{value}'")
            mode = _MODES[value]
        elif key == "SHOW_INITIAL_ROWS":
            if value not in ("TRUE", "FALSE"):
                p.raise_error(f"SHOW_INITIAL_ROWS must be 'TRUE' or 'FALSE', not '{value}'")
            initial = value == "TRUE"
        else:
            p.raise_error(f"unknown table stream property '{key}'; expected TABLE_STREAM_MODE or SHOW_INITIAL_ROWS")
        p._match(TokenType.COMMA)
    return mode, initial


def parse_drop_stream(p: Parser) -> exp.Expr | None:
    if not p._match_text_seq("DROP"):
        return None
    if not (p._match_text_seq("TABLE", "STREAM") or p._match_text_seq("STREAM")):
        return None
    exists = p._match_text_seq("IF", "EXISTS")
    return DropStream(this=p._parse_table_parts(), exists=exists)


_SHOW = re.compile(r"^\s*(?:TABLE\s+)?STREAMS(?:\s+LIKE\s+'([^']*)')?\s*$", re.IGNORECASE)


def parse_show_streams(p: Parser) -> exp.Expr | None:
    # The tokenizer hands over everything after SHOW as one string (as for SHOW DYNAMIC TABLES).
    if not p._match_text_seq("SHOW") or not p._match(TokenType.STRING):
        return None
    match = _SHOW.match(p._prev.text)
    if match is None:
        return None
    return ShowStreams(like=exp.Literal.string(match.group(1)) if match.group(1) is not None else None)


def parse_describe_stream(p: Parser) -> exp.Expr | None:
    if not (p._match_text_seq("DESCRIBE") or p._match_text_seq("DESC")):
        return None
    if not (p._match_text_seq("TABLE", "STREAM") or p._match_text_seq("STREAM")):
        return None
    return DescribeStream(this=p._parse_table_parts())


def parse_transaction(p: Parser) -> exp.Expr | None:
    """BEGIN / START TRANSACTION / COMMIT / ROLLBACK (sqlglot's own nodes would not mark them as dtables')."""
    node: exp.Expr
    if p._match_text_seq("BEGIN") or p._match_text_seq("START", "TRANSACTION"):
        node = BeginTransaction()
    elif p._match_text_seq("COMMIT"):
        node = CommitTransaction()
    elif p._match_text_seq("ROLLBACK") or p._match_text_seq("ABORT"):
        node = RollbackTransaction()
    else:
        return None
    p._match_text_seq("TRANSACTION") or p._match_text_seq("WORK")
    if not _at_end(p):
        return None  # e.g. BEGIN ... END blocks: not ours
    return node


_VACUUM = re.compile(r"^\s*(?P<table>'[^']*'|delta\s*\.\s*`[^`]+`|[\w`.]+)"
                     r"(?:\s+RETAIN\s+(?P<hours>\d+(?:\.\d+)?)\s+HOURS?)?(?P<dry>\s+DRY\s+RUN)?\s*$", re.IGNORECASE)


def parse_vacuum(p: Parser) -> exp.Expr | None:
    # VACUUM is one of the tokenizer's commands: everything after it arrives as one string.
    if not p._match_text_seq("VACUUM"):
        return None
    text = p._prev.text if p._match(TokenType.STRING) else ""
    match = _VACUUM.match(text)
    if match is None:
        p.raise_error(f"cannot read VACUUM {text.strip()!r}: dtables runs VACUUM t [RETAIN n HOURS] [DRY RUN] "
                      "(keeping what live stream and dynamic table frontiers need)")
        return None
    written = match.group("table")
    if written.startswith("'"):  # Delta's VACUUM '/path/to/table'
        table = exp.Table(this=exp.to_identifier(written.strip("'"), quoted=True), db=exp.to_identifier("delta"))
    else:
        table = exp.to_table(written, dialect="spark")
    hours = match.group("hours")
    return Vacuum(this=table, retain=exp.Literal.number(hours) if hours is not None else None,
                  dry_run=exp.Boolean(this=match.group("dry") is not None))


PARSERS = (parse_create_stream, parse_drop_stream, parse_show_streams,
           parse_describe_stream, parse_transaction, parse_vacuum)
