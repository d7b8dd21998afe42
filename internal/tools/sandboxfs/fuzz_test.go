//go:build linux

package sandboxfs

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/mcp-bastion/bastion/internal/problem"
)

// FuzzResolve feeds arbitrary paths, including bytes JSON could never
// carry, straight to the read path of both backends over the corpus
// fixture. Invariants: no panic; the outside marker never comes back; a
// path that is served is relative and free of NUL, control and bidi
// characters; a refusal is a problem that carries neither the marker nor a
// host path unless the caller's own path did.
func FuzzResolve(f *testing.F) {
	fx := newFixture(f)
	for _, c := range corpus(fx) {
		if c.raw == "" {
			f.Add(c.path)
		}
	}
	readers := []*Reader{fx.reader(f, backendOpenat2), fx.reader(f, backendOSRoot)}
	f.Fuzz(func(t *testing.T, path string) {
		for _, r := range readers {
			// base64 so that every byte a file holds would come back.
			out, err := r.read(context.Background(), Input{RelativePath: path, Encoding: EncodingBase64})
			if err != nil {
				var p *problem.Problem
				if !errors.As(err, &p) {
					t.Fatalf("%s: %q: internal error %v", r.Mechanism(), path, err)
				}
				visible := err.Error()
				if strings.Contains(visible, fx.marker) && !strings.Contains(path, fx.marker) {
					t.Fatalf("%s: %q: problem carries the marker: %s", r.Mechanism(), path, visible)
				}
				if strings.Contains(visible, fx.base) && !strings.Contains(path, fx.base) {
					t.Fatalf("%s: %q: problem carries a host path: %s", r.Mechanism(), path, visible)
				}
				continue
			}
			content, err := base64.StdEncoding.DecodeString(out.Content)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(content), fx.marker) {
				t.Fatalf("%s: %q: returned the outside marker", r.Mechanism(), path)
			}
			if !utf8.ValidString(path) || strings.HasPrefix(path, "/") {
				t.Fatalf("%s: %q: served a path that is not relative UTF-8", r.Mechanism(), path)
			}
			for _, c := range path {
				if c == 0 || unicode.IsControl(c) || unicode.Is(unicode.Bidi_Control, c) {
					t.Fatalf("%s: %q: served a path with U+%04X", r.Mechanism(), path, c)
				}
			}
		}
	})
}
