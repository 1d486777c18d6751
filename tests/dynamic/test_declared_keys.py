"""Declared keys: PRIMARY KEY / UNIQUE / FOREIGN KEY ... RELY in CREATE TABLE and ALTER TABLE, kept in the catalog and
shown by DESCRIBE TABLE EXTENDED; refreshes skip the join terms RELY keys prove empty, and a RELY key the data
violates gives the wrong result the README documents."""

from __future__ import annotations

import json
from typing import Any

import pytest
from oracle import oracle_rows, table_rows

from dtables.catalog.constraints import KeyStore
from dtables.errors import SqlError
from dtables.testing import assert_same_rows

QUERY = "SELECT o.ok, o.cust, l.qty FROM orders o JOIN lines l ON o.ok = l.ok WHERE l.qty > 0"


def _keys(dt: Any, table: str) -> set[str]:
    return {f"{k.name}: {k.definition()}" for k in KeyStore(dt.store).of(table)}


def test_keys_are_declared_shown_renamed_and_dropped(dt: Any) -> None:
    dt.sql("CREATE TABLE ko (ok INT NOT NULL PRIMARY KEY RELY, cust INT, code STRING, UNIQUE (code))")
    dt.sql("CREATE TABLE kl (lk INT, ok INT, qty INT, CONSTRAINT kl_orders FOREIGN KEY (ok) REFERENCES ko RELY)")
    assert _keys(dt, "ko") == {"ko_pk: PRIMARY KEY (ok) RELY", "ko_code_uk: UNIQUE (code) NORELY"}
    assert _keys(dt, "kl") == {"kl_orders: FOREIGN KEY (ok) REFERENCES default.ko (ok) RELY"}
    dt.sql("INSERT INTO kl VALUES (1, 1, 1)")  # Spark saw the table without the keys: it holds data as usual
    described = {(r["col_name"], r["data_type"]) for r in dt.sql("DESCRIBE TABLE EXTENDED kl").collect()}
    assert {("# Constraints", ""), ("kl_orders", "FOREIGN KEY (ok) REFERENCES default.ko (ok) RELY")} <= described
    assert "# Constraints" not in {r["col_name"] for r in dt.sql("DESCRIBE TABLE kl").collect()}

    dt.sql("ALTER TABLE kl ADD CONSTRAINT kl_pk PRIMARY KEY (lk) RELY")
    dt.sql("ALTER TABLE kl ADD CONSTRAINT positive CHECK (qty > 0)")  # CHECK constraints stay Delta's
    assert "kl_pk: PRIMARY KEY (lk) RELY" in _keys(dt, "kl")
    with pytest.raises(SqlError, match="referenced by FOREIGN KEY kl_orders"):
        dt.sql("ALTER TABLE ko DROP CONSTRAINT ko_pk")
    dt.sql("ALTER TABLE ko RENAME TO ko2")
    assert _keys(dt, "kl") == {"kl_orders: FOREIGN KEY (ok) REFERENCES default.ko2 (ok) RELY",
                               "kl_pk: PRIMARY KEY (lk) RELY"}
    dt.sql("ALTER TABLE kl DROP CONSTRAINT kl_orders")
    dt.sql("ALTER TABLE kl DROP CONSTRAINT positive")
    dt.sql("ALTER TABLE ko2 DROP CONSTRAINT ko_pk")
    assert _keys(dt, "ko2") == {"ko_code_uk: UNIQUE (code) NORELY"}
    dt.sql("DROP TABLE ko2")
    assert KeyStore(dt.store).of("ko2") == []


def test_keys_that_cannot_hold_are_refused(dt: Any) -> None:
    dt.sql("CREATE TABLE kp (a INT, b INT)")
    with pytest.raises(SqlError, match="no primary key"):
        dt.sql("CREATE TABLE kf (x INT, FOREIGN KEY (x) REFERENCES kp RELY)")
    with pytest.raises(SqlError, match="not a declared PRIMARY KEY or UNIQUE key"):
        dt.sql("CREATE TABLE kf (x INT, FOREIGN KEY (x) REFERENCES kp (a) RELY)")
    with pytest.raises(SqlError, match="no column z"):
        dt.sql("ALTER TABLE kp ADD PRIMARY KEY (z)")
    dt.sql("ALTER TABLE kp ADD PRIMARY KEY (a, b) RELY")
    with pytest.raises(SqlError, match="already has a primary key"):
        dt.sql("ALTER TABLE kp ADD CONSTRAINT other PRIMARY KEY (a)")
    with pytest.raises(SqlError, match="has 1 columns but references 2"):
        dt.sql("CREATE TABLE kf (x INT, FOREIGN KEY (x) REFERENCES kp RELY)")
    assert dt.catalog.lookup("kf") is None  # refused before Spark created anything


@pytest.fixture
def shop(dt: Any) -> Any:
    dt.sql("CREATE TABLE orders (ok BIGINT NOT NULL, cust INT, CONSTRAINT orders_pk PRIMARY KEY (ok) RELY)")
    dt.sql("CREATE TABLE lines (ok BIGINT, qty INT, CONSTRAINT lines_fk FOREIGN KEY (ok) REFERENCES orders RELY)")
    dt.sql("INSERT INTO orders SELECT id, CAST(id % 7 AS INT) FROM range(2000)")
    dt.sql("INSERT INTO lines SELECT id DIV 10, CAST(id % 5 AS INT) FROM range(20000)")
    dt.sql(f"CREATE DYNAMIC TABLE j TARGET_LAG = '1 minute' REFRESH_MODE = INCREMENTAL AS {QUERY}")
    return dt


def _refresh(dt: Any) -> Any:
    [record] = dt.refresh("j")
    assert (record.state, record.action) == ("SUCCEEDED", "INCREMENTAL"), record.error
    return record


@pytest.mark.slow
def test_new_orders_with_their_lines_do_not_read_the_old_lines(shop: Any) -> None:
    shop.sql("INSERT INTO orders VALUES (5000, 1), (5001, 2); INSERT INTO lines VALUES (5000, 3), (5001, 4), (7, 1)")
    keyed = _refresh(shop)
    assert_same_rows(table_rows(shop, "j"), oracle_rows(shop, "j"))
    shop.sql("ALTER TABLE lines DROP CONSTRAINT lines_fk")
    shop.sql("INSERT INTO orders VALUES (5002, 1); INSERT INTO lines VALUES (5002, 3)")
    unkeyed = _refresh(shop)
    assert_same_rows(table_rows(shop, "j"), oracle_rows(shop, "j"))
    # without the key the term Δorders ⋈ lines reads all 20,000 old lines; with it that term is gone
    assert unkeyed.records_read - keyed.records_read > 15000, (keyed.records_read, unkeyed.records_read)


@pytest.mark.slow  # long-running; `make test-all` runs it
def test_deleted_orders_with_their_lines_stay_exact(shop: Any) -> None:
    shop.sql("DELETE FROM lines WHERE ok IN (3, 4, 1999); DELETE FROM orders WHERE ok IN (3, 4, 1999)")
    _refresh(shop)
    assert_same_rows(table_rows(shop, "j"), oracle_rows(shop, "j"))
    shop.sql("UPDATE orders SET cust = cust + 1 WHERE ok < 50")  # both kinds of change: no term is dropped
    _refresh(shop)
    assert_same_rows(table_rows(shop, "j"), oracle_rows(shop, "j"))


def test_a_violated_rely_key_gives_the_documented_wrong_result(shop: Any) -> None:
    # a line refers to order 9000, which does not exist: the foreign key is violated
    shop.sql("INSERT INTO lines VALUES (9000, 2)")
    _refresh(shop)
    # order 9000 arrives with no line of its own: relying on the key, the refresh skips joining it with old lines
    shop.sql("INSERT INTO orders VALUES (9000, 1)")
    _refresh(shop)
    assert (9000, 1, 2) in set(oracle_rows(shop, "j"))
    assert (9000, 1, 2) not in set(table_rows(shop, "j"))  # the row the violated key hid
    # recomputing repairs it (the README says so)
    shop.sql(f"CREATE OR REPLACE DYNAMIC TABLE j TARGET_LAG = '1 minute' REFRESH_MODE = INCREMENTAL AS {QUERY}")
    assert_same_rows(table_rows(shop, "j"), oracle_rows(shop, "j"))


def _lines_of_gone_orders_not_read_at_the_end(shop: Any, name: str, query: str, kept_dml: str) -> None:
    """Create `name` AS `query`; delete orders with their lines: the refresh reads no line at I1 and is exact;
    then `kept_dml` (orders that stay): the lines are read at I1 as before, and counted right."""
    from dtables.changes import keys

    shop.spark.conf.set(keys.MIN_BYTES, "0")
    try:
        shop.sql(f"CREATE DYNAMIC TABLE {name} TARGET_LAG = '1 minute' REFRESH_MODE = INCREMENTAL AS {query}")
        shop.sql("DELETE FROM lines WHERE ok IN (3, 4, 1999); DELETE FROM orders WHERE ok IN (3, 4, 1999)")
        [gone] = shop.refresh(name)
        assert (gone.state, gone.action) == ("SUCCEEDED", "INCREMENTAL"), gone.error
        assert_same_rows(table_rows(shop, name), oracle_rows(shop, name))
        shop.sql(kept_dml)
        [kept] = shop.refresh(name)
        assert (kept.state, kept.action) == ("SUCCEEDED", "INCREMENTAL"), kept.error
        assert_same_rows(table_rows(shop, name), oracle_rows(shop, name))
        # the history lists the snapshot reads key pruning narrowed: (files read, files of the version)
        reads = {(r["table"], r["at"]): (r["files"], r["of"]) for r in json.loads(gone.pruning or "[]")}
        assert reads.get(("default.lines", "end"), (None, 0))[0] == 0 < reads[("default.lines", "end")][1], reads
        kept_reads = {(r["table"], r["at"]): r["files"] for r in json.loads(kept.pruning or "[]")}
        assert kept_reads.get(("default.lines", "end")) != 0, kept_reads
    finally:
        shop.spark.conf.unset(keys.MIN_BYTES)


def test_lines_of_deleted_orders_are_not_read_at_the_end(shop: Any) -> None:
    """Q4's shape: the lines at I1 counted for the keys the change touched skip the keys of orders gone by I1
    (the foreign key says no line can carry one), so deleting orders with their lines reads no old line. An
    order updated in place keeps its key: its lines are read and counted as before."""
    _lines_of_gone_orders_not_read_at_the_end(
        shop, "q", "SELECT o.cust, count(*) AS n FROM orders o WHERE EXISTS "
                   "(SELECT * FROM lines l WHERE l.ok = o.ok AND l.qty > 1) GROUP BY o.cust",
        "UPDATE orders SET cust = cust + 1 WHERE ok IN (5, 1998); DELETE FROM lines WHERE ok = 6 AND qty = 2")


def test_a_nested_aggregate_skips_the_lines_of_deleted_orders_though_no_term_reads_their_change(shop: Any) -> None:
    """Q18's shape: deleting orders with their lines drops the terms of the orders' change (the key says no line
    left refers to one), so the plan reads only the lines' change; the orders' change still proves the changed
    keys gone at I1, where the IN subquery's sums are recounted, so that read is skipped."""
    _lines_of_gone_orders_not_read_at_the_end(
        shop, "big", "SELECT o.cust, sum(l.qty) AS q FROM orders o JOIN lines l ON o.ok = l.ok WHERE o.ok IN "
                     "(SELECT ok FROM lines GROUP BY ok HAVING sum(qty) > 20) GROUP BY o.cust",
        "DELETE FROM lines WHERE ok = 6 AND qty = 2")
