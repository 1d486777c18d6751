-- Q03 as a dynamic table. Rewrite: the top-level ORDER BY and LIMIT are dropped (a dynamic table is a
-- bag of rows) and applied when reading it (the `read:` line).
-- read: order by revenue desc, o_orderdate limit 10
select l_orderkey, sum(l_extendedprice * (1 - l_discount)) as revenue, o_orderdate, o_shippriority
from customer, orders, lineitem
where c_mktsegment = 'BUILDING' and c_custkey = o_custkey and l_orderkey = o_orderkey
  and o_orderdate < date '1995-03-15' and l_shipdate > date '1995-03-15'
group by l_orderkey, o_orderdate, o_shippriority
