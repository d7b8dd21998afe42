package sqlquery

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseFunctionList(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  string
	}{
		{"app.f", []string{"app.f"}, ""},
		{"App.F, reporting.total_for", []string{"app.f", "reporting.total_for"}, ""},
		{`"App".f`, []string{`"App".f`}, ""},
		{`app."f,g"`, []string{`app."f,g"`}, ""},
		{`app."say ""hi"""`, []string{`app."say ""hi"""`}, ""},
		{"f", nil, "entry 1: is not schema-qualified"},
		{"a.b.c", nil, "entry 1: is not schema-qualified"},
		{"app.f,", nil, "entry 2: is not schema-qualified"},
		{"pg_catalog.ext_fn", []string{"pg_catalog.ext_fn"}, ""},
		{"app.f-g", nil, `entry 1: "f-g" is not an identifier; quote it`},
		{`app."f`, nil, "unterminated quoted identifier"},
		{"app.", nil, "expected schema.function"},
		{"app." + strings.Repeat("x", 64), nil, "is not a valid name"},
	}
	for _, tt := range tests {
		got, err := ParseFunctionList(tt.in)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("ParseFunctionList(%q) = %v", tt.in, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("ParseFunctionList(%q) = %v, %v; want an error containing %q", tt.in, got, err, tt.err)
		case tt.err == "" && !slices.Equal(got, tt.want):
			t.Errorf("ParseFunctionList(%q) = %q, want %q", tt.in, got, tt.want)
		}
		// What the list gives back reads back as itself.
		for _, s := range got {
			parts, err := parseQualified(s)
			if err != nil || sqlIdent(parts[0])+"."+sqlIdent(parts[1]) != s {
				t.Errorf("parseQualified(%q) = %q, %v; want it back", s, parts, err)
			}
		}
	}
}

// TestVetCache: a resolution is reused for the same search_path within
// vetTTL and looked up again after it, or for another search_path.
func TestVetCache(t *testing.T) {
	var c vetCache
	now := time.Now()
	k := vetKey{schemas: "{pg_catalog,public}", ref: FuncRef{Name: "f"}}
	c.store(k, vetEntry{refused: "public.f", at: now})
	if e, ok := c.lookup(k, now.Add(vetTTL/2)); !ok || e.refused != "public.f" {
		t.Errorf("lookup within the TTL = %+v, %v", e, ok)
	}
	if _, ok := c.lookup(k, now.Add(vetTTL+time.Second)); ok {
		t.Error("lookup after the TTL hit the cache")
	}
	other := k
	other.schemas = "{pg_catalog,evil}"
	if _, ok := c.lookup(other, now); ok {
		t.Error("lookup for another search_path hit the cache")
	}
	for i := range vetMaxEntries + 1 {
		c.store(vetKey{ref: FuncRef{Name: strings.Repeat("x", i%64+1), Schema: string(rune('a' + i%26))}}, vetEntry{at: now})
	}
	if n := len(c.entries); n > vetMaxEntries {
		t.Errorf("cache holds %d entries, want at most %d", n, vetMaxEntries)
	}
}
