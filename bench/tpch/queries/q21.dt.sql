-- Q21 as a dynamic table. Rewrites (dtables has no EXISTS / NOT EXISTS):
-- * per order, count the distinct suppliers and the distinct suppliers with a late line. For a late line l1,
--   `exists (l2 of the same order, other supplier)` holds iff the order has more than one supplier, and
--   `not exists (l3 of the same order, other supplier, late)` holds iff l1's supplier is the only late one,
--   i.e. the order has exactly one late supplier (l1's own). Both become a join with that per-order aggregate;
-- * the top-level ORDER BY and LIMIT are dropped (a dynamic table is a bag of rows) and applied when reading it.
-- read: order by numwait desc, s_name limit 100
select s_name, count(*) as numwait
from supplier, lineitem l1, orders, nation,
  (select l_orderkey as agg_orderkey, count(distinct l_suppkey) as n_supp,
          count(distinct case when l_receiptdate > l_commitdate then l_suppkey end) as n_late_supp
   from lineitem group by l_orderkey) as per_order
where s_suppkey = l1.l_suppkey and o_orderkey = l1.l_orderkey and o_orderstatus = 'F'
  and l1.l_receiptdate > l1.l_commitdate and agg_orderkey = l1.l_orderkey and n_supp > 1 and n_late_supp = 1
  and s_nationkey = n_nationkey and n_name = 'SAUDI ARABIA'
group by s_name
