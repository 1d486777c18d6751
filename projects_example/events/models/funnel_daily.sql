-- target_lag: 1 minute
-- comment: per day, the users who reached each funnel stage and the conversion between stages
SELECT CAST(ts AS DATE) AS day,
       {{ users_who('view') }} AS viewed,
       {{ users_who('add_to_cart') }} AS added_to_cart,
       {{ users_who('checkout') }} AS checked_out,
       {{ users_who('purchase') }} AS purchased,
       {{ share(users_who('add_to_cart'), users_who('view')) }} AS view_to_cart,
       {{ share(users_who('checkout'), users_who('add_to_cart')) }} AS cart_to_checkout,
       {{ share(users_who('purchase'), users_who('checkout')) }} AS checkout_to_purchase,
       {{ share(users_who('purchase'), users_who('view')) }} AS conversion,
       SUM(CASE WHEN event_type = 'purchase' THEN amount END) AS revenue
FROM {{ ref('clicks') }}
GROUP BY CAST(ts AS DATE)
