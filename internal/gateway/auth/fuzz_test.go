package auth

import (
	"strings"
	"testing"
)

// FuzzParseBearer: whatever the header, an accepted token is a token68
// that the header ends with, its scheme is Bearer in some case, and a
// refusal says whether a token was presented (only an empty header
// presents none).
func FuzzParseBearer(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bEaReR a.b-c", "Bearer  x==", "Basic abc", "Bearer", "Bearer a b", "", "Bearer \u00e9", "Bearer =", "bearer\tabc"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		tok, err := ParseBearer(h)
		if err != nil {
			e, ok := err.(*Error)
			if !ok || e.Presented != (h != "") || strings.Contains(e.Reason, h) && h != "" && len(h) > 8 {
				t.Fatalf("ParseBearer(%q): %v", h, err)
			}
			return
		}
		if !token68(tok) || !strings.HasSuffix(h, " "+tok) || !strings.EqualFold(h[:6], "Bearer") {
			t.Fatalf("ParseBearer(%q) = %q", h, tok)
		}
	})
}
