"""Column lists and unnamed expressions in dynamic tables, CTAS and views (issue 24)."""

from __future__ import annotations

from typing import Any

import pytest

from dtables.errors import DtablesError
from dtables.testing import assert_same_rows


def _rows(session: Any, sql: str) -> list[tuple]:
    return [tuple(r) for r in session.sql(sql).collect()]


def _refreshed_incrementally(session: Any, name: str, query: str) -> None:
    [record] = session.sql(f"ALTER DYNAMIC TABLE {name} REFRESH").collect()
    assert (record["state"], record["action"]) == ("SUCCEEDED", "INCREMENTAL"), record["error"]
    assert_same_rows(_rows(session, f"SELECT * FROM {name}"), _rows(session, query))


@pytest.fixture
def rs(dt: Any) -> Any:
    dt.sql("""CREATE TABLE base_r (i INT); CREATE TABLE base_s (i INT);
              INSERT INTO base_r VALUES (1), (2), (3); INSERT INTO base_s VALUES (2), (2), (3), (3)""")
    return dt


@pytest.mark.slow  # long-running; `make test-all` runs it
def test_a_column_list_names_duplicate_outputs_and_a_missing_one_is_a_clear_error(rs: Any) -> None:
    query = "SELECT r.i, s.i FROM base_r r JOIN base_s s ON r.i = s.i"
    rs.sql(f"CREATE DYNAMIC TABLE dup (a, b COMMENT 'from s') TARGET_LAG = '1 hour' AS {query}")
    assert rs.sql("SELECT * FROM dup").columns == ["a", "b"]
    assert_same_rows(_rows(rs, "SELECT * FROM dup"), _rows(rs, query))
    rs.sql("INSERT INTO base_r VALUES (2); UPDATE base_s SET i = 1 WHERE i = 3; DELETE FROM base_r WHERE i = 3")
    _refreshed_incrementally(rs, "dup", query)
    with pytest.raises(DtablesError, match=r"two columns named i \(columns 1 and 2\).*column list"):
        rs.sql(f"CREATE DYNAMIC TABLE dup2 TARGET_LAG = '1 hour' AS {query}")
    with pytest.raises(DtablesError, match="names 3 columns but the query returns 2"):
        rs.sql(f"CREATE DYNAMIC TABLE dup3 (a, b, c) TARGET_LAG = '1 hour' AS {query}")
    assert rs.catalog.lookup("dup2") is None and rs.catalog.lookup("dup3") is None
    rs.sql("CREATE DYNAMIC TABLE starred (x, y) TARGET_LAG = '1 hour' AS SELECT * FROM base_r r JOIN "
           "(SELECT i AS j FROM base_s) s ON r.i = s.j")
    assert rs.sql("SELECT * FROM starred").columns == ["x", "y"]


@pytest.mark.slow  # 20 s; positions and reserved names stay in the default suite
def test_unnamed_expressions_are_named_as_spark_shows_them(rs: Any) -> None:
    query = "SELECT i, sum(i), count(*) FROM base_s GROUP BY i"
    rs.sql(f"CREATE DYNAMIC TABLE agg1 TARGET_LAG = '1 hour' AS {query}")
    assert rs.sql("SELECT * FROM agg1").columns == ["i", "sum(i)", "count(1)"]
    downstream = "SELECT `sum(i)` + 1 AS next, count(*) AS n FROM agg1 GROUP BY `sum(i)` + 1"
    rs.sql(f"CREATE DYNAMIC TABLE agg2 TARGET_LAG = DOWNSTREAM AS {downstream}")
    rs.sql("INSERT INTO base_s VALUES (2), (5), (NULL); DELETE FROM base_s WHERE i = 3")
    _refreshed_incrementally(rs, "agg1", query)
    [record] = rs.sql("ALTER DYNAMIC TABLE agg2 REFRESH").collect()[-1:]
    assert record["state"] == "SUCCEEDED", record["error"]
    assert_same_rows(_rows(rs, "SELECT * FROM agg2"), _rows(rs, downstream))
    rs.sql("CREATE TABLE ctas AS SELECT i, sum(i), count(*) FROM base_s GROUP BY i")
    assert rs.sql("SELECT * FROM ctas").columns == ["i", "sum(i)", "count(1)"]
    assert_same_rows(_rows(rs, "SELECT * FROM ctas"), _rows(rs, query))
    rs.sql("CREATE VIEW v2 AS SELECT i, sum(i) FROM base_s GROUP BY i")
    assert rs.sql("SELECT * FROM v2").columns == ["i", "sum(i)"]


@pytest.mark.slow
def test_a_views_column_list_survives_inlining_into_a_dynamic_table(rs: Any) -> None:
    rs.sql("CREATE VIEW pairs (x, y) AS SELECT r.i, s.i FROM base_r r JOIN base_s s ON r.i = s.i")
    rs.sql("CREATE VIEW sums AS SELECT i, sum(i) FROM base_s GROUP BY i")
    query = "SELECT pairs.x, sums.`sum(i)` AS total FROM pairs JOIN sums ON pairs.y = sums.i"
    rs.sql(f"CREATE DYNAMIC TABLE dv TARGET_LAG = '1 hour' AS {query}")
    assert_same_rows(_rows(rs, "SELECT * FROM dv"), _rows(rs, query))
    rs.sql("INSERT INTO base_s VALUES (1); DELETE FROM base_r WHERE i = 2")
    _refreshed_incrementally(rs, "dv", query)


def test_spark_errors_at_create_name_the_position_in_the_users_text(rs: Any) -> None:
    cases = {
        "CREATE DYNAMIC TABLE e1 TARGET_LAG = '1 hour' AS\n  SELECT r.i,\n         r.nope FROM base_r r": (3, 10),
        "CREATE VIEW e2 AS SELECT zz FROM base_r": (1, 26),
        "CREATE DYNAMIC TABLE e3 TARGET_LAG = '1 hour' AS SELECT i + 1 AS j FROM base_r GROUP BY 1 + i * 2": (1, 57),
    }
    for statement, (line, column) in cases.items():
        with pytest.raises(DtablesError, match=f"at line {line}, column {column} in statement"):
            rs.sql(statement)
    # differentiation's refusal points into the user's statement too, not into the stored (rewritten) query
    statement = ("CREATE DYNAMIC TABLE e4 TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS\n"
                 "  SELECT i, rank() OVER (ORDER BY count(*)) AS r FROM base_r GROUP BY i")
    with pytest.raises(DtablesError, match="rank over it at line 2, column 13"):
        rs.sql(statement)


def test_position_finds_quoted_and_qualified_fragments_or_says_nothing() -> None:
    from dtables.sql.spark_errors import position

    assert position("CREATE VIEW v AS SELECT `a b`.x FROM t `a b`", ["`a b`.`x`"]) == " at line 1, column 25"
    assert position("CREATE VIEW x AS SELECT x.y FROM t x", ["x"]) == " at line 1, column 25"  # after SELECT only
    assert position("CREATE VIEW v AS SELECT 1", ["missing"]) == ""
