-- Schema the allowed queries of policy_corpus.json run against. The
-- corpus targets PostgreSQL 17 (the grammar pg_query_go v6 parses):
-- JSON_TABLE needs 17, 0x/0o/0b and 1_000 literals need 16, and the XML
-- entries need a server built with libxml. Load it into a throwaway
-- database as its owner; the executor's tests then connect as a
-- SELECT-only role.
CREATE TABLE customers (
  id bigint PRIMARY KEY,
  name text NOT NULL,
  email text,
  country text,
  created_at timestamptz NOT NULL DEFAULT now(),
  account_manager_id bigint
);
CREATE TABLE orders (
  id bigint PRIMARY KEY,
  customer_id bigint REFERENCES customers (id),
  amount numeric(12, 2),
  status text,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE products (
  id bigint PRIMARY KEY,
  name text,
  category text,
  price numeric(12, 2),
  supplier_id bigint,
  tags text[]
);
CREATE TABLE order_items (order_id bigint, product_id bigint, qty int, price numeric(12, 2));
CREATE TABLE employees (id bigint PRIMARY KEY, name text, manager_id bigint, dept_id bigint, salary numeric);
CREATE TABLE events (id bigint, payload jsonb, at timestamptz);
CREATE TABLE categories (name text PRIMARY KEY);
CREATE TABLE suppliers (id bigint PRIMARY KEY, name text);
CREATE TABLE regions (country text PRIMARY KEY, region text);
CREATE TABLE departments (id bigint PRIMARY KEY, name text);
CREATE TABLE shipments (id bigint PRIMARY KEY, order_id bigint, warehouse_id bigint);
CREATE TABLE warehouses (id bigint PRIMARY KEY, name text);
CREATE TABLE payments (id bigint PRIMARY KEY, order_id bigint, state text);
CREATE SEQUENCE order_seq;

INSERT INTO customers (id, name, email, country, account_manager_id) VALUES
  (1, 'Ada', 'ada@example.com', 'DE', 1),
  (2, 'Bob', NULL, 'FR', 2),
  (3, 'Cy', 'cy@example.com', 'SE', NULL);
INSERT INTO orders (id, customer_id, amount, status) VALUES
  (1, 1, 120.00, 'paid'), (2, 1, 15.50, 'refunded'), (3, 2, 999.99, 'paid');
INSERT INTO products VALUES (1, 'Widget', 'tools', 9.99, 1, ARRAY['a', 'b']), (2, 'Gadget', 'toys', 19.99, 1, NULL);
INSERT INTO order_items VALUES (1, 1, 3, 9.99), (1, 2, 1, 19.99), (3, 2, 50, 19.99);
INSERT INTO employees VALUES (1, 'Eve', NULL, 1, 100), (2, 'Mal', 1, 1, 80);
INSERT INTO events VALUES (1, '{"kind": "a", "items": [{"n": 1, "label": "x"}]}', now());
INSERT INTO payments VALUES (1, 1, 'settled'), (2, 3, 'settled');
