"""End-to-end quickstart: a warehouse, a change-tracked table, its changes, and a reconnect.

Run with ``make demo`` (or ``.venv/bin/python projects_example/quickstart.py [WAREHOUSE]``). Uses the people table
of the change-queries paper (Listings 1 and 2).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import dtables


def show(title: str, df) -> None:  # type: ignore[no-untyped-def]
    print(f"\n== {title}")
    df.show(truncate=False)


def main(warehouse: Path) -> None:
    shutil.rmtree(warehouse, ignore_errors=True)
    with dtables.connect(warehouse) as dt:
        dt.sql("""
            CREATE TABLE people (id INT, name STRING);
            INSERT INTO people VALUES (1, 'Jeff'), (2, 'Donny');
        """)
        start = dt.sql("DESCRIBE HISTORY people").agg({"version": "max"}).collect()[0][0]
        show("people (Listing 1)", dt.sql("SELECT * FROM people ORDER BY id"))
        dt.sql("""
            INSERT INTO people VALUES (3, 'Walter'), (4, 'Maud'), (5, 'Uli');
            UPDATE people SET name = 'Jeffrey' WHERE id = 1;
            UPDATE people SET name = 'Maude' WHERE id = 4;
            DELETE FROM people WHERE id IN (2, 5);
        """)
        show("people after Listing 2's mutations", dt.sql("SELECT * FROM people ORDER BY id"))
        show(f"CHANGES since version {start} (minimum delta, Listing 5)", dt.sql(
            "SELECT id, name, METADATA$ACTION, METADATA$ISUPDATE, METADATA$ROW_ID FROM people "
            f"CHANGES(INFORMATION => DEFAULT) AT(VERSION => {start})"))
        show("append-only CHANGES (Listing 4)", dt.sql(
            "SELECT id, name, METADATA$ACTION FROM people "
            f"CHANGES(INFORMATION => APPEND_ONLY) AT(VERSION => {start})"))
        print("\n== how that change read ran (paper 4.2 plan shape)")
        print(dt.sql(f"EXPLAIN SELECT * FROM people CHANGES(INFORMATION => DEFAULT) AT(VERSION => {start})")
              .first()[0])
        dt.sql("CREATE VIEW people_names AS SELECT name FROM people")
    # A new session on the same warehouse sees the same objects by name.
    with dtables.connect(warehouse) as again:
        show("after reconnecting: people_names", again.sql("SELECT * FROM people_names ORDER BY name"))
    print(f"\nwarehouse: {warehouse}")


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.gettempdir()) / "dtables-quickstart"
    main(target)
