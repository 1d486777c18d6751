-- Q15 as a dynamic table (the spec's view revenue0 is a CTE, as in most engines). Rewrites:
-- * the scalar subquery `total_revenue = (select max(total_revenue) from revenue0)` becomes a join with the
--   one-row maximum (dtables has no scalar subqueries);
-- * the top-level ORDER BY is dropped (a dynamic table is a bag of rows) and applied when reading it.
-- read: order by s_suppkey
with revenue0 as (
  select l_suppkey as supplier_no, sum(l_extendedprice * (1 - l_discount)) as total_revenue
  from lineitem
  where l_shipdate >= date '1996-01-01' and l_shipdate < date '1996-01-01' + interval '3' month
  group by l_suppkey)
select s_suppkey, s_name, s_address, s_phone, total_revenue
from supplier, revenue0, (select max(total_revenue) as max_revenue from revenue0) as top
where s_suppkey = supplier_no and total_revenue = max_revenue
