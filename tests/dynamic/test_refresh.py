"""Dynamic tables end to end: creation, INCREMENTAL / NO_DATA / FULL refreshes, history, statements, errors."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from dtables.dynamic import apply, history
from dtables.dynamic.errors import DynamicTableError, RefreshFailed
from dtables.spark.fs import local_path
from dtables.testing import assert_same_rows
from oracle import latest_record, oracle_rows, table_rows


@pytest.fixture
def shop(dt: Any) -> Any:
    dt.sql("CREATE TABLE orders (id INT, cust INT, amount DOUBLE)")
    dt.sql("CREATE TABLE custs (cust INT, region STRING)")
    dt.sql("INSERT INTO orders VALUES (1, 1, 10.0), (2, 2, 20.0), (3, 1, 5.0), (3, 1, 5.0)")
    dt.sql("INSERT INTO custs VALUES (1, 'eu'), (2, 'us')")
    return dt


def check(dt: Any, name: str) -> None:
    assert_same_rows(table_rows(dt, name), oracle_rows(dt, name))


def test_create_refresh_incremental_merge_and_append(shop: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    shop.sql("CREATE DYNAMIC TABLE big TARGET_LAG = '1 minute' AS SELECT id, amount FROM orders WHERE amount > 4")
    first = latest_record(shop, "big")
    assert (first.trigger, first.action, first.state) == ("CREATION", "FULL", "SUCCEEDED")
    check(shop, "big")

    shop.sql("INSERT INTO orders VALUES (4, 2, 7.0)")
    [rec] = shop.refresh("big")
    assert (rec.action, rec.state, rec.rows_inserted) == ("INCREMENTAL", "SUCCEEDED", 1)
    assert "default.orders" in rec.reason
    commit = shop.spark.sql(f"DESCRIBE HISTORY delta.`{shop.catalog.lookup('big')['location']}` LIMIT 1").first()
    assert commit["operation"] == "WRITE"  # the inserts-only change set is a plain append, not a MERGE
    check(shop, "big")

    # deleting one copy of a duplicated row deletes exactly that copy (matched on the row id); a small table takes
    # the change set as one overwrite of its patched contents (REWRITE), a large one as a MERGE
    # round 1 deletes both copies of (3, 5.0) and inserts one back under a new id; rounds 2 and 3 delete that one
    # and insert another. Round 1's REWRITE probes the old rows with the change set's ids broadcast (as for a table
    # of a megabyte or more); round 3's, on this small table, full-outer-joins them.
    rounds = (("REWRITE", "WRITE", None, 0, (2, 2, 1)), ("MERGE", "MERGE", "0", None, (2, 1, 1)),
              ("REWRITE", "WRITE", None, None, (2, 1, 1)))
    for write, operation, limit, broadcast_from, counts in rounds:
        if limit is not None:
            shop.spark.conf.set("spark.dtables.refresh.rewriteMaxBytes", limit)
        if broadcast_from is not None:
            monkeypatch.setattr(apply, "REWRITE_BROADCAST_MIN_BYTES", broadcast_from)
        else:
            monkeypatch.undo()
        try:
            shop.sql("DELETE FROM orders WHERE id = 3")
            shop.sql("INSERT INTO orders VALUES (3, 1, 5.0), (5, 1, 9.0)")
            shop.sql("UPDATE orders SET amount = amount + 100 WHERE id = 1")
            [rec] = shop.refresh("big")
        finally:
            shop.spark.conf.unset("spark.dtables.refresh.rewriteMaxBytes")
        assert (rec.action, rec.state, rec.write_kind) == ("INCREMENTAL", "SUCCEEDED", write), rec.error
        location = shop.catalog.lookup("big")["location"]
        assert shop.spark.sql(f"DESCRIBE HISTORY delta.`{location}` LIMIT 1").first()["operation"] == operation
        assert (rec.rows_inserted, rec.rows_deleted, rec.rows_updated) == counts
        assert rec.frontier_after["default.orders"] > rec.frontier_before["default.orders"]
        check(shop, "big")
    assert sorted(table_rows(shop, "big")) == [(1, 310.0), (2, 20.0), (3, 5.0), (4, 7.0), (5, 9.0), (5, 9.0),
                                              (5, 9.0)]
    # round 3's REWRITE of this small table wrote it as one file, not one per shuffle partition
    detail = shop.spark.sql(f"DESCRIBE DETAIL delta.`{shop.catalog.lookup('big')['location']}`").first()
    assert detail["numFiles"] == 1


def test_no_data_refresh_launches_no_spark_job(shop: Any) -> None:
    shop.sql("CREATE DYNAMIC TABLE by_region TARGET_LAG = '1 minute' AS "
             "SELECT c.region, count(*) AS n, sum(o.amount) AS total FROM orders o JOIN custs c ON o.cust = c.cust "
             "GROUP BY c.region")
    before = latest_record(shop, "by_region")
    [rec] = shop.refresh("by_region")
    assert (rec.action, rec.state) == ("NO_DATA", "SUCCEEDED")
    assert (rec.spark_jobs, rec.bytes_read, rec.write_kind) == (0, 0, "NONE")
    assert rec.data_timestamp > before.data_timestamp and rec.target_version == before.target_version
    from dtables.dynamic import definition

    assert definition.require(shop.store, "by_region").data_timestamp == rec.data_timestamp
    check(shop, "by_region")


def test_history_records_where_a_refresh_spent_its_time(shop: Any) -> None:
    """Keeps the NO_DATA job assertion honest: the same accounting sees the jobs of an INCREMENTAL refresh; and the
    caller's own job group is back after the refresh."""
    shop.sql("CREATE DYNAMIC TABLE big TARGET_LAG = '1 minute' AS SELECT id, amount FROM orders WHERE amount > 4")
    shop.sql("INSERT INTO orders VALUES (9, 2, 70.0)")
    sc = shop.spark.sparkContext
    sc.setJobGroup("caller", "the caller's group")
    try:
        [rec] = shop.refresh("big")
        assert sc.getLocalProperty("spark.jobGroup.id") == "caller"
    finally:
        sc.setJobGroup("other", "after")
    assert (rec.action, rec.write_kind) == ("INCREMENTAL", "APPEND")
    assert rec.spark_jobs > 0 and rec.bytes_read > 0 and rec.records_read >= 1
    assert 0 < rec.job_seconds and 0 < rec.driver_seconds
    assert rec.job_seconds + rec.driver_seconds <= (rec.ended_at - rec.started_at).total_seconds() + 0.5
    row = shop.sql("SELECT spark_jobs, write_kind FROM dtables.refresh_history WHERE refresh_id = "
                   f"'{rec.refresh_id}'").first()
    assert (row["spark_jobs"], row["write_kind"]) == (rec.spark_jobs, "APPEND")


def test_dag_refreshes_upstreams_to_one_data_timestamp(shop: Any) -> None:
    shop.sql("CREATE DYNAMIC TABLE enriched TARGET_LAG = DOWNSTREAM AS "
             "SELECT o.id, o.amount, c.region FROM orders o JOIN custs c ON o.cust = c.cust")
    shop.sql("CREATE DYNAMIC TABLE totals TARGET_LAG = '1 minute' AS "
             "SELECT region, count(*) AS n, sum(amount) AS total FROM enriched GROUP BY region")
    shop.sql("INSERT INTO orders VALUES (5, 2, 1.0)")
    shop.sql("UPDATE custs SET region = 'asia' WHERE cust = 1")
    records = shop.refresh(["totals"])
    assert [r.name for r in records] == ["default.enriched", "default.totals"]
    assert {r.action for r in records} == {"INCREMENTAL"}
    assert records[0].data_timestamp == records[1].data_timestamp
    assert records[1].frontier_after["default.enriched"] == records[0].target_version
    check(shop, "enriched")
    check(shop, "totals")


def test_auto_chooses_full_with_a_readable_reason_and_incremental_refuses(shop: Any) -> None:
    query = "SELECT id, row_number() OVER (ORDER BY id) AS rn FROM orders"
    shop.sql(f"CREATE DYNAMIC TABLE ranked TARGET_LAG = '1 hour' AS {query}")
    row = shop.sql("SHOW DYNAMIC TABLES LIKE 'ranked'").first()
    assert row["refresh_mode"] == "FULL"
    assert "window function" in row["refresh_mode_reason"] and "line 1" in row["refresh_mode_reason"]
    shop.sql("INSERT INTO orders VALUES (7, 1, 1.0)")
    [rec] = shop.refresh("ranked")
    assert rec.action == "FULL" and "window function" in rec.reason
    check(shop, "ranked")
    with pytest.raises(DynamicTableError, match="INCREMENTAL is not possible: window function"):
        shop.sql(f"CREATE DYNAMIC TABLE ranked2 TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS {query}")
    assert shop.catalog.lookup("ranked2") is None


def test_explain_create_shows_mode_plan_and_rewrites_and_creates_nothing(shop: Any) -> None:
    text = shop.sql("EXPLAIN CREATE DYNAMIC TABLE buyers TARGET_LAG = '1 hour' AS SELECT cust, region FROM custs c "
                    "WHERE EXISTS (SELECT 1 FROM orders o WHERE o.cust = c.cust AND o.amount > 6)").first()[0]
    assert text.startswith("dynamic table default.buyers: refresh mode INCREMENTAL: AUTO: every operator"), text
    assert "maintained as: EXISTS subquery -> semi join" in text
    assert "Join semi" in text and "(from EXISTS subquery)" in text  # the plan names what the join was written as
    assert "changes (" in text  # and its derivative follows
    assert shop.catalog.lookup("buyers") is None
    refused = shop.sql("EXPLAIN CREATE DYNAMIC TABLE r TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS "
                       "SELECT id, rand() AS x FROM orders").first()[0]
    assert refused.startswith("refused: dynamic table default.r: REFRESH_MODE = INCREMENTAL is not possible"), refused
    assert "RAND()" in refused
    # a top aggregate kept from its stored state is shown as its refreshes compute it, not recomputed at both ends
    kept = shop.sql("EXPLAIN CREATE DYNAMIC TABLE t TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS "
                    "SELECT cust, sum(id) AS s FROM orders GROUP BY cust").first()[0]
    assert "Δγ algebraic (old from state)" in kept and "Stored state" in kept, kept


def test_describe_table_of_a_dynamic_table_shows_its_columns_only(shop: Any) -> None:
    shop.sql("CREATE DYNAMIC TABLE totals TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS "
             "SELECT cust, sum(amount) AS total FROM orders GROUP BY cust")  # stores hidden state columns
    for statement in ("DESCRIBE TABLE totals", "DESC default.totals", "DESCRIBE TABLE EXTENDED totals"):
        names = [r.col_name for r in shop.sql(statement).collect()]
        assert names[:2] == ["cust", "total"], (statement, names)
        assert not [n for n in names if n.startswith("__dtables")], (statement, names)


def test_a_view_over_a_dynamic_table_shows_its_columns_only(shop: Any, connect: Any) -> None:
    shop.sql("CREATE DYNAMIC TABLE totals TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS "
             "SELECT cust, sum(amount) AS total FROM orders GROUP BY cust")  # stores hidden state columns
    shop.sql("CREATE VIEW everything AS SELECT * FROM totals; CREATE STREAM on_view ON VIEW everything")
    shop.sql("CREATE VIEW joined AS SELECT t.*, c.region FROM totals t JOIN custs c ON t.cust = c.cust")
    for session in (shop, connect()):  # a new session registers the views from the catalog
        assert session.sql("SELECT * FROM everything").columns == ["cust", "total"]
        assert session.table("joined").columns == ["cust", "total", "region"]
        assert [r.col_name for r in session.sql("DESCRIBE everything").collect()] == ["cust", "total"]
    shop.sql("INSERT INTO orders VALUES (9, 2, 1.5)")
    [record] = shop.sql("ALTER DYNAMIC TABLE totals REFRESH").collect()
    assert record["action"] == "INCREMENTAL", record
    assert_same_rows([tuple(r) for r in shop.sql("SELECT * FROM joined").collect()],
                     [(1, 20.0, "eu"), (2, 21.5, "us")])
    shop.sql("CREATE VIEW altered AS SELECT 1 AS one; ALTER VIEW altered AS SELECT * FROM totals")
    assert connect().sql("SELECT * FROM altered").columns == ["cust", "total"]
    changes = shop.sql("SELECT * FROM on_view")
    assert changes.columns[:2] == ["cust", "total"] and not [c for c in changes.columns if c.startswith("__dtables")]
    # net of what the refresh's rewrite of the whole (small) table also reports of unchanged rows: deleted and
    # inserted again under new Delta row ids
    net = Counter((r["cust"], r["total"]) for r in changes.collect() if r["METADATA$ACTION"] == "INSERT")
    net.subtract((r["cust"], r["total"]) for r in changes.collect() if r["METADATA$ACTION"] == "DELETE")
    assert {k: v for k, v in net.items() if v} == {(2, 21.5): 1, (2, 20.0): -1}


def test_suspend_resume_and_scheduled_refresh(shop: Any) -> None:
    from dtables.dynamic.executor import DynamicTableRefresher
    from dtables.dynamic.definition import now_utc

    shop.sql("CREATE DYNAMIC TABLE big TARGET_LAG = '1 minute' AS SELECT id, amount FROM orders WHERE amount > 4")
    shop.sql("ALTER DYNAMIC TABLE big SUSPEND")
    assert shop.sql("SHOW DYNAMIC TABLES").first()["scheduling_state"] == "SUSPENDED"
    shop.sql("INSERT INTO orders VALUES (8, 1, 50.0)")
    outcome = DynamicTableRefresher(shop).refresh("default.big", now_utc(), "SCHEDULED")
    assert outcome.state == "CANCELLED" and "suspended" in outcome.error
    assert (8, 50.0) not in table_rows(shop, "big")
    shop.sql("ALTER DYNAMIC TABLE big RESUME")
    outcome = DynamicTableRefresher(shop).refresh("default.big", now_utc(), "SCHEDULED")
    assert (outcome.state, outcome.action) == ("SUCCEEDED", "INCREMENTAL")
    assert latest_record(shop, "big").trigger == "SCHEDULED"
    check(shop, "big")
    shop.sql("ALTER DYNAMIC TABLE big SET TARGET_LAG = '2 hours'")
    assert shop.sql("SHOW DYNAMIC TABLES").first()["target_lag"] == "2 hours"


def test_initialize_on_schedule_leaves_the_table_empty_until_its_first_refresh(shop: Any) -> None:
    shop.sql("CREATE DYNAMIC TABLE later TARGET_LAG = '1 minute' INITIALIZE = ON_SCHEDULE AS "
             "SELECT id FROM orders")
    assert history.records(shop.store, "later") == []
    assert table_rows(shop, "later") == []
    assert shop.sql("SHOW DYNAMIC TABLES").first()["data_timestamp"] is None
    [rec] = shop.refresh("later")
    assert (rec.action, rec.trigger) == ("FULL", "MANUAL") and "initial" in rec.reason
    check(shop, "later")


def test_history_via_sql_and_session(shop: Any) -> None:
    shop.sql("CREATE DYNAMIC TABLE big TARGET_LAG = '1 minute' AS SELECT id, amount FROM orders WHERE amount > 4")
    shop.sql("ALTER DYNAMIC TABLE big REFRESH")
    rows = shop.sql("SELECT name, trigger, action, state FROM dtables.refresh_history h "
                    "WHERE h.name = 'default.big' ORDER BY started_at").collect()
    assert [tuple(r) for r in rows] == [("default.big", "CREATION", "FULL", "SUCCEEDED"),
                                        ("default.big", "MANUAL", "NO_DATA", "SUCCEEDED")]
    df = shop.history("big")
    assert df.count() == 2 and {"frontier_before", "frontier_after", "rows_inserted", "error"} <= set(df.columns)
    described = {r["name"]: r for r in shop.sql("DESCRIBE DYNAMIC TABLE big").collect()}
    assert described["amount"]["type"] == "double" and described["__dtables_row_id"]["kind"] == "HIDDEN"


def test_failed_refresh_keeps_contents_and_recovers(shop: Any) -> None:
    shop.sql("CREATE DYNAMIC TABLE big TARGET_LAG = '1 minute' AS SELECT id, amount FROM orders WHERE amount > 4")
    good = sorted(table_rows(shop, "big"))
    shop.sql("DROP TABLE orders")
    with pytest.raises(RefreshFailed, match="default.big.*default.orders"):
        shop.sql("ALTER DYNAMIC TABLE big REFRESH")
    rec = latest_record(shop, "big")
    assert rec.state == "FAILED" and "default.orders" in rec.error and "does not exist" in rec.error
    assert sorted(table_rows(shop, "big")) == good
    # the cause is fixed: the source is back (re-created, so the table is re-initialized)
    shop.sql("CREATE TABLE orders (id INT, cust INT, amount DOUBLE)")
    shop.sql("INSERT INTO orders VALUES (1, 1, 9.0)")
    [rec] = shop.refresh("big")
    assert (rec.state, rec.action) == ("SUCCEEDED", "REINITIALIZE") and "re-created" in rec.reason
    check(shop, "big")


def test_query_broken_by_a_schema_change_fails_then_succeeds_when_fixed(shop: Any) -> None:
    shop.sql("CREATE DYNAMIC TABLE big TARGET_LAG = '1 minute' REFRESH_MODE = FULL AS "
             "SELECT id, amount FROM orders WHERE amount > 4")
    good = sorted(table_rows(shop, "big"))
    shop.sql("ALTER TABLE orders SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
    shop.sql("ALTER TABLE orders DROP COLUMN amount")
    [rec] = shop.refresh("big", raise_on_failure=False)
    assert rec.state == "FAILED" and "default.big" in rec.error and "amount" in rec.error
    assert sorted(table_rows(shop, "big")) == good
    shop.sql("ALTER TABLE orders ADD COLUMNS (amount DOUBLE)")
    shop.sql("INSERT INTO orders VALUES (10, 1, 11.0)")
    [rec] = shop.refresh("big")
    assert (rec.state, rec.action) == ("SUCCEEDED", "REINITIALIZE")
    check(shop, "big")


def test_dropped_upstream_dynamic_table_fails_downstream(shop: Any) -> None:
    shop.sql("CREATE DYNAMIC TABLE up TARGET_LAG = DOWNSTREAM AS SELECT id, amount FROM orders")
    shop.sql("CREATE DYNAMIC TABLE down TARGET_LAG = '1 minute' AS SELECT id FROM up WHERE amount > 6")
    shop.sql("DROP DYNAMIC TABLE up")
    [rec] = shop.refresh("down", raise_on_failure=False)
    assert rec.state == "FAILED" and "default.up" in rec.error
    assert shop.catalog.lookup("up") is None


def test_create_errors_name_the_table(shop: Any) -> None:
    with pytest.raises(DynamicTableError, match="default.d1.*default.nope.*does not exist"):
        shop.sql("CREATE DYNAMIC TABLE d1 TARGET_LAG = '1 minute' AS SELECT * FROM nope")
    shop.sql("CREATE DYNAMIC TABLE d1 TARGET_LAG = '1 minute' AS SELECT id FROM orders")
    with pytest.raises(DynamicTableError, match="already exists"):
        shop.sql("CREATE DYNAMIC TABLE d1 TARGET_LAG = '1 minute' AS SELECT id FROM orders")
    shop.sql("CREATE DYNAMIC TABLE IF NOT EXISTS d1 TARGET_LAG = '1 minute' AS SELECT id FROM orders")
    shop.sql("CREATE OR REPLACE DYNAMIC TABLE d1 TARGET_LAG = '1 minute' AS SELECT id, cust FROM orders")
    check(shop, "d1")
    with pytest.raises(DynamicTableError, match="does not exist"):
        shop.sql("ALTER DYNAMIC TABLE nope REFRESH")


def test_view_source_is_inlined_and_refreshed_incrementally(shop: Any) -> None:
    shop.sql("CREATE VIEW big_orders AS SELECT id, cust, amount FROM orders WHERE amount > 6")
    shop.sql("CREATE DYNAMIC TABLE big_by_cust TARGET_LAG = '1 hour' AS "
             "SELECT b.cust, count(*) AS n FROM big_orders b GROUP BY b.cust")
    assert shop.sql("SHOW DYNAMIC TABLES").first()["refresh_mode"] == "INCREMENTAL"
    shop.sql("INSERT INTO orders VALUES (9, 2, 50.0), (10, 3, 1.0)")
    [rec] = shop.refresh("big_by_cust")
    assert (rec.action, rec.state) == ("INCREMENTAL", "SUCCEEDED") and "default.orders" in rec.reason
    check(shop, "big_by_cust")
    assert sorted(table_rows(shop, "big_by_cust")) == [(1, 1), (2, 2)]


def test_a_source_with_deletion_vectors_refreshes_incrementally(dt: Any) -> None:
    """Issue 18: the source's DELETE / UPDATE / MERGE mark rows in deletion vectors instead of rewriting files;
    the refresh reads the marked rows by row index and stays equal to its query."""
    dt.sql("CREATE TABLE src (k INT, v INT) TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    dt.sql("INSERT INTO src SELECT CAST(id % 10 AS INT), CAST(id AS INT) FROM range(1000)")
    dt.sql("CREATE DYNAMIC TABLE per_k TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS "
           "SELECT k, count(*) AS n, sum(v) AS total, max(v) AS top FROM src GROUP BY k")
    dt.sql("DELETE FROM src WHERE v % 97 = 0")
    dt.sql("UPDATE src SET v = v + 1 WHERE v % 89 = 0")
    dt.sql("MERGE INTO src t USING (SELECT 3 AS k, 5 AS v UNION ALL SELECT 11, 7) s ON t.v = s.v "
           "WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT (k, v) VALUES (s.k, s.v)")
    location = dt.catalog.lookup("src")["location"]
    log = [line for line in dt.spark.read.text(f"{location}/_delta_log/*.json").collect()
           if '"deletionVector"' in line.value and '"storageType"' in line.value]
    assert log, "the DML should have written deletion vectors"
    [rec] = dt.refresh("per_k")
    assert rec.action == "INCREMENTAL"
    check(dt, "per_k")
    dt.sql("DELETE FROM src WHERE k = 4 AND v < 500")
    [rec] = dt.refresh("per_k")
    assert rec.action == "INCREMENTAL"
    check(dt, "per_k")


@pytest.mark.parametrize("write", ["REWRITE", "MERGE"])
def test_a_change_that_moves_no_row_writes_no_commit(dt: Any, write: str) -> None:
    """A new row below its group's maximum changes no row of the table: the refresh is INCREMENTAL and writes
    nothing (no Delta commit, the refresh sequence stays), and the next change is written as usual."""
    dt.sql("CREATE TABLE t (k INT, v INT)")
    dt.sql("INSERT INTO t VALUES (1, 5), (2, 7)")
    dt.sql("CREATE DYNAMIC TABLE tops TARGET_LAG = '1 minute' REFRESH_MODE = INCREMENTAL AS "
           "SELECT k, max(v) AS m, count(*) AS n FROM t WHERE v > 0 GROUP BY k")
    location = dt.catalog.lookup("tops")["location"]

    def latest_version() -> int:
        return dt.spark.sql(f"DESCRIBE HISTORY delta.`{location}` LIMIT 1").first()["version"]

    def data_files() -> set[str]:
        return {p.name for p in Path(local_path(location)).glob("*.parquet")}

    if write == "MERGE":
        dt.spark.conf.set("spark.dtables.refresh.rewriteMaxBytes", "0")
    try:
        before, version, files = latest_record(dt, "tops"), latest_version(), data_files()
        dt.sql("INSERT INTO t VALUES (1, -3), (2, NULL)")  # filtered out: the change set is empty
        [rec] = dt.refresh("tops")
        assert (rec.action, rec.state, rec.write_kind) == ("INCREMENTAL", "SUCCEEDED", "NONE"), rec.error
        assert "nothing written" in rec.reason and rec.target_version == before.target_version
        assert latest_version() == version and rec.data_timestamp > before.data_timestamp
        assert data_files() == files  # a REWRITE that wrote its files before finding nothing to commit deleted them
        assert_same_rows(table_rows(dt, "tops"), oracle_rows(dt, "tops"))
        dt.sql("INSERT INTO t VALUES (1, 9)")
        [rec] = dt.refresh("tops")
        assert (rec.action, rec.write_kind, rec.rows_updated) == ("INCREMENTAL", write, 1)
        assert latest_version() == version + 1
        assert_same_rows(table_rows(dt, "tops"), oracle_rows(dt, "tops"))
    finally:
        dt.spark.conf.unset("spark.dtables.refresh.rewriteMaxBytes")
