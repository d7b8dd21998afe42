package sqlquery

import (
	_ "embed"
	"strings"
	"testing"

	pg "github.com/pganalyze/pg_query_go/v6"
	pgparser "github.com/pganalyze/pg_query_go/v6/parser"
	"google.golang.org/protobuf/proto"
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
			if prob := p.walk(sel.ProtoReflect(), 1); prob != nil {
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
