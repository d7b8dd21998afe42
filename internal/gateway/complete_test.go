package gateway

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/gateway/audit"
	"github.com/mcp-bastion/bastion/internal/gateway/auth"
	"github.com/mcp-bastion/bastion/internal/gateway/catalog"
)

// syncBuffer is an audit sink's writer read by the test while the
// gateway writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startCompleting runs a gateway over one fixture server "docs" that
// offers the prompt summarize(customer, region) and the template
// users://{id}, with completions, under rules.
func startCompleting(t *testing.T, rules string) (*Gateway, *syncBuffer) {
	t.Helper()
	dir := t.TempDir()
	prompts := filepath.Join(dir, "prompts.json")
	resources := filepath.Join(dir, "resources.json")
	if err := os.WriteFile(prompts, []byte(`[{"name":"summarize","arguments":[{"name":"customer","required":true},{"name":"region"}]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(resources, []byte(`{"resources":[],"resourceTemplates":[{"uriTemplate":"users://{id}","name":"users"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return startDocs(t, rules, map[string]string{"FIXTURE_PROMPTS": prompts, "FIXTURE_RESOURCES": resources}, func(snap *catalog.Snapshot) bool {
		_, ok := snap.LookupPrompt("docs.summarize")
		return ok && len(snap.Templates) == 1
	})
}

// startDocs runs a gateway over one fixture server "docs" with env, under
// rules, with its audit in the buffer returned, once ready holds for its
// catalog.
func startDocs(t *testing.T, rules string, env map[string]string, ready func(*catalog.Snapshot) bool) (*Gateway, *syncBuffer) {
	t.Helper()
	return startDocsWith(t, rules, env, ready, nil)
}

// startDocsWith is startDocs with before called on the gateway before
// it starts.
func startDocsWith(t *testing.T, rules string, env map[string]string, ready func(*catalog.Snapshot) bool, before func(*Gateway)) (*Gateway, *syncBuffer) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "auth:\n  mode: none\npolicy:\n  rules:\n%sservers:\n  - name: docs\n    command: [%q]\n    timeout: 5s\n    env:\n", rules, fixtureBin)
	for k, v := range env {
		fmt.Fprintf(&b, "      %s: %q\n", k, v)
	}
	b.WriteString("admission: {first_use: pin}\n")
	buf := &syncBuffer{}
	return launch(t, b.String(), audit.New(buf), before, ready), buf
}

// TestCompletionConditions: a rule with a condition is decided for a
// completion on the arguments the client says it has given, so a caller
// the condition refuses gets an empty completion, as for prompts/get.
func TestCompletionConditions(t *testing.T) {
	g, _ := startCompleting(t, `    - {id: alice, prompts: ["docs.summarize"], roles: ["*"], when: "principal.subject == 'alice'"}
    - {id: emea, resources: ["docs:users://*"], roles: ["*"], when: "principal.subject == 'alice'"}
    - {id: region, prompts: ["*"], roles: ["*"], when: "args.region == 'emea'"}
`)
	alice := auth.Principal{Subject: "alice", Issuer: auth.IssuerStatic}
	bob := auth.Principal{Subject: "bob", Issuer: auth.IssuerStatic}
	const prompt = `"ref":{"type":"ref/prompt","name":"docs.summarize"},"argument":{"name":"customer","value":"ac"}`
	const template = `"ref":{"type":"ref/resource","uri":"users://{id}"},"argument":{"name":"id","value":"ac"}`
	for _, tc := range []struct {
		name   string
		p      auth.Principal
		params string
		values bool
	}{
		{"the condition holds", alice, `{` + prompt + `}`, true},
		{"the condition fails", bob, `{` + prompt + `}`, false},
		{"a template, the condition holds", alice, `{` + template + `}`, true},
		{"a template, the condition fails", bob, `{` + template + `}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := g.Complete(t.Context(), CompletionRequest{Principal: tc.p, Params: jsontext.Value(tc.params)})
			if err != nil {
				t.Fatal(err)
			}
			if got := len(res) > 0 && len(res[0].Values) > 0; got != tc.values {
				t.Errorf("values %v, want values: %v", res, tc.values)
			}
		})
	}
}

// TestCompletionConditionOnArguments: a condition on the prompt's
// arguments reads the ones in context.arguments; without them it cannot
// hold, and the completion is empty.
func TestCompletionConditionOnArguments(t *testing.T) {
	g, _ := startCompleting(t, `    - {id: region, prompts: ["*"], roles: ["*"], when: "args.region == 'emea'"}
`)
	p := auth.Principal{Subject: "bob", Issuer: auth.IssuerStatic}
	base := `"ref":{"type":"ref/prompt","name":"docs.summarize"},"argument":{"name":"customer","value":"ac"}`
	for _, tc := range []struct {
		name, params string
		values       bool
	}{
		{"no context", `{` + base + `}`, false},
		{"another region", `{` + base + `,"context":{"arguments":{"region":"apac"}}}`, false},
		{"the region", `{` + base + `,"context":{"arguments":{"region":"emea"}}}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := g.Complete(t.Context(), CompletionRequest{Principal: p, Params: jsontext.Value(tc.params)})
			if err != nil {
				t.Fatal(err)
			}
			if got := len(res) > 0 && len(res[0].Values) > 0; got != tc.values {
				t.Errorf("values %v, want values: %v", res, tc.values)
			}
		})
	}
}

// startCompletingWith runs a gateway over one fixture server "docs" that
// offers prompts and templates (raw JSON arrays) and answers every
// completion with values, under rules.
func startCompletingWith(t *testing.T, rules, prompts, templates string, values ...string) *Gateway {
	t.Helper()
	dir := t.TempDir()
	pf, rf := filepath.Join(dir, "prompts.json"), filepath.Join(dir, "resources.json")
	if err := os.WriteFile(pf, []byte(prompts), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rf, []byte(`{"resources":[],"resourceTemplates":`+templates+`}`), 0o600); err != nil {
		t.Fatal(err)
	}
	g, _ := startDocs(t, rules, map[string]string{"FIXTURE_PROMPTS": pf, "FIXTURE_RESOURCES": rf, "FIXTURE_COMPLETIONS": strings.Join(values, ",")},
		func(snap *catalog.Snapshot) bool { return len(snap.Prompts) > 0 && len(snap.Templates) > 0 })
	return g
}

// completed is what a completion relays: its values, and whether it
// kept the server's total.
func completed(t *testing.T, g *Gateway, p auth.Principal, params string) (values []string, total bool) {
	t.Helper()
	res, err := g.Complete(t.Context(), CompletionRequest{Principal: p, Params: jsontext.Value(params)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res {
		values = append(values, c.Values...)
		total = total || c.Total != nil
	}
	return values, total
}

// TestCompletionOfATemplateIsARead: a template's completion is decided
// as a read of the URI the arguments and the value typed make, and the
// server's values are relayed only when their reads would be allowed:
// a carve-out for a private directory holds against completion as it
// does against reads, the text after the variable is decided with it, a
// variable not given yet stands for any value, and no argument of the caller's (a forged "uri"
// in context.arguments) reaches a condition that reads the URI.
func TestCompletionOfATemplateIsARead(t *testing.T) {
	g := startCompletingWith(t, `    - {id: private-docs, resources: ["docs:file:///srv/docs/private/*"], roles: [admin]}
    - {id: docs, resources: ["docs:file:///srv/docs/*"], roles: ["*"]}
    - {id: own-tenant, resources: ["docs:file:///srv/tenants/*"], roles: ["*"], when: "args.uri.startsWith('file:///srv/tenants/acme/')"}
    - {id: keys, resources: ["docs:vault://*/private-key", "docs:vault://*/secret/notes"], roles: [admin]}
    - {id: vault, resources: ["docs:vault://*"], roles: ["*"]}
    - {id: prompts, prompts: ["*"], roles: ["*"]}
`, `[{"name":"p"}]`, `[{"uriTemplate":"file:///srv/docs/{+path}","name":"docs"},{"uriTemplate":"file:///srv/tenants/{tenant}/{+path}","name":"tenants"},`+
		`{"uriTemplate":"vault://{+account}/private-key","name":"keys"},{"uriTemplate":"vault://{+account}/{kind}/notes","name":"notes"}]`,
		"private/salaries.md", "public/readme.md")
	viewer := auth.Principal{Subject: "bob", Issuer: auth.IssuerStatic, Roles: []string{"viewer"}}
	admin := auth.Principal{Subject: "alice", Issuer: auth.IssuerStatic, Roles: []string{"admin"}}
	const docs = `{"ref":{"type":"ref/resource","uri":"file:///srv/docs/{+path}"},"argument":{"name":"path","value":%q}}`
	const tenants = `{"ref":{"type":"ref/resource","uri":"file:///srv/tenants/{tenant}/{+path}"},"argument":{"name":"path","value":"pay"},"context":{"arguments":%s}}`
	const keys = `{"ref":{"type":"ref/resource","uri":"vault://{+account}/private-key"},"argument":{"name":"account","value":%q}}`
	const notes = `{"ref":{"type":"ref/resource","uri":"vault://{+account}/{kind}/notes"},"argument":{"name":"account","value":""},"context":{"arguments":%s}}`
	for _, tc := range []struct {
		name   string
		p      auth.Principal
		params string
		want   string
		total  bool
	}{
		{"typing into the private directory", viewer, fmt.Sprintf(docs, "private/sal"), "[]", false},
		{"the server's private values are dropped", viewer, fmt.Sprintf(docs, ""), "[public/readme.md]", false},
		{"an admin gets every value", admin, fmt.Sprintf(docs, ""), "[private/salaries.md public/readme.md]", true},
		{"a URI not in normal form", viewer, fmt.Sprintf(docs, "public/../private/"), "[]", false},
		{"another tenant", viewer, fmt.Sprintf(tenants, `{"tenant":"globex"}`), "[]", false},
		{"another tenant with a forged uri", viewer, fmt.Sprintf(tenants, `{"tenant":"globex","uri":"file:///srv/tenants/acme/"}`), "[]", false},
		{"the caller's tenant", viewer, fmt.Sprintf(tenants, `{"tenant":"acme"}`), "[private/salaries.md public/readme.md]", true},
		// The text after the variable is decided with it: no key of any
		// account is the viewer's to read, so no account is completed.
		{"a literal after the variable", viewer, fmt.Sprintf(keys, ""), "[]", false},
		{"an admin completes the key's accounts", admin, fmt.Sprintf(keys, ""), "[private/salaries.md public/readme.md]", true},
		// A variable not given yet stands for any value: some kind of
		// notes is the viewer's, the secret one is not.
		{"a later variable not given", viewer, fmt.Sprintf(notes, `{}`), "[private/salaries.md public/readme.md]", true},
		{"a later variable given a value the rules refuse", viewer, fmt.Sprintf(notes, `{"kind":"secret"}`), "[]", false},
		{"a later variable given a value the rules allow", viewer, fmt.Sprintf(notes, `{"kind":"public"}`), "[private/salaries.md public/readme.md]", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, total := completed(t, g, tc.p, tc.params)
			if fmt.Sprint(got) != tc.want && !(tc.want == "[]" && got == nil) || total != tc.total {
				t.Errorf("values %v (total kept: %v), want %s (%v)", got, total, tc.want, tc.total)
			}
		})
	}
}

// TestCompletionConditionOnTheValue: a prompt rule's condition reads the
// value typed with the arguments given (the value wins over a given one
// of the same name), and each value the server offers is relayed only
// when the condition holds for it; a name the prompt does not declare
// never reaches a condition.
func TestCompletionConditionOnTheValue(t *testing.T) {
	g := startCompletingWith(t, `    - {id: acme-only, prompts: ["docs.tenant_report"], roles: ["*"], when: "args.tenant == 'acme'"}
    - {id: reads, resources: ["docs:*"], roles: ["*"]}
`, `[{"name":"tenant_report","arguments":[{"name":"tenant"},{"name":"month"}]}]`, `[{"uriTemplate":"file:///x/{y}","name":"x"}]`,
		"acme", "globex")
	p := auth.Principal{Subject: "bob", Issuer: auth.IssuerStatic, Roles: []string{"viewer"}}
	const tenant = `{"ref":{"type":"ref/prompt","name":"docs.tenant_report"},"argument":{"name":"tenant","value":%q},"context":{"arguments":%s}}`
	const month = `{"ref":{"type":"ref/prompt","name":"docs.tenant_report"},"argument":{"name":"month","value":"ja"},"context":{"arguments":%s}}`
	for _, tc := range []struct {
		name, params, want string
	}{
		{"another tenant typed, the right one given", fmt.Sprintf(tenant, "globex", `{"tenant":"acme"}`), "[]"},
		{"the tenant typed: the server's other tenant is dropped", fmt.Sprintf(tenant, "acme", `{}`), "[acme]"},
		{"another argument, the tenant given", fmt.Sprintf(month, `{"tenant":"acme"}`), "[acme globex]"},
		{"another argument, another tenant given", fmt.Sprintf(month, `{"tenant":"globex"}`), "[]"},
		{"a name the prompt does not declare", fmt.Sprintf(month, `{"tenant":"acme","uri":"x"}`), "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := completed(t, g, p, tc.params)
			if fmt.Sprint(got) != tc.want && !(tc.want == "[]" && got == nil) {
				t.Errorf("values %v, want %s", got, tc.want)
			}
		})
	}
}

// TestCompletionAuditNames: the audit names the argument being completed
// only when the reference declares it; a name of the caller's own is its
// text, and stays out, for known and unknown references alike.
func TestCompletionAuditNames(t *testing.T) {
	g, buf := startCompleting(t, `    - {id: all, prompts: ["*"], resources: ["*:*"], roles: ["*"]}
`)
	p := auth.Principal{Subject: "bob", Issuer: auth.IssuerStatic}
	const secret = "card=4111111111111111"
	for _, params := range []string{
		`{"ref":{"type":"ref/prompt","name":"docs.summarize"},"argument":{"name":"` + secret + `","value":"v"}}`,
		`{"ref":{"type":"ref/prompt","name":"docs.nothing"},"argument":{"name":"` + secret + `","value":"v"}}`,
		`{"ref":{"type":"ref/resource","uri":"users://{id}"},"argument":{"name":"` + secret + `","value":"v"}}`,
		`{"ref":{"type":"ref/prompt","name":"docs.summarize"},"argument":{"name":"customer","value":"v"}}`,
		`{"ref":{"type":"ref/resource","uri":"users://{id}"},"argument":{"name":"id","value":"v"}}`,
	} {
		if _, err := g.Complete(t.Context(), CompletionRequest{Principal: p, Params: jsontext.Value(params)}); err != nil {
			t.Fatal(err)
		}
	}
	out := buf.String()
	if strings.Contains(out, secret) {
		t.Errorf("the audit holds a name of the caller's own:\n%s", out)
	}
	for _, want := range []string{`"arguments":["customer"]`, `"arguments":["id"]`} {
		if !strings.Contains(out, want) {
			t.Errorf("the audit lacks %s:\n%s", want, out)
		}
	}
}

// TestSetLogLevel: a logging/setLevel is audited, with its level, and
// applied only when a connected server declares logging; with none it
// changes nothing and reports so (the front answers -32601).
func TestSetLogLevel(t *testing.T) {
	p := auth.Principal{Subject: "bob", Issuer: auth.IssuerStatic}
	for _, tc := range []struct {
		name    string
		logging string
		want    bool
		audited string
	}{
		{"no server offers logging", "0", false, `"reason":"no_logging"`},
		{"a server offers logging", "1", true, `"outcome":"allow"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			log := filepath.Join(dir, "received.log")
			g, buf := startDocs(t, "    - {id: all, tools: [\"*\"], roles: [\"*\"]}\n",
				map[string]string{"FIXTURE_LOGGING": tc.logging, "FIXTURE_LOG": log}, func(*catalog.Snapshot) bool { return true })
			if got := g.SetLogLevel(t.Context(), LogLevelRequest{Level: "debug", RequestID: "r", Principal: p}); got != tc.want {
				t.Errorf("SetLogLevel = %v, want %v", got, tc.want)
			}
			out := buf.String()
			if !strings.Contains(out, `"method":"logging/setLevel"`) || !strings.Contains(out, `"level":"debug"`) || !strings.Contains(out, tc.audited) {
				t.Errorf("the audit lacks the request, its level or %s:\n%s", tc.audited, out)
			}
			b, _ := os.ReadFile(log)
			if got := strings.Contains(string(b), `"logging/setLevel"`); got != tc.want {
				t.Errorf("the downstream got logging/setLevel: %v, want %v", got, tc.want)
			}
		})
	}
}

// TestCompletionOfATemplateRouted: a template's completion names nothing
// a read would not reach through it: an argument that is no variable of
// the template completes nothing; a URI a read would route to another
// server (listed first, with a template of its own) is that server's, and
// so are the values that make one; a URI past the bound of a URI
// completes nothing; and the variables after the one completed are left
// out, so the first of several completes.
func TestCompletionOfATemplateRouted(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	prompts := write("prompts.json", `[{"name":"p"}]`)
	docs := write("docs.json", `{"resources":[],"resourceTemplates":[{"uriTemplate":"file:///srv/docs/{+path}","name":"docs"}]}`)
	fs := write("fs.json", `{"resources":[],"resourceTemplates":[{"uriTemplate":"file:///srv/{+path}","name":"fs"},{"uriTemplate":"db://{database}/{table}/schema","name":"db"}]}`)
	var b strings.Builder
	b.WriteString("auth:\n  mode: none\npolicy:\n  rules:\n    - {id: private, resources: [\"docs:file:///srv/docs/private/*\"], roles: [admin]}\n" +
		"    - {id: all, resources: [\"*:*\"], roles: [\"*\"]}\nservers:\n")
	fmt.Fprintf(&b, "  - name: docs\n    command: [%q]\n    env: {FIXTURE_PROMPTS: %q, FIXTURE_RESOURCES: %q}\n", fixtureBin, prompts, docs)
	fmt.Fprintf(&b, "  - name: fs\n    command: [%q]\n    env: {FIXTURE_PROMPTS: %q, FIXTURE_RESOURCES: %q, FIXTURE_COMPLETIONS: \"docs/private/salaries.md,docs/public/readme.md,other.md\"}\n",
		fixtureBin, prompts, fs)
	b.WriteString("admission: {first_use: pin}\n")
	g := launch(t, b.String(), nil, nil, func(snap *catalog.Snapshot) bool { return len(snap.Templates) == 3 })
	viewer := auth.Principal{Subject: "bob", Issuer: auth.IssuerStatic, Roles: []string{"viewer"}}
	ref := func(template, arg, value string) string {
		return fmt.Sprintf(`{"ref":{"type":"ref/resource","uri":%q},"argument":{"name":%q,"value":%q}}`, template, arg, value)
	}
	for _, tc := range []struct {
		name, params, want string
	}{
		{"no variable of the template", ref("file:///srv/{+path}", "nope", ""), "[]"},
		{"a variable in another case", ref("file:///srv/{+path}", "Path", ""), "[]"},
		{"a URI another server's template routes", ref("file:///srv/{+path}", "path", "docs/p"), "[]"},
		{"the server's values another server's template routes are dropped", ref("file:///srv/{+path}", "path", "docs/"), "[other.md]"},
		{"the values another server would serve are dropped", ref("file:///srv/{+path}", "path", ""), "[other.md]"},
		{"past the bound of a URI", ref("file:///srv/{+path}", "path", strings.Repeat("a", catalog.MaxURI)), "[]"},
		// The values with a '/' make a URI not in normal form (%2F), and
		// are dropped.
		{"the first of several variables", ref("db://{database}/{table}/schema", "database", "s"), "[other.md]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := completed(t, g, viewer, tc.params)
			if fmt.Sprint(got) != tc.want && !(tc.want == "[]" && got == nil) {
				t.Errorf("values %v, want %s", got, tc.want)
			}
		})
	}
}

// TestCompletionTakesASlot: a completion is a request to the server like
// a call: while its caller holds its whole share of the server's slots,
// it waits (here, until its context ends) instead of reaching the server.
func TestCompletionTakesASlot(t *testing.T) {
	g, _ := startCompleting(t, "    - {id: all, prompts: [\"*\"], resources: [\"*:*\"], roles: [\"*\"]}\n")
	p := auth.Principal{Subject: "mallory", Issuer: auth.IssuerStatic, Roles: []string{"viewer"}}
	params := jsontext.Value(`{"ref":{"type":"ref/prompt","name":"docs.summarize"},"argument":{"name":"customer","value":"ac"}}`)
	var held []func()
	for range max(1, g.cfg.Limits.InflightPerDownstream/4) {
		release, err := g.servers["docs"].slots.acquire(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, release)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if res, err := g.Complete(ctx, CompletionRequest{Principal: p, Params: params}); err == nil {
		t.Errorf("a completion past its caller's share reached the server: %v", res)
	}
	for _, r := range held {
		r()
	}
	if res, err := g.Complete(t.Context(), CompletionRequest{Principal: p, Params: params}); err != nil || len(res) == 0 {
		t.Errorf("a completion with a slot free: %v, %v", res, err)
	}
}
