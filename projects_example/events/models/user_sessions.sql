-- target_lag: DOWNSTREAM
-- comment: one row per session of a user, with its span, event counts and revenue
--
-- A session is the session_id the web client puts on each event. Cutting sessions here at 30-minute gaps would
-- need LAG(ts) OVER (PARTITION BY user_id ORDER BY ts), a window function, which dtables refreshes only in FULL
-- mode (every refresh would re-read the whole click history). Grouping by a key each event already carries keeps
-- this table INCREMENTAL. Events without a session id (the cookie is blocked) fall back to one session per user
-- and clock hour, a key that is also computed from the event alone.
SELECT user_id,
       COALESCE(session_id, CONCAT('hour-', date_format(ts, 'yyyy-MM-dd-HH'))) AS session_key,
       MIN(ts) AS started_at,
       MAX(ts) AS ended_at,
       COUNT(*) AS events,
       SUM(CASE WHEN event_type = 'view' THEN 1 ELSE 0 END) AS page_views,
       SUM(CASE WHEN event_type = 'purchase' THEN 1 ELSE 0 END) AS purchases,
       SUM(CASE WHEN event_type = 'purchase' THEN amount END) AS revenue
FROM {{ ref('clicks') }}
GROUP BY user_id, COALESCE(session_id, CONCAT('hour-', date_format(ts, 'yyyy-MM-dd-HH')))
