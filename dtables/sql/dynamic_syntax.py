"""Syntax of dynamic-table statements (Snowflake's spelling), parsed into the classes of ``dtables.sql.expressions``.

    CREATE [OR REPLACE] DYNAMIC TABLE [IF NOT EXISTS] d [(col [COMMENT '...'], ...)]
        TARGET_LAG = '<n> seconds|minutes|hours|days' | DOWNSTREAM
        [REFRESH_MODE = AUTO | INCREMENTAL | FULL] [INITIALIZE = ON_CREATE | ON_SCHEDULE] [COMMENT = '...']
        AS SELECT ...
    ALTER DYNAMIC TABLE d REFRESH | SUSPEND | RESUME | SET TARGET_LAG = ...
    DROP DYNAMIC TABLE [IF EXISTS] d
    SHOW DYNAMIC TABLES [LIKE 'pattern']
    DESCRIBE | DESC DYNAMIC TABLE d
"""

from __future__ import annotations

import re

from sqlglot import exp
from sqlglot.parser import Parser
from sqlglot.tokens import TokenType

from differentiation.vocabulary import Word
from dtables.errors import UsageError
from dtables.sql.expressions import AlterDynamicTable, CreateDynamicTable, DescribeDynamicTable, DropDynamicTable, \
    ShowDynamicTables
from scheduler.errors import TargetLagError
from scheduler.periods import parse_target_lag


class RefreshMode(Word):
    """REFRESH_MODE as requested (AUTO chooses) and as chosen (INCREMENTAL or FULL)."""

    AUTO = "AUTO"
    INCREMENTAL = "INCREMENTAL"
    FULL = "FULL"


class Initialize(Word):
    """INITIALIZE: when the first refresh runs."""

    ON_CREATE = "ON_CREATE"
    ON_SCHEDULE = "ON_SCHEDULE"


REFRESH_MODES = tuple(m.value for m in RefreshMode)
INITIALIZE_MODES = tuple(m.value for m in Initialize)


# -- the values of the settings: one parser for SQL and for project files (dtables.yml, model headers) -------------


class SettingError(UsageError):
    """A dynamic-table setting's value is refused; the message names the setting and what it accepts."""


def choice(key: str, value: str, allowed: tuple[str, ...]) -> str:
    """``value`` as one of ``allowed`` (any case), or SettingError."""
    word = value.strip().upper()
    if word not in allowed:
        raise SettingError(f"{key} must be one of {', '.join(allowed)}, not {word or 'nothing'}")
    return word


def target_lag(text: str) -> str:
    """A TARGET_LAG as stored: ``DOWNSTREAM`` (any case) or the text, once the scheduler can schedule it
    (``'<n> seconds|minutes|hours|days'``, at least one second); SettingError otherwise (``soon``, ``-5 minutes``,
    ``0 seconds``, ``1000 years``)."""
    try:
        lag = parse_target_lag(text)
    except TargetLagError as e:
        raise SettingError(str(e)) from e
    return "DOWNSTREAM" if lag.is_downstream else text.strip()


def setting(key: str, value: str) -> str:
    """The value of setting ``key`` (TARGET_LAG, REFRESH_MODE, INITIALIZE, COMMENT) as CREATE DYNAMIC TABLE takes
    it; project files go through here too, so a value one accepts the other accepts."""
    key = key.upper()
    if key == "TARGET_LAG":
        return target_lag(value)
    if key == "REFRESH_MODE":
        return choice(key, value, REFRESH_MODES)
    if key == "INITIALIZE":
        return choice(key, value, INITIALIZE_MODES)
    if key == "COMMENT":
        return value
    raise SettingError(f"unknown dynamic table setting {key!r}; expected TARGET_LAG, REFRESH_MODE, INITIALIZE or "
                       "COMMENT")


def _lag_value(p: Parser) -> str:
    if p._match(TokenType.STRING):
        return p._prev.text
    word = p._parse_var(any_token=True)
    if word is None or word.name.upper() != "DOWNSTREAM":
        p.raise_error("TARGET_LAG must be a string like '5 minutes' or DOWNSTREAM")
    return "DOWNSTREAM"


def _choice(p: Parser, key: str, allowed: tuple[str, ...]) -> str:
    word = p._parse_var(any_token=True)
    try:
        return choice(key, word.name if word is not None else "", allowed)
    except SettingError as e:
        p.raise_error(str(e))
        return ""


def parse_create_dynamic_table(p: Parser) -> exp.Expr | None:
    if not p._match_text_seq("CREATE"):
        return None
    replace = p._match_text_seq("OR", "REPLACE")
    if not p._match_text_seq("DYNAMIC", "TABLE"):
        return None
    exists = p._match_text_seq("IF", "NOT", "EXISTS")
    name = p._parse_table_parts(schema=True)
    columns: list[exp.Expr] = []
    if p._match(TokenType.L_PAREN):
        columns = p._parse_csv(p._parse_field_def)
        p._match_r_paren()
    settings: dict[str, str] = {}
    while not p._match(TokenType.ALIAS):  # AS
        if p._curr is None:
            p.raise_error("expected AS SELECT ... after the dynamic table's settings")
            return None
        key = (p._parse_var(any_token=True) or exp.var("")).name.upper()
        p._match(TokenType.EQ)
        if key == "TARGET_LAG":
            settings[key] = _lag_value(p)
        elif key == "REFRESH_MODE":
            settings[key] = _choice(p, key, REFRESH_MODES)
        elif key == "INITIALIZE":
            settings[key] = _choice(p, key, INITIALIZE_MODES)
        elif key == "COMMENT" and p._match(TokenType.STRING):
            settings[key] = p._prev.text
        elif key == "WAREHOUSE":  # accepted for Snowflake scripts; dtables has no warehouses to pick
            p._parse_var(any_token=True)
        else:
            p.raise_error(f"unknown dynamic table setting {key or p._curr.text!r}; expected TARGET_LAG, "
                          "REFRESH_MODE, INITIALIZE or COMMENT")
    if "TARGET_LAG" not in settings:
        p.raise_error("a dynamic table needs TARGET_LAG = '<n> minutes' or TARGET_LAG = DOWNSTREAM")
    query = p._parse_select()
    if query is None:
        p.raise_error("expected a SELECT after AS")
    return CreateDynamicTable(
        this=name, query=query, target_lag=exp.Literal.string(settings["TARGET_LAG"]),
        refresh_mode=exp.var(settings.get("REFRESH_MODE", RefreshMode.AUTO.value)),
        initialize=exp.var(settings.get("INITIALIZE", Initialize.ON_CREATE.value)),
        comment=exp.Literal.string(settings["COMMENT"]) if "COMMENT" in settings else None,
        columns=columns or None, replace=replace, exists=exists)


def parse_alter_dynamic_table(p: Parser) -> exp.Expr | None:
    if not p._match_text_seq("ALTER", "DYNAMIC", "TABLE"):
        return None
    name = p._parse_table_parts()
    if p._match_text_seq("SET", "TARGET_LAG"):
        p._match(TokenType.EQ)
        return AlterDynamicTable(this=name, action=exp.var("SET_TARGET_LAG"),
                                 target_lag=exp.Literal.string(_lag_value(p)))
    action = _choice(p, "ALTER DYNAMIC TABLE action", ("REFRESH", "SUSPEND", "RESUME"))
    return AlterDynamicTable(this=name, action=exp.var(action))


def parse_drop_dynamic_table(p: Parser) -> exp.Expr | None:
    if not p._match_text_seq("DROP", "DYNAMIC", "TABLE"):
        return None
    exists = p._match_text_seq("IF", "EXISTS")
    return DropDynamicTable(this=p._parse_table_parts(), exists=exists)


_SHOW = re.compile(r"^\s*DYNAMIC\s+TABLES(?:\s+LIKE\s+'([^']*)')?\s*$", re.IGNORECASE)


def parse_show_dynamic_tables(p: Parser) -> exp.Expr | None:
    # The tokenizer treats SHOW as a command keyword and hands over the rest of the statement as one string.
    if not p._match_text_seq("SHOW") or not p._match(TokenType.STRING):
        return None
    match = _SHOW.match(p._prev.text)
    if match is None:
        return None
    return ShowDynamicTables(like=exp.Literal.string(match.group(1)) if match.group(1) is not None else None)


def parse_describe_dynamic_table(p: Parser) -> exp.Expr | None:
    if not (p._match_text_seq("DESCRIBE") or p._match_text_seq("DESC")):
        return None
    if not p._match_text_seq("DYNAMIC", "TABLE"):
        return None
    return DescribeDynamicTable(this=p._parse_table_parts())


PARSERS = (parse_create_dynamic_table, parse_alter_dynamic_table, parse_drop_dynamic_table,
           parse_show_dynamic_tables, parse_describe_dynamic_table)
