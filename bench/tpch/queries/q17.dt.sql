-- Q17 as a dynamic table. Rewrite: the correlated scalar subquery
-- `l_quantity < (select 0.2 * avg(l_quantity) from lineitem where l_partkey = p_partkey)` becomes a join with
-- 0.2 * AVG(l_quantity) grouped by l_partkey (the classic decorrelation; dtables has no scalar subqueries).
select sum(l_extendedprice) / 7.0 as avg_yearly
from lineitem, part,
  (select l_partkey as agg_partkey, 0.2 * avg(l_quantity) as avg_qty from lineitem group by l_partkey) as part_avg
where p_partkey = l_partkey and p_brand = 'Brand#23' and p_container = 'MED BOX'
  and agg_partkey = p_partkey and l_quantity < avg_qty
