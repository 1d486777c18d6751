"""Nested aggregates kept as intermediate dynamic tables (dtables/dynamic/intermediates.py): maintained from their
own stored state, refreshed with the table that reads them, equal to the query as written after every change, and
created, suspended, replaced and dropped with that table."""

from __future__ import annotations

from typing import Any

import pytest

from dtables.dynamic import definition as defs
from dtables.dynamic import history
from dtables.dynamic.errors import DynamicTableError
from dtables.dynamic.intermediates import SWITCH
from oracle import refreshes_match

QUERIES = {
    # a derived table aggregated again (TPC-H Q13's shape)
    "counts": ("SELECT n, count(*) AS customers FROM (SELECT c.k, count(o.v) AS n FROM c LEFT JOIN o ON o.k = c.k "
               "GROUP BY c.k) per_key GROUP BY n"),
    # a CTE joined and its MAX taken (Q15's)
    "top": ("WITH totals AS (SELECT k, sum(v) AS total FROM o GROUP BY k) "
            "SELECT c.k, c.name, totals.total FROM c JOIN totals ON c.k = totals.k "
            "WHERE totals.total = (SELECT max(total) FROM totals)"),
    # correlated scalar aggregates, decorrelated into grouped derived tables (Q17's and Q20's); COUNT is 0, not
    # NULL, for a key without rows
    "below": "SELECT c.k, c.name FROM c WHERE c.limit_v > (SELECT 0.5 * avg(v) FROM o WHERE o.k = c.k)",
    "counted": "SELECT c.k, c.name FROM c WHERE c.limit_v >= (SELECT count(*) FROM o WHERE o.k = c.k)",
}

STEPS = [
    "INSERT INTO o VALUES (1, 4), (1, 4), (3, NULL), (9, 2)",  # duplicates, a NULL, a key no c row has
    "DELETE FROM o WHERE k = 2",                               # a group vanishes
    "UPDATE o SET v = v + 10 WHERE k = 1",
    "INSERT INTO c VALUES (4, 'd', 1), (5, NULL, NULL)",       # keys without rows in o
    "UPDATE c SET limit_v = 100 WHERE k = 3",
    "DELETE FROM o WHERE v IS NULL OR k = 9",
]


@pytest.fixture(autouse=True)
def kept(dt: Any) -> Any:
    """Intermediates on (``spark.dtables.intermediates``, off by default) for every test here."""
    dt.spark.conf.set(SWITCH, "true")
    yield
    dt.spark.conf.unset(SWITCH)


def _sources(dt: Any) -> None:
    dt.sql("CREATE TABLE c (k INT, name STRING, limit_v INT)")
    dt.sql("CREATE TABLE o (k INT, v INT)")
    dt.sql("INSERT INTO c VALUES (1, 'a', 5), (2, 'b', 0), (3, 'c', 3), (3, 'c', 3)")
    dt.sql("INSERT INTO o VALUES (1, 2), (1, 3), (2, 7), (2, NULL), (3, 1)")


def test_nested_aggregates_kept_as_intermediates_match_the_query_as_written(dt: Any) -> None:
    _sources(dt)
    for name, query in QUERIES.items():
        dt.sql(f"CREATE DYNAMIC TABLE {name} TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS {query}")
        d = defs.require(dt.store, name)
        kept = [k.name for k in defs.kept_for(dt.store, name)]
        assert kept == [f"default.__dtables_{name}_1"], (name, kept)
        assert kept[0] in d.sources and "default.o" not in d.sources  # the aggregate's source is read through it
        assert "nested aggregates kept as dynamic tables" in d.refresh_mode_reason
        assert d.written_query is not None and kept[0].split(".")[1] not in d.text  # SHOW's text: as written
        child = defs.require(dt.store, kept[0])
        assert (child.parent, child.target_lag, child.refresh_mode_chosen) == (d.name, "DOWNSTREAM", "INCREMENTAL")
    names = list(QUERIES)
    refreshes_match(dt, names)
    for step in STEPS:
        dt.sql(step)
        refreshes_match(dt, names)  # every table and intermediate INCREMENTAL or NO_DATA, equal to its query
    for name in names:
        kept = defs.kept_for(dt.store, name)[0].name
        actions = {r.action for r in history.records(dt.store, kept)}
        assert "INCREMENTAL" in actions, (kept, actions)  # maintained from its state, not recomputed


def test_intermediates_go_with_their_table(dt: Any) -> None:
    _sources(dt)
    dt.sql(f"CREATE DYNAMIC TABLE top TARGET_LAG = '1 hour' AS {QUERIES['top']}")
    [child] = defs.kept_for(dt.store, "top")
    # hidden from SHOW, listed when a pattern asks
    assert [r["name"] for r in dt.sql("SHOW DYNAMIC TABLES").collect()] == ["default.top"]
    assert [r["name"] for r in dt.sql("SHOW DYNAMIC TABLES LIKE '__dtables%'").collect()] == [child.name]
    # SHOW and DESCRIBE give the query as written
    [shown] = dt.sql("SHOW DYNAMIC TABLES").collect()
    assert "sum(" in shown["text"].lower() and child.name not in shown["text"]
    described = {r["name"]: r["comment"] for r in dt.sql("DESCRIBE DYNAMIC TABLE top").collect()}
    assert child.name.split(".")[1] in described["maintained_query"]
    # it goes with its table, not on its own
    for statement in (f"DROP DYNAMIC TABLE {child.name}", f"ALTER DYNAMIC TABLE {child.name} SUSPEND",
                      f"ALTER DYNAMIC TABLE {child.name} SET TARGET_LAG = '1 minute'",
                      f"CREATE OR REPLACE DYNAMIC TABLE {child.name} TARGET_LAG = '1 hour' AS SELECT k FROM o"):
        with pytest.raises(DynamicTableError, match="kept by dtables for default.top"):
            dt.sql(statement)
    dt.sql("ALTER DYNAMIC TABLE top SUSPEND")
    assert defs.require(dt.store, child.name).state == "SUSPENDED"
    dt.sql("ALTER DYNAMIC TABLE top RESUME")
    assert defs.require(dt.store, child.name).state == "ACTIVE"
    # replaced: the new query's intermediate replaces the old one
    dt.sql("CREATE OR REPLACE DYNAMIC TABLE top TARGET_LAG = '1 hour' AS "
           "SELECT t.k FROM (SELECT k, max(v) AS m FROM o GROUP BY k) t JOIN c ON c.k = t.k")
    [new_child] = defs.kept_for(dt.store, "top")
    assert "max(" in new_child.query.lower()
    refreshes_match(dt, ["top"])
    dt.sql("DROP DYNAMIC TABLE top")
    assert defs.load(dt.store, new_child.name) is None and dt.catalog.lookup(new_child.name) is None
    assert defs.load_all(dt.store) == []


def test_explain_create_names_the_intermediates_it_would_keep(dt: Any) -> None:
    _sources(dt)
    text = dt.sql(f"EXPLAIN CREATE DYNAMIC TABLE below TARGET_LAG = '1 hour' AS {QUERIES['below']}").first()[0]
    assert "nested aggregate kept as intermediate dynamic table default.__dtables_below_1: SELECT" in text, text
    assert defs.load_all(dt.store) == [] and dt.catalog.lookup("default.__dtables_below_1") is None


def test_by_default_nested_aggregates_stay_in_the_query(dt: Any) -> None:
    _sources(dt)
    dt.spark.conf.unset(SWITCH)
    dt.sql(f"CREATE DYNAMIC TABLE counts TARGET_LAG = '1 hour' AS {QUERIES['counts']}")
    d = defs.require(dt.store, "counts")
    assert defs.kept_for(dt.store, "counts") == [] and d.written_query is None
    assert set(d.sources) == {"default.c", "default.o"}
    dt.sql(STEPS[0])
    refreshes_match(dt, ["counts"])


def test_full_tables_keep_no_intermediates(dt: Any) -> None:
    _sources(dt)
    dt.sql(f"CREATE DYNAMIC TABLE below TARGET_LAG = '1 hour' REFRESH_MODE = FULL AS {QUERIES['below']}")
    assert defs.kept_for(dt.store, "below") == []
    assert len(defs.load_all(dt.store)) == 1
