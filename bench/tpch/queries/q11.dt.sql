-- Q11 as a dynamic table. Rewrites:
-- * the uncorrelated scalar subquery in HAVING (the threshold, 0.0001 of Germany's total stock value) becomes a
--   one-row aggregate joined to the per-part values, and HAVING becomes a WHERE on that join (dtables has no
--   scalar subqueries);
-- * the top-level ORDER BY is dropped (a dynamic table is a bag of rows) and applied when reading it.
-- read: order by value desc
select ps_partkey, value
from
  (select ps_partkey, sum(ps_supplycost * ps_availqty) as value
   from partsupp, supplier, nation
   where ps_suppkey = s_suppkey and s_nationkey = n_nationkey and n_name = 'GERMANY'
   group by ps_partkey) as by_part,
  (select sum(ps_supplycost * ps_availqty) * 0.0001 as threshold
   from partsupp, supplier, nation
   where ps_suppkey = s_suppkey and s_nationkey = n_nationkey and n_name = 'GERMANY') as total
where value > threshold
