-- Q20 as a dynamic table. Rewrites (dtables has no IN subqueries and no correlated scalar subqueries):
-- * `ps_partkey in (select p_partkey from part where p_name like 'forest%')` becomes a join with those parts
--   (p_partkey is unique);
-- * `ps_availqty > (select 0.5 * sum(l_quantity) from lineitem where l_partkey = ps_partkey and l_suppkey =
--   ps_suppkey and <1994>)` becomes a join with 0.5 * SUM(l_quantity) grouped by (l_partkey, l_suppkey); a pair
--   with no 1994 shipment has no group, as the subquery gave NULL and the comparison was not true;
-- * `s_suppkey in (...)` becomes a join with the DISTINCT qualifying supplier keys;
-- * the top-level ORDER BY is dropped (a dynamic table is a bag of rows) and applied when reading it.
-- read: order by s_name
select s_name, s_address
from supplier, nation,
  (select distinct ps_suppkey as avail_suppkey
   from partsupp,
     (select p_partkey as forest_partkey from part where p_name like 'forest%') as forest,
     (select l_partkey as agg_partkey, l_suppkey as agg_suppkey, 0.5 * sum(l_quantity) as half_qty
      from lineitem
      where l_shipdate >= date '1994-01-01' and l_shipdate < date '1994-01-01' + interval '1' year
      group by l_partkey, l_suppkey) as shipped
   where ps_partkey = forest_partkey and ps_partkey = agg_partkey and ps_suppkey = agg_suppkey
     and ps_availqty > half_qty) as avail
where s_suppkey = avail_suppkey and s_nationkey = n_nationkey and n_name = 'CANADA'
