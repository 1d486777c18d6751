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
from sqlglot import exp
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


class DtablesGenerator(SparkGenerator):
    # dtables statements render back to their own syntax (for messages and EXPLAIN); Spark never sees them.
    TRANSFORMS = {**SparkGenerator.TRANSFORMS, SetChangeTracking: _set_change_tracking_sql}

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


def to_spark(expression: exp.Expr) -> str:
    """Spark SQL text for an expression tree (``$`` identifiers quoted)."""
    return expression.sql(dialect=Dtables)


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


__all__ = ["Dtables", "DtablesParser", "DTABLES_STATEMENTS", "parse", "parse_one", "split_statements", "to_spark"]
