package sqlquery

import (
	"testing"

	pg "github.com/pganalyze/pg_query_go/v6"
)

// analyticsQuery is a ten-join reporting query of the kind a model writes:
// a CTE, ten joins, aggregates, a window, CASE, a subquery and ORDER BY.
const analyticsQuery = `WITH recent AS (
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
LIMIT 200`

// BenchmarkPrepare measures the whole policy path for analyticsQuery:
// parse, walk, LIMIT rewrite, deparse, second parse, second walk, tree
// comparison. The parse-only sub-benchmarks are the baseline it is built
// on: one pg_query.Parse of the same text, which Prepare does twice.
func BenchmarkPrepare(b *testing.B) {
	p, err := NewPolicy()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("prepare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.Prepare(analyticsQuery, 1000); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parse-only", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := pg.Parse(analyticsQuery); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("prepare-select-1", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.Prepare("SELECT 1", 1000); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parse-only-select-1", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := pg.Parse("SELECT 1"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("prepare-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := p.Prepare(analyticsQuery, 1000); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
