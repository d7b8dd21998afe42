package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

const minimal = `
auth: {mode: none}
servers:
  - name: refund
    command: [./bin/refund]
`

func TestMinimalDefaults(t *testing.T) {
	c, err := Parse([]byte(minimal), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != DefaultListen || c.Path != "/mcp" || c.PublicURL != "http://127.0.0.1:8080/mcp" {
		t.Errorf("listen %q path %q public_url %q", c.Listen, c.Path, c.PublicURL)
	}
	if c.Limits.Body != DefaultBody || c.Limits.Call.D() != DefaultCall || c.Servers[0].Timeout.D() != DefaultCall {
		t.Errorf("limits %+v, server timeout %v", c.Limits, c.Servers[0].Timeout)
	}
	if c.Discovery.Pages != DefaultPages || c.Discovery.ListTimeout.D() != DefaultListTimeout || c.Discovery.RefreshEvery() != DefaultRefresh {
		t.Errorf("discovery %+v", c.Discovery)
	}
	if c.Sessions.KeyEnv != DefaultSessionKeyEnv || c.ArgumentErrors != "in_band" || c.Log.Level != "info" {
		t.Errorf("sessions %+v argument_errors %q log %+v", c.Sessions, c.ArgumentErrors, c.Log)
	}
}

func TestFull(t *testing.T) {
	c, err := Parse([]byte(`
listen: 127.0.0.1:9000
public_url: http://127.0.0.1:9000/gw
path: /gw
auth: {mode: none}
servers:
  - name: refund
    command: [./bin/refund, --flag]
    env: {REFUND_TOKEN: "${TOK}", MCP_LOG_LEVEL: warn}
    timeout: 5s
  - name: docs
    url: https://docs.example/mcp
    headers: {Authorization: "Bearer ${DOCS}", X-Tenant: acme}
discovery: {pages: 10, tools: 50, list_timeout: 2s, refresh: 1m}
limits: {body: 512KiB, batch: 8, downstream_message: 1MiB, call: 10s, inflight_per_downstream: 4}
sessions: {key_env: KEY, ttl: 1h}
argument_errors: protocol
metrics: {listen: 127.0.0.1:9090}
log: {level: debug, format: text}
`), env(map[string]string{"TOK": "t0k", "DOCS": "d0cs"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Servers[0].Env["REFUND_TOKEN"]; got != "t0k" {
		t.Errorf("env reference resolved to %q", got)
	}
	if got := c.Servers[1].Headers["Authorization"]; got != "Bearer d0cs" {
		t.Errorf("header reference resolved to %q", got)
	}
	if c.Limits.Body != 512<<10 || c.Limits.DownstreamMessage != 1<<20 || c.Servers[1].Timeout.D() != 10*time.Second {
		t.Errorf("sizes %+v", c.Limits)
	}
	if c.Metrics == nil || c.Metrics.Listen != "127.0.0.1:9090" || c.Discovery.RefreshEvery() != time.Minute {
		t.Errorf("metrics %+v discovery %+v", c.Metrics, c.Discovery)
	}
}

// TestErrorsNameTheKey: every error names the key path at fault, and
// each problem gets an error of its own.
func TestErrorsNameTheKey(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"empty file", ``, []string{"(file): the file is empty"}},
		{"not yaml", `servers: [`, []string{"(file): not valid YAML"}},
		{"two documents", minimal + "---\nlisten: x\n", []string{"more than one YAML document"}},
		{"unknown key", minimal + "listne: 127.0.0.1:1\n", []string{"listne (line 6): unknown key (did you mean listen?)"}},
		{"unknown nested key", "auth: {mode: none}\nservers:\n  - name: a\n    comand: [x]\n",
			[]string{"servers[0].comand (line 4): unknown key (did you mean command?)"}},
		{"duplicate key", minimal + "auth: {mode: none}\n", []string{"auth (line 6): the key appears twice"}},
		{"duplicate map key", "auth: {mode: none}\nservers:\n  - name: a\n    command: [x]\n    env: {A: 1, A: 2}\n",
			[]string{"servers[0].env.A (line 5): the key appears twice"}},
		{"alias", "auth: {mode: none}\nx: &a [1]\nservers:\n  - name: a\n    command: *a\n", []string{"x (line 2): unknown key", "servers[0].command (line 5): anchors and aliases are not accepted"}},
		{"wrong kind", "auth: {mode: none}\nservers: {name: a}\n", []string{"servers (line 2): must be a list"}},
		{"number for string list", "auth: {mode: none}\nservers:\n  - name: a\n    command: ./x\n", []string{"servers[0].command (line 4): must be a list"}},
		{"no auth", "servers:\n  - name: a\n    command: [x]\n", []string{"auth: no authentication method is configured"}},
		{"auth other", "auth: {mode: tokens}\nservers:\n  - name: a\n    command: [x]\n", []string{`auth.mode: must be "none"`}},
		{"none with tokens", "auth: {mode: none, tokens_env: T}\nservers:\n  - name: a\n    command: [x]\n", []string{"auth.mode: none cannot be combined"}},
		{"token not a digest", "auth:\n  tokens:\n    - {sha256: admin-token, subject: a, roles: [admin]}\nservers:\n  - name: a\n    command: [x]\n",
			[]string{"auth.tokens[0].sha256: must be the 64 lower-case hex digits"}},
		{"token without roles", "auth:\n  tokens:\n    - {sha256: " + strings.Repeat("ab", 32) + ", subject: a, roles: []}\nservers:\n  - name: a\n    command: [x]\n",
			[]string{"auth.tokens[0].roles: at least one role"}},
		{"bad role", "auth:\n  tokens:\n    - {sha256: " + strings.Repeat("ab", 32) + ", subject: a, roles: [\"a,b\"]}\nservers:\n  - name: a\n    command: [x]\n",
			[]string{"auth.tokens[0].roles[0]: must be 1-64 characters"}},
		{"tokens env unset", "auth: {tokens_env: NOPE}\nservers:\n  - name: a\n    command: [x]\n", []string{"auth.tokens_env: names NOPE, which is not set or empty"}},
		{"tokens env bad", "auth: {tokens_env: BAD_TOKENS}\nservers:\n  - name: a\n    command: [x]\n", []string{"auth.tokens_env: BAD_TOKENS: not a JSON object"}},
		{"jwt", "auth:\n  jwt: {jwks_url: \"http://idp.example/jwks\", algorithms: [HS256], leeway: 1h}\nservers:\n  - name: a\n    command: [x]\n",
			[]string{"auth.jwt.issuer: is required", "auth.jwt.jwks_url: http is allowed only to a loopback", "auth.jwt.algorithms[0]: must be one of", "auth.jwt.leeway: must be from"}},
		{"rule that does not compile", minimal + "policy:\n  rules:\n    - {id: refunds, tools: [\"*\"], roles: [\"*\"], when: \"args.amount <=\"}\n",
			[]string{`policy.rules[0] (line 8): rule "refunds": when:`}},
		{"rate", minimal + "policy: {rate: {per_principal: fast}}\n", []string{"policy.rate.per_principal: must be a count per s, m or h"}},
		{"auth none off loopback", "listen: 0.0.0.0:8080\npublic_url: http://gw.example:8080/mcp\nauth: {mode: none}\nservers:\n  - name: a\n    command: [x]\n",
			[]string{"listen: with auth mode none the gateway listens on a loopback address only"}},
		{"no servers", "auth: {mode: none}\n", []string{"servers: at least one server is required"}},
		{"bad name", "auth: {mode: none}\nservers:\n  - name: Re.fund\n    command: [x]\n", []string{"servers[0].name: must be 1-63 characters"}},
		{"duplicate name", minimal + "  - name: refund\n    command: [y]\n", []string{"servers[1].name: another server has the name refund"}},
		{"both", "auth: {mode: none}\nservers:\n  - name: a\n    command: [x]\n    url: https://h/mcp\n", []string{"servers[0]: has both command and url"}},
		{"plain http", "auth: {mode: none}\nservers:\n  - name: a\n    url: http://h.example/mcp\n", []string{"servers[0].url: http is allowed only to a loopback address"}},
		{"inline secret", "auth: {mode: none}\nservers:\n  - name: a\n    url: https://h/mcp\n    headers: {Authorization: Bearer abc}\n",
			[]string{"servers[0].headers.Authorization: holds a credential, which must come from the environment"}},
		{"inline secret env", "auth: {mode: none}\nservers:\n  - name: a\n    command: [x]\n    env: {API_TOKEN: abc}\n",
			[]string{"servers[0].env.API_TOKEN: holds a credential"}},
		{"unset reference", "auth: {mode: none}\nservers:\n  - name: a\n    command: [x]\n    env: {API_TOKEN: \"${NOPE}\"}\n",
			[]string{"servers[0].env.API_TOKEN: refers to NOPE, which is not set"}},
		{"reserved header", "auth: {mode: none}\nservers:\n  - name: a\n    url: https://h/mcp\n    headers: {X-MCP-Gateway-Role: admin, Mcp-Session-Id: x}\n",
			[]string{"servers[0].headers.Mcp-Session-Id: is set by the gateway", "servers[0].headers.X-MCP-Gateway-Role: is set by the gateway"}},
		{"PATH", "auth: {mode: none}\nservers:\n  - name: a\n    command: [x]\n    env: {PATH: /x}\n", []string{"servers[0].env.PATH: PATH is passed on"}},
		{"duration unit", minimal + "limits: {call: 30}\n", []string{"limits.call (line 6): must be a duration with a unit"}},
		{"size", minimal + "limits: {body: 4 potatoes}\n", []string{"limits.body (line 6): must be a size"}},
		{"size range", minimal + "limits: {body: 1B}\n", []string{"limits.body: must be from 1KiB to 1GiB"}},
		{"bool", minimal + "  - name: b\n    url: http://h.example/x\n    insecure_http: yes\n", []string{"servers[1].insecure_http (line 8): must be true or false"}},
		{"public url path", minimal + "public_url: http://127.0.0.1:8080/other\n", []string{`public_url: its path "/other" is not the configured path "/mcp"`}},
		{"metrics", minimal + "metrics: {}\n", []string{"metrics.listen: is required when metrics is set"}},
		{"names", minimal + "names: short\n", []string{`names: must be "qualified" or "bare"`}},
		{"protocol", "auth: {mode: none}\nservers:\n  - name: a\n    command: [x]\n    protocol: 2025\n", []string{`servers[0].protocol: must be "auto" or "legacy"`}},
		{"bare names with two servers", minimal + "  - name: b\n    command: [y]\nnames: bare\n", []string{`names: "bare" needs exactly one server`}},
		{"several at once", "auth: {mode: none}\nlog: {level: loud, format: xml}\nservers:\n  - name: a\n    command: [x]\n",
			[]string{"log.level: must be one of", "log.format: must be json or text"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), env(map[string]string{"BAD_TOKENS": "tok-secret-1"}))
			if err == nil {
				t.Fatal("accepted")
			}
			if strings.Contains(err.Error(), "tok-secret-1") {
				t.Errorf("the error quotes a token: %v", err)
			}
			// The lines are TestErrorsGiveTheLine's; here, the paths and
			// what is said of them.
			for _, w := range tt.want {
				msg := err.Error()
				if !strings.Contains(w, "(line ") {
					msg = lineNote.ReplaceAllString(msg, "")
				}
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

var lineNote = regexp.MustCompile(` \(line \d+\)`)

// TestErrorsGiveTheLine: an error the validator finds in a value says the
// line of that value, or of the nearest key above it the file holds; a
// key the file leaves out has none.
func TestErrorsGiveTheLine(t *testing.T) {
	for _, tc := range []struct {
		yaml, want string
	}{
		{"servers:\n  - name: a\n    command: [x]\nlisten: 8080\n", "listen (line 4): "},
		{"servers:\n  - name: a\n    command: [x]\nadmission:\n  first_use: reveiw\n", "admission.first_use (line 5): "},
		{"servers:\n  - name: a\n    command: [x]\n  - name: Bad.Name\n    command: [y]\n", "servers[1].name (line 4): "},
		{"servers:\n  - name: a\n    command: [x]\npolicy:\n  rules:\n    - id: r\n      tools: [\"*\"]\n", `policy.rules[0] (line 6): rule "r": roles must`},
		{"servers: []\n", "servers (line 1): "},
		{"servers:\n  - name: a\n    command: [x]\npolicy:\n  rules:\n    - {id: a, tools: [\"*\"], roles: [\"*\"]}\n    - {id: b, tools: [\"*\"], roles: [\"*\"],\n       when: \"args.x <=\"}\n",
			`policy.rules[1] (line 7): rule "b": when:`},
	} {
		_, err := Parse([]byte(tc.yaml), env(nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
	if _, err := Parse([]byte("auth: {mode: none}\n"), env(nil)); err == nil || !strings.Contains(err.Error(), "servers: ") {
		t.Errorf("a key the file leaves out: %v, want no line", err)
	}
}

func TestSecretValueNeverInErrors(t *testing.T) {
	_, err := Parse([]byte("auth: {mode: tokens}\nservers:\n  - name: a\n    url: https://h/mcp\n    headers: {Authorization: \"Bearer ${T}\"}\n"),
		env(map[string]string{"T": "s3cr3t-value"}))
	if err == nil || strings.Contains(err.Error(), "s3cr3t-value") {
		t.Fatalf("error %v", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "gw.yaml")
	if err := os.WriteFile(p, []byte(minimal), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p, env(nil)); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte(strings.Repeat("#", MaxFileBytes+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big, env(nil)); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("oversized file: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml"), env(nil)); err == nil {
		t.Fatal("missing file accepted")
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]int64{"1024": 1024, "4MiB": 4 << 20, "512 KiB": 512 << 10, "1GB": 1e9, "3kB": 3000, "7B": 7} {
		var b ByteSize
		if err := b.setScalar(in); err != nil || int64(b) != want {
			t.Errorf("%q = %d, %v; want %d", in, b, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "-1", "1.5MiB", "1 TiB", "99999999999GiB"} {
		var b ByteSize
		if err := b.setScalar(in); err == nil {
			t.Errorf("%q accepted as %d", in, b)
		}
	}
	if s := ByteSize(4 << 20).String(); s != "4MiB" {
		t.Errorf("String = %q", s)
	}
}

func TestAuthResolved(t *testing.T) {
	y := "auth:\n  tokens:\n    - {sha256: " + strings.Repeat("0f", 32) + ", subject: ops, roles: [admin, viewer]}\n  tokens_env: TOKS\n" +
		"policy:\n  rules:\n    - {id: all, tools: [\"*\"], roles: [\"*\"]}\n  filter_tools_list: false\n  rate: {per_principal: 10/s}\nservers:\n  - name: a\n    command: [x]\n"
	c, err := Parse([]byte(y), env(map[string]string{"TOKS": `{"tok-viewer-0123456789":"viewer"}`}))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Auth.Static) != 2 || c.Auth.Static[0].Subject != "ops" || c.Auth.Static[1].Roles[0] != "viewer" {
		t.Errorf("static tokens %+v", c.Auth.Static)
	}
	if c.FilterToolsList() || c.Policy.Rate.Every != 100*time.Millisecond || c.Policy.Rate.Burst != 10 || c.Audit.File != "stderr" {
		t.Errorf("policy %+v, audit %+v", c.Policy, c.Audit)
	}
}

// TestDefaultRate: authenticated principals get a token bucket by
// default; auth mode none, whose callers are one principal, does not;
// per_principal: off turns it off.
func TestDefaultRate(t *testing.T) {
	tokens := "auth:\n  tokens_env: TOKS\nservers:\n  - name: a\n    command: [x]\n"
	getenv := env(map[string]string{"TOKS": `{"tok-viewer-0123456789":"viewer"}`})
	for _, tc := range []struct {
		name, yaml string
		every      time.Duration
		burst      int
	}{
		{"authenticated", tokens, 20 * time.Millisecond, 100},
		{"off", tokens + "policy: {rate: {per_principal: \"off\"}}\n", 0, 0},
		{"set", tokens + "policy: {rate: {per_principal: 5/s}}\n", 200 * time.Millisecond, 5},
		{"mode none", "auth: {mode: none}\nservers:\n  - name: a\n    command: [x]\n", 0, 0},
	} {
		c, err := Parse([]byte(tc.yaml), getenv)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		r := c.Policy.Rate
		switch {
		case tc.every == 0 && r != nil:
			t.Errorf("%s: rate %+v, want none", tc.name, r)
		case tc.every != 0 && (r == nil || r.Every != tc.every || r.Burst != tc.burst):
			t.Errorf("%s: rate %+v, want every %s burst %d", tc.name, r, tc.every, tc.burst)
		}
	}
}

// TestLoadOffline: review needs none of the credentials the file refers
// to; everything else is still validated.
func TestLoadOffline(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "g.yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	unset := func(string) (string, bool) { return "", false }
	p := write("auth:\n  tokens_env: NOPE\nservers:\n  - name: a\n    command: [x]\n    env: {DB_PASSWORD: \"${NOPE2}\"}\n")
	if _, err := Load(p, unset); err == nil {
		t.Fatal("Load accepted unset credentials")
	}
	c, err := LoadOffline(p, unset)
	if err != nil {
		t.Fatalf("LoadOffline: %v", err)
	}
	if c.Servers[0].Env["DB_PASSWORD"] != "${NOPE2}" || len(c.Auth.Static) != 0 {
		t.Errorf("offline config %+v", c.Servers[0].Env)
	}
	if _, err := LoadOffline(write("auth: {mode: none}\nservers: []\n"), unset); err == nil {
		t.Error("LoadOffline skipped the rest of validation")
	}
}

// TestRefreshOff: the refresh is on by default, and 0s turns it off.
func TestRefreshOff(t *testing.T) {
	c, err := Parse([]byte("auth: {mode: none}\ndiscovery: {refresh: 0s}\nservers:\n  - name: a\n    command: [x]\n"), env(nil))
	if err != nil || c.Discovery.RefreshEvery() != 0 {
		t.Fatalf("%v %v", err, c.Discovery.RefreshEvery())
	}
}

// TestStdioPrincipalAlone: a configuration for gateway --stdio alone may
// name its one client and no way to authenticate HTTP callers; the HTTP
// front refuses it, saying what --stdio would accept.
func TestStdioPrincipalAlone(t *testing.T) {
	p := filepath.Join(t.TempDir(), "g.yaml")
	body := "auth:\n  stdio_principal: {subject: desk, roles: [viewer]}\nservers:\n  - name: a\n    command: [x]\n"
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	unset := func(string) (string, bool) { return "", false }
	c, err := LoadWithoutCallers(p, unset)
	if err != nil {
		t.Fatalf("--stdio with only its principal: %v", err)
	}
	if c.Auth.StdioPrincipal == nil || c.Auth.StdioPrincipal.Subject != "desk" {
		t.Errorf("principal %+v", c.Auth.StdioPrincipal)
	}
	if _, err := Load(p, unset); err == nil || !strings.Contains(err.Error(), "for gateway --stdio alone, auth.stdio_principal") {
		t.Errorf("the HTTP front with only a stdio principal: %v", err)
	}
	// Without the principal, --stdio has no one to serve either.
	if err := os.WriteFile(p, []byte("servers:\n  - name: a\n    command: [x]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadWithoutCallers(p, unset); err == nil || !strings.Contains(err.Error(), "no authentication method") {
		t.Errorf("--stdio without a principal or a method: %v", err)
	}
}

// TestSyntaxErrorLines: a YAML syntax error names, counted from 1, the
// line where it was found (the scanner's problems), or that line or the
// one where the collection it breaks begins (the parser's).
func TestSyntaxErrorLines(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"auth:\n  mode: none\n foo: 1\n", "line 3 or the block that begins there: did not find expected key"},
		{"auth: {mode: none}\nlog: {level: info}\nservers: [a, b\nlisten: x\n", "line 3 or the block that begins there: did not find expected ',' or ']'"},
		{"auth: {mode: none}\nlog: {level: info\nlisten: x\n", "line 2 or the block that begins there: did not find expected ',' or '}'"},
		{"servers:\n  - name: a\n  - name: b\n - name: c\n", "line 4 or the block that begins there: did not find expected key"},
		{"x: 1\nauth:\n  mode: none\n  log: info\n  a:\n    b: 1\n   c: 2\n", "line 3 or the block that begins there: did not find expected key"},
		{"auth: {mode: none}\nlisten: x\n  state_dir: y\n", "line 3: mapping values are not allowed"},
		{"auth: {mode: none}\nlisten: @x\n", "line 2: found character that cannot start any token"},
	} {
		_, err := Parse([]byte(tc.yaml), env(nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
