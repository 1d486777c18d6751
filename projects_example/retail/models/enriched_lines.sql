-- target_lag: DOWNSTREAM
-- comment: one row per order line with its customer, region and amount
SELECT l.order_id, l.line_no, o.order_date, o.status, c.customer_id, c.name AS customer, c.region,
       p.category, l.quantity, {{ line_amount('p.price', 'l.quantity', 'l.discount') }} AS amount
FROM {{ ref('order_lines') }} AS l
JOIN {{ ref('orders') }} AS o ON l.order_id = o.order_id
JOIN {{ ref('customers') }} AS c ON o.customer_id = c.customer_id
JOIN {{ ref('products') }} AS p ON l.product_id = p.product_id
WHERE o.status <> 'CANCELLED'
