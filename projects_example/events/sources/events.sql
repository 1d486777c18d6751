-- users: a small dimension, seeded from seeds/users.csv when the table is created.
CREATE TABLE users (user_id INT, country STRING, signup_date DATE, plan STRING);

-- clicks: the raw event stream, one row per event, fed through ingestion channels (never seeded).
-- session_id is assigned by the web client (a new one after 30 minutes of inactivity); it is NULL for clients
-- that block the session cookie. amount is the item price for add_to_cart and the order total for purchase.
CREATE TABLE clicks (
  user_id INT,
  session_id STRING,
  event_type STRING,            -- view | add_to_cart | checkout | purchase
  page STRING,
  ts TIMESTAMP,
  amount DECIMAL(10, 2)
);
