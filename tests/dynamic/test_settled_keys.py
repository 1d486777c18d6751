"""Keys a referenced table's change settles (`KeyProbe.settled`): with `lines (ok) REFERENCES orders RELY`, the lines
of an order deleted over the interval are at I0 exactly the lines the interval deleted, and those of a new order at
I1 exactly the lines it inserted, so a snapshot restricted to such keys is read from the lines' change, not from
their files. Each refresh still equals its query from scratch under random orders and lines that keep the keys."""

from __future__ import annotations

import json
import tempfile
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dtables.changes import keys
from dtables.changes.sources import RESTRICT_MIN_BYTES, SETTLED_MIN_BYTES
from dtables.testing import assert_same_rows
from oracle import oracle_rows, refreshes_match, table_rows

TABLES = {
    # TPC-H Q18's shape: orders and their lines, for the orders whose lines sum above a bound
    "big": "SELECT o.cust, o.ok, sum(l.qty) AS q FROM orders o JOIN lines l ON o.ok = l.ok WHERE o.ok IN "
           "(SELECT ok FROM lines GROUP BY ok HAVING sum(qty) > 5) GROUP BY o.cust, o.ok",
    # Q4's: orders with some line
    "ex": "SELECT o.cust, count(*) AS n FROM orders o WHERE EXISTS "
          "(SELECT * FROM lines l WHERE l.ok = o.ok AND l.qty > 1) GROUP BY o.cust",
    # Q21's: lines with no other line of their order above a bound
    "alone": "SELECT l1.ok, o.cust, count(*) AS n FROM lines l1 JOIN orders o ON o.ok = l1.ok WHERE NOT EXISTS "
             "(SELECT * FROM lines l3 WHERE l3.ok = l1.ok AND l3.ln <> l1.ln AND l3.qty > 2) GROUP BY l1.ok, o.cust",
    "j": "SELECT o.ok, o.cust, l.ln, l.qty FROM orders o JOIN lines l ON o.ok = l.ok",
}
SETTINGS = (keys.MIN_BYTES, keys.MAX_FRACTION, RESTRICT_MIN_BYTES, SETTLED_MIN_BYTES)


class Shop:
    """The session and the order keys that exist, so that every change keeps the declared keys true."""

    def __init__(self, connect: Any) -> None:
        self.dt = connect(tempfile.mkdtemp(prefix="dt-settled-") + "/wh")
        self.dt.sql("CREATE TABLE orders (ok BIGINT NOT NULL, cust INT, CONSTRAINT orders_pk PRIMARY KEY (ok) RELY)")
        self.dt.sql("CREATE TABLE lines (ok BIGINT, ln INT, qty INT, "
                    "CONSTRAINT lines_fk FOREIGN KEY (ok) REFERENCES orders RELY)")
        self.dt.sql("INSERT INTO orders SELECT id, CAST(id % 4 AS INT) FROM range(40)")
        self.dt.sql("INSERT INTO lines SELECT id DIV 3, CAST(id % 3 AS INT), "
                    "CASE WHEN id % 11 = 0 THEN NULL ELSE CAST(id % 5 AS INT) END FROM range(120)")
        self.dt.sql("INSERT INTO lines VALUES (7, 1, 2), (7, 1, 2)")  # a duplicate line
        self.live = list(range(40))
        self.next = 1000
        for key in SETTINGS:  # tiny tables: probe and filter as at TPC-H's sizes
            self.dt.spark.conf.set(key, "1" if key == keys.MAX_FRACTION else "0")
        for name, query in TABLES.items():
            self.dt.sql(f"CREATE DYNAMIC TABLE {name} TARGET_LAG = '1 minute' REFRESH_MODE = INCREMENTAL AS {query}")

    def close(self) -> None:
        for key in SETTINGS:
            self.dt.spark.conf.unset(key)

    def pick(self, i: int) -> int:
        return self.live[i % len(self.live)] if self.live else -1

    def run(self, op: tuple[str, int, int]) -> None:
        kind, i, n = op
        sql = self.dt.sql
        if kind == "new" or not self.live:  # an order with n lines (none: an order of no line)
            k, self.next = self.next, self.next + 1
            self.live.append(k)
            sql(f"INSERT INTO orders VALUES ({k}, {n % 4})")
            if n:
                sql("INSERT INTO lines VALUES " + ", ".join(f"({k}, {j}, {(n + j) % 6})" for j in range(n)))
            return
        k = self.pick(i)
        if kind == "drop":  # an order and all its lines (RF2)
            self.live.remove(k)
            sql(f"DELETE FROM lines WHERE ok = {k}")
            sql(f"DELETE FROM orders WHERE ok = {k}")
        elif kind == "again":  # dropped and made anew under the same key: the key is neither lost nor gained
            sql(f"DELETE FROM lines WHERE ok = {k}")
            sql(f"DELETE FROM orders WHERE ok = {k}")
            sql(f"INSERT INTO orders VALUES ({k}, {n % 4})")
            sql(f"INSERT INTO lines VALUES ({k}, 0, {n}), ({k}, 1, {n})")
        elif kind == "fleeting":  # a new order with lines, gone again inside the interval
            t = self.next
            self.next += 1
            sql(f"INSERT INTO orders VALUES ({t}, 1)")
            sql(f"INSERT INTO lines VALUES ({t}, 0, 4), ({t}, 1, 4)")
            sql(f"DELETE FROM lines WHERE ok = {t}")
            sql(f"DELETE FROM orders WHERE ok = {t}")
        elif kind == "late":  # a line added to an order, then the order dropped with it: the line never was
            self.live.remove(k)
            sql(f"INSERT INTO lines VALUES ({k}, 9, {n})")
            sql(f"DELETE FROM lines WHERE ok = {k}")
            sql(f"DELETE FROM orders WHERE ok = {k}")
        elif kind == "line":  # a line of an order that stays
            sql(f"DELETE FROM lines WHERE ok = {k} AND ln = {n % 3}")
        elif kind == "qty":
            sql(f"UPDATE lines SET qty = coalesce(qty, 0) + {n} WHERE ok = {k}")
        elif kind == "move":  # a line to another order that exists
            sql(f"UPDATE lines SET ok = {self.pick(i + n + 1)} WHERE ok = {k} AND ln = 0")
        elif kind == "cust":
            sql(f"UPDATE orders SET cust = cust + 1 WHERE ok = {k}")


def _pruned(record: Any) -> dict[tuple[str, str], list[str]]:
    return {(r["table"], r["at"]): r["keys"] for r in json.loads(record.pruning or "[]")}


def test_the_lines_of_dropped_and_new_orders_are_read_from_their_change(connect: Any) -> None:
    shop = Shop(connect)
    try:
        for k in (3, 4, 17):
            shop.run(("drop", shop.live.index(k), 0))
        shop.run(("late", shop.live.index(9), 5))
        [record] = shop.dt.refresh("big")
        assert record.action == "INCREMENTAL", record.reason
        assert_same_rows(table_rows(shop.dt, "big"), oracle_rows(shop.dt, "big"))
        # lines at I0 restricted to the deleted orders' keys: no key left for the files, all from the change
        labels = " ".join(" ".join(v) for v in _pruned(record).values())
        assert "from the change" in labels, record.pruning
        refreshes_match(shop.dt, list(TABLES))
        shop.run(("new", 0, 3))
        shop.run(("new", 0, 2))
        [record] = shop.dt.refresh("big")
        assert "from the change" in " ".join(" ".join(v) for v in _pruned(record).values()), record.pruning
        assert_same_rows(table_rows(shop.dt, "big"), oracle_rows(shop.dt, "big"))
        refreshes_match(shop.dt, list(TABLES))
    finally:
        shop.close()


ops = st.tuples(st.sampled_from(["new", "drop", "again", "fleeting", "late", "line", "qty", "move", "cust"]),
                st.integers(0, 60), st.integers(0, 4))


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(script=st.lists(st.lists(ops, min_size=1, max_size=4), min_size=1, max_size=3))
def test_random_orders_and_lines_under_their_keys_match_recompute(connect: Any, script: list) -> None:
    shop = Shop(connect)
    try:
        for batch in script:
            for op in batch:
                shop.run(op)
            refreshes_match(shop.dt, list(TABLES))
    finally:
        shop.close()
