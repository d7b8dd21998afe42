package policy

import "testing"

// TestResourceHalves: a resource pattern's server half matches the
// server name alone and its URI half the URI alone, so a `*` in the
// server half never crosses the ':' into the URI (a URI may hold ':'
// anywhere, a server name never does).
func TestResourceHalves(t *testing.T) {
	pol := mustCompile(t, []Rule{
		{ID: "public", Resources: []string{"*:file:///public/*"}, Roles: []string{"*"}},
		{ID: "docs", Resources: []string{"do*:file:///srv/*"}, Roles: []string{"*"}},
		{ID: "anyuri", Resources: []string{"db:*"}, Roles: []string{"admin"}},
	})
	viewer := Principal{Subject: "v", Roles: []string{"viewer"}}
	for _, tc := range []struct {
		name  string
		allow bool
		rule  string
	}{
		{"db:file:///public/x", true, "public"},
		{"web:file:///public/a/b", true, "public"},
		// The server half's `*` must not swallow "db:db://prod/users?dump=all#".
		{"db:db://prod/users?dump=all#:file:///public/x", false, "anyuri"},
		{"db:file:///etc/passwd#:file:///public/", false, "anyuri"},
		{"docs:file:///srv/a", true, "docs"},
		{"dogs:file:///srv/a", true, "docs"},
		// A server half `do*` cannot reach into the URI: "do" + "cs:file" is
		// not a server name.
		{"do:cs:file:///srv/a", false, ""},
		{"other:x:file:///srv/a", false, ""},
		{"nocolon", false, ""},
		{"", false, ""},
	} {
		d := pol.Decide(viewer, Call{Kind: KindResource, Qualified: tc.name})
		if d.Allow != tc.allow || d.Rule != tc.rule {
			t.Errorf("%q: %+v, want allow=%v rule=%q", tc.name, d, tc.allow, tc.rule)
		}
		if l := pol.ListableKind(viewer, KindResource, tc.name); l != tc.allow {
			t.Errorf("%q: ListableKind %v, Decide %v", tc.name, l, tc.allow)
		}
	}
}
