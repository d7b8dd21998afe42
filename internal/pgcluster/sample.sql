-- Sample dataset: the reporting data of a small online shop.
--
-- Small enough to read whole (60 rows), deterministic (no now(), no
-- random()), and chosen to exercise the types that are easy to get wrong on
-- the way to JSON: numeric(12,2), bigint beyond 2^53 (and negative), uuid,
-- inet (v4, v6, with a netmask), timestamptz with microseconds, interval,
-- jsonb, text[], bytea, non-ASCII and quoted text, and NULLs in most
-- columns that allow them.
--
-- Loaded by pgcluster.Cluster.LoadSample, which also grants the read-only
-- login role access. By hand: psql -v ON_ERROR_STOP=1 -1 -f sample.sql
-- There is no BEGIN/COMMIT here so that the loader can wrap it in its own
-- transaction.

CREATE SCHEMA reporting;
COMMENT ON SCHEMA reporting IS 'Sample shop data for demos and tests';

CREATE SEQUENCE reporting.invoice_no_seq START WITH 100001;
COMMENT ON SEQUENCE reporting.invoice_no_seq IS 'Invoice numbers, one per order in insertion order';

CREATE TABLE reporting.customers (
    customer_id       integer PRIMARY KEY,
    public_id         uuid NOT NULL UNIQUE,
    full_name         text NOT NULL,
    email             text UNIQUE,          -- NULL: never gave one
    country_code      char(2) NOT NULL,
    signup_ip         inet,                 -- NULL: signed up in a shop
    legacy_account_no bigint,               -- from the old system; some do not fit a float64
    created_at        timestamptz NOT NULL
);
COMMENT ON TABLE reporting.customers IS 'People who signed up; one (Hana) has never ordered';

CREATE TABLE reporting.products (
    product_id      integer PRIMARY KEY,
    sku             text NOT NULL UNIQUE,
    name            text NOT NULL,
    category        text NOT NULL,
    unit_price      numeric(12,2) NOT NULL CHECK (unit_price >= 0),  -- current list price
    tags            text[] NOT NULL DEFAULT '{}',
    attributes      jsonb NOT NULL DEFAULT '{}',
    weight_grams    integer,                -- NULL for goods that are not shipped
    thumbnail       bytea,                  -- leading bytes of the image; NULL when none
    discontinued_at timestamptz             -- NULL while on sale
);
COMMENT ON TABLE reporting.products IS 'Catalogue with current list prices';

CREATE TABLE reporting.orders (
    order_id      bigint PRIMARY KEY,
    invoice_no    bigint NOT NULL UNIQUE DEFAULT nextval('reporting.invoice_no_seq'),
    customer_id   integer NOT NULL REFERENCES reporting.customers,
    status        text NOT NULL
                  CHECK (status IN ('pending', 'paid', 'shipped', 'delivered', 'cancelled', 'refunded')),
    ordered_at    timestamptz NOT NULL,
    shipped_at    timestamptz,              -- NULL until shipped
    delivery_time interval,                 -- from shipping to delivery; NULL until delivered
    note          text
);
ALTER SEQUENCE reporting.invoice_no_seq OWNED BY reporting.orders.invoice_no;
COMMENT ON TABLE reporting.orders IS 'One row per order; totals are in the order_totals view';

CREATE TABLE reporting.order_items (
    order_id     bigint NOT NULL REFERENCES reporting.orders,
    line_no      smallint NOT NULL,
    product_id   integer NOT NULL REFERENCES reporting.products,
    quantity     integer NOT NULL CHECK (quantity > 0),
    unit_price   numeric(12,2) NOT NULL,    -- price when ordered, may differ from the list price
    discount_pct numeric(5,2),              -- NULL: no discount
    PRIMARY KEY (order_id, line_no)
);
COMMENT ON TABLE reporting.order_items IS 'Order lines';

CREATE VIEW reporting.order_totals AS
SELECT o.order_id,
       o.customer_id,
       o.status,
       o.ordered_at,
       count(i.line_no) AS line_count,
       coalesce(sum(round(i.quantity * i.unit_price * (1 - coalesce(i.discount_pct, 0) / 100), 2)), 0)::numeric(12,2) AS total
FROM reporting.orders o
LEFT JOIN reporting.order_items i USING (order_id)
GROUP BY o.order_id;
COMMENT ON VIEW reporting.order_totals IS 'Order totals after line discounts';

INSERT INTO reporting.customers
    (customer_id, public_id, full_name, email, country_code, signup_ip, legacy_account_no, created_at)
VALUES
    (1, '3f2504e0-4f89-41d3-9a0c-0305e82c3301', 'Ana Souza',        'ana.souza@example.com',    'BR', '203.0.113.7',      9007199254740993,    '2024-01-08 09:12:00+00'),
    (2, '9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d', 'Ben Carter',       'ben.carter@example.org',   'US', '2001:db8::17',     4611686018427387904, '2024-01-19 17:45:30+00'),
    (3, '1b4e28ba-2fa1-41d2-883f-0016d3cca427', 'Chloé Martin',     'chloe.martin@example.net', 'FR', '198.51.100.23',    NULL,                '2024-02-02 08:00:00+00'),
    (4, '6fa459ea-ee8a-4ca4-894e-db77e160355e', 'Dmitri Volkov',    NULL,                       'DE', NULL,               1234567,             '2024-02-14 21:30:00+00'),
    (5, '16fd2706-8baf-433b-82eb-8c7fada847da', 'Emeka Okafor',     'emeka@example.com',        'NG', '192.0.2.200',      9223372036854775807, '2024-03-01 06:05:00+00'),
    (6, '886313e1-3b8a-4372-9b90-0c9aee199e5d', 'Fatima Zahra',     'fatima.z@example.com',     'MA', '203.0.113.99',     NULL,                '2024-03-22 12:00:00+00'),
    (7, 'c2d29867-3d0b-4497-9a1f-5b5a6f0c3a11', 'Gustav Lindqvist', 'gustav@example.org',       'SE', '198.51.100.42/24', 42,                  '2024-04-30 15:20:45+00'),
    (8, 'e4eaaaf2-d142-41a6-9a3c-2f9b5f6f2d8c', 'Hana Kobayashi',   'hana.k@example.com',       'JP', NULL,               -9007199254740993,   '2024-06-30 23:59:59.123456+00');

INSERT INTO reporting.products
    (product_id, sku, name, category, unit_price, tags, attributes, weight_grams, thumbnail, discontinued_at)
VALUES
    (1,  'KB-101',     'Mechanical keyboard',     'hardware',    89.90,   '{keyboard,usb}',                '{"layout": "ISO", "switch": "brown", "backlight": true}',  1150, '\x89504e470d0a1a0a', NULL),
    (2,  'MS-220',     'Wireless mouse',          'hardware',    24.50,   '{mouse,wireless}',              '{"dpi": [800, 1600, 3200], "battery": "AA"}',              95,   NULL,                 NULL),
    (3,  'MN-270',     'Monitor 27"',             'hardware',    329.00,  '{display}',                     '{"resolution": "2560x1440", "refresh_hz": 144}',           5400, '\xffd8ffe000104a46', NULL),
    (4,  'CB-USB-C',   'USB-C cable, 2 m',        'accessories', 9.99,    '{cable,usb}',                   '{"length_m": 2.0, "watts": 100}',                          60,   NULL,                 NULL),
    (5,  'DK-900',     'Docking station',         'hardware',    189.00,  '{dock,usb}',                    '{"ports": {"usb_a": 3, "usb_c": 2, "hdmi": 2}}',           480,  NULL,                 '2024-09-01 00:00:00+00'),
    (6,  'SW-PRO-1Y',  'Pro licence, 1 year',     'software',    119.00,  '{licence,subscription}',        '{"seats": 1, "renewal": "yearly"}',                        NULL, NULL,                 NULL),
    (7,  'SW-TEAM-1Y', 'Team licence, 1 year',    'software',    1499.00, '{licence,subscription,team}',   '{"seats": 10, "renewal": "yearly", "support": null}',      NULL, NULL,                 NULL),
    (8,  'BK-GO',      'Book: Go concurrency',    'books',       39.95,   '{}',                            '{}',                                                       620,  NULL,                 NULL),
    (9,  'GC-50',      'Gift card €50',           'gift',        50.00,   '{gift}',                        '{"currency": "EUR"}',                                      NULL, NULL,                 NULL),
    (10, 'LB-STICKER', 'Laptop sticker',          'accessories', 0.10,    '{sticker,"with space"}',        '{"size_mm": [70, 50]}',                                    2,    '\x00',               NULL);

-- invoice_no comes from the sequence, so insertion order fixes it.
INSERT INTO reporting.orders
    (order_id, customer_id, status, ordered_at, shipped_at, delivery_time, note)
VALUES
    (1001, 1, 'delivered', '2024-02-01 10:15:00+00', '2024-02-02 08:00:00+00', '2 days 03:30:00', NULL),
    (1002, 2, 'delivered', '2024-02-03 14:20:00+00', '2024-02-05 09:10:00+00', '1 day 06:00:00',  'Leave at the back door'),
    (1003, 1, 'refunded',  '2024-02-10 19:05:00+00', '2024-02-11 07:45:00+00', '3 days',          'Arrived damaged; refunded in full'),
    (1004, 3, 'delivered', '2024-03-01 09:00:00+00', '2024-03-01 16:30:00+00', '20:15:00',        NULL),
    (1005, 4, 'cancelled', '2024-03-05 11:11:11+00', NULL,                     NULL,              'Customer changed their mind'),
    (1006, 5, 'delivered', '2024-03-18 08:30:00+00', '2024-03-19 10:00:00+00', '5 days 02:00:00', NULL),
    (1007, 2, 'shipped',   '2024-04-02 13:00:00+00', '2024-04-03 09:00:00+00', NULL,              NULL),
    (1008, 6, 'paid',      '2024-04-20 22:45:00+00', NULL,                     NULL,              NULL),
    (1009, 7, 'delivered', '2024-05-06 07:15:00+00', '2024-05-06 15:00:00+00', '1 day',           'Gift wrap: "Happy birthday!"'),
    (1010, 3, 'delivered', '2024-05-21 12:00:00+00', '2024-05-22 12:00:00+00', '2 days',          NULL),
    (1011, 1, 'paid',      '2024-06-11 16:40:00+00', NULL,                     NULL,              NULL),
    (1012, 5, 'pending',   '2024-06-28 23:59:00+00', NULL,                     NULL,              'Awaiting bank transfer'),
    (1013, 6, 'shipped',   '2024-07-02 06:05:00+00', '2024-07-03 06:05:00+00', NULL,              NULL),
    (1014, 7, 'delivered', '2024-07-15 10:30:00+00', '2024-07-15 18:00:00+00', '1 day 12:00:00',  NULL),
    (1015, 2, 'pending',   '2024-07-31 20:00:00+00', NULL,                     NULL,              NULL);

INSERT INTO reporting.order_items
    (order_id, line_no, product_id, quantity, unit_price, discount_pct)
VALUES
    (1001, 1, 1,  1,  89.90,   NULL),
    (1001, 2, 4,  2,  9.99,    NULL),
    (1002, 1, 3,  1,  329.00,  10.00),
    (1002, 2, 2,  1,  24.50,   NULL),
    (1003, 1, 5,  1,  189.00,  NULL),
    (1004, 1, 6,  1,  119.00,  NULL),
    (1005, 1, 7,  1,  1499.00, 15.00),
    (1006, 1, 1,  2,  89.90,   NULL),
    (1006, 2, 2,  2,  24.50,   NULL),
    (1006, 3, 10, 5,  0.10,    NULL),
    (1007, 1, 8,  3,  39.95,   NULL),
    (1008, 1, 9,  2,  50.00,   NULL),
    (1008, 2, 10, 3,  0.10,    NULL),
    (1009, 1, 3,  2,  319.00,  NULL),
    (1009, 2, 4,  4,  9.99,    5.00),
    (1010, 1, 7,  1,  1499.00, 20.00),
    (1010, 2, 6,  2,  119.00,  NULL),
    (1011, 1, 2,  1,  24.50,   NULL),
    (1011, 2, 4,  1,  9.99,    NULL),
    (1011, 3, 10, 10, 0.10,    NULL),
    (1012, 1, 5,  1,  189.00,  NULL),
    (1013, 1, 1,  1,  84.90,   NULL),
    (1013, 2, 8,  1,  39.95,   NULL),
    (1014, 1, 9,  1,  50.00,   NULL),
    (1015, 1, 3,  1,  329.00,  NULL),
    (1015, 2, 1,  1,  89.90,   NULL),
    (1015, 3, 2,  1,  24.50,   NULL);
