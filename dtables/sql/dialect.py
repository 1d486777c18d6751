"""The dtables SQL dialect: Spark SQL, plus the statements and clauses of change queries, streams and dynamic tables.

Built on sqlglot's Spark dialect so plain Spark SQL parses as Spark's; everything dtables adds lives here:
- ``METADATA$ACTION``-style identifiers (``$`` inside names, as in Snowflake);
- ``FROM t CHANGES(INFORMATION => ...) AT|BEFORE(...) END(...)`` (sqlglot's own ``exp.Changes`` /
  ``exp.HistoricalData``);
- dtables statements, parsed into the expression classes below by the parsers in ``DTABLES_STATEMENTS``: each is a
  function that gets the parser positioned at the statement's first token and returns an expression or ``None``
  (not this statement; the parser is rewound). Later statements (streams, dynamic tables) register here too.

The generator quotes identifiers holding ``$`` so that Spark accepts them as column names.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.generators.spark import SparkGenerator
from sqlglot.parsers.spark import SparkParser
from sqlglot.tokens import TokenType

from dtables.ingest import syntax as ingest_syntax
from dtables.sql import dynamic_syntax
from dtables.streams import syntax as stream_syntax


class SetChangeTracking(exp.Expression):
    """``ALTER TABLE t SET CHANGE_TRACKING = TRUE | FALSE``."""

    arg_types = {"this": True, "enabled": True}


StatementParser = Callable[["DtablesParser"], "exp.Expr | None"]


def _parse_set_change_tracking(p: DtablesParser) -> exp.Expr | None:
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


# Ordered: the first parser that recognises the statement wins.
DTABLES_STATEMENTS: list[StatementParser] = [_parse_set_change_tracking, *dynamic_syntax.PARSERS,
                                              *stream_syntax.PARSERS, *ingest_syntax.PARSERS]


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
    import sqlglot

    return sqlglot.parse_one(sql, read=Dtables)


def to_spark(expression: exp.Expr) -> str:
    """Spark SQL text for an expression tree (``$`` identifiers quoted)."""
    return expression.sql(dialect=Dtables)


__all__ = ["Dtables", "DtablesParser", "DTABLES_STATEMENTS", "SetChangeTracking", "parse_one", "to_spark"]
