"""Paper Listings 6-8: CHANGES on the owner_and_items inner-join view."""

from __future__ import annotations

from typing import Any

from diff_harness import BaseTable, check_oracle

PEOPLE = {"id": "INT", "name": "STRING"}
ITEMS = {"id": "INT", "oid": "INT", "item": "STRING", "desc": "STRING"}
VIEW = "SELECT name, item FROM people JOIN items ON people.id = oid"


def _listing_tables() -> dict[str, BaseTable]:
    people_start = {"1": (1, "Jeffrey"), "2": (2, "Donny"), "3": (3, "Walter"), "4": (4, "Maude")}
    people_end = {k: v for k, v in people_start.items() if k != "2"}
    items_start = {
        "11": (11, 2, "Ball", "Bowling"), "12": (12, 2, "Surfboard", "Yater"), "13": (13, 1, "Car", "1973"),
        "14": (14, 1, "Rug", "Classic"), "15": (15, 4, "Autobahn LP", None),
    }
    items_end = dict(items_start)
    items_end["13"] = (13, 1, "Ford", "1973")
    items_end["14"] = (14, 4, "Rug", "Classic")
    items_end["15"] = (15, 4, "Autobahn LP", "Techno")
    items_changes = []
    for rid in ("13", "14", "15"):
        items_changes += [("DELETE", rid, items_start[rid]), ("INSERT", rid, items_end[rid])]
    # Copy-on-write redundancy: an untouched row rewritten in the same file.
    items_changes += [("DELETE", "11", items_start["11"]), ("INSERT", "11", items_start["11"])]
    return {
        "people": BaseTable(PEOPLE, people_start, people_end, [("DELETE", "2", people_start["2"])]),
        "items": BaseTable(ITEMS, items_start, items_end, items_changes),
    }


def test_listing7_view_contents(tables: Any) -> None:
    ts = tables(_listing_tables())
    res = check_oracle(ts, VIEW)
    assert sorted(r[:2] for r in res.start) == sorted(
        [("Donny", "Ball"), ("Donny", "Surfboard"), ("Jeffrey", "Car"), ("Jeffrey", "Rug"), ("Maude", "Autobahn LP")]
    )
    assert sorted(r[:2] for r in res.end) == [("Jeffrey", "Ford"), ("Maude", "Autobahn LP"), ("Maude", "Rug")]


def test_listing8_changes_on_inner_join_view(tables: Any) -> None:
    ts = tables(_listing_tables())
    res = check_oracle(ts, VIEW)
    assert res.shape == "MINIMIZE"
    got = sorted(r[:4] for r in res.rows)
    assert got == [
        ("Donny", "Ball", "DELETE", False),
        ("Donny", "Surfboard", "DELETE", False),
        ("Jeffrey", "Car", "DELETE", True),
        ("Jeffrey", "Ford", "INSERT", True),
        ("Jeffrey", "Rug", "DELETE", False),
        ("Maude", "Rug", "INSERT", False),
    ]
    ids = {(r[0], r[1]): r[4] for r in res.rows}
    assert ids[("Jeffrey", "Car")] == ids[("Jeffrey", "Ford")]  # an update keeps its row id
    assert ids[("Jeffrey", "Rug")] != ids[("Maude", "Rug")]  # UPDATE coercion: a new join partner
    assert len(set(ids.values())) == 5
    # Excluded columns: the Autobahn LP description change produced nothing.
    assert not [r for r in res.rows if r[1] == "Autobahn LP"]
