package gateway

import (
	"testing"

	"github.com/mcp-bastion/bastion/internal/gateway/audit"
	"github.com/mcp-bastion/bastion/internal/gateway/auth"
	"github.com/mcp-bastion/bastion/internal/gateway/policy"
	"github.com/mcp-bastion/bastion/internal/mcp"
)

var spellingViewer = auth.Principal{Subject: "v", Roles: []string{"viewer"}}

// TestCheckContentsSpelling: contents labelled with another spelling of
// a URI the caller may not read, or of another server's, are refused as
// their normal spelling is.
func TestCheckContentsSpelling(t *testing.T) {
	g, _ := resourceGateway(t, []string{"docs", "b"}, map[string][2][]string{
		"docs": {nil, {"file:///srv/docs/{+path}"}},
		"b":    {{"file:///b/secret.md"}, nil},
	}, []policy.Rule{
		{ID: "private", Resources: []string{"docs:file:///srv/docs/private/*"}, Roles: []string{"admin"}},
		{ID: "docs", Resources: []string{"docs:file:///srv/docs/*"}, Roles: []string{"*"}},
		{ID: "all", Resources: []string{"*:*"}, Roles: []string{"*"}},
	})
	read := "file:///srv/docs/public/index.md"
	items := func(u string) []mcp.ResourceContents { return []mcp.ResourceContents{{URI: read}, {URI: u}} }
	if err := g.checkContents(spellingViewer, "docs", read, items("file:///srv/docs/public/other.md")); err != nil {
		t.Fatalf("a readable label of the same server: %v", err)
	}
	for _, tc := range []struct{ label, canonical string }{
		{"file:///srv/docs/./private/salaries.md", "file:///srv/docs/private/salaries.md"},
		{"file:///srv/docs//private/salaries.md", "file:///srv/docs/private/salaries.md"},
		{"file:///srv/docs/x/../private/salaries.md", "file:///srv/docs/private/salaries.md"},
		{"file:///srv/docs/%70rivate/salaries.md", "file:///srv/docs/private/salaries.md"},
		{"file:///b/./secret.md", "file:///b/secret.md"},
	} {
		if err := g.checkContents(spellingViewer, "docs", read, items(tc.canonical)); err == nil {
			t.Fatalf("control: %s was relayed", tc.canonical)
		}
		if err := g.checkContents(spellingViewer, "docs", read, items(tc.label)); err == nil {
			t.Errorf("contents labelled %s (that is %s) were relayed", tc.label, tc.canonical)
		}
	}
}

// TestRouteReadReadings: a template-routed URI is also decided as a
// server that reads only its path reads it, so a rule written for one
// file is not passed with a query, a fragment or a trailing '/'; a
// reading no rule names refuses nothing (a directory stays readable).
func TestRouteReadReadings(t *testing.T) {
	g, _ := resourceGateway(t, []string{"docs"}, map[string][2][]string{
		"docs": {nil, {"file:///srv/docs/{+path}", "file://{+path}"}},
	}, []policy.Rule{
		{ID: "salaries", Resources: []string{"docs:file:///srv/docs/salaries.md"}, Roles: []string{"admin"}},
		{ID: "private", Resources: []string{"docs:file:///srv/docs/private/*"}, Roles: []string{"admin"}},
		{ID: "docs", Resources: []string{"docs:file:///srv/docs/*", "docs:file://*"}, Roles: []string{"*"}},
	})
	for _, tc := range []struct {
		uri  string
		code int
	}{
		{"file:///srv/docs/salaries.md", CodeUnauthorized},
		{"file:///srv/docs/salaries.md?", CodeUnauthorized},
		{"file:///srv/docs/salaries.md#", CodeUnauthorized},
		{"file:///srv/docs/salaries.md?v=1", CodeUnauthorized},
		{"file:///srv/docs/salaries.md/", CodeUnauthorized},
		{"file://localhost/srv/docs/private/salaries.md", -32602},
		{"file://LOCALHOST/srv/docs/private/salaries.md", -32602},
		{"file:///srv/docs/public.md?v=1", 0},
		{"file:///srv/docs/", 0},
	} {
		var ev audit.Event
		_, err := g.routeRead(spellingViewer, tc.uri, &ev)
		if got := codeOf(err); got != tc.code {
			t.Errorf("%s: code %d (rule %q), want %d", tc.uri, got, ev.Rule, tc.code)
		}
	}
}
