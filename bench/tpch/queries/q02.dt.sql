-- Q02 as a dynamic table. Rewrites:
-- * the correlated scalar subquery `ps_supplycost = (select min(ps_supplycost) ... where p_partkey = ps_partkey)`
--   becomes a join with the minimum cost per part, grouped by ps_partkey (dtables maintains GROUP BY, not scalar
--   subqueries). A part with no European supplier has no group, as the subquery gave NULL: same rows;
-- * the top-level ORDER BY and LIMIT are dropped (a dynamic table is a bag of rows) and applied when reading it.
-- read: order by s_acctbal desc, n_name, s_name, p_partkey limit 100
select s_acctbal, s_name, n_name, p_partkey, p_mfgr, s_address, s_phone, s_comment
from part, supplier, partsupp, nation, region,
  (select ps_partkey as min_partkey, min(ps_supplycost) as min_supplycost
   from partsupp, supplier, nation, region
   where s_suppkey = ps_suppkey and s_nationkey = n_nationkey and n_regionkey = r_regionkey and r_name = 'EUROPE'
   group by ps_partkey) as min_cost
where p_partkey = ps_partkey and s_suppkey = ps_suppkey and p_size = 15 and p_type like '%BRASS'
  and s_nationkey = n_nationkey and n_regionkey = r_regionkey and r_name = 'EUROPE'
  and p_partkey = min_partkey and ps_supplycost = min_supplycost
