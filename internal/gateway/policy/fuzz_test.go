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
