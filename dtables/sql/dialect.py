"""The dtables SQL dialect: Spark SQL, plus the statements and clauses of change queries, streams and dynamic tables.

Built on sqlglot's Spark dialect so plain Spark SQL parses as Spark's; everything dtables adds lives here:
- ``METADATA$ACTION``-style identifiers (``$`` inside names, as in Snowflake);
- ``FROM t CHANGES(INFORMATION => ...) AT|BEFORE(...) END(...)`` (sqlglot's own ``exp.Changes`` /
  ``exp.HistoricalData``);
- dtables statements, parsed into the classes of ``dtables.sql.expressions`` by the parsers in
  ``DTABLES_STATEMENTS`` (from ``dtables.sql.*_syntax``): each is a function that gets the parser positioned at the
  statement's first token and returns an expression or ``None`` (not this statement; the parser is rewound).

The generator quotes identifiers holding ``$`` so that Spark accepts them as column names.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlglot
from sqlglot import exp, transforms
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError, TokenError
from sqlglot.generators.spark import SparkGenerator
from sqlglot.parser import Parser
from sqlglot.parsers.spark import SparkParser
from sqlglot.tokens import TokenType

from dtables.errors import SqlError
from dtables.sql import channel_syntax, dynamic_syntax, stream_syntax, table_syntax
from dtables.sql.expressions import SetChangeTracking

StatementParser = Callable[[Parser], "exp.Expr | None"]

# Ordered: the first parser that recognises the statement wins.
DTABLES_STATEMENTS: list[StatementParser] = [
    table_syntax.parse_set_change_tracking, *dynamic_syntax.PARSERS, table_syntax.parse_set_properties_change_tracking,
    *stream_syntax.PARSERS, *channel_syntax.PARSERS]


class DtablesParser(SparkParser):
    def _parse_statement(self) -> exp.Expr | None:
        if self._curr is None:
            return None
        start = self._index
        for parse in DTABLES_STATEMENTS:
            stmt = parse(self)
            if stmt is not None:
                return stmt
            self._retreat(start)
        return super()._parse_statement()


def _set_change_tracking_sql(gen: SparkGenerator, expression: SetChangeTracking) -> str:
    value = "TRUE" if expression.args["enabled"].this else "FALSE"
    return f"ALTER TABLE {gen.sql(expression, 'this')} SET CHANGE_TRACKING = {value}"


# Names users gave (tables, columns, aliases) reach generated SQL as they were written, unquoted; these words get
# quoted. First Spark's: its reserved words (``SELECT keyword FROM sql_keywords() WHERE reserved`` with ANSI mode
# on), its strict non-reserved words (never a table alias, even with ANSI off: ``(...) AS full`` is a syntax error)
# and TRUE (a literal unless quoted). Then sqlglot's: words its parser does not take back as a name, since dtables
# re-parses the SQL it generates (tests/dynamic/test_reserved_names.py checks both lists against the running code).
QUOTED_WORDS = frozenset("""
    all and anti any as authorization both call case cast check collate collation collations column constraint create
    cross current_date current_path current_schema current_time current_timestamp current_user distinct else end
    escape except execute false fetch filter for foreign from full grant group having in inner intersect into is join
    lateral leading left minus natural not null offset on only or order outer overlaps primary recursive references
    right select semi session_user setminus some sql table then time to trailing true union unique unknown user using
    when where with within
    alter between drop glob ilike insert like notnull partitioned_by qualify regexp returning revoke rlike rollback
    serdeproperties tablesample uncache values xor""".split())


def _any_to_exists(select: exp.Expr) -> exp.Expr:
    """sqlglot's `any_to_exists` where the SELECT's own clauses hold an ANY. sqlglot searches the whole tree under
    every SELECT it prints, which made printing a change plan (SELECTs nested dozens deep) quadratic; each nested
    SELECT is rewritten when it is printed itself."""
    own = select.walk(prune=lambda n: n is not select and isinstance(n, exp.Query))
    return transforms.any_to_exists(select) if any(isinstance(n, exp.Any) for n in own) else select


class DtablesGenerator(SparkGenerator):
    # dtables statements render back to their own syntax (for messages and EXPLAIN); Spark never sees them.
    TRANSFORMS = {
        **SparkGenerator.TRANSFORMS,
        SetChangeTracking: _set_change_tracking_sql,
        exp.Select: transforms.preprocess([transforms.eliminate_qualify, transforms.eliminate_distinct_on,
                                           transforms.unnest_to_explode, _any_to_exists]),
    }
    RESERVED_KEYWORDS = set(QUOTED_WORDS)

    def identifier_sql(self, expression: exp.Identifier) -> str:
        if "$" in expression.name and not expression.quoted:
            expression = exp.Identifier(this=expression.name, quoted=True)
        return super().identifier_sql(expression)


class Dtables(Spark):
    """Spark SQL plus dtables' statements; pass ``read="dtables"`` or this class to sqlglot."""

    class Tokenizer(Spark.Tokenizer):
        VAR_SINGLE_TOKENS = {"$"}

    Parser = DtablesParser
    Generator = DtablesGenerator


def parse_one(sql: str) -> exp.Expr:
    return sqlglot.parse_one(sql, read=Dtables)


def to_spark(expression: exp.Expr, copy: bool = True) -> str:
    """Spark SQL text for an expression tree (``$`` identifiers and reserved words quoted); ``copy=False`` saves
    sqlglot's copy of the tree (its printer may rewrite what it prints) where the caller built it to print once."""
    return expression.sql(dialect=Dtables, copy=copy)


def split_statements(text: str) -> list[str]:
    """The statements of a ``;``-separated script, as the user wrote them (semicolons inside strings are fine)."""
    try:
        tokens = Dtables().tokenize(text)
    except TokenError as e:
        raise SqlError(f"syntax error: {e}", text) from e
    statements, start = [], 0
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            statements.append(text[start:token.start].strip())
            start = token.end + 1
    statements.append(text[start:].strip())
    return [s for s in statements if s]


def parse(statement: str) -> exp.Expr | None:
    """The statement's tree, or None when sqlglot cannot parse it (then Spark alone decides)."""
    try:
        return sqlglot.parse_one(statement, read=Dtables)
    except ParseError:
        return None


__all__ = ["Dtables", "DtablesParser", "DTABLES_STATEMENTS", "QUOTED_WORDS", "parse", "parse_one", "split_statements",
           "to_spark"]
