package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"
	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The gateway's authentication and authorization, end to end. What a
// downstream received is read from the downstream's own record (the
// fixture's FIXTURE_LOG of every line it read, httpfixture's headers
// tool), never inferred from the answer: a denied call must not be there.

// Tokens of these tests: random per run, so that the leak check below
// can look for them.
var (
	adminToken  = "adm-" + randHex(12)
	viewerToken = "view-" + randHex(12)
	supportTok  = "sup-" + randHex(12)
)

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}

func tokensEnv() string {
	b, _ := json.Marshal(map[string]any{
		adminToken:  map[string]string{"sub": "alice@example.com", "role": "admin"},
		viewerToken: map[string]string{"sub": "bob@example.com", "role": "viewer"},
		supportTok:  map[string]any{"sub": "sam", "roles": []string{"support", "viewer"}},
	})
	return string(b)
}

const authPolicy = `policy:
  rules:
    - {id: admin-tools, tools: ["*.admin_*"], roles: [admin]}
    - id: refunds
      tools: ["*.refund"]
      roles: [support, admin]
      when: "'admin' in principal.roles || double(args.amount) <= 100.0"
    - {id: everyone-else, tools: ["*"], roles: ["*"]}
`

// authGateway fronts one fixture whose every received line lands in the
// returned log file, behind the test tokens and authPolicy, plus extra
// top-level YAML.
func authGateway(t *testing.T, extra string, servers ...string) (*gw, string) {
	t.Helper()
	return authGatewayPolicy(t, authPolicy, extra, servers...)
}

func authGatewayPolicy(t *testing.T, pol, extra string, servers ...string) (*gw, string) {
	t.Helper()
	suiteLeaks.secret(adminToken, viewerToken, supportTok)
	mark := newMark()
	rec := filepath.Join(t.TempDir(), "received.log")
	srv := fixture("fx", mark, map[string]string{"FIXTURE_TOOLS": "echo,admin_reset_key,refund,crash", "FIXTURE_LOG": rec})
	body := "auth:\n  tokens_env: E2E_TOKENS\n" + pol + "log:\n  level: debug\n" + extra +
		"servers:\n" + srv + strings.Join(servers, "")
	g := startGatewayWith(t, mark, body, "E2E_TOKENS="+tokensEnv())
	return g, rec
}

// received is what the fixture read, as one string.
func received(t *testing.T, rec string) string {
	t.Helper()
	b, err := os.ReadFile(rec)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

func callAs(g *gw, tok, name string, args any, id any) httpReply {
	g.t.Helper()
	h := modernHeaders("tools/call", name)
	if tok != "" {
		h["Authorization"] = "Bearer " + tok
	}
	return g.mustPost(h, modernBody(id, "tools/call", map[string]any{"name": name, "arguments": args}))
}

// TestGatewayAuthentication: every way to fail authentication is 401 with
// -32000 and a Bearer challenge (invalid_token only when a token was
// presented), the id echoed; nothing reaches the downstream; the scheme
// is matched without regard to case, the token exactly.
func TestGatewayAuthentication(t *testing.T) {
	g, rec := authGateway(t, "")
	body := modernBody(7, "tools/call", map[string]any{"name": "fx.echo", "arguments": map[string]any{"probe": "unauthenticated"}})
	for _, tc := range []struct {
		name      string
		auth      []string
		presented bool
	}{
		{"no header", nil, false},
		{"wrong scheme", []string{"Basic " + adminToken}, true},
		{"empty token", []string{"Bearer "}, true},
		{"unknown token", []string{"Bearer not-a-token"}, true},
		{"token in another case", []string{"Bearer " + strings.ToUpper(adminToken)}, true},
		{"token with a suffix", []string{"Bearer " + adminToken + "x"}, true},
		{"two headers", []string{"Bearer " + adminToken, "Bearer " + adminToken}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, g.url, strings.NewReader(body))
			for k, v := range modernHeaders("tools/call", "fx.echo") {
				req.Header.Set(k, v)
			}
			req.Header.Set("Content-Type", "application/json")
			for _, a := range tc.auth {
				req.Header.Add("Authorization", a)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var m msg
			_ = json.NewDecoder(resp.Body).Decode(&m)
			ch := resp.Header.Get("WWW-Authenticate")
			if resp.StatusCode != 401 || m["id"] != float64(7) || !strings.HasPrefix(ch, "Bearer ") || strings.Contains(ch, "invalid_token") != tc.presented {
				t.Errorf("HTTP %d, challenge %q, body %v", resp.StatusCode, ch, m)
			}
			if code, _ := errorOf(t, m); code != -32000 {
				t.Errorf("code %d", code)
			}
		})
	}
	// bEaReR is the Bearer scheme.
	r := g.mustPost(map[string]string{"Authorization": "bEaReR " + viewerToken, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "fx.echo"},
		modernBody(8, "tools/call", map[string]any{"name": "fx.echo", "arguments": map[string]any{"probe": "mixed-case"}}))
	if r.status != 200 {
		t.Fatalf("bEaReR: HTTP %d %s", r.status, r.body)
	}
	got := received(t, rec)
	if strings.Contains(got, "unauthenticated") || !strings.Contains(got, "mixed-case") {
		t.Errorf("the downstream received:\n%s", got)
	}
}

// TestGatewayAuthorization: seed 002's demonstration and its batch and
// notification rows. A viewer's admin_* call is 403/-32001 and never
// reaches the downstream; the admin's is forwarded; the CEL rule bounds
// a refund for one role and not another; a batch is decided member by
// member with the answers in the client's order; a denied notification
// gets no body; the listing is the caller's own.
func TestGatewayAuthorization(t *testing.T) {
	mport := freePort(t)
	g, rec := authGateway(t, fmt.Sprintf("metrics:\n  listen: 127.0.0.1:%d\n", mport))
	suiteLeaks.secret("KEY-VIEWER", "KEY-SPELT", "KEY-ADMIN", "KEY-BATCH", "KEY-NOTIFY", "batch-1", "refund-sup-50", "refund-adm-5000")
	defer func() {
		// The metrics hold names and counts, never a value.
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", mport))
		if err != nil {
			t.Errorf("metrics: %v", err)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(b), `bastion_gateway_decisions_total{outcome="deny",rule="admin-tools"}`) {
			t.Errorf("metrics lack the decision counter:\n%s", b)
		}
		suiteLeaks.watch(func() string { return string(b) })
	}()
	r := callAs(g, viewerToken, "fx.admin_reset_key", map[string]any{"key_id": "KEY-VIEWER"}, 1)
	m := r.msg(t)
	code, _ := errorOf(t, m)
	data := fmt.Sprint(m["error"].(map[string]any)["data"])
	if r.status != 403 || code != -32001 || !strings.Contains(data, "required_roles:[admin]") || !strings.Contains(data, "rule:admin-tools") || !strings.Contains(data, "roles:[viewer]") {
		t.Fatalf("viewer: HTTP %d %s", r.status, r.body)
	}
	// Another spelling names no tool (names are exact), and never reaches
	// the downstream; the rule's pattern ignores case regardless.
	if m := callAs(g, viewerToken, "FX.ADMIN_reset_key", map[string]any{"key_id": "KEY-SPELT"}, 2).msg(t); m["error"] == nil {
		t.Errorf("a respelt admin tool: %v", m)
	}
	if r := callAs(g, adminToken, "fx.admin_reset_key", map[string]any{"key_id": "KEY-ADMIN"}, 3); r.status != 200 {
		t.Fatalf("admin: HTTP %d %s", r.status, r.body)
	}
	// The refund rule: support up to 100, admin without bound, viewer not at all.
	for _, tc := range []struct {
		tok    string
		amount float64
		want   int
	}{
		{supportTok, 50, 200}, {supportTok, 5000, 403}, {adminToken, 5000, 200}, {viewerToken, 1, 403},
	} {
		r := callAs(g, tc.tok, "fx.refund", map[string]any{"amount": tc.amount, "marker": fmt.Sprintf("refund-%s-%v", tc.tok[:3], tc.amount)}, 4)
		if r.status != tc.want {
			t.Errorf("refund of %v with %s: HTTP %d %s", tc.amount, tc.tok[:3], r.status, r.body)
		}
	}
	got := received(t, rec)
	for _, never := range []string{"KEY-VIEWER", "KEY-SPELT", "refund-sup-5000", "refund-vie-1"} {
		if strings.Contains(got, never) {
			t.Errorf("a denied call reached the downstream (%s):\n%s", never, got)
		}
	}
	for _, want := range []string{"KEY-ADMIN", "refund-sup-50", "refund-adm-5000"} {
		if !strings.Contains(got, want) {
			t.Errorf("an allowed call did not reach the downstream (%s)", want)
		}
	}

	// Listing: the viewer does not see admin_* (nor the refund it may not
	// call); the admin does; both lists are private.
	list := func(tok string) (names []string, scope any) {
		h := modernHeaders("tools/list", "")
		h["Authorization"] = "Bearer " + tok
		res := resultObj(t, g.mustPost(h, modernBody(9, "tools/list", nil)).msg(t))
		for _, tl := range res["tools"].([]any) {
			names = append(names, tl.(map[string]any)["name"].(string))
		}
		return names, res["cacheScope"]
	}
	vn, vscope := list(viewerToken)
	an, _ := list(adminToken)
	if slices.Contains(vn, "fx.admin_reset_key") || slices.Contains(vn, "fx.refund") || !slices.Contains(vn, "fx.echo") || vscope != "private" {
		t.Errorf("viewer lists %v (cacheScope %v)", vn, vscope)
	}
	if !slices.Contains(an, "fx.admin_reset_key") {
		t.Errorf("admin lists %v", an)
	}

	// A legacy session of the viewer: a batch decided member by member.
	s := legacyAs(t, g, viewerToken, "2025-03-26")
	batch := `[{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"fx.echo","arguments":{"m":"batch-1"}}},` +
		`{"jsonrpc":"2.0","id":0,"method":"tools/call","params":{"name":"fx.admin_reset_key","arguments":{"key_id":"KEY-BATCH"}}},` +
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"fx.admin_reset_key","arguments":{"key_id":"KEY-NOTIFY"}}},` +
		`{"jsonrpc":"2.0","id":"","method":"tools/list"}]`
	br := s.post(batch)
	var members []msg
	if err := json.Unmarshal(br.body, &members); err != nil || br.status != 200 || len(members) != 3 {
		t.Fatalf("batch: HTTP %d %s", br.status, br.body)
	}
	if members[0]["id"] != "a" || members[0]["result"] == nil || members[1]["id"] != float64(0) || members[2]["id"] != "" || members[2]["result"] == nil {
		t.Errorf("batch answers out of order or wrong: %s", br.body)
	}
	if c, _ := errorOf(t, members[1]); c != -32001 {
		t.Errorf("batch member 2: %v", members[1])
	}
	// A denied notification alone: no body.
	nr := s.post(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"fx.admin_reset_key","arguments":{"key_id":"KEY-NOTIFY2"}}}`)
	if len(strings.TrimSpace(string(nr.body))) != 0 || nr.status == 200 {
		t.Errorf("a denied notification: HTTP %d %q", nr.status, nr.body)
	}
	got = received(t, rec)
	if !strings.Contains(got, "batch-1") || strings.Contains(got, "KEY-BATCH") || strings.Contains(got, "KEY-NOTIFY") {
		t.Errorf("the downstream received:\n%s", got)
	}
	// The viewer's session id is refused with the admin's token.
	h := map[string]string{"Mcp-Session-Id": s.id, "MCP-Protocol-Version": "2025-03-26", "Authorization": "Bearer " + adminToken}
	if r := g.mustPost(h, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); r.status != 404 {
		t.Errorf("another principal's session id: HTTP %d %s", r.status, r.body)
	}

	// The log and the audit (both on the gateway's stderr here) name
	// decisions, never a token, an argument value or a session id.
	logs := g.p.stderr.String()
	for _, e := range []string{`"outcome":"deny","reason":"role","code":-32001`, `"rule":"admin-tools","outcome":"allow"`, `"rule":"refunds","outcome":"deny","reason":"condition"`} {
		if !strings.Contains(logs, e) {
			t.Errorf("the audit lacks %s", e)
		}
	}
	for _, secret := range []string{adminToken, viewerToken, supportTok, "KEY-VIEWER", "KEY-ADMIN", "KEY-BATCH", "batch-1", "refund-sup-50", s.id} {
		if strings.Contains(logs, secret) {
			t.Errorf("the gateway's stderr holds %q", secret)
		}
	}
}

type authSession struct {
	g   *gw
	id  string
	v   string
	tok string
}

func legacyAs(t *testing.T, g *gw, tok, version string) *authSession {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{
		"protocolVersion": version, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "e2e", "version": "1"}}})
	r := g.mustPost(map[string]string{"Authorization": "Bearer " + tok}, string(b))
	if r.status != 200 || r.header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: HTTP %d %s", r.status, r.body)
	}
	return &authSession{g: g, id: r.header.Get("Mcp-Session-Id"), v: version, tok: tok}
}

func (s *authSession) post(body string) httpReply {
	return s.g.mustPost(map[string]string{"Mcp-Session-Id": s.id, "MCP-Protocol-Version": s.v, "Authorization": "Bearer " + s.tok}, body)
}

// TestGatewayIdentityHeaders: an HTTP downstream hears who calls from the
// gateway alone: X-MCP-Gateway-Subject, -Issuer, -Role and -Request-Id;
// a caller's own x-mcp-gateway-* headers, Authorization and Cookie never
// arrive, so a role cannot be forged.
func TestGatewayIdentityHeaders(t *testing.T) {
	url := httpFixture(t, "--name", "web", "--tools", "0")
	g, _ := authGateway(t, "", fmt.Sprintf("  - name: web\n    url: %s\n", url))
	h := modernHeaders("tools/call", "web.headers")
	h["Authorization"] = "Bearer " + viewerToken
	h["X-MCP-Gateway-Role"] = "admin"
	h["X-MCP-Gateway-Subject"] = "forged-subject-9f2c"
	h["X-MCP-Gateway-Issuer"] = "https://forged-issuer-9f2c"
	h["Cookie"] = "session=stolen-cookie-9f2c"
	h["X-Forwarded-For"] = "10.9.8.7"
	suiteLeaks.secret("forged-subject-9f2c", "forged-issuer-9f2c", "stolen-cookie-9f2c", "10.9.8.7")
	r := g.mustPost(h, modernBody(1, "tools/call", map[string]any{"name": "web.headers", "arguments": map[string]any{}}))
	got := structured(t, r)
	if fmt.Sprint(got["x-mcp-gateway-role"]) != "[viewer]" || fmt.Sprint(got["x-mcp-gateway-subject"]) != "[bob@example.com]" ||
		fmt.Sprint(got["x-mcp-gateway-issuer"]) != "[static]" || got["x-mcp-gateway-request-id"] == nil {
		t.Errorf("the downstream saw %v", got)
	}
	for _, k := range []string{"authorization", "cookie", "x-forwarded-for"} {
		if got[k] != nil {
			t.Errorf("the client's %s reached the downstream: %v", k, got[k])
		}
	}
}

// TestGatewayRateLimit: past its rate a principal gets -32005, 429 and
// Retry-After; another principal is unaffected.
func TestGatewayRateLimit(t *testing.T) {
	g, _ := authGatewayPolicy(t, authPolicy+"  rate: {per_principal: 1/m, burst: 2}\n", "")
	for i := range 2 {
		if r := callAs(g, viewerToken, "fx.echo", map[string]any{}, i); r.status != 200 {
			t.Fatalf("call %d: HTTP %d %s", i, r.status, r.body)
		}
	}
	r := callAs(g, viewerToken, "fx.echo", map[string]any{}, 3)
	if code, _ := errorOf(t, r.msg(t)); r.status != 429 || code != -32005 || r.header.Get("Retry-After") == "" {
		t.Errorf("over the rate: HTTP %d, Retry-After %q: %s", r.status, r.header.Get("Retry-After"), r.body)
	}
	if r := callAs(g, adminToken, "fx.echo", map[string]any{}, 4); r.status != 200 {
		t.Errorf("another principal: HTTP %d %s", r.status, r.body)
	}
	// A request past the rate is audited under a method label the gateway
	// chose: the caller's own method text, of any length, never reaches
	// the decision log.
	method := "x-" + strings.Repeat("m", 4096) + "-RATE-PROBE"
	h := modernHeaders(method, "")
	h["Authorization"] = "Bearer " + viewerToken
	if r := g.mustPost(h, modernBody(5, method, map[string]any{})); r.status != 429 {
		t.Errorf("an unknown method over the rate: HTTP %d %s", r.status, r.body)
	}
	// The line is written before the answer, and read from the pipe after.
	waitUntil(t, "the audit of the request over the rate", func() bool {
		return strings.Contains(g.p.stderr.String(), `"method":"(other)","outcome":"rate_limited"`)
	})
	if logs := g.p.stderr.String(); strings.Contains(logs, "RATE-PROBE") {
		t.Errorf("the audit of a request over the rate holds the caller's method:\n%s", logs)
	}
}

// jwksServer is an identity provider's key set, with keys the test makes
// and rotates.
type jwksServer struct {
	mu   sync.Mutex
	keys []jwk.Key
	url  string
}

func newJWKS(t *testing.T) *jwksServer {
	j := &jwksServer{}
	j.rotate(t, "k1")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		j.mu.Lock()
		defer j.mu.Unlock()
		set := jwk.NewSet()
		for _, k := range j.keys {
			pub, _ := k.PublicKey()
			_ = set.AddKey(pub)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(srv.Close)
	j.url = srv.URL
	return j
}

func (j *jwksServer) rotate(t *testing.T, kid string) {
	raw, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := jwk.Import(raw)
	_ = k.Set(jwk.KeyIDKey, kid)
	j.mu.Lock()
	j.keys = []jwk.Key{k}
	j.mu.Unlock()
}

func (j *jwksServer) sign(t *testing.T, aud string, mod func(jwt.Token)) string {
	t.Helper()
	tok := jwt.New()
	_ = tok.Set(jwt.IssuerKey, "https://idp.e2e")
	_ = tok.Set(jwt.AudienceKey, aud)
	_ = tok.Set(jwt.SubjectKey, "carol")
	_ = tok.Set(jwt.ExpirationKey, time.Now().Add(time.Hour))
	_ = tok.Set("roles", []string{"viewer"})
	if mod != nil {
		mod(tok)
	}
	j.mu.Lock()
	k := j.keys[0]
	j.mu.Unlock()
	b, err := jwt.Sign(tok, jwt.WithKey(jwa.RS256(), k))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestGatewayJWT: JWTs from a key set the test serves: a good one is the
// caller, expired, wrong-audience, wrong-issuer, unsigned and foreign-key
// ones are 401 with invalid_token; a rotated key is picked up without a
// restart; RFC 9728 metadata is served and every 401 points at it.
func TestGatewayJWT(t *testing.T) {
	j := newJWKS(t)
	mark := newMark()
	srv := fixture("fx", mark, map[string]string{"FIXTURE_TOOLS": "echo"})
	body := fmt.Sprintf("auth:\n  jwt: {issuer: \"https://idp.e2e\", jwks_url: %q, jwks_min_refresh: 1ms}\n"+
		"  resource_metadata: {authorization_servers: [\"https://idp.e2e\"]}\n%slog:\n  level: debug\nservers:\n%s", j.url, authPolicy, srv)
	g := startGatewayWith(t, mark, body)
	aud := g.url
	call := func(tok string) httpReply {
		return callAs(g, tok, "fx.echo", map[string]any{}, 1)
	}
	if r := call(j.sign(t, aud, nil)); r.status != 200 {
		t.Fatalf("a good JWT: HTTP %d %s", r.status, r.body)
	}
	unsigned := func() string {
		tok := j.sign(t, aud, nil)
		parts := strings.Split(tok, ".")
		return "eyJhbGciOiJub25lIn0." + parts[1] + "."
	}()
	foreign := &jwksServer{}
	foreign.rotate(t, "k1") // the set's kid, another key
	stranger := &jwksServer{}
	stranger.rotate(t, "k-nobody-knows")
	for name, tok := range map[string]string{
		"HMAC keyed with the public key": j.hmacConfused(t, aud),
		"signed by a foreign key":        foreign.sign(t, aud, nil),
		"an unknown key id":              stranger.sign(t, aud, nil),
		"expired":                        j.sign(t, aud, func(c jwt.Token) { _ = c.Set(jwt.ExpirationKey, time.Now().Add(-time.Hour)) }),
		"wrong audience":                 j.sign(t, "http://elsewhere/mcp", nil),
		"wrong issuer":                   j.sign(t, aud, func(c jwt.Token) { _ = c.Set(jwt.IssuerKey, "https://evil.e2e") }),
		"alg none":                       unsigned,
	} {
		r := call(tok)
		if r.status != 401 || !strings.Contains(r.header.Get("WWW-Authenticate"), `error="invalid_token"`) ||
			!strings.Contains(r.header.Get("WWW-Authenticate"), `resource_metadata="`+strings.TrimSuffix(g.url, "/mcp")+`/.well-known/oauth-protected-resource/mcp"`) {
			t.Errorf("%s: HTTP %d, challenge %q", name, r.status, r.header.Get("WWW-Authenticate"))
		}
	}
	j.rotate(t, "k2")
	if r := call(j.sign(t, aud, nil)); r.status != 200 {
		t.Errorf("after the IdP rotated its key: HTTP %d %s", r.status, r.body)
	}
	resp, err := http.Get(strings.TrimSuffix(g.url, "/mcp") + "/.well-known/oauth-protected-resource/mcp")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var meta map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&meta)
	if resp.StatusCode != 200 || meta["resource"] != g.url {
		t.Errorf("metadata: HTTP %d %v", resp.StatusCode, meta)
	}
}

// TestGatewayStreamsEndWithCredential: a notification stream lives no
// longer than the JWT that opened it is accepted (its exp plus the
// leeway): a 2026-07-28 subscriptions/listen then ends with its result,
// as at shutdown, and a legacy session's GET stream ends; a listen
// opened with a JWT that lives on stays open.
func TestGatewayStreamsEndWithCredential(t *testing.T) {
	j := newJWKS(t)
	mark := newMark()
	body := fmt.Sprintf("auth:\n  jwt: {issuer: \"https://idp.e2e\", jwks_url: %q, leeway: 1s}\n%slog:\n  level: debug\nservers:\n%s",
		j.url, authPolicy, fixture("fx", mark, map[string]string{"FIXTURE_TOOLS": "echo"}))
	g := startGatewayWith(t, mark, body)
	ctx := ctxT(t)
	lasting := j.sign(t, g.url, nil)
	short := j.sign(t, g.url, func(c jwt.Token) { _ = c.Set(jwt.ExpirationKey, time.Now().Add(3*time.Second)) })

	kept := listenStream(ctx, t, g, lasting, "kept", map[string]any{"toolsListChanged": true})
	ending := listenStream(ctx, t, g, short, "ending", map[string]any{"toolsListChanged": true})
	next(t, kept, "the acknowledgement of the listen with a lasting JWT")
	next(t, ending, "the acknowledgement of the listen with a short-lived JWT")

	auth := map[string]string{"Authorization": "Bearer " + short}
	r, err := g.post(ctx, auth, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`)
	sid := r.header.Get("Mcp-Session-Id")
	if err != nil || r.status != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %v, HTTP %d: %s", err, r.status, r.body)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Authorization", "Bearer "+short)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %v %v", err, resp)
	}
	t.Cleanup(func() { resp.Body.Close() })
	got := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		got <- err
	}()

	m := next(t, ending, "the listen's end, past its JWT's exp and the leeway")
	if res, _ := m["result"].(map[string]any); m["id"] != "ending" || res["resultType"] != "complete" {
		t.Errorf("the listen whose JWT expired ended with %v", m)
	}
	select {
	case _, open := <-ending:
		if open {
			t.Error("the listen went on after its result")
		}
	case <-time.After(waitLimit):
		t.Error("the listen whose JWT expired was not closed")
	}
	select {
	case err := <-got:
		if err != nil {
			t.Errorf("the GET stream whose JWT expired: %v", err)
		}
	case <-time.After(waitLimit):
		t.Error("the GET stream outlived its JWT")
	}
	select {
	case m, open := <-kept:
		t.Errorf("the listen with a lasting JWT ended: %v %v", m, open)
	default:
	}
}

// hmacConfused is a token signed with HS256 under the bytes of the set's
// public key: the classic algorithm confusion.
func (j *jwksServer) hmacConfused(t *testing.T, aud string) string {
	j.mu.Lock()
	pub, _ := j.keys[0].PublicKey()
	kid, _ := j.keys[0].KeyID()
	j.mu.Unlock()
	var raw rsa.PublicKey
	if err := jwk.Export(pub, &raw); err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&raw)
	tok := jwt.New()
	_ = tok.Set(jwt.IssuerKey, "https://idp.e2e")
	_ = tok.Set(jwt.AudienceKey, aud)
	_ = tok.Set(jwt.SubjectKey, "mallory")
	_ = tok.Set(jwt.ExpirationKey, time.Now().Add(time.Hour))
	_ = tok.Set("roles", []string{"admin"})
	hdr := jws.NewHeaders()
	_ = hdr.Set(jws.KeyIDKey, kid)
	b, err := jwt.Sign(tok, jwt.WithKey(jwa.HS256(), der, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestGatewayRuleThatDoesNotCompile: a condition that does not compile
// stops start-up (and --check), naming the rule.
func TestGatewayRuleThatDoesNotCompile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	cfg := "auth:\n  tokens_env: E2E_TOKENS\npolicy:\n  rules:\n    - {id: big-refunds, tools: [\"*\"], roles: [\"*\"], when: \"args.amount >\"}\n" +
		"servers:\n  - name: a\n    command: [x]\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"gateway", "--check", "--config", path}, {"gateway", "--config", path}} {
		_, errOut, code := runBastion(t, baseEnv("E2E_TOKENS="+tokensEnv(), "MCP_GATEWAY_SESSION_KEY="+gwSessionKey), args...)
		if code != 2 || !strings.Contains(errOut, `policy.rules[0] (line 5): rule "big-refunds": when:`) {
			t.Errorf("%v: exit %d: %s", args, code, errOut)
		}
		if strings.Contains(errOut, adminToken) {
			t.Errorf("the error holds a token")
		}
	}
}

// TestGatewayStdioPrincipal: the --stdio front's one client is
// auth.stdio_principal: its calls are decided by the rules, and it lists
// only what they may allow it.
func TestGatewayStdioPrincipal(t *testing.T) {
	mark := newMark()
	cfg := "auth:\n  tokens_env: E2E_TOKENS\n  stdio_principal: {subject: desk, roles: [viewer]}\n" + authPolicy + "servers:\n" +
		fixture("fx", mark, map[string]string{"FIXTURE_TOOLS": "echo,admin_reset_key"})
	cfg += stateKeys(t, cfg)
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, "bastion", []string{"gateway", "--stdio", "--config", path}, baseEnv("E2E_TOKENS="+tokensEnv()))
	p.initialize("2025-11-25")
	deadline := time.Now().Add(waitLimit)
	for id := 100; ; id++ {
		p.sendJSON(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/list"})
		m := mustJSON(t, p.recvID(id))
		if strings.Contains(m, `"fx.echo"`) {
			if strings.Contains(m, "admin_reset_key") {
				t.Errorf("the viewer lists the admin tool: %s", m)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fx.echo never listed: %s", m)
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.call(2, "fx.admin_reset_key", map[string]any{"key_id": "KEY-STDIO"})
	if m := p.recvID(2); !strings.Contains(mustJSON(t, m), "-32001") {
		t.Errorf("the stdio viewer's admin call: %v", m)
	}
	p.closeStdin()
	if code := p.wait(); code != 0 {
		t.Errorf("exit %d; stderr:\n%s", code, p.stderr.String())
	}
	waitUntil(t, "no child left", func() bool { return len(leftovers(mark)) == 0 })
}

// TestGatewayRefusalsEchoIDs: a 401 and a 403 echo the request's id
// exactly — 0, "", a string, a negative number — and a null or fractional
// id, which no MCP request may carry, is refused (-32600, 400) before
// authentication, with the id echoed as sent.
func TestGatewayRefusalsEchoIDs(t *testing.T) {
	g, _ := authGateway(t, "")
	for _, id := range []string{`0`, `""`, `"0"`, `-1`, `null`, `1.5`} {
		body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"fx.admin_reset_key","arguments":{"key_id":"KEY-X"},` +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		h := modernHeaders("tools/call", "fx.admin_reset_key")
		for _, tc := range []struct {
			tok    string
			status int
		}{{"", 401}, {viewerToken, 403}} {
			if tc.tok != "" {
				h["Authorization"] = "Bearer " + tc.tok
			}
			r := g.mustPost(h, body)
			want := tc.status
			if id == "null" || id == "1.5" {
				want = 400 // not a valid MCP request: refused before anything else
			}
			if r.status != want || !strings.Contains(string(r.body), `"id":`+id+`,`) {
				t.Errorf("id %s, with a token %v: HTTP %d %s", id, tc.tok != "", r.status, r.body)
			}
		}
	}
}

// TestGatewayAuthFailuresPerAddress: successful authentications cost the
// address nothing, however many; once it has used up its failed
// authentications, its requests are refused (429, -32005, Retry-After)
// before any token is read, a valid one included.
func TestGatewayAuthFailuresPerAddress(t *testing.T) {
	g, _ := authGateway(t, "limits:\n  auth_failures: {per_address: 1/m, burst: 3}\n")
	for i := range 12 {
		if r := callAs(g, viewerToken, "fx.echo", map[string]any{}, i); r.status != 200 {
			t.Fatalf("success %d: HTTP %d %s", i, r.status, r.body)
		}
	}
	for i := range 3 {
		if r := callAs(g, "wrong-"+fmt.Sprint(i), "fx.echo", map[string]any{}, i); r.status != 401 {
			t.Fatalf("failure %d: HTTP %d %s", i, r.status, r.body)
		}
	}
	r := callAs(g, viewerToken, "fx.echo", map[string]any{}, 9)
	if code, _ := errorOf(t, r.msg(t)); r.status != 429 || code != -32005 || r.header.Get("Retry-After") == "" {
		t.Errorf("after the failures: HTTP %d, Retry-After %q: %s", r.status, r.header.Get("Retry-After"), r.body)
	}
}

// bearerTransport adds a bearer token to every request of a client nobody
// here wrote.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestGatewayGoSDKClientAuthorized: the official Go SDK client, in both
// eras, with a viewer's token lists only what the viewer may call and is
// refused an admin tool with -32001; with the admin's token the same call
// goes through. Without a token it cannot connect.
func TestGatewayGoSDKClientAuthorized(t *testing.T) {
	g, rec := authGateway(t, "")
	connect := func(t *testing.T, tok, version string) (*sdkmcp.ClientSession, error) {
		client := sdkmcp.NewClient(&sdkmcp.Implementation{Name: "bastion-e2e-gosdk", Version: "1.0.0"}, nil)
		var opts *sdkmcp.ClientSessionOptions
		if version != "" {
			opts = &sdkmcp.ClientSessionOptions{ProtocolVersion: version}
		}
		hc := &http.Client{Transport: bearerTransport{tok}}
		return client.Connect(ctxT(t), &sdkmcp.StreamableClientTransport{Endpoint: g.url, HTTPClient: hc, MaxRetries: -1}, opts)
	}
	for _, version := range []string{"", "2025-11-25"} {
		t.Run("era "+version, func(t *testing.T) {
			ctx := ctxT(t)
			cs, err := connect(t, viewerToken, version)
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			var names []string
			for tl, err := range cs.Tools(ctx, nil) {
				if err != nil {
					t.Fatalf("tools/list: %v", err)
				}
				names = append(names, tl.Name)
			}
			if slices.Contains(names, "fx.admin_reset_key") || !slices.Contains(names, "fx.echo") {
				t.Errorf("the viewer lists %v", names)
			}
			_, err = cs.CallTool(ctx, &sdkmcp.CallToolParams{Name: "fx.admin_reset_key", Arguments: map[string]any{"key_id": "KEY-SDK-VIEWER"}})
			if err == nil || !strings.Contains(err.Error(), "Unauthorized Tool Call") {
				t.Errorf("the viewer's admin call: %v", err)
			}
			admin, err := connect(t, adminToken, version)
			if err != nil {
				t.Fatalf("connect as admin: %v", err)
			}
			defer admin.Close()
			if res, err := admin.CallTool(ctx, &sdkmcp.CallToolParams{Name: "fx.admin_reset_key", Arguments: map[string]any{"key_id": "KEY-SDK-ADMIN"}}); err != nil || res.IsError {
				t.Errorf("the admin's call: %v %+v", err, res)
			}
		})
	}
	if _, err := connect(t, "not-a-token", ""); err == nil {
		t.Error("a client with an unknown token connected")
	}
	got := received(t, rec)
	if strings.Contains(got, "KEY-SDK-VIEWER") || !strings.Contains(got, "KEY-SDK-ADMIN") {
		t.Errorf("the downstream received:\n%s", got)
	}
}

// TestGatewayEnvelopesWithAuth: with authentication on, every malformed
// envelope of seed 002's list is refused with its code and status, and
// none reaches the downstream.
func TestGatewayEnvelopesWithAuth(t *testing.T) {
	g, rec := authGateway(t, "")
	s := legacyAs(t, g, viewerToken, "2025-03-26")
	for _, tc := range []struct {
		name, body string
		code       float64
		status     int
	}{
		{"not JSON", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx.echo","arguments":{"m":"env-1"}}`, -32700, 400},
		{"no jsonrpc", `{"id":1,"method":"tools/call","params":{"name":"fx.echo","arguments":{"m":"env-2"}}}`, -32600, 400},
		{"wrong jsonrpc", `{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"fx.echo","arguments":{"m":"env-3"}}}`, -32600, 400},
		{"method not a string", `{"jsonrpc":"2.0","id":1,"method":7}`, -32600, 400},
		{"empty batch", `[]`, -32600, 400},
		{"duplicate member", `{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"tools/list","params":{"name":"fx.echo","arguments":{"m":"env-4"}}}`, -32700, 400}, // strict JSON: a repeated member is not JSON the gateway reads
		{"no name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"m":"env-5"}}}`, -32602, 200},
		{"name not a string", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7,"arguments":{"m":"env-6"}}}`, -32602, 200},
	} {
		r := s.post(tc.body)
		var m msg
		_ = json.Unmarshal(r.body, &m)
		code := float64(0)
		if e, ok := m["error"].(map[string]any); ok {
			code, _ = e["code"].(float64)
		}
		if r.status != tc.status || code != tc.code {
			t.Errorf("%s: HTTP %d %s, want %d and %v", tc.name, r.status, r.body, tc.status, tc.code)
		}
	}
	if got := received(t, rec); strings.Contains(got, "env-") {
		t.Errorf("a malformed envelope reached the downstream:\n%s", got)
	}
}

// TestGatewayDownstreamUnavailableWithAuth: an allowed call whose
// downstream dies is -32003 (502), audited as allowed with that code; the
// gateway keeps serving the caller once the downstream is back.
func TestGatewayDownstreamUnavailableWithAuth(t *testing.T) {
	g, _ := authGateway(t, "")
	r := callAs(g, viewerToken, "fx.crash", map[string]any{}, 1)
	if code, _ := errorOf(t, r.msg(t)); r.status != 502 || code != -32003 {
		t.Fatalf("a crashing downstream: HTTP %d %s", r.status, r.body)
	}
	waitUntil(t, "the downstream is back", func() bool {
		return callAs(g, viewerToken, "fx.echo", map[string]any{}, 2).status == 200
	})
	if !strings.Contains(g.p.stderr.String(), `"tool":"fx.crash","rule":"everyone-else","outcome":"allow","code":-32003`) {
		t.Errorf("the audit lacks the failed, allowed call")
	}
}

// openListen opens a 2026-07-28 subscriptions/listen as tok's principal
// and returns the response once its acknowledgement was read (or its
// refusal, unread).
func openListen(t *testing.T, g *gw, tok, id string, tools bool) *http.Response {
	t.Helper()
	r, err := http.DefaultClient.Do(listenRequest(ctxT(t), g, tok, id, map[string]any{"toolsListChanged": tools}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Body.Close() })
	if r.StatusCode == 200 {
		if _, err := bufio.NewReader(r.Body).ReadString('\n'); err != nil {
			t.Fatalf("listen %s: %v", id, err)
		}
	}
	return r
}

// TestGatewayListenBounded: a subscription spends the caller's rate like
// any request, and one principal's streams — whatever they ask to hear —
// are bounded, so it cannot take every stream from the others.
func TestGatewayListenBounded(t *testing.T) {
	g, _ := authGatewayPolicy(t, authPolicy+"  rate: {per_principal: 1/m, burst: 2}\n", "")
	for i := range 2 {
		if r := openListen(t, g, viewerToken, fmt.Sprint("r", i), true); r.StatusCode != 200 {
			t.Fatalf("listen %d: HTTP %d", i, r.StatusCode)
		}
	}
	if r := openListen(t, g, viewerToken, "r2", true); r.StatusCode != 429 || r.Header.Get("Retry-After") == "" {
		t.Errorf("a listen past the rate: HTTP %d", r.StatusCode)
	}
	// Each resource a listen names costs the rate as a subscribe would:
	// one naming two spends three tokens.
	g3, _ := authGatewayPolicy(t, authPolicy+"  rate: {per_principal: 1/m, burst: 3}\n", "")
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	listenStream(ctx, t, g3, viewerToken, "u", map[string]any{"resourceSubscriptions": []string{"file:///a.md", "file:///b.md"}})
	if r := openListen(t, g3, viewerToken, "u2", true); r.StatusCode != 429 {
		t.Errorf("a listen after one that named two resources, at a burst of three: HTTP %d", r.StatusCode)
	}
	// All together it costs at most a full burst: with a burst of one, a
	// listen naming resources can still be opened.
	g4, _ := authGatewayPolicy(t, authPolicy+"  rate: {per_principal: 1/m, burst: 1}\n", "")
	listenStream(ctx, t, g4, viewerToken, "v", map[string]any{"resourceSubscriptions": []string{"file:///a.md", "file:///b.md"}})

	g2, _ := authGateway(t, "")
	n := 0
	for ; n < 40; n++ {
		r := openListen(t, g2, viewerToken, fmt.Sprint("s", n), n%2 == 0) // half of them ask for nothing
		if r.StatusCode != 200 {
			var m msg
			_ = json.NewDecoder(r.Body).Decode(&m)
			if code, _ := errorOf(t, m); r.StatusCode != 429 || code != -32005 {
				t.Errorf("the refused listen: HTTP %d %v", r.StatusCode, m)
			}
			break
		}
	}
	if n == 40 || n < 4 {
		t.Errorf("one principal held %d streams", n)
	}
	if r := openListen(t, g2, adminToken, "admin", true); r.StatusCode != 200 {
		t.Errorf("another principal's listen, once the first is at its bound: HTTP %d", r.StatusCode)
	}
}

// TestGatewayConditionSeesWhatTheDownstreamReads: under a rule with a
// condition, arguments whose member names differ only in case are
// refused, so the condition cannot judge "amount" while a case-folding
// downstream acts on "AMOUNT".
func TestGatewayConditionSeesWhatTheDownstreamReads(t *testing.T) {
	g, rec := authGateway(t, "")
	m := callAs(g, supportTok, "fx.refund", map[string]any{"amount": 50, "AMOUNT": 5000, "marker": "folded-dup"}, 1).msg(t)
	if !strings.Contains(mustJSON(t, m), "differ only in case") {
		t.Errorf("case-colliding arguments under a condition: %v", m)
	}
	if strings.Contains(received(t, rec), "folded-dup") {
		t.Error("the call reached the downstream")
	}
}

// TestGatewayCaseVariantArgument: a single argument named as a declared
// one but for case ("TO" where the schema declares "to") is refused as
// invalid arguments on both fronts, under a rule whose !has(args.to) it
// would pass while a case-folding downstream reads it as "to", and under
// a rule without a condition; it never reaches the downstream.
func TestGatewayCaseVariantArgument(t *testing.T) {
	mark, dir := newMark(), t.TempDir()
	rec := filepath.Join(dir, "received.log")
	writeFile(t, filepath.Join(dir, "descriptors.json"), `[`+
		`{"name":"note","inputSchema":{"type":"object","properties":{"to":{"type":"string"},"body":{"type":"string"}}}},`+
		`{"name":"mail","inputSchema":{"type":"object","properties":{"to":{"type":"string"},"body":{"type":"string"}}}}]`)
	body := "auth:\n  tokens_env: E2E_TOKENS\n  stdio_principal: {subject: desk, roles: [viewer]}\n" + `policy:
  rules:
    - {id: notes-unaddressed, tools: ["fx.note"], roles: ["*"], when: "!has(args.to)"}
    - {id: mail, tools: ["fx.mail"], roles: ["*"]}
` + "servers:\n" + fixture("fx", mark, map[string]string{"FIXTURE_DESCRIPTORS": filepath.Join(dir, "descriptors.json"), "FIXTURE_LOG": rec})
	refused := func(t *testing.T, front, got string) {
		t.Helper()
		if !strings.Contains(got, "differs only in case") {
			t.Errorf("%s: a case-variant argument: %s", front, got)
		}
	}
	g := startGatewayWith(t, mark, body, "E2E_TOKENS="+tokensEnv())
	for _, name := range []string{"fx.note", "fx.mail"} {
		refused(t, "http "+name, mustJSON(t, callAs(g, viewerToken, name, map[string]any{"TO": "x@example.com", "body": "case-variant-http"}, 1).msg(t)))
	}
	if m := callAs(g, viewerToken, "fx.note", map[string]any{"body": "unaddressed"}, 2).msg(t); strings.Contains(mustJSON(t, m), `"isError":true`) || m["error"] != nil {
		t.Errorf("an unaddressed note: %v", m)
	}

	path := filepath.Join(dir, "stdio.yaml")
	writeFile(t, path, body+stateKeys(t, body))
	cs := goSDKCommandSession(t, "", baseEnv("E2E_TOKENS="+tokensEnv()), "gateway", "--stdio", "--config", path)
	ctx := ctxT(t)
	for _, name := range []string{"fx.note", "fx.mail"} {
		res, err := cs.CallTool(ctx, &sdkmcp.CallToolParams{Name: name, Arguments: map[string]any{"tO": "x@example.com", "body": "case-variant-stdio"}})
		got := fmt.Sprint(err)
		if res != nil {
			got = mustJSON(t, res)
		}
		refused(t, "stdio "+name, got)
	}
	if strings.Contains(received(t, rec), "case-variant") {
		t.Error("a call with a case-variant argument reached the downstream")
	}
}

// TestGatewayCheckAndStart: --check refuses what start-up refuses (--stdio
// without its principal), and a port in use stops the gateway before it
// starts any downstream, saying why.
func TestGatewayCheckAndStart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.yaml")
	received := filepath.Join(dir, "received.log")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := fmt.Sprintf("listen: %s\npublic_url: http://%s/mcp\nstate_dir: %q\nauth:\n  tokens_env: E2E_TOKENS\n%sservers:\n%s",
		busy.Addr(), busy.Addr(), filepath.Join(dir, "state"), authPolicy, fixture("fx", newMark(), map[string]string{"FIXTURE_LOG": received}))
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := baseEnv("E2E_TOKENS="+tokensEnv(), "MCP_GATEWAY_SESSION_KEY="+gwSessionKey)
	for _, args := range [][]string{{"gateway", "--check", "--stdio", "--config", path}, {"gateway", "--stdio", "--config", path}} {
		if _, errOut, code := runBastion(t, env, args...); code != 2 || !strings.Contains(errOut, "--stdio needs auth.stdio_principal") {
			t.Errorf("%v: exit %d: %s", args, code, errOut)
		}
	}
	if _, errOut, code := runBastion(t, env, "gateway", "--check", "--config", path); code != 0 || !strings.Contains(errOut, "configuration OK (1 server: fx)") {
		t.Errorf("--check: exit %d: %s", code, errOut)
	}
	// --stdio authenticates no HTTP caller: the callers' tokens need not
	// be set (a desktop client's configuration need not carry them), but
	// the HTTP front still needs them.
	withPrincipal := filepath.Join(dir, "stdio.yaml")
	if err := os.WriteFile(withPrincipal, []byte(strings.Replace(cfg, "tokens_env: E2E_TOKENS\n", "tokens_env: E2E_TOKENS\n  stdio_principal: {subject: desk, roles: [viewer]}\n", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	noTokens := baseEnv("MCP_GATEWAY_SESSION_KEY=" + gwSessionKey)
	if _, errOut, code := runBastion(t, noTokens, "gateway", "--check", "--stdio", "--config", withPrincipal); code != 0 {
		t.Errorf("--check --stdio without the callers' tokens: exit %d: %s", code, errOut)
	}
	if _, errOut, code := runBastion(t, noTokens, "gateway", "--check", "--config", withPrincipal); code != 2 || !strings.Contains(errOut, "auth.tokens_env") {
		t.Errorf("--check without the callers' tokens: exit %d: %s", code, errOut)
	}
	// Neither the tokens nor the session key: one run names both.
	if _, errOut, code := runBastion(t, baseEnv(), "gateway", "--check", "--config", withPrincipal); code != 2 ||
		!strings.Contains(errOut, "auth.tokens_env") || !strings.Contains(errOut, "MCP_GATEWAY_SESSION_KEY: not set") {
		t.Errorf("--check without the tokens and the session key: exit %d: %s", code, errOut)
	}
	// A server whose command cannot be started is told at --check, not
	// found at run time as a server that fails closed.
	for _, command := range []string{`["bin/no-such-server"]`, `["no-such-server-on-path"]`, fmt.Sprintf("[%q]", dir)} {
		bad := filepath.Join(dir, "bad.yaml")
		if err := os.WriteFile(bad, []byte(fmt.Sprintf("auth:\n  tokens_env: E2E_TOKENS\n%sservers:\n  - name: fx\n    command: %s\n", authPolicy, command)), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, errOut, code := runBastion(t, env, "gateway", "--check", "--config", bad); code != 2 || !strings.Contains(errOut, "servers[0].command[0]: ") {
			t.Errorf("--check of the command %s: exit %d: %s", command, code, errOut)
		}
	}
	// A bare name is looked up on PATH only, as a shell does; when a file
	// of that name sits in the server's directory, --check says how to
	// name it.
	bare := filepath.Join(dir, "bare.yaml")
	if err := os.WriteFile(bare, []byte(fmt.Sprintf("auth:\n  tokens_env: E2E_TOKENS\n%sservers:\n  - name: fx\n    command: [gateway.yaml]\n    dir: %q\n", authPolicy, dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runBastion(t, env, "gateway", "--check", "--config", bare); code != 2 || !strings.Contains(errOut, "gateway.yaml is not on PATH (for the file in the server's directory, write ./gateway.yaml)") {
		t.Errorf("--check of a bare name that is a file here: exit %d: %s", code, errOut)
	}
	// What the file alone cannot tell is said at once, under one heading:
	// the session key the environment lacks and the command not found.
	noKey := baseEnv("E2E_TOKENS=" + tokensEnv())
	if _, errOut, code := runBastion(t, noKey, "gateway", "--check", "--config", bare); code != 2 ||
		!strings.Contains(errOut, "invalid configuration:\n  MCP_GATEWAY_SESSION_KEY: not set") || !strings.Contains(errOut, "\n  servers[0].command[0]: ") {
		t.Errorf("--check without a session key, of a command not found: exit %d: %s", code, errOut)
	}
	_, errOut, code := runBastion(t, env, "gateway", "--config", path)
	if code != 1 || !strings.Contains(errOut, "bastion gateway: listen:") || strings.Contains(errOut, "gateway listening") {
		t.Errorf("a port in use: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(received); !os.IsNotExist(err) {
		t.Errorf("a downstream was started before the port was taken (%v)", err)
	}
}

// TestGatewayDownstreamArgumentNames: a downstream's schema may name its
// arguments outside the core's identifier grammar ("user-id", a map of
// header names, "a.b"): a tool the gateway lists is callable with them on
// both fronts, while a name holding a bidirectional control is still
// refused before the downstream.
func TestGatewayDownstreamArgumentNames(t *testing.T) {
	mark, dir := newMark(), t.TempDir()
	rec := filepath.Join(dir, "received.log")
	writeFile(t, filepath.Join(dir, "descriptors.json"), `[{"name":"echo","inputSchema":{"type":"object","properties":{`+
		`"user-id":{"type":"string"},"a.b":{"type":"integer"},"body":{"type":"string"},`+
		`"headers":{"type":"object","additionalProperties":{"type":"string"}}}}}]`)
	body := "auth:\n  tokens_env: E2E_TOKENS\n  stdio_principal: {subject: desk, roles: [viewer]}\n" + `policy:
  rules:
    - {id: all, tools: ["fx.echo"], roles: ["*"]}
` + "servers:\n" + fixture("fx", mark, map[string]string{"FIXTURE_DESCRIPTORS": filepath.Join(dir, "descriptors.json"), "FIXTURE_LOG": rec})
	args := func(marker string) map[string]any {
		return map[string]any{"user-id": "u1", "a.b": 1, "headers": map[string]any{"Content-Type": "text/plain", "X-Trace": "t"}, "body": marker}
	}
	hidden := map[string]any{"user\u202eid": "u1", "body": "bidi-name"}
	g := startGatewayWith(t, mark, body, "E2E_TOKENS="+tokensEnv())
	if m := callAs(g, viewerToken, "fx.echo", args("names-http"), 1).msg(t); m["error"] != nil || strings.Contains(mustJSON(t, m), `"isError":true`) {
		t.Errorf("http: a call with the downstream's own names: %v", m)
	}
	if m := callAs(g, viewerToken, "fx.echo", hidden, 2).msg(t); m["error"] == nil && !strings.Contains(mustJSON(t, m), `"isError":true`) {
		t.Errorf("http: a name with a bidi control was accepted: %v", m)
	}

	path := filepath.Join(dir, "stdio.yaml")
	writeFile(t, path, body+stateKeys(t, body))
	cs := goSDKCommandSession(t, "", baseEnv("E2E_TOKENS="+tokensEnv()), "gateway", "--stdio", "--config", path)
	ctx := ctxT(t)
	if res, err := cs.CallTool(ctx, &sdkmcp.CallToolParams{Name: "fx.echo", Arguments: args("names-stdio")}); err != nil || res.IsError {
		t.Errorf("stdio: a call with the downstream's own names: %v %v", err, res)
	}
	if res, err := cs.CallTool(ctx, &sdkmcp.CallToolParams{Name: "fx.echo", Arguments: hidden}); err == nil && !res.IsError {
		t.Errorf("stdio: a name with a bidi control was accepted: %v", mustJSON(t, res))
	}
	got := received(t, rec)
	for _, marker := range []string{"names-http", "names-stdio"} {
		if !strings.Contains(got, marker) {
			t.Errorf("the call %s did not reach the downstream", marker)
		}
	}
	if strings.Contains(got, "bidi-name") {
		t.Error("a call with a bidi control in a member name reached the downstream")
	}
}
