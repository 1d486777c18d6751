CREATE TABLE customers (customer_id INT, name STRING, region STRING);
CREATE TABLE products (product_id INT, title STRING, category STRING, price DECIMAL(10, 2));
CREATE TABLE orders (order_id INT, customer_id INT, order_date DATE, status STRING);
CREATE TABLE order_lines (order_id INT, line_no INT, product_id INT, quantity INT, discount DECIMAL(4, 2));
