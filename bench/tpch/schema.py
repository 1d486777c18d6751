"""The eight TPC-H tables with the types of the specification (DECIMAL(15,2) money, DATE dates)."""

from __future__ import annotations

from collections.abc import Collection

TABLES: dict[str, str] = {
    "region": "r_regionkey BIGINT, r_name STRING, r_comment STRING",
    "nation": "n_nationkey BIGINT, n_name STRING, n_regionkey BIGINT, n_comment STRING",
    "part": ("p_partkey BIGINT, p_name STRING, p_mfgr STRING, p_brand STRING, p_type STRING, p_size INT, "
             "p_container STRING, p_retailprice DECIMAL(15,2), p_comment STRING"),
    "supplier": ("s_suppkey BIGINT, s_name STRING, s_address STRING, s_nationkey BIGINT, s_phone STRING, "
                 "s_acctbal DECIMAL(15,2), s_comment STRING"),
    "partsupp": ("ps_partkey BIGINT, ps_suppkey BIGINT, ps_availqty INT, ps_supplycost DECIMAL(15,2), "
                 "ps_comment STRING"),
    "customer": ("c_custkey BIGINT, c_name STRING, c_address STRING, c_nationkey BIGINT, c_phone STRING, "
                 "c_acctbal DECIMAL(15,2), c_mktsegment STRING, c_comment STRING"),
    "orders": ("o_orderkey BIGINT, o_custkey BIGINT, o_orderstatus STRING, o_totalprice DECIMAL(15,2), "
               "o_orderdate DATE, o_orderpriority STRING, o_clerk STRING, o_shippriority INT, o_comment STRING"),
    "lineitem": ("l_orderkey BIGINT, l_partkey BIGINT, l_suppkey BIGINT, l_linenumber INT, "
                 "l_quantity DECIMAL(15,2), l_extendedprice DECIMAL(15,2), l_discount DECIMAL(15,2), "
                 "l_tax DECIMAL(15,2), l_returnflag STRING, l_linestatus STRING, l_shipdate DATE, "
                 "l_commitdate DATE, l_receiptdate DATE, l_shipinstruct STRING, l_shipmode STRING, l_comment STRING"),
}


# The keys of the specification (clause 1.4.2), declared RELY: the refresh functions keep them at every version
# (RF1 inserts an order before its lines, RF2 deletes the lines before their order), so a refresh may rely on them.
PRIMARY_KEYS: dict[str, str] = {
    "region": "r_regionkey", "nation": "n_nationkey", "part": "p_partkey", "supplier": "s_suppkey",
    "partsupp": "ps_partkey, ps_suppkey", "customer": "c_custkey", "orders": "o_orderkey",
    "lineitem": "l_orderkey, l_linenumber",
}
FOREIGN_KEYS: tuple[tuple[str, str, str], ...] = (
    ("nation", "n_regionkey", "region"), ("supplier", "s_nationkey", "nation"),
    ("customer", "c_nationkey", "nation"), ("partsupp", "ps_partkey", "part"), ("partsupp", "ps_suppkey", "supplier"),
    ("orders", "o_custkey", "customer"), ("lineitem", "l_orderkey", "orders"),
    ("lineitem", "l_partkey, l_suppkey", "partsupp"), ("lineitem", "l_partkey", "part"),
    ("lineitem", "l_suppkey", "supplier"),
)


def key_statements(tables: Collection[str] = TABLES) -> list[str]:
    """ALTER TABLE statements declaring the keys among ``tables``, primary keys first (a foreign key needs its
    referenced key)."""
    out = [f"ALTER TABLE {t} ADD PRIMARY KEY ({cols}) RELY" for t, cols in PRIMARY_KEYS.items() if t in tables]
    return out + [f"ALTER TABLE {t} ADD FOREIGN KEY ({cols}) REFERENCES {ref} RELY" for t, cols, ref in FOREIGN_KEYS
                  if t in tables and ref in tables]


def columns(table: str) -> list[tuple[str, str]]:
    """(name, type) pairs of a table, in order."""
    out = []
    for col in TABLES[table].split(", "):
        name, type_ = col.split(" ", 1)
        out.append((name, type_))
    return out
