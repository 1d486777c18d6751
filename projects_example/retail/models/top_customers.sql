-- target_lag: 10 minutes
-- comment: the best customers of each region (window functions: refreshed in FULL mode)
SELECT region, customer, revenue, rank
FROM (
  SELECT region, customer, revenue, RANK() OVER (PARTITION BY region ORDER BY revenue DESC) AS rank
  FROM {{ ref('customer_revenue') }}
) ranked
WHERE rank <= {{ var('top_n') }}
