package policy

import (
	"strings"
	"testing"
)

// FuzzDecide: whatever a tool name's spelling, a principal without the
// admin role is never allowed a tool the admin rule matches, and the
// decision agrees with a case-folding reading of the pattern.
func FuzzDecide(f *testing.F) {
	for _, s := range []string{"refund.admin_reset_key", "REFUND.ADMIN_RESET_KEY", "refund.Admin_x", "a.b.admin_c",
		"refund.admin", "refund.ａdmin_x", "refund.admın_x", "x.admin_", "admin_x", ".admin_", "refund.get"} {
		f.Add(s, "viewer")
	}
	pol := mustCompile(f, seedRules)
	f.Fuzz(func(t *testing.T, name, role string) {
		p := Principal{Subject: "s", Roles: []string{role}}
		d := pol.Decide(p, Call{Qualified: name, Args: map[string]any{"amount": 1.0}})
		adminMatched := Match("*.admin_*", strings.ToLower(name))
		if adminMatched && role != "admin" && d.Allow {
			t.Fatalf("%q with role %q allowed: %+v", name, role, d)
		}
		if adminMatched && d.Rule != "admin-tools" {
			t.Fatalf("%q matches *.admin_* but was decided by %q", name, d.Rule)
		}
		if d.Allow && d.Reason != "" || !d.Allow && !d.NeedsArgs && d.Reason == "" {
			t.Fatalf("inconsistent decision %+v", d)
		}
	})
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
