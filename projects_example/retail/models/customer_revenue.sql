-- target_lag: 10 minutes
SELECT customer_id, customer, region, SUM(amount) AS revenue, COUNT(DISTINCT order_id) AS orders
FROM {{ ref('enriched_lines') }}
GROUP BY customer_id, customer, region
