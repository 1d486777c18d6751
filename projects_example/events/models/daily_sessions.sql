-- target_lag: 5 minutes
-- comment: per day (of the session start) and country, sessions, bounces, buying sessions and revenue
SELECT CAST(s.started_at AS DATE) AS day,
       u.country,
       COUNT(*) AS sessions,
       SUM(CASE WHEN s.page_views <= {{ var('bounce_max_views') }} AND s.purchases = 0 THEN 1 ELSE 0 END) AS bounces,
       SUM(CASE WHEN s.purchases > 0 THEN 1 ELSE 0 END) AS buying_sessions,
       SUM(s.revenue) AS revenue,
       AVG(s.events) AS avg_events
FROM {{ ref('user_sessions') }} AS s
JOIN {{ ref('users') }} AS u ON s.user_id = u.user_id
GROUP BY CAST(s.started_at AS DATE), u.country
