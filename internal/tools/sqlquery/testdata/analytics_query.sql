WITH recent AS (
  SELECT o.id, o.customer_id, o.amount, o.created_at
  FROM orders o
  WHERE o.created_at >= now() - interval '90 days' AND o.status <> 'cancelled'
)
SELECT c.country,
       p.category,
       date_trunc('month', r.created_at) AS month,
       count(DISTINCT r.id) AS orders,
       sum(oi.qty * oi.price) AS revenue,
       avg(r.amount) FILTER (WHERE r.amount > 0) AS avg_order,
       rank() OVER (PARTITION BY c.country ORDER BY sum(oi.qty * oi.price) DESC) AS country_rank,
       CASE WHEN sum(oi.qty) > 100 THEN 'bulk' ELSE 'retail' END AS kind
FROM recent r
JOIN customers c ON c.id = r.customer_id
JOIN order_items oi ON oi.order_id = r.id
JOIN products p ON p.id = oi.product_id
LEFT JOIN categories cat ON cat.name = p.category
LEFT JOIN suppliers s ON s.id = p.supplier_id
LEFT JOIN regions rg ON rg.country = c.country
LEFT JOIN employees e ON e.id = c.account_manager_id
LEFT JOIN departments d ON d.id = e.dept_id
LEFT JOIN shipments sh ON sh.order_id = r.id
LEFT JOIN warehouses w ON w.id = sh.warehouse_id
WHERE c.country IN ('DE', 'FR', 'NL', 'SE')
  AND p.price BETWEEN 1 AND 10000
  AND EXISTS (SELECT 1 FROM payments pay WHERE pay.order_id = r.id AND pay.state = 'settled')
GROUP BY c.country, p.category, date_trunc('month', r.created_at)
HAVING sum(oi.qty * oi.price) > 1000
ORDER BY revenue DESC, c.country
LIMIT 200
