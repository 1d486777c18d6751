-- Q18 as a dynamic table. Rewrites:
-- * `o_orderkey in (select l_orderkey from lineitem group by l_orderkey having sum(l_quantity) > 300)` becomes an
--   inner join with that grouped subquery (its keys are unique, so no order repeats; dtables has no IN subquery);
-- * the top-level ORDER BY and LIMIT are dropped (a dynamic table is a bag of rows) and applied when reading it.
-- read: order by o_totalprice desc, o_orderdate limit 100
select c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice, sum(l_quantity) as sum_qty
from customer, orders, lineitem,
  (select l_orderkey as big_orderkey from lineitem group by l_orderkey having sum(l_quantity) > 300) as big
where o_orderkey = big_orderkey and c_custkey = o_custkey and o_orderkey = l_orderkey
group by c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice
