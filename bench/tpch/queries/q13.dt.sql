-- Q13 as a dynamic table. Rewrite: the top-level ORDER BY is dropped (a dynamic table is a
-- bag of rows) and applied when reading it (the `read:` line).
-- read: order by custdist desc, c_count desc
select c_count, count(*) as custdist
from (
  select c_custkey, count(o_orderkey) as c_count
  from customer left outer join orders on c_custkey = o_custkey and o_comment not like '%special%requests%'
  group by c_custkey
) as c_orders
group by c_count
