package glob

import "testing"

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"*", "a.b", true},
		{"*.admin_*", "refund.admin_reset_key", true},
		{"*.admin_*", "a.b.admin_x", true},
		{"refund.*", "refundx.y", false},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"", "", true},
		{"", "a", false},
		{"a**", "a", true},
		{"?", "x", false},
		{"[a]", "a", false},
	} {
		if got := Match(tc.pattern, tc.name); got != tc.want {
			t.Errorf("Match(%q, %q) = %v", tc.pattern, tc.name, got)
		}
	}
}

// FuzzMatch: Match agrees with a simple recursive reading of the glob.
func FuzzMatch(f *testing.F) {
	f.Add("*.admin_*", "refund.admin_x")
	f.Add("a*b*c", "aXbYc")
	f.Add("**", "")
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if len(pattern) > 24 || len(name) > 24 {
			return
		}
		if got, want := Match(pattern, name), slowMatch(pattern, name); got != want {
			t.Fatalf("Match(%q, %q) = %v, want %v", pattern, name, got, want)
		}
	})
}

func slowMatch(p, n string) bool {
	if p == "" {
		return n == ""
	}
	if p[0] == '*' {
		for i := 0; i <= len(n); i++ {
			if slowMatch(p[1:], n[i:]) {
				return true
			}
		}
		return false
	}
	return n != "" && p[0] == n[0] && slowMatch(p[1:], n[1:])
}
