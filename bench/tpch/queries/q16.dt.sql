-- Q16 as a dynamic table. Rewrites:
-- * `ps_suppkey not in (select s_suppkey from supplier where s_comment like '%Customer%Complaints%')` becomes an
--   anti join spelled as LEFT JOIN ... WHERE complaint_suppkey IS NULL (dtables has no IN subquery / anti join;
--   both keys are NOT NULL and s_suppkey is unique, so NOT IN's NULL rule never applies and no row repeats);
-- * the top-level ORDER BY is dropped (a dynamic table is a bag of rows) and applied when reading it.
-- read: order by supplier_cnt desc, p_brand, p_type, p_size
select p_brand, p_type, p_size, count(distinct ps_suppkey) as supplier_cnt
from partsupp
  join part on p_partkey = ps_partkey
  left join (select s_suppkey as complaint_suppkey from supplier where s_comment like '%Customer%Complaints%')
    as complaints on ps_suppkey = complaint_suppkey
where p_brand <> 'Brand#45' and p_type not like 'MEDIUM POLISHED%' and p_size in (49, 14, 23, 45, 19, 3, 36, 9)
  and complaint_suppkey is null
group by p_brand, p_type, p_size
