-- Q22 as a dynamic table. Rewrites (dtables has no scalar subqueries and no NOT EXISTS):
-- * the uncorrelated scalar subquery (average positive balance of the seven country codes) becomes a CROSS JOIN
--   with that one-row aggregate;
-- * `not exists (select * from orders where o_custkey = c_custkey)` becomes an anti join spelled as LEFT JOIN
--   with the DISTINCT ordering customers ... WHERE o_custkey IS NULL;
-- * the top-level ORDER BY is dropped (a dynamic table is a bag of rows) and applied when reading it.
-- read: order by cntrycode
select cntrycode, count(*) as numcust, sum(c_acctbal) as totacctbal
from (
  select substring(c_phone, 1, 2) as cntrycode, c_acctbal
  from customer
    left join (select distinct o_custkey from orders) as ordering on c_custkey = o_custkey
    cross join (select avg(c_acctbal) as avg_acctbal from customer
                where c_acctbal > 0.00 and substring(c_phone, 1, 2) in ('13', '31', '23', '29', '30', '18', '17'))
      as average
  where substring(c_phone, 1, 2) in ('13', '31', '23', '29', '30', '18', '17')
    and c_acctbal > avg_acctbal and o_custkey is null
) as custsale
group by cntrycode
