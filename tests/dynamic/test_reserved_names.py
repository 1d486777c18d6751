"""Tables, dynamic tables and streams named by Spark's reserved words (``full``, ``order``, ``group``) work.

dtables rewrites a read of a dynamic table into a subquery aliased by the table's name and builds the change plans'
SQL from the names users gave; a reserved word left unquoted there is a Spark syntax error (``... ) AS full``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sqlglot import exp

from dtables.sql.dialect import QUOTED_WORDS, Dtables, parse_one, to_spark
from dtables.testing import assert_same_rows


def _rows(session: Any, sql: str) -> list[tuple]:
    return [tuple(r) for r in session.sql(sql).collect()]


def test_generated_sql_quotes_reserved_words_and_nothing_else() -> None:
    tree = parse_one("SELECT `full`.`order`, t.a FROM `full` JOIN t ON `full`.`group` = t.a")
    text = to_spark(tree)
    assert "`full`.`order`" in text and "JOIN t ON `full`.`group` = t.a" in text, text


def test_no_module_prints_sql_with_sqlglots_plain_spark_dialect() -> None:
    """``.sql(dialect="spark")`` leaves reserved words unquoted; Spark-bound text is printed with ``to_spark``."""
    root = Path(__file__).parents[2] / "dtables"
    plain = re.compile(r"""\.sql\((dialect=)?["']spark["']""")
    found = [f"{path.relative_to(root)}:{n}" for path in sorted(root.rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1) if plain.search(line)]
    assert found == [], found


def test_every_keyword_of_the_parser_prints_as_a_name_it_parses_back() -> None:
    """A sqlglot upgrade that makes another word a keyword fails here until the word joins QUOTED_WORDS."""
    words = {k.lower() for k in Dtables.Tokenizer.KEYWORDS if k.replace("_", "").isalpha()} | QUOTED_WORDS
    for word in sorted(words):
        name = exp.to_identifier(word)
        tree = exp.select(exp.column("x", table=word)).from_(
            exp.Table(this=name, db=exp.to_identifier("db"), alias=exp.TableAlias(this=name.copy())))
        text = to_spark(tree)
        assert to_spark(parse_one(text)) == text, word


def test_spark_reserved_words_are_quoted(spark: Any) -> None:
    ansi = {k: spark.conf.get(k) for k in ("spark.sql.ansi.enabled", "spark.sql.ansi.enforceReservedKeywords")}
    try:
        for key in ansi:
            spark.conf.set(key, "true")
        reserved = {r["keyword"].lower() for r in spark.sql("SELECT * FROM sql_keywords()").collect() if r["reserved"]}
    finally:
        for key, value in ansi.items():
            spark.conf.set(key, value)
    assert len(reserved) > 50 and reserved <= QUOTED_WORDS, sorted(reserved - QUOTED_WORDS)


def test_reserved_words_name_sources_dynamic_tables_and_streams(dt: Any) -> None:
    dt.sql("""CREATE TABLE `order` (`group` INT, `select` INT); CREATE TABLE `join` (`group` INT, `full` STRING);
              INSERT INTO `order` VALUES (1, 10), (2, 20), (2, NULL); INSERT INTO `join` VALUES (1, 'a'), (2, 'b')""")
    query = ("SELECT o.`group`, j.`full`, sum(o.`select`) AS `from` FROM `order` o JOIN `join` j "
             "ON o.`group` = j.`group` GROUP BY o.`group`, j.`full`")
    dt.sql(f"CREATE DYNAMIC TABLE `full` TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS {query}")
    downstream = "SELECT `group`, `from` * 2 AS `left` FROM `full`"
    dt.sql(f"CREATE DYNAMIC TABLE `group` TARGET_LAG = DOWNSTREAM REFRESH_MODE = INCREMENTAL AS {downstream}")
    dt.sql("CREATE STREAM `union` ON TABLE `order`")
    assert_same_rows(_rows(dt, "SELECT * FROM `full`"), _rows(dt, query))
    assert_same_rows(_rows(dt, "SELECT * FROM full"), _rows(dt, query))  # Spark takes `full` unquoted in FROM
    dt.sql("INSERT INTO `order` VALUES (1, 5), (3, 7); UPDATE `order` SET `select` = 1 WHERE `select` IS NULL")
    dt.sql("INSERT INTO `join` VALUES (3, NULL); DELETE FROM `join` WHERE `group` = 2")
    records = dt.sql("ALTER DYNAMIC TABLE `group` REFRESH").collect()
    assert [(r["name"], r["state"], r["action"]) for r in records] == [
        ("default.full", "SUCCEEDED", "INCREMENTAL"), ("default.group", "SUCCEEDED", "INCREMENTAL")], records
    assert_same_rows(_rows(dt, "SELECT * FROM `full`"), _rows(dt, query))
    assert_same_rows(_rows(dt, "SELECT * FROM `group`"), _rows(dt, downstream))
    changes = _rows(dt, "SELECT `group`, `select`, METADATA$ACTION FROM `union`")
    assert sorted(changes, key=repr) == sorted(
        [(1, 5, "INSERT"), (3, 7, "INSERT"), (2, None, "DELETE"), (2, 1, "INSERT")], key=repr)
    dt.sql("CREATE TABLE sink AS SELECT `group`, `select` FROM `order` WHERE false")
    dt.sql("INSERT INTO sink SELECT `group`, `select` FROM `union`")
    assert _rows(dt, "SELECT * FROM `union`") == []
