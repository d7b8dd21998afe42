package guard

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// largeArgs returns a realistic but busy arguments object of a few
// kilobytes: long SQL, escapes, non-ASCII text, nesting and arrays.
func largeArgs() []byte {
	var b strings.Builder
	b.WriteString(`{"query":"`)
	for i := range 40 {
		fmt.Fprintf(&b, `SELECT id, name, \"created_at\" FROM orders_%d WHERE status = 'open' AND total > %d\n`, i, i*10)
	}
	b.WriteString(`","max_rows":1000,"encoding":"utf-8","options":{"timeout_ms":30000,"explain":false,`)
	b.WriteString(`"filters":{"region":{"in":["eu-west","us-east","ap-south"]},"note":"café \u00e9t\u00e9 日本語 😀"}},`)
	b.WriteString(`"tags":[`)
	for i := range 200 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"tag_%d","weight":%d.5,"enabled":true,"parent":null}`, i, i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

func BenchmarkSanitize(b *testing.B) {
	inputs := []struct {
		name string
		args []byte
	}{
		{"small", []byte(`{"query":"SELECT 1","max_rows":10}`)},
		{"large", largeArgs()},
	}
	lim := DefaultLimits()
	for _, in := range inputs {
		if err := Sanitize(in.args, lim); err != nil {
			b.Fatalf("%s: Sanitize() = %v", in.name, err)
		}
		b.Run(in.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(in.args)))
			for b.Loop() {
				if err := Sanitize(in.args, lim); err != nil {
					b.Fatal(err)
				}
			}
		})
		// The naive reference of the fuzz test, as a baseline in the same
		// run: decode to a tree, then judge.
		b.Run(in.name+"/naive", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(in.args)))
			for b.Loop() {
				if !naiveSanitize(in.args, lim) {
					b.Fatal("reference refused")
				}
			}
		})
	}
}

// BenchmarkLimiter measures acquire and release on the default 16 slots
// with 16 callers per CPU competing, so the queue path is exercised too.
func BenchmarkLimiter(b *testing.B) {
	l := NewLimiter(16, 5*time.Second)
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		ctx := b.Context()
		for pb.Next() {
			release, err := l.Acquire(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			release()
		}
	})
}
