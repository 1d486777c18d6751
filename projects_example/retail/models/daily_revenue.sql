-- target_lag: 5 minutes
SELECT order_date, region, COUNT(*) AS lines, SUM(amount) AS revenue, AVG(amount) AS avg_line
FROM {{ ref('enriched_lines') }}
GROUP BY order_date, region
