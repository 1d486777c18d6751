-- target_lag: 10 minutes
-- comment: the best customers of each region (a window function: the regions whose customers changed are ranked again)
SELECT region, customer, revenue, rank
FROM (
  SELECT region, customer, revenue, RANK() OVER (PARTITION BY region ORDER BY revenue DESC) AS rank
  FROM {{ ref('customer_revenue') }}
) ranked
WHERE rank <= {{ var('top_n') }}
