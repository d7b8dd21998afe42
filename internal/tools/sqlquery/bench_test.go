package sqlquery

import (
	_ "embed"
	"os"
	"strings"
	"testing"
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"
	pgparser "github.com/pganalyze/pg_query_go/v6/parser"
	"google.golang.org/protobuf/proto"

	"github.com/mcp-bastion/bastion/internal/pgcluster/pgtest"
)

// analyticsQueryFile is a ten-join reporting query of the kind a model
// writes: a CTE, ten joins, aggregates, a window, CASE, a subquery and
// ORDER BY. bench/libpgquery times libpg_query's C parser on the same file.
//
//go:embed testdata/analytics_query.sql
var analyticsQueryFile string

// analyticsQuery is the query without the file's final newline.
var analyticsQuery = strings.TrimSpace(analyticsQueryFile)

// BenchmarkPrepare measures the whole policy path for analyticsQuery:
// parse, walk, deparse, second parse, second walk, tree comparison. The parse-only sub-benchmarks are the baseline it is built
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

// BenchmarkPrepareSteps times each step of Prepare on analyticsQuery
// alone, to show where its time goes. Prepare runs c-parse-protobuf,
// go-unmarshal and walk twice, encode twice, c-deparse and compare once.
// The c- steps are libpg_query; c-parse-json is not part of Prepare: it is
// the same C parser with libpg_query's JSON writer instead of its protobuf
// one, to separate the parser from the serialisation.
func BenchmarkPrepareSteps(b *testing.B) {
	p, err := NewPolicy()
	if err != nil {
		b.Fatal(err)
	}
	raw, err := pgparser.ParseToProtobuf(analyticsQuery)
	if err != nil {
		b.Fatal(err)
	}
	tree := &pg.ParseResult{}
	if err := proto.Unmarshal(raw, tree); err != nil {
		b.Fatal(err)
	}
	sel := tree.GetStmts()[0].GetStmt().GetSelectStmt()
	enc, err := encode(tree)
	if err != nil {
		b.Fatal(err)
	}
	// What compare is given in Prepare: the checked tree and the tree of
	// the deparsed text, whose locations differ.
	out, err := pgparser.DeparseFromProtobuf(enc)
	if err != nil {
		b.Fatal(err)
	}
	enc2 := mustEncode(b, out)
	md := tree.ProtoReflect().Descriptor()
	steps := []struct {
		name string
		fn   func() error
	}{
		{"c-parse-protobuf", func() error { _, err := pgparser.ParseToProtobuf(analyticsQuery); return err }},
		{"c-parse-json", func() error { _, err := pgparser.ParseToJSON(analyticsQuery); return err }},
		{"go-unmarshal", func() error { return proto.Unmarshal(raw, &pg.ParseResult{}) }},
		{"walk", func() error {
			w := walker{p: p}
			if prob := w.walk(sel.ProtoReflect(), 1); prob != nil {
				return prob
			}
			return nil
		}},
		{"encode", func() error { _, err := encode(tree); return err }},
		{"c-deparse", func() error { _, err := pgparser.DeparseFromProtobuf(enc); return err }},
		{"compare", func() error {
			if !sameEncoding(md, enc, enc2) {
				b.Fatal("the deparsed query parses to a different tree")
			}
			return nil
		}},
	}
	for _, st := range steps {
		b.Run(st.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := st.fn(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRunCatalogCheck measures what the catalog check adds to a
// repeated query once its resolutions are cached, on a fixture database,
// for the ten-join query and a point lookup:
//
//   - paired: Executor.Run of the query with the functions Prepare listed
//     and of the same Prepared stripped of them, alternately in one loop,
//     so that drift in machine load hits both alike; it reports each
//     one's time per run and their ratio (vetted-vs-bare);
//   - vet-cached: the catalog check alone, its cache warm;
//   - parse-only: one bare pg_query.Parse of the same text, the baseline
//     BenchmarkPrepare reports Prepare against.
func BenchmarkRunCatalogCheck(b *testing.B) {
	db := pgtest.NewDB(b)
	fixture, err := os.ReadFile("testdata/policy_fixture.sql")
	if err != nil {
		b.Fatal(err)
	}
	db.Exec(b, string(fixture)+"GRANT SELECT ON ALL TABLES IN SCHEMA public TO PUBLIC;")
	ex, err := NewExecutor(db.DSN(), ExecOptions{MaxConns: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ex.Close() })
	p, err := NewPolicy()
	if err != nil {
		b.Fatal(err)
	}
	for _, q := range []struct{ name, sql string }{
		{"ten-join", analyticsQuery},
		{"point", "SELECT c.name, lower(c.email), upper(c.country) FROM customers c WHERE c.id = 1"},
	} {
		prep, err := p.Prepare(q.sql, 1000)
		if err != nil {
			b.Fatal(err)
		}
		if len(prep.Functions) == 0 {
			b.Fatal("the query names no function: nothing to vet")
		}
		bare := *prep
		bare.Functions = nil
		b.Run(q.name+"/paired", func(b *testing.B) {
			if _, err := ex.Run(b.Context(), prep); err != nil { // warms the cache
				b.Fatal(err)
			}
			var withCheck, without time.Duration
			for b.Loop() {
				t0 := time.Now()
				if _, err := ex.Run(b.Context(), &bare); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if _, err := ex.Run(b.Context(), prep); err != nil {
					b.Fatal(err)
				}
				without += t1.Sub(t0)
				withCheck += time.Since(t1)
			}
			n := float64(b.N)
			b.ReportMetric(float64(without.Nanoseconds())/n, "bare-ns/run")
			b.ReportMetric(float64(withCheck.Nanoseconds())/n, "vetted-ns/run")
			b.ReportMetric(float64(withCheck)/float64(without), "vetted-vs-bare")
		})
		b.Run(q.name+"/vet-cached", func(b *testing.B) {
			conn, err := ex.pool.Acquire(b.Context())
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Release()
			const schemas = "{pg_catalog,public}"
			if err := ex.vet(b.Context(), conn.Conn(), schemas, prep.Functions); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := ex.vet(b.Context(), conn.Conn(), schemas, prep.Functions); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(q.name+"/parse-only", func(b *testing.B) {
			for b.Loop() {
				if _, err := pg.Parse(q.sql); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
