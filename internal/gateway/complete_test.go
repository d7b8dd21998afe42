package gateway

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

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
