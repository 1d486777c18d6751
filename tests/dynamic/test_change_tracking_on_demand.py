"""A dynamic table's storage gets change tracking only when something reads its changes (dynamic/tracking.py):
created without it, turned on by a downstream dynamic table or a stream, kept through CREATE OR REPLACE of an
upstream that is read, and turned on again (with a recompute) by a downstream refresh that finds it off."""

from __future__ import annotations

from typing import Any

import pytest

from dtables.changes.log import DeltaLog
from dtables.dynamic.tracking import TRACKING_SETTING
from dtables.testing import assert_same_rows
from oracle import latest_record, oracle_rows, table_rows


@pytest.fixture
def sales(dt: Any) -> Any:
    dt.sql("CREATE TABLE sales (id INT, region STRING, amount INT)")
    dt.sql("INSERT INTO sales VALUES (1, 'eu', 10), (2, 'us', 20), (3, 'eu', 5), (3, 'eu', 5), (4, NULL, 1)")
    return dt


def tracked(dt: Any, name: str) -> bool:
    obj = dt.catalog.lookup(name)
    log = DeltaLog(dt.spark, obj["location"], name)
    return log.metadata_at(log.latest_version).row_tracking


def check(dt: Any, name: str) -> None:
    assert_same_rows(table_rows(dt, name), oracle_rows(dt, name))


def test_a_dynamic_table_nothing_reads_is_stored_without_change_tracking(sales: Any) -> None:
    sales.sql("CREATE DYNAMIC TABLE by_region TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS "
              "SELECT region, count(*) AS n, sum(amount) AS total FROM sales GROUP BY region")
    assert not tracked(sales, "by_region")
    props = {r[0]: r[1] for r in sales.sql("SHOW TBLPROPERTIES by_region").collect()}
    assert props.get("delta.enableRowTracking") != "true" and props.get("delta.enableChangeDataFeed") != "true"
    for dml in ("INSERT INTO sales VALUES (5, 'us', 7)", "UPDATE sales SET amount = amount + 1 WHERE id = 3",
                "DELETE FROM sales WHERE region IS NULL"):
        sales.sql(dml)
        [rec] = sales.refresh("by_region")
        assert (rec.action, rec.state) == ("INCREMENTAL", "SUCCEEDED")
        check(sales, "by_region")
    assert not tracked(sales, "by_region")


def test_a_downstream_dynamic_table_turns_it_on_and_reads_its_changes(sales: Any) -> None:
    sales.sql("CREATE DYNAMIC TABLE big TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS "
              "SELECT id, region, amount FROM sales WHERE amount > 4")
    sales.sql("INSERT INTO sales VALUES (5, 'us', 7)")
    sales.refresh("big")
    assert not tracked(sales, "big")
    sales.sql("CREATE DYNAMIC TABLE big_by_region TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS "
              "SELECT region, count(*) AS n, sum(amount) AS total FROM big GROUP BY region")
    assert tracked(sales, "big")
    check(sales, "big_by_region")
    for dml in ("INSERT INTO sales VALUES (6, 'eu', 50), (6, 'eu', 50)", "UPDATE sales SET amount = 1 WHERE id = 1",
                "DELETE FROM sales WHERE id = 3"):
        sales.sql(dml)
        records = sales.refresh("big_by_region")  # refreshes big first
        assert [(r.action, r.state) for r in records] == [("INCREMENTAL", "SUCCEEDED")] * 2
        check(sales, "big")
        check(sales, "big_by_region")


def test_a_stream_on_a_dynamic_table_turns_it_on(sales: Any) -> None:
    sales.sql("CREATE DYNAMIC TABLE big TARGET_LAG = '1 hour' AS SELECT id, amount FROM sales WHERE amount > 4")
    assert not tracked(sales, "big")
    sales.sql("CREATE STREAM big_changes ON DYNAMIC TABLE big")
    assert tracked(sales, "big")
    sales.sql("INSERT INTO sales VALUES (7, 'us', 70)")
    sales.refresh("big")
    rows = sales.sql("SELECT id, amount, METADATA$ACTION FROM big_changes").collect()
    assert [tuple(r) for r in rows] == [(7, 70, "INSERT")]


def test_replacing_an_upstream_that_is_read_keeps_it_tracked(sales: Any) -> None:
    sales.sql("CREATE DYNAMIC TABLE big TARGET_LAG = '1 hour' AS SELECT id, amount FROM sales WHERE amount > 4")
    sales.sql("CREATE DYNAMIC TABLE total TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS "
              "SELECT count(*) AS n, sum(amount) AS s FROM big")
    sales.sql("CREATE OR REPLACE DYNAMIC TABLE big TARGET_LAG = '1 hour' AS "
              "SELECT id, amount FROM sales WHERE amount > 9")
    assert tracked(sales, "big")
    sales.refresh("total")
    sales.sql("INSERT INTO sales VALUES (8, 'eu', 80)")
    records = sales.refresh("total")
    assert [(r.action, r.state) for r in records] == [("INCREMENTAL", "SUCCEEDED")] * 2
    check(sales, "total")


def test_the_setting_keeps_every_dynamic_table_tracked(sales: Any) -> None:
    sales.spark.conf.set(TRACKING_SETTING, "true")
    try:
        sales.sql("CREATE DYNAMIC TABLE big TARGET_LAG = '1 hour' AS SELECT id FROM sales")
    finally:
        sales.spark.conf.unset(TRACKING_SETTING)
    assert tracked(sales, "big")


def test_a_downstream_refresh_that_finds_tracking_off_turns_it_on_and_recomputes(sales: Any) -> None:
    sales.sql("CREATE DYNAMIC TABLE big TARGET_LAG = '1 hour' AS SELECT id, amount FROM sales WHERE amount > 4")
    sales.sql("CREATE DYNAMIC TABLE total TARGET_LAG = '1 hour' REFRESH_MODE = INCREMENTAL AS "
              "SELECT count(*) AS n, sum(amount) AS s FROM big")
    location = sales.catalog.lookup("big")["location"]
    sales.spark.sql(f"ALTER TABLE delta.`{location}` SET TBLPROPERTIES ('delta.enableRowTracking' = 'false')")
    sales.sql("INSERT INTO sales VALUES (9, 'us', 90)")
    sales.refresh("big")
    assert not tracked(sales, "big")
    [up, down] = sales.refresh("total")
    assert (down.action, down.state) == ("REINITIALIZE", "SUCCEEDED") and "change tracking" in down.reason
    assert tracked(sales, "big")
    check(sales, "total")
    sales.sql("DELETE FROM sales WHERE id = 9")
    [up, down] = sales.refresh("total")
    assert (down.action, down.state) == ("INCREMENTAL", "SUCCEEDED")
    assert latest_record(sales, "total").action == "INCREMENTAL"
    check(sales, "total")


def test_changes_of_a_dynamic_table_nothing_reads_name_the_fix_which_works(sales: Any) -> None:
    sales.sql("CREATE DYNAMIC TABLE big TARGET_LAG = '1 hour' AS SELECT id, amount FROM sales WHERE amount > 4")
    with pytest.raises(Exception, match="SET CHANGE_TRACKING = TRUE"):
        sales.changes("big", start=0, information="DEFAULT").collect()
    sales.sql("ALTER TABLE big SET CHANGE_TRACKING = TRUE")
    assert tracked(sales, "big")
    location = sales.catalog.lookup("big")["location"]
    since = DeltaLog(sales.spark, location, "big").latest_version
    sales.sql("INSERT INTO sales VALUES (10, 'eu', 100)")
    sales.refresh("big")
    rows = sales.changes("big", start=since, information="DEFAULT").select("id", "amount", "METADATA$ACTION")
    assert [tuple(r) for r in rows.collect()] == [(10, 100, "INSERT")]
