//go:build linux

package sandboxfs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// BenchmarkRead4KiB times the whole tool path (schema validation, strict
// decode, resolution, fstat, read, UTF-8 check, result encoding) for a
// 4 KiB file, for each backend, against a naive os.ReadFile of the same
// file as the baseline: the ratio is the price of the sandbox and the
// protocol. Run it with
//
//	go test -run '^$' -bench Read4KiB -benchmem ./internal/tools/sandboxfs/
func BenchmarkRead4KiB(b *testing.B) {
	dir := b.TempDir()
	content := strings.Repeat("0123456789abcdef", 256)
	if err := os.WriteFile(filepath.Join(dir, "four.txt"), []byte(content), 0o644); err != nil {
		b.Fatal(err)
	}
	args := jsontext.Value(`{"relative_path":"four.txt"}`)
	ctx := context.Background()
	for _, bk := range backends {
		r, err := newReader(dir, 1<<20, config{backend: bk.b})
		if errors.Is(err, errNoOpenat2) {
			continue
		}
		if err != nil {
			b.Fatal(err)
		}
		b.Run("tool/"+bk.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				if _, err := r.Call(ctx, args); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "reads/s")
		})
		// Without the protocol: resolution, fstat, read and UTF-8 check.
		b.Run("read/"+bk.name, func(b *testing.B) {
			b.ReportAllocs()
			in := Input{RelativePath: "four.txt"}
			n := 0
			for b.Loop() {
				if _, err := r.read(ctx, in); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "reads/s")
		})
		b.Run("tool-parallel/"+bk.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(2) // with GOMAXPROCS ≥ 8, 16 calls in flight
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := r.Call(ctx, args); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
		})
		r.Close()
	}
	b.Run("baseline/os.ReadFile", func(b *testing.B) {
		b.ReportAllocs()
		name := filepath.Join(dir, "four.txt")
		n := 0
		for b.Loop() {
			if _, err := os.ReadFile(name); err != nil {
				b.Fatal(err)
			}
			n++
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "reads/s")
	})
}
