-- Q04 as a dynamic table. Rewrites:
-- * `exists (select * from lineitem where l_orderkey = o_orderkey and l_commitdate < l_receiptdate)` becomes an
--   inner join with the DISTINCT late order keys (dtables has no EXISTS / semi join yet; DISTINCT keeps one row
--   per order, so the join neither drops nor repeats orders);
-- * the top-level ORDER BY is dropped (a dynamic table is a bag of rows) and applied when reading it.
-- read: order by o_orderpriority
select o_orderpriority, count(*) as order_count
from orders,
  (select distinct l_orderkey as late_orderkey from lineitem where l_commitdate < l_receiptdate) as late
where o_orderdate >= date '1993-07-01' and o_orderdate < date '1993-07-01' + interval '3' month
  and o_orderkey = late_orderkey
group by o_orderpriority
