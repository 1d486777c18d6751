"""Issue 3/4 SQL surface: CHANGES(...) AT/BEFORE/END on tables and views, session.changes, EXPLAIN."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from dtables.errors import ChangeTrackingError, DtablesError, SqlError

META = "METADATA$ACTION, METADATA$ISUPDATE"


def latest_version(dt_session, table: str) -> int:
    return dt_session.sql(f"DESCRIBE HISTORY {table}").agg({"version": "max"}).first()[0]


@pytest.fixture
def people(dt):
    """The paper's Listing 1 table, then Listing 2's mutations; returns (session, version before them)."""
    dt.sql("CREATE TABLE people (id INT, name STRING); INSERT INTO people VALUES (1, 'Jeff'), (2, 'Donny')")
    start = latest_version(dt, "people")
    dt.sql("""
        INSERT INTO people VALUES (3, 'Walter'), (4, 'Maud'), (5, 'Uli');
        UPDATE people SET name = 'Jeffrey' WHERE id = 1;
        UPDATE people SET name = 'Maude' WHERE id = 4;
        DELETE FROM people WHERE id IN (2, 5);
    """)
    return dt, start


def test_listing_5_minimum_delta_through_sql(people):
    dt, start = people
    rows = dt.sql(f"SELECT id, name, {META}, METADATA$ROW_ID FROM people "
                  f"CHANGES(INFORMATION => DEFAULT) AT(VERSION => {start})").collect()
    got = sorted((r[0], r[1], r[2], r[3]) for r in rows)
    assert got == [(1, "Jeff", "DELETE", True), (1, "Jeffrey", "INSERT", True), (2, "Donny", "DELETE", False),
                   (3, "Walter", "INSERT", False), (4, "Maude", "INSERT", False)]
    ids = {(r[0], r[2]): r[4] for r in rows}
    assert ids[(1, "DELETE")] == ids[(1, "INSERT")]
    assert len({ids[(1, "DELETE")], ids[(2, "DELETE")], ids[(3, "INSERT")], ids[(4, "INSERT")]}) == 4


def test_listing_4_append_only_and_metadata_columns_filter_like_columns(people):
    dt, start = people
    rows = dt.sql(f"SELECT p.id, p.name, {META} FROM people CHANGES(INFORMATION => APPEND_ONLY) "
                  f"AT(VERSION => {start}) AS p WHERE METADATA$ACTION = 'INSERT' ORDER BY p.id").collect()
    assert [tuple(r) for r in rows] == [(3, "Walter", "INSERT", False), (4, "Maud", "INSERT", False),
                                        (5, "Uli", "INSERT", False)]


def test_columns_come_in_table_order_then_metadata(people):
    dt, start = people
    df = dt.sql(f"SELECT * FROM people CHANGES(INFORMATION => DEFAULT) AT(VERSION => {start})")
    assert df.columns == ["id", "name", "METADATA$ACTION", "METADATA$ISUPDATE", "METADATA$ROW_ID",
                          "METADATA$COMMIT_VERSION", "METADATA$COMMIT_TIMESTAMP"]


def test_end_and_before_bounds(people):
    dt, start = people
    # Only the multi-row insert (commit start+1): BEFORE(start+1) == AT(start).
    q = "SELECT id FROM people CHANGES(INFORMATION => DEFAULT) {} END(VERSION => {})"
    at = sorted(r[0] for r in dt.sql(q.format(f"AT(VERSION => {start})", start + 1)).collect())
    before = sorted(r[0] for r in dt.sql(q.format(f"BEFORE(VERSION => {start + 1})", start + 1)).collect())
    assert at == before == [3, 4, 5]


def test_python_api_matches_sql(people):
    dt, start = people
    via_sql = dt.sql(f"SELECT * FROM people CHANGES(INFORMATION => DEFAULT) AT(VERSION => {start})").collect()
    via_py = dt.changes("people", start=start).collect()
    assert sorted(map(tuple, via_sql)) == sorted(map(tuple, via_py))
    with pytest.raises(DtablesError, match="exactly one of start= or before="):
        dt.changes("people")


def test_explain_shows_the_plan_shape(people):
    dt, start = people
    text = dt.sql(f"EXPLAIN SELECT * FROM people CHANGES(INFORMATION => DEFAULT) AT(VERSION => {start})").first()[0]
    assert "shape: MINIMIZE" in text
    inserts_only = dt.sql(f"EXPLAIN SELECT * FROM people CHANGES(INFORMATION => DEFAULT) AT(VERSION => {start}) "
                          f"END(VERSION => {start + 1})").first()[0]
    assert "shape: ADDED_ONLY" in inserts_only


def test_bad_intervals_are_clear_errors(people):
    dt, start = people
    with pytest.raises(ChangeTrackingError, match="people"):
        dt.sql(f"SELECT * FROM people CHANGES(INFORMATION => DEFAULT) AT(VERSION => {start + 3}) "
               f"END(VERSION => {start + 1})").collect()
    with pytest.raises(ChangeTrackingError, match="99"):
        dt.sql("SELECT * FROM people CHANGES(INFORMATION => DEFAULT) AT(VERSION => 99)").collect()
    with pytest.raises(SqlError, match="STREAM"):
        dt.sql("SELECT * FROM people CHANGES(INFORMATION => DEFAULT) AT(STREAM => 's')")
    with pytest.raises(SqlError, match="syntax error"):
        dt.sql("SELECT * FROM people CHANGES(INFORMATION => ) AT(VERSION => 1)")


@pytest.fixture
def owner_and_items(dt):
    """Listings 6 and 7: people, items and the owner_and_items view; returns (session, timestamp before 12:14)."""
    dt.sql("""
        CREATE TABLE people (id INT, name STRING);
        INSERT INTO people VALUES (1, 'Jeffrey'), (2, 'Donny'), (3, 'Walter'), (4, 'Maude');
        CREATE TABLE items (id INT, oid INT, item STRING, `desc` STRING);
        INSERT INTO items VALUES (11, 2, 'Ball', 'Bowling'), (12, 2, 'Surfboard', 'Yater'), (13, 1, 'Car', '1973'),
                                 (14, 1, 'Rug', 'Classic'), (15, 4, 'Autobahn', 'LP');
        CREATE VIEW owner_and_items AS SELECT name, item FROM people JOIN items ON people.id = oid
    """)
    time.sleep(1.1)  # Delta commit timestamps have millisecond resolution; keep the bound strictly between
    mark = dt_now()
    time.sleep(1.1)
    dt.sql("""
        UPDATE items SET item = 'Ford' WHERE id = 13;
        UPDATE items SET oid = 4 WHERE id = 14;
        UPDATE items SET `desc` = 'Techno' WHERE id = 15;
        DELETE FROM people WHERE id = 2
    """)
    return dt, mark


def dt_now() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None).isoformat(sep=" ")


def test_listing_8_changes_on_a_join_view(owner_and_items):
    dt, mark = owner_and_items
    rows = dt.sql(f"SELECT name, item, {META}, METADATA$ROW_ID FROM owner_and_items "
                  f"CHANGES(INFORMATION => DEFAULT) AT(TIMESTAMP => '{mark}')").collect()
    got = sorted((r[0], r[1], r[2], r[3]) for r in rows)
    assert got == [("Donny", "Ball", "DELETE", False), ("Donny", "Surfboard", "DELETE", False),
                   ("Jeffrey", "Car", "DELETE", True), ("Jeffrey", "Ford", "INSERT", True),
                   ("Jeffrey", "Rug", "DELETE", False), ("Maude", "Rug", "INSERT", False)]
    ids = {(r[0], r[1]): r[4] for r in rows}
    assert ids[("Jeffrey", "Car")] == ids[("Jeffrey", "Ford")]
    assert ids[("Jeffrey", "Rug")] != ids[("Maude", "Rug")]


def test_views_over_views_and_explain_changes(owner_and_items):
    dt, mark = owner_and_items
    dt.sql("CREATE VIEW rugs AS SELECT name FROM owner_and_items WHERE item = 'Rug'")
    rows = dt.sql(f"SELECT name, METADATA$ACTION FROM rugs CHANGES(INFORMATION => DEFAULT) "
                  f"AT(TIMESTAMP => '{mark}')").collect()
    assert sorted(map(tuple, rows)) == [("Jeffrey", "DELETE"), ("Maude", "INSERT")]
    text = dt.explain_changes("SELECT name, item FROM people JOIN items ON people.id = oid")
    assert "Join inner" in text and "Changes items" in text and "@I0" in text


def test_version_bound_on_a_multi_table_view_is_refused(owner_and_items):
    dt, _ = owner_and_items
    with pytest.raises(ChangeTrackingError, match="VERSION bound is ambiguous"):
        dt.sql("SELECT * FROM owner_and_items CHANGES(INFORMATION => DEFAULT) AT(VERSION => 1)")


def test_append_only_on_a_non_monotonic_view_names_the_operator(owner_and_items):
    dt, mark = owner_and_items
    dt.sql("CREATE VIEW counts AS SELECT oid, count(*) AS n FROM items GROUP BY oid")
    with pytest.raises(SqlError, match="monotonic query, but it contains GROUP BY"):
        dt.sql(f"SELECT * FROM counts CHANGES(INFORMATION => APPEND_ONLY) AT(TIMESTAMP => '{mark}')")
