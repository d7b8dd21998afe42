package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/gateway/audit"
	"github.com/mcp-bastion/bastion/internal/gateway/auth"
	"github.com/mcp-bastion/bastion/internal/gateway/catalog"
	"github.com/mcp-bastion/bastion/internal/gateway/config"
	"github.com/mcp-bastion/bastion/internal/gateway/policy"
	"github.com/mcp-bastion/bastion/internal/gateway/upstream"
	"github.com/mcp-bastion/bastion/internal/jsonrpc"
	"github.com/mcp-bastion/bastion/internal/mcp"
)

// resourceGateway is a gateway without servers whose catalog holds, for
// each server in order, the resources and templates given, and whose
// policy is rules; its audit goes to the buffer returned.
func resourceGateway(t *testing.T, order []string, offers map[string][2][]string, rules []policy.Rule) (*Gateway, *bytes.Buffer) {
	t.Helper()
	g := pinned(t)
	g.catalog.SetOrder(order)
	for _, name := range order {
		var res, tmpl []jsontext.Value
		for _, u := range offers[name][0] {
			res = append(res, jsontext.Value(fmt.Sprintf(`{"uri":%q,"name":"r"}`, u)))
		}
		for _, u := range offers[name][1] {
			tmpl = append(tmpl, jsontext.Value(fmt.Sprintf(`{"uriTemplate":%q,"name":"t"}`, u)))
		}
		if err := g.catalog.UpdateResources(catalog.Server{Name: name}, res, tmpl); err != nil {
			t.Fatal(err)
		}
	}
	pol, err := policy.Compile(rules)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	g.Authorize(pol, false, audit.New(&buf))
	return g, &buf
}

func codeOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestRouteReadServerHalf: the `*` of a rule's server half does not cross
// the ':' into the URI, through the gateway's routing.
func TestRouteReadServerHalf(t *testing.T) {
	g, _ := resourceGateway(t, []string{"db"}, map[string][2][]string{"db": {nil, {"file:///{+path}", "db://{+rest}"}}},
		[]policy.Rule{{ID: "public", Resources: []string{"*:file:///public/*"}, Roles: []string{"*"}}})
	viewer := auth.Principal{Subject: "v", Roles: []string{"viewer"}}
	for uri, want := range map[string]int{
		"file:///public/x":                           0,
		"file:///etc/passwd#:file:///public/":        CodeUnauthorized,
		"db://prod/users?dump=all#:file:///public/x": CodeUnauthorized,
	} {
		var ev audit.Event
		_, err := g.routeRead(viewer, uri, &ev)
		if codeOf(err) != want {
			t.Errorf("%s: %v, want %d", uri, err, want)
		}
	}
}

// TestRouteReadNormalForm: a URI a template routes must be in normal
// form (-32602, audited as invalid without the URI); an exact URI is
// read as the downstream spelled it. Neither a private file behind a
// broader rule nor a URI another server owns exactly is reached by
// another spelling.
func TestRouteReadNormalForm(t *testing.T) {
	g, buf := resourceGateway(t, []string{"docs", "a", "b"}, map[string][2][]string{
		"docs": {{"file:///srv/docs/odd/./exact.md"}, {"file:///srv/docs/{+path}"}},
		"a":    {{"file:///shared/readme.md"}, nil},
		"b":    {nil, {"file:///{+path}"}},
	}, []policy.Rule{
		{ID: "private", Resources: []string{"docs:file:///srv/docs/private/*"}, Roles: []string{"admin"}},
		{ID: "docs", Resources: []string{"docs:file:///srv/docs/*"}, Roles: []string{"*"}},
		{ID: "shared", Resources: []string{"a:*"}, Roles: []string{"admin"}},
		{ID: "b", Resources: []string{"b:*"}, Roles: []string{"*"}},
	})
	viewer := auth.Principal{Subject: "v", Roles: []string{"viewer"}}
	for _, tc := range []struct {
		uri    string
		code   int
		server string // the route, "" for none
	}{
		{"file:///srv/docs/public/a.md", 0, "docs"},
		{"file:///srv/docs/private/salaries.md", CodeUnauthorized, "docs"},
		{"file:///srv/docs/private", CodeUnauthorized, "docs"},   // the directory a rule keeps what is under
		{"file:///srv/docs/private?x", CodeUnauthorized, "docs"}, // the same, with a query
		{"file:///srv/docs/privatex", 0, "docs"},
		{"file:///srv/docs/odd/./exact.md", 0, "docs"}, // exact: the downstream's own spelling
		{"file:///srv/docs/%70rivate/salaries.md", jsonrpc.CodeInvalidParams, "docs"},
		{"file:///srv/docs/./private/salaries.md", jsonrpc.CodeInvalidParams, "docs"},
		{"file:///srv/docs/x/../private/salaries.md", jsonrpc.CodeInvalidParams, "docs"},
		{"file:///srv/docs//private/salaries.md", jsonrpc.CodeInvalidParams, "docs"},
		{"file:///srv/docs/private%2Fsalaries.md", jsonrpc.CodeInvalidParams, "docs"},
		{"file:///srv/docs/../../etc/passwd", jsonrpc.CodeInvalidParams, "docs"},
		{"FILE:///srv/docs/private/salaries.md", CodeResourceNotFound, ""}, // no template matches the upper-case scheme
		{"file:///shared/readme.md", CodeUnauthorized, "a"},
		// Another spelling of a's URI: b's template does not route it.
		{"file:///shared/./readme.md", jsonrpc.CodeInvalidParams, ""},
		{"file:///shared//readme.md", jsonrpc.CodeInvalidParams, ""},
		{"file:///shared/%72eadme.md", jsonrpc.CodeInvalidParams, ""},
		{"file:///shared/readme.md?v=1", CodeResourceNotFound, ""},
		{"file:///shared/readme.md%3Fv=1", jsonrpc.CodeInvalidParams, ""},
		{"file:///srv/docs/private%3Fx", jsonrpc.CodeInvalidParams, "docs"},
		{"file:///srv/docs/%2570rivate/salaries.md", jsonrpc.CodeInvalidParams, "docs"},
		{"file:///other/./readme.md", jsonrpc.CodeInvalidParams, "b"},
		{"file:///other/readme.md", 0, "b"},
	} {
		buf.Reset()
		var ev audit.Event
		_, err := g.routeRead(viewer, tc.uri, &ev)
		if codeOf(err) != tc.code || ev.Server != tc.server {
			t.Errorf("%s: routed to %q, %v; want %q, %d", tc.uri, ev.Server, err, tc.server, tc.code)
		}
		if tc.code == jsonrpc.CodeInvalidParams {
			var e *Error
			if !errors.As(err, &e) {
				continue
			}
			if !strings.Contains(e.Message, "normal form") || strings.Contains(e.Message+string(e.Data), tc.uri) {
				t.Errorf("%s: the refusal %q %s", tc.uri, e.Message, e.Data)
			}
			if a := buf.String(); !strings.Contains(a, `"outcome":"invalid"`) || !strings.Contains(a, `"reason":"uri_not_normal"`) ||
				strings.Contains(a, tc.uri) {
				t.Errorf("%s: audit %s", tc.uri, a)
			}
		}
	}
}

// TestParseContentsBlob: a blob is relayed only if it is strict standard
// base64.
func TestParseContentsBlob(t *testing.T) {
	for blob, ok := range map[string]bool{
		"":            true,
		"aGk=":        true,
		"aGVsbG8h":    true,
		"aGk":         false, // no padding
		"aGl=":        false, // non-zero pad bits
		"aG k=":       false,
		"aGk=\n":      false,
		"aG\r\nk=":    false,
		"aGk_":        false, // URL alphabet
		"not base64!": false,
		"aGk=aGk=":    false,
	} {
		_, err := parseContents(jsontext.Value(fmt.Sprintf(`{"contents":[{"uri":"x:y","blob":%q}]}`, blob)))
		if (err == nil) != ok {
			t.Errorf("blob %q: %v, want ok=%v", blob, err, ok)
		}
	}
}

// TestCheckContents: contents labelled with another URI than the one
// read are relayed only when that URI is the same server's, or nobody's,
// and the caller may read it there.
func TestCheckContents(t *testing.T) {
	g, _ := resourceGateway(t, []string{"evil", "b"}, map[string][2][]string{
		"evil": {{"evil://other", "evil://also"}, {"evil://t/{x}"}},
		"b":    {{"file:///b/secret.md"}, {"file:///b/{+path}"}},
	}, []policy.Rule{
		{ID: "secret", Resources: []string{"*:file:///b/secret*", "evil:evil://t/admin*"}, Roles: []string{"admin"}},
		{ID: "all", Resources: []string{"*:*"}, Roles: []string{"*"}},
	})
	viewer := auth.Principal{Subject: "v", Roles: []string{"viewer"}}
	admin := auth.Principal{Subject: "a", Roles: []string{"admin"}}
	item := func(uris ...string) []mcp.ResourceContents {
		var out []mcp.ResourceContents
		for _, u := range uris {
			out = append(out, mcp.ResourceContents{URI: u})
		}
		return out
	}
	for _, tc := range []struct {
		p        auth.Principal
		contents []mcp.ResourceContents
		ok       bool
	}{
		{viewer, item("evil://other"), true},
		{viewer, item("evil://other", "evil://also", "evil://t/1"), true}, // the same server's
		{viewer, item("evil://other", "unrouted://x"), true},              // nobody's, and the rules allow it
		{viewer, item("evil://other", "file:///b/secret.md"), false},      // b's, exactly
		{admin, item("evil://other", "file:///b/secret.md"), false},       // b's, whoever reads
		{viewer, item("evil://other", "file:///b/x.md"), false},           // b's, by template
		{viewer, item("evil://other", "evil://t/admin1"), false},          // the caller may not read it
		{admin, item("evil://other", "evil://t/admin1"), true},
		{viewer, item("evil://other", "file:///elsewhere/secret.md"), true},
		{viewer, item("evil://other", "evil://t/"+strings.Repeat("x", catalog.MaxURI)), false}, // longer than any listed URI
	} {
		err := g.checkContents(tc.p, "evil", "evil://other", tc.contents)
		if (err == nil) != tc.ok {
			t.Errorf("%s reads %v: %v, want ok=%v", tc.p.Subject, tc.contents, err, tc.ok)
		}
		if err != nil && strings.Contains(err.Error(), "://") {
			t.Errorf("the error names a URI: %v", err)
		}
	}
}

// fakeConn answers every call with result.
type fakeConn struct{ result string }

func (f fakeConn) Call(context.Context, string, []byte, upstream.CallOptions) (jsontext.Value, error) {
	return jsontext.Value(f.result), nil
}
func (fakeConn) Close(context.Context) error { return nil }
func (fakeConn) Stats() *upstream.Stats      { return &upstream.Stats{} }
func (fakeConn) Restarts() int               { return 0 }
func (fakeConn) Connected() bool             { return true }

// TestReadResourceContents: a read whose contents are labelled with a URI
// another server owns, or one the caller may not read, or whose blob is
// not base64, is refused whole as a bad gateway, and the warning logged
// does not name the URI.
func TestReadResourceContents(t *testing.T) {
	g, _ := resourceGateway(t, []string{"evil", "b"}, map[string][2][]string{
		"evil": {{"evil://other"}, nil},
		"b":    {{"file:///b/secret.md"}, nil},
	}, []policy.Rule{
		{ID: "admins", Resources: []string{"evil:evil://hidden*"}, Roles: []string{"admin"}},
		{ID: "all", Resources: []string{"*:*"}, Roles: []string{"*"}},
	})
	var logs bytes.Buffer
	g.log = slog.New(slog.NewJSONHandler(&logs, nil))
	viewer := auth.Principal{Subject: "v", Roles: []string{"viewer"}}
	for _, tc := range []struct {
		result string
		code   int
	}{
		{`{"contents":[{"uri":"evil://other","text":"ok"}]}`, 0},
		{`{"contents":[{"uri":"evil://other","blob":"aGk="}]}`, 0},
		{`{"contents":[{"uri":"evil://other","text":"ok"},{"uri":"evil://unlisted","text":"ok"}]}`, 0},
		{`{"contents":[{"uri":"evil://other","blob":"not base64!"}]}`, CodeBadGateway},
		{`{"contents":[{"uri":"evil://other","text":"ok"},{"uri":"file:///b/secret.md","text":"forged"}]}`, CodeBadGateway},
		{`{"contents":[{"uri":"evil://other","text":"ok"},{"uri":"evil://hidden/x","text":"not for a viewer"}]}`, CodeBadGateway},
	} {
		g.servers["evil"] = &downstream{g: g, name: "evil", cfg: config.Server{Timeout: config.Duration(time.Second)},
			conn: fakeConn{tc.result}, slots: newSlots(1)}
		logs.Reset()
		contents, err := g.ReadResource(t.Context(), ResourceRead{URI: "evil://other", Principal: viewer})
		if codeOf(err) != tc.code || (err == nil) != (contents != nil) {
			t.Errorf("%s: %v %v, want %d", tc.result, contents, err, tc.code)
		}
		if l := logs.String(); strings.Contains(l, "secret.md") || strings.Contains(l, "hidden") {
			t.Errorf("the log names the URI: %s", l)
		}
	}
}

// TestCheckEmbedded: a tool result or prompt message may embed a
// resource under a URI of its own server or of no one, but never one
// another server serves (exactly or through a template), nor another
// spelling of one; the read rules do not apply (the call was decided).
func TestCheckEmbedded(t *testing.T) {
	g, _ := resourceGateway(t, []string{"config", "plugin"}, map[string][2][]string{
		"config": {{"file:///etc/app.conf"}, {"file:///etc/app/{name}"}},
		"plugin": {{"plugin://notes"}, {"plugin://t/{x}"}},
	}, []policy.Rule{{ID: "none", Resources: []string{"*:nothing"}, Roles: []string{"admin"}}})
	for _, tc := range []struct {
		uris []string
		ok   bool
	}{
		{nil, true},
		{[]string{"plugin://notes", "plugin://t/1"}, true},       // its own, exactly and by template
		{[]string{"plugin://notes", "report://made/here"}, true}, // no one's
		{[]string{"plugin://notes", "file:///etc/app.conf"}, false},
		{[]string{"file:///etc/app/db"}, false},                                // another server's, by template
		{[]string{"file:///etc/./app.conf"}, false},                            // another spelling, no one's
		{[]string{"file:///etc/%61pp.conf"}, false},                            // another spelling, no one's
		{[]string{"plugin://t/" + strings.Repeat("x", catalog.MaxURI)}, false}, // longer than any listed URI
	} {
		err := g.checkEmbedded("plugin", tc.uris)
		if (err == nil) != tc.ok {
			t.Errorf("plugin embeds %v: %v, want ok=%v", tc.uris, err, tc.ok)
		}
		if err != nil && strings.Contains(err.Error(), "://") {
			t.Errorf("the error names a URI: %v", err)
		}
	}
	res, err := parseResult(jsontext.Value(`{"content":[{"type":"text","text":"x"},{"type":"resource","resource":{"uri":"file:///etc/app.conf","text":"spoofed"}},{"type":"resource_link","uri":"file:///etc/app.conf","name":"l"}]}`))
	if err != nil || len(res.embedded) != 1 || res.embedded[0] != "file:///etc/app.conf" {
		t.Errorf("parseResult: embedded %v, %v", res, err)
	}
	if _, err := parseResult(jsontext.Value(`{"content":[{"type":"resource","resource":{"text":"no uri"}}]}`)); err == nil {
		t.Error("an embedded resource without a uri was accepted")
	}
	// Member names that differ only in case read as one thing here and as
	// another to a client that folds case.
	for _, block := range []string{
		`{"type":"resource","resource":{"uri":"plugin://notes","text":"x"},"Resource":{"uri":"file:///etc/app.conf","text":"spoofed"}}`,
		`{"type":"resource","resource":{"uri":"plugin://notes","text":"x","URI":"file:///etc/app.conf"}}`,
		`{"type":"text","text":"hi","Type":"resource","Resource":{"uri":"file:///etc/app.conf","text":"spoofed"}}`,
		`{"type":"resource","resource":{"uri":"plugin://notes","text":"x"},"reſource":{"uri":"file:///etc/app.conf","text":"x"}}`,
	} {
		if _, err := parseResult(jsontext.Value(`{"content":[` + block + `]}`)); err == nil {
			t.Errorf("a tool result with %s was accepted", block)
		}
		if _, _, err := parsePromptResult(jsontext.Value(`{"messages":[{"role":"user","content":` + block + `}]}`)); err == nil {
			t.Errorf("a prompt message with %s was accepted", block)
		}
	}
	_, embedded, err := parsePromptResult(jsontext.Value(`{"messages":[{"role":"user","content":{"type":"resource","resource":{"uri":"file:///etc/app.conf","text":"spoofed"}}}]}`))
	if err != nil || len(embedded) != 1 || embedded[0] != "file:///etc/app.conf" {
		t.Errorf("parsePromptResult: embedded %v, %v", embedded, err)
	}
}

// TestRouteReadURITooLong: a caller's URI past catalog.MaxURI is refused
// before any template is matched or rule decided (a read, a subscription
// and a listen all route through here), audited without the URI.
func TestRouteReadURITooLong(t *testing.T) {
	g, buf := resourceGateway(t, []string{"docs"}, map[string][2][]string{"docs": {nil, {"file:///srv/docs/{+path}"}}},
		[]policy.Rule{{ID: "docs", Resources: []string{"docs:*"}, Roles: []string{"*"}}})
	viewer := auth.Principal{Subject: "v", Roles: []string{"viewer"}}
	long := "file:///srv/docs/" + strings.Repeat("a", catalog.MaxURI)
	var ev audit.Event
	_, err := g.routeRead(viewer, long, &ev)
	var e *Error
	if !errors.As(err, &e) || e.Code != jsonrpc.CodeInvalidParams || !strings.Contains(string(e.Data), `"uri_too_long"`) {
		t.Fatalf("a URI of %d bytes: %v", len(long), err)
	}
	if a := buf.String(); !strings.Contains(a, `"reason":"uri_too_long"`) || strings.Contains(a, "aaaa") {
		t.Errorf("audit %s", a)
	}
	if _, err := g.routeRead(viewer, long[:catalog.MaxURI], &ev); err != nil {
		t.Errorf("a URI of %d bytes: %v", catalog.MaxURI, err)
	}
}

// TestDecideReadDirectory: a directory read by its name is decided by the
// rule written for what is under it, whether a template routes it or the
// server lists it as a resource; a rule that names a URI itself, with no
// wildcard, decides it alone.
func TestDecideReadDirectory(t *testing.T) {
	g, _ := resourceGateway(t, []string{"docs", "api"}, map[string][2][]string{
		"docs": {{"file:///srv/docs/private"}, {"file:///srv/docs/{+path}"}},
		"api":  {nil, {"https://api.example.com/v1/{+path}"}},
	}, []policy.Rule{
		{ID: "private", Resources: []string{"docs:file:///srv/docs/private/*"}, Roles: []string{"admin"}},
		{ID: "docs", Resources: []string{"docs:file:///srv/docs/*"}, Roles: []string{"*"}},
		{ID: "orders-list", Resources: []string{"api:https://api.example.com/v1/orders"}, Roles: []string{"*"}},
		{ID: "order", Resources: []string{"api:https://api.example.com/v1/orders/*"}, Roles: []string{"admin"}},
	})
	viewer := auth.Principal{Subject: "v", Roles: []string{"viewer"}}
	for _, tc := range []struct {
		uri  string
		code int
	}{
		{"file:///srv/docs/private", CodeUnauthorized}, // a resource the server lists
		{"file:///srv/docs/private?x", CodeUnauthorized},
		{"file:///srv/docs/public", 0},
		{"https://api.example.com/v1/orders", 0}, // named by a rule of its own
		{"https://api.example.com/v1/orders/42", CodeUnauthorized},
	} {
		var ev audit.Event
		if _, err := g.routeRead(viewer, tc.uri, &ev); codeOf(err) != tc.code {
			t.Errorf("%s: %v, want %d", tc.uri, err, tc.code)
		}
	}
}
