"""AUTO's cost model end to end: a batch that changes half a source refreshes FULL and says why, a small change stays
INCREMENTAL, FULL and INCREMENTAL refreshes chosen in turn keep the table equal to its query (row ids and aggregate
state written by the FULL are what the next INCREMENTAL continues from), a FULL measured only at CREATE is run once
more to measure it warm, and REFRESH_MODE = INCREMENTAL is never switched."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dtables.dynamic.measure import COST_MODEL, EXPLORE, MARGIN, MIN_SOURCE_BYTES, estimate_next
from dtables.testing import assert_same_rows
from oracle import oracle_rows, table_rows

QUERIES = {
    "agg": "SELECT g, count(*) AS n, sum(v) AS s, avg(v) AS a FROM items GROUP BY g",  # kept from stored state
    "joined": "SELECT i.k, i.v, r.name FROM items i JOIN grps r ON i.g = r.g",  # row ids of duplicates
    "picked": "SELECT g, max(v) AS top FROM items GROUP BY g",  # groups recomputed
    "inc_only": "SELECT k, v FROM items WHERE v > 3",
    "full_only": "SELECT k, g FROM items WHERE v IS NOT NULL",  # reads v, so the UPDATE of v below changes it
}
MODES = {"inc_only": "INCREMENTAL", "full_only": "FULL"}


@pytest.fixture
def settings(dt: Any) -> Iterator[Any]:
    """The model on for these small tables (its size floor at 0), settings put back afterwards."""
    changed: list[str] = []

    def set_(key: str, value: str) -> None:
        dt.spark.conf.set(key, value)
        changed.append(key)

    set_(MIN_SOURCE_BYTES, "0")
    yield set_
    for key in changed:
        dt.spark.conf.unset(key)


@pytest.fixture
def shop(dt: Any, settings: Any) -> Any:
    dt.sql("CREATE TABLE items (k INT, g INT, v DOUBLE)")
    dt.sql("CREATE TABLE grps (g INT, name STRING)")
    # 40 rows, duplicates and NULLs included
    rows = ", ".join(f"({k}, {k % 4}, {float(k)})" for k in range(36))
    dt.sql(f"INSERT INTO items VALUES {rows}, (1, 1, 1.0), (1, 1, 1.0), (2, NULL, NULL), (3, 3, NULL)")
    dt.sql("INSERT INTO grps VALUES (0, 'zero'), (1, 'one'), (2, 'two'), (3, 'three'), (3, 'tri')")
    return dt


def estimate_full(dt: Any, name: str) -> float:
    """The FULL estimate from the last full refresh, independently of the model: its seconds scaled by bytes."""
    from dtables.changes.log import DeltaLog
    from dtables.dynamic import definition as defs
    from dtables.dynamic import history

    [full] = history.recent(dt.store, name, "write_kind = 'OVERWRITE'", 1)
    table = DeltaLog(dt.spark, dt.catalog.lookup(name)["location"])
    then = full.source_bytes + table.size_at(full.target_version)
    items = DeltaLog(dt.spark, dt.catalog.lookup("items")["location"])
    now = items.size_at(items.latest_version) + table.size_at(defs.require(dt.store, name).data_version)
    return full.seconds * now / then


def _create(dt: Any, *names: str) -> None:
    for name in names:
        dt.sql(f"CREATE DYNAMIC TABLE {name} TARGET_LAG = '1 hour' REFRESH_MODE = {MODES.get(name, 'AUTO')} AS "
               f"{QUERIES[name]}")


def _refresh(dt: Any, *names: str) -> dict[str, Any]:
    records = {r.name.split(".")[-1]: r for r in dt.refresh(list(names))}
    for name in names:
        assert_same_rows(table_rows(dt, name), oracle_rows(dt, name))
    return records


def test_half_a_source_changed_refreshes_full_and_says_why(shop: Any) -> None:
    _create(shop, "agg", "inc_only", "full_only")
    shop.sql("UPDATE items SET v = v + 100 WHERE k < 24")  # 28 of 40 rows (k = 0..23 and the four extra rows)
    records = _refresh(shop, "agg", "inc_only", "full_only")
    for name in ("agg",):
        r = records[name]
        assert (r.action, r.write_kind, r.cost_choice) == ("FULL", "OVERWRITE", "FULL"), (name, r.reason)
        assert r.cost_reason == "FULL: 70% of default.items changed"
        assert r.reason.startswith("AUTO cost model: FULL: 70% of default.items changed; changed: default.items")
        assert r.estimate_full_s is not None and r.estimate_full_s > 0  # from the refresh at CREATE
        assert r.estimate_incremental_s is None  # no incremental refresh measured yet
        assert r.source_bytes and r.change_bytes
    # INCREMENTAL stays INCREMENTAL, FULL stays FULL: the model does not decide for them
    assert (records["inc_only"].action, records["inc_only"].cost_choice) == ("INCREMENTAL", None)
    assert (records["full_only"].action, records["full_only"].cost_choice) == ("FULL", None)
    assert records["inc_only"].source_bytes and records["inc_only"].change_bytes  # measured all the same

    shown = {r["name"]: r for r in shop.history().where("action = 'FULL' AND cost_choice = 'FULL'").collect()}
    assert set(shown) == {"default.agg"}
    assert shown["default.agg"]["cost_reason"] == "FULL: 70% of default.items changed"
    show = shop.sql("SHOW DYNAMIC TABLES LIKE 'agg'").first()
    assert (show["last_refresh_action"], show["last_refresh_cost_choice"]) == ("FULL", "FULL")
    assert show["last_refresh_cost_reason"] == "FULL: 70% of default.items changed"
    assert show["last_refresh_estimate_full_s"] == records["agg"].estimate_full_s

    # what `dtables plan` shows: the next refresh's choice and estimates, from the logs (nothing refreshed)
    shop.sql("DELETE FROM items WHERE k >= 10")
    # agg has no incremental refresh of its own; inc_only's is its prior
    shown = estimate_next(shop, "agg")
    assert shown.startswith("FULL: 65% of default.items changed (est. INCREMENTAL "), shown
    assert shown.endswith(f", FULL {estimate_full(shop, 'agg'):.1f} s)") and "INCREMENTAL ?" not in shown, shown
    assert estimate_next(shop, "inc_only") == "" and estimate_next(shop, "full_only") == ""


@pytest.mark.slow
def test_a_small_change_stays_incremental_and_the_next_table_borrows_its_time(shop: Any) -> None:
    _create(shop, "agg", "joined")
    shop.sql("INSERT INTO items VALUES (50, 2, 5.0)")
    shop.sql("UPDATE items SET v = -v WHERE k = 7")
    records = _refresh(shop, "agg", "joined")
    first, second = sorted((records["agg"], records["joined"]), key=lambda r: r.started_at)
    assert (first.action, first.cost_choice) == ("INCREMENTAL", "INCREMENTAL"), first.reason
    assert first.cost_reason == "INCREMENTAL: no incremental refresh measured yet; 5% of default.items changed"
    # the second has none of its own either, and borrows the first's time as its prior
    assert second.cost_reason is not None and "(other tables' incremental refreshes" in second.cost_reason
    assert second.estimate_incremental_s is not None and first.seconds is not None
    assert second.estimate_incremental_s >= first.seconds * 0.99, (second.estimate_incremental_s, first.seconds)
    shop.sql("DELETE FROM items WHERE k = 8")
    records = _refresh(shop, "agg")
    agg = records["agg"]
    # now both are measured: the estimates are recorded beside the choice
    assert agg.estimate_incremental_s is not None and agg.estimate_full_s is not None
    assert agg.cost_reason is not None and agg.cost_reason.split(":")[0] == agg.action


@pytest.mark.slow
def test_full_and_incremental_in_turn_keep_the_table_equal_to_its_query(shop: Any, settings: Any) -> None:
    settings(MARGIN, "1000")  # only the share of changed rows decides: FULL for the big batches, not by timing
    _create(shop, "agg", "joined", "picked")
    batches = [
        ("FULL", ["UPDATE items SET v = v * 2 WHERE k % 3 <> 0"]),
        ("INCREMENTAL", ["INSERT INTO items VALUES (1, 1, 1.0), (60, 0, NULL)", "DELETE FROM items WHERE k = 9"]),
        ("FULL", ["DELETE FROM items WHERE k < 30", "UPDATE grps SET name = 'zwei' WHERE g = 2"]),
        ("INCREMENTAL", ["UPDATE items SET g = 2 WHERE k = 31", "INSERT INTO items VALUES (61, 3, 7.0)",
                         "UPDATE grps SET name = 'ein' WHERE g = 1"]),
    ]
    for expected, statements in batches:
        for statement in statements:
            shop.sql(statement)
        records = _refresh(shop, "agg", "joined", "picked")  # equal to its query, both ways, after every refresh
        for name in ("agg", "joined", "picked"):
            assert records[name].action == expected, (name, statements, records[name].cost_reason)


def test_a_full_measured_only_at_create_is_run_once_more_to_measure_it_warm(shop: Any, settings: Any) -> None:
    settings(EXPLORE, "1000")  # any FULL estimate is within reach of INCREMENTAL's: the rule decides, not timings
    settings(MARGIN, "1000")  # and the estimates themselves never choose FULL
    _create(shop, "agg")
    shop.sql("INSERT INTO items VALUES (70, 1, 2.0)")
    first = _refresh(shop, "agg")["agg"]  # no incremental refresh of its own yet to weigh FULL against
    assert first.action == "INCREMENTAL", first.cost_reason
    shop.sql("INSERT INTO items VALUES (71, 2, 3.0), (72, NULL, NULL)")
    second = _refresh(shop, "agg")["agg"]  # equal to its query after each refresh (_refresh)
    assert (second.action, second.cost_choice, second.write_kind) == ("FULL", "FULL", "OVERWRITE"), second.reason
    reason = second.cost_reason or ""
    assert reason.startswith("FULL: est. ") and " at CREATE against INCREMENTAL " in reason, reason
    assert reason.endswith(", within 1000x: refreshed in full once to measure it warm"), reason
    shop.sql("DELETE FROM items WHERE k = 71")
    third = _refresh(shop, "agg")["agg"]  # FULL measured since CREATE: once only, back to the estimates
    assert (third.action, third.cost_choice) == ("INCREMENTAL", "INCREMENTAL"), third.cost_reason


@pytest.mark.slow
def test_the_model_can_be_turned_off(shop: Any, settings: Any) -> None:
    settings(COST_MODEL, "false")
    _create(shop, "agg")
    shop.sql("DELETE FROM items WHERE k < 30")
    records = _refresh(shop, "agg")
    assert (records["agg"].action, records["agg"].cost_choice, records["agg"].cost_reason) == (
        "INCREMENTAL", None, None)


@pytest.mark.slow
def test_a_delete_marked_in_a_deletion_vector_counts_the_rows_bytes_not_the_files(shop: Any) -> None:
    # one row of the 40 marked deleted: Delta removes and re-adds the file with a vector; the change is a row's share
    _create(shop, "agg")
    shop.sql("DELETE FROM items WHERE k = 20")
    r = _refresh(shop, "agg")["agg"]
    assert r.source_bytes and r.change_bytes
    assert 0 < r.change_bytes < r.source_bytes / 10, (r.change_bytes, r.source_bytes)
