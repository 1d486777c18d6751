"""The TPC-H refresh functions, applied through dtables SQL: RF1 (new orders), RF2 (deleted orders), an update batch.

Each touches 0.1% of ORDERS (and their LINEITEMs), as the specification's RF1/RF2 do. The rows are produced in SQL
from a seed (a hash of seed, key and field), so a batch is deterministic and different from one run to the next
without any file of pre-generated rows. RF1 follows the generator's rules closely enough for every query to
see its rows: suppliers come from the part's four PARTSUPP suppliers, prices from the part's retail price, the
order status and total price from its lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

FRACTION = 0.001
BATCHES = ("rf1", "rf2", "update")


@dataclass(frozen=True)
class BatchResult:
    name: str
    orders: int  # ORDERS rows inserted, deleted or updated
    lineitems: int  # LINEITEM rows inserted, deleted or updated

    @property
    def rows(self) -> int:
        return self.orders + self.lineitems


def _rnd(seed: int, key: str, tag: str, low: int, high: int) -> str:
    """SQL for a deterministic integer in [low, high] drawn from (seed, key, tag)."""
    return f"({low} + pmod(hash({seed}, {key}, '{tag}'), {high - low + 1}))"


def _pick(seed: int, key: str, tag: str, values: tuple[str, ...]) -> str:
    options = ", ".join(f"'{v}'" for v in values)
    return f"element_at(array({options}), {_rnd(seed, key, tag, 1, len(values))})"


def _scalar(session: Any, sql: str) -> Any:
    return session.sql(sql).first()[0]


def _new_lines_sql(session: Any, seed: int) -> str:
    """A SELECT of RF1's new LINEITEM rows, each with its order's columns (`o_*`)."""
    orders = _scalar(session, "SELECT count(*) FROM orders")
    base = _scalar(session, "SELECT max(o_orderkey) FROM orders") or 0
    customers = _scalar(session, "SELECT max(c_custkey) FROM customer")
    parts = _scalar(session, "SELECT max(p_partkey) FROM part")
    suppliers = _scalar(session, "SELECT max(s_suppkey) FROM supplier")
    clerks = max(1, suppliers // 10)  # the spec has SF * 1000 clerks and SF * 10000 suppliers
    n = max(1, round(orders * FRACTION))
    line = "o_orderkey, line"
    cust = _rnd(seed, "o_orderkey", "cust", 1, customers)
    partkey = _rnd(seed, line, "part", 1, parts)
    return f"""
      WITH ids AS (SELECT {base} + id + 1 AS o_orderkey FROM range({n})),
      new_orders AS (
        SELECT o_orderkey,
               CASE WHEN {cust} % 3 = 0 THEN {cust} - 1 ELSE {cust} END AS o_custkey,
               date_add(DATE '1992-01-01', {_rnd(seed, 'o_orderkey', 'date', 0, 2405)}) AS o_orderdate,
               {_pick(seed, 'o_orderkey', 'prio', ('1-URGENT', '2-HIGH', '3-MEDIUM', '4-NOT SPECIFIED', '5-LOW'))}
                 AS o_orderpriority,
               concat('Clerk#', lpad(CAST({_rnd(seed, 'o_orderkey', 'clerk', 1, clerks)} AS STRING), 9, '0'))
                 AS o_clerk,
               concat('rf1 order ', CAST({seed} AS STRING)) AS o_comment
        FROM ids
      ),
      lines AS (
        SELECT o.*, CAST(r.id AS INT) AS line
        FROM new_orders o JOIN range(1, 8) r ON r.id <= {_rnd(seed, 'o.o_orderkey', 'lines', 1, 7)}
      ),
      parted AS (
        SELECT l.*, {partkey} AS l_partkey, date_add(o_orderdate, {_rnd(seed, line, 'ship', 1, 121)}) AS l_shipdate,
               CAST({_rnd(seed, line, 'qty', 1, 50)} AS DECIMAL(15,2)) AS l_quantity
        FROM lines l
      ),
      dated AS (
        SELECT p.*,
               pmod(l_partkey + {_rnd(seed, line, 'supp', 0, 3)}
                      * ({suppliers} div 4 + (l_partkey - 1) div {suppliers}),
                    {suppliers}) + 1 AS l_suppkey
        FROM parted p
      )
      SELECT d.o_orderkey AS l_orderkey, d.l_partkey, d.l_suppkey, d.line AS l_linenumber, d.l_quantity,
             CAST(d.l_quantity * p.p_retailprice AS DECIMAL(15,2)) AS l_extendedprice,
             CAST({_rnd(seed, line, 'disc', 0, 10)} / 100.0 AS DECIMAL(15,2)) AS l_discount,
             CAST({_rnd(seed, line, 'tax', 0, 8)} / 100.0 AS DECIMAL(15,2)) AS l_tax,
             CASE WHEN date_add(d.l_shipdate, {_rnd(seed, line, 'receipt', 1, 30)}) <= DATE '1995-06-17'
                  THEN {_pick(seed, line, 'flag', ('R', 'A'))} ELSE 'N' END AS l_returnflag,
             CASE WHEN d.l_shipdate > DATE '1995-06-17' THEN 'O' ELSE 'F' END AS l_linestatus,
             d.l_shipdate,
             date_add(d.o_orderdate, {_rnd(seed, line, 'commit', 30, 90)}) AS l_commitdate,
             date_add(d.l_shipdate, {_rnd(seed, line, 'receipt', 1, 30)}) AS l_receiptdate,
             {_pick(seed, line, 'instruct', ('DELIVER IN PERSON', 'COLLECT COD', 'NONE', 'TAKE BACK RETURN'))}
               AS l_shipinstruct,
             {_pick(seed, line, 'mode', ('REG AIR', 'AIR', 'RAIL', 'SHIP', 'TRUCK', 'MAIL', 'FOB'))} AS l_shipmode,
             concat('rf1 line ', CAST({seed} AS STRING)) AS l_comment,
             d.o_custkey, d.o_orderdate, d.o_orderpriority, d.o_clerk, d.o_comment
      FROM dated d JOIN part p ON p.p_partkey = d.l_partkey
    """


def rf1(session: Any, seed: int) -> BatchResult:
    """Insert 0.1% new ORDERS (keys above the current maximum) with 1 to 7 LINEITEMs each."""
    lines = _new_lines_sql(session, seed)
    # orders first, then their lines: the foreign key lineitem -> orders holds at every version
    session.sql(f"""
      INSERT INTO orders
      SELECT l_orderkey, o_custkey,
             CASE WHEN min(l_linestatus) = max(l_linestatus) THEN min(l_linestatus) ELSE 'P' END,
             CAST(sum(l_extendedprice * (1 + l_tax) * (1 - l_discount)) AS DECIMAL(15,2)),
             o_orderdate, o_orderpriority, o_clerk, 0, o_comment
      FROM ({lines}) AS new_lines
      GROUP BY l_orderkey, o_custkey, o_orderdate, o_orderpriority, o_clerk, o_comment""")
    session.sql(f"""
      INSERT INTO lineitem
      SELECT l_orderkey, l_partkey, l_suppkey, l_linenumber, l_quantity, l_extendedprice, l_discount, l_tax,
             l_returnflag, l_linestatus, l_shipdate, l_commitdate, l_receiptdate, l_shipinstruct, l_shipmode,
             l_comment
      FROM ({lines}) AS new_lines""")
    base = _scalar(session, f"SELECT count(*) FROM orders WHERE o_comment = 'rf1 order {seed}'")
    items = _scalar(session, f"SELECT count(*) FROM lineitem WHERE l_comment = 'rf1 line {seed}'")
    return BatchResult("rf1", base, items)


def _chosen(seed: int, key: str, tag: str) -> str:
    """A predicate true for about 0.1% of the keys, a different set for each (seed, tag)."""
    return f"pmod(hash({seed}, {key}, '{tag}'), {round(1 / FRACTION)}) = 0"


def rf2(session: Any, seed: int) -> BatchResult:
    """Delete about 0.1% of the ORDERS and all their LINEITEMs."""
    orders = _scalar(session, f"SELECT count(*) FROM orders WHERE {_chosen(seed, 'o_orderkey', 'rf2')}")
    items = _scalar(session, f"SELECT count(*) FROM lineitem WHERE {_chosen(seed, 'l_orderkey', 'rf2')}")
    session.sql(f"DELETE FROM lineitem WHERE {_chosen(seed, 'l_orderkey', 'rf2')}")
    session.sql(f"DELETE FROM orders WHERE {_chosen(seed, 'o_orderkey', 'rf2')}")
    return BatchResult("rf2", orders, items)


def update(session: Any, seed: int) -> BatchResult:
    """Price and status changes on about 0.1% of the ORDERS and the LINEITEMs of those orders."""
    pick_l, pick_o = _chosen(seed, "l_orderkey", "upd"), _chosen(seed, "o_orderkey", "upd")
    orders = _scalar(session, f"SELECT count(*) FROM orders WHERE {pick_o}")
    items = _scalar(session, f"SELECT count(*) FROM lineitem WHERE {pick_l}")
    session.sql(f"""
      UPDATE lineitem
      SET l_extendedprice = CAST(l_extendedprice * 1.05 AS DECIMAL(15,2)),
          l_discount = CAST(CASE WHEN l_discount >= 0.10 THEN 0.00 ELSE l_discount + 0.01 END AS DECIMAL(15,2))
      WHERE {pick_l}""")
    session.sql(f"""
      UPDATE orders
      SET o_orderstatus = CASE o_orderstatus WHEN 'F' THEN 'O' WHEN 'O' THEN 'P' ELSE 'F' END,
          o_totalprice = CAST(o_totalprice * 1.05 AS DECIMAL(15,2))
      WHERE {pick_o}""")
    return BatchResult("update", orders, items)


def apply(session: Any, batch: str, seed: int) -> BatchResult:
    """Run one named batch (rf1, rf2 or update)."""
    return {"rf1": rf1, "rf2": rf2, "update": update}[batch](session, seed)
