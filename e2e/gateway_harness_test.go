package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The gateway's end-to-end tests run the real `bastion gateway` binary
// over real HTTP in front of real downstream processes: the mcpfixture
// (whose misbehaviour the test chooses), examples/refund, `bastion serve`,
// and httpfixture, a Streamable HTTP server on the official Go SDK.

// gw is a running gateway.
type gw struct {
	t    testing.TB
	p    *proc
	url  string // the MCP endpoint
	base string // scheme://host:port
	// mark is in the environment of every downstream child the test
	// configured, so that leftovers can be found (see leftovers).
	mark string
}

// gwSessionKey seals the gateway's session ids in these tests.
const gwSessionKey = "e2e-session-key-0123456789abcdef0123456789"

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// newMark returns a fresh marker for a test's child processes.
func newMark() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// fixture is the YAML of one mcpfixture server, with env FIXTURE_* values
// and extra keys (e.g. "timeout: 1s").
func fixture(name, mark string, env map[string]string, extra ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  - name: %s\n    command: [%q]\n    env:\n      E2E_MARK: %q\n", name, bin("mcpfixture"), mark)
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "      %s: %q\n", k, env[k])
	}
	for _, e := range extra {
		fmt.Fprintf(&b, "    %s\n", e)
	}
	return b.String()
}

// stateKeys is what a test configuration needs besides body: a state
// directory of its own, and — unless body configures admission — trust on
// first use, for the tests of what lies past the admission gate.
func stateKeys(t testing.TB, body string) string {
	t.Helper()
	var b strings.Builder
	if !strings.Contains(body, "state_dir:") {
		fmt.Fprintf(&b, "\nstate_dir: %q\n", t.TempDir())
	}
	if !strings.Contains(body, "admission:") {
		b.WriteString("\nadmission: {first_use: pin}\n")
	}
	return b.String()
}

// startGateway writes a configuration with the given servers (YAML list
// items) and top-level extra YAML, starts the gateway and waits until it
// is ready.
func startGateway(t testing.TB, mark, servers, extra string, env ...string) *gw {
	t.Helper()
	return startGatewayWith(t, mark, "auth:\n  mode: none\npolicy:\n  rules:\n    - {id: all, tools: [\"*\"], roles: [\"*\"]}\n"+
		"log:\n  level: debug\nservers:\n"+servers+extra+"\n", env...)
}

// startGatewayWith starts the gateway on a free port with body, the whole
// configuration but listen and public_url.
func startGatewayWith(t testing.TB, mark, body string, env ...string) *gw {
	t.Helper()
	port := freePort(t)
	cfg := fmt.Sprintf("listen: 127.0.0.1:%d\npublic_url: http://127.0.0.1:%d/mcp\n%s", port, port, body+stateKeys(t, body))
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, "bastion", []string{"gateway", "--config", path},
		baseEnv(append([]string{"MCP_GATEWAY_SESSION_KEY=" + gwSessionKey}, env...)...))
	suiteLeaks.watch(p.stderr.String)
	g := &gw{t: t, p: p, base: fmt.Sprintf("http://127.0.0.1:%d", port), mark: mark}
	g.url = g.base + "/mcp"
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(waitLimit):
			}
		}
		if mark != "" {
			if left := leftovers(mark); len(left) > 0 {
				for _, pid := range left {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
				t.Errorf("downstream processes left behind after the gateway ended: %v", left)
			}
		}
	})
	g.waitReady()
	return g
}

// waitReady polls /readyz until it answers 200.
func (g *gw) waitReady() {
	g.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		select {
		case <-g.p.done:
			g.t.Fatalf("the gateway exited with %d before it was ready; stderr:\n%s", g.p.exit, g.p.stderr.String())
		default:
		}
		resp, err := http.Get(g.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	g.t.Fatalf("the gateway was not ready within %s; stderr:\n%s", waitLimit, g.p.stderr.String())
}

// stop sends SIGTERM and returns the exit code.
func (g *gw) stop() int {
	g.t.Helper()
	g.p.signal(syscall.SIGTERM)
	select {
	case <-g.p.done:
		return g.p.exit
	case <-time.After(waitLimit):
		g.t.Fatalf("the gateway did not exit within %s of SIGTERM", waitLimit)
	}
	return -1
}

// leftovers returns the pids of live processes whose environment holds
// E2E_MARK=mark.
func leftovers(mark string) []int {
	want := []byte("E2E_MARK=" + mark + "\x00")
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(append(env, 0), want) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// httpReply is one HTTP answer.
type httpReply struct {
	status int
	header http.Header
	body   []byte
}

// msg decodes the body as one JSON object (the first SSE message's data
// when the answer is an event stream).
func (r httpReply) msg(t testing.TB) msg {
	t.Helper()
	body := r.body
	if strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
		evs := sseMessages(t, body)
		if len(evs) == 0 {
			t.Fatalf("event stream with no message: %q", r.body)
		}
		body = evs[len(evs)-1]
	}
	var m msg
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("HTTP %d: body is not a JSON object: %v: %q", r.status, err, r.body)
	}
	return m
}

// sseMessages returns the data of each event of an event stream.
func sseMessages(t testing.TB, body []byte) [][]byte {
	t.Helper()
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, []byte(d))
		}
	}
	return out
}

// post sends one POST to the endpoint.
func (g *gw) post(ctx context.Context, headers map[string]string, body string) (httpReply, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.url, strings.NewReader(body))
	if err != nil {
		return httpReply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return httpReply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return httpReply{status: resp.StatusCode, header: resp.Header, body: b}, err
}

func (g *gw) mustPost(headers map[string]string, body string) httpReply {
	g.t.Helper()
	r, err := g.post(ctxT(g.t), headers, body)
	if err != nil {
		g.t.Fatalf("POST: %v", err)
	}
	return r
}

// modernBody is a 2026-07-28 request: params with the version in _meta.
func modernBody(id any, method string, params map[string]any) string {
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	return string(b)
}

// modernHeaders are the headers that must mirror a 2026-07-28 body.
func modernHeaders(method, name string) map[string]string {
	h := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
	if name != "" {
		h["Mcp-Name"] = name
	}
	return h
}

// call sends a stateless 2026-07-28 tools/call and returns the answer.
func (g *gw) call(name string, args any) httpReply {
	g.t.Helper()
	return g.mustPost(modernHeaders("tools/call", name), modernBody(1, "tools/call", map[string]any{"name": name, "arguments": args}))
}

// tools lists every tool of the gateway (every page) by name.
func (g *gw) tools() []string {
	g.t.Helper()
	var names []string
	var cursor any
	for page := 0; page < 1000; page++ {
		params := map[string]any{}
		if cursor != nil {
			params["cursor"] = cursor
		}
		r := g.mustPost(modernHeaders("tools/list", ""), modernBody(page, "tools/list", params))
		m := r.msg(g.t)
		res, ok := m["result"].(map[string]any)
		if !ok {
			g.t.Fatalf("tools/list: %s", r.body)
		}
		for _, tl := range res["tools"].([]any) {
			names = append(names, tl.(map[string]any)["name"].(string))
		}
		if cursor = res["nextCursor"]; cursor == nil {
			return names
		}
	}
	g.t.Fatal("tools/list did not end within 1000 pages")
	return nil
}

// legacySession is a legacy (2025-11-25) HTTP session of the gateway.
type legacySession struct {
	g       *gw
	id      string
	version string
}

func (g *gw) legacy(version string) *legacySession {
	g.t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{
		"protocolVersion": version, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "e2e", "version": "1"}}})
	r := g.mustPost(nil, string(b))
	sid := r.header.Get("Mcp-Session-Id")
	if r.status != http.StatusOK || sid == "" {
		g.t.Fatalf("initialize: HTTP %d, session id %q: %s", r.status, sid, r.body)
	}
	s := &legacySession{g: g, id: sid, version: version}
	if r := s.post(ctxT(g.t), `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.status != http.StatusAccepted {
		g.t.Fatalf("notifications/initialized: HTTP %d: %s", r.status, r.body)
	}
	return s
}

// end sends the session's DELETE and returns its HTTP status.
func (s *legacySession) end() int {
	s.g.t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, s.g.url, nil)
	req.Header.Set("Mcp-Session-Id", s.id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.g.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (s *legacySession) post(ctx context.Context, body string) httpReply {
	s.g.t.Helper()
	r, err := s.g.post(ctx, map[string]string{"Mcp-Session-Id": s.id, "MCP-Protocol-Version": s.version}, body)
	if err != nil && ctx.Err() == nil {
		s.g.t.Fatalf("POST: %v", err)
	}
	return r
}

// errorOf returns the JSON-RPC error code and message of m, failing when
// m is not an error.
func errorOf(t testing.TB, m msg) (int, string) {
	t.Helper()
	e, ok := m["error"].(map[string]any)
	if !ok {
		t.Fatalf("want a JSON-RPC error, got %v", m)
	}
	return int(e["code"].(float64)), e["message"].(string)
}

// resultObj returns the result of m, failing when it is an error.
func resultObj(t testing.TB, m msg) map[string]any {
	t.Helper()
	r, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("want a result, got %v", m)
	}
	return r
}

// structured returns structuredContent of a successful tools/call answer.
func structured(t testing.TB, r httpReply) map[string]any {
	t.Helper()
	res := resultObj(t, r.msg(t))
	if res["isError"] == true {
		t.Fatalf("the call failed: %v", res)
	}
	sc, _ := res["structuredContent"].(map[string]any)
	return sc
}

// httpFixture starts httpfixture and returns its URL.
func httpFixture(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin("httpfixture"), args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(waitLimit):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("httpfixture: %v", err)
	}
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "LISTEN ")
	if !ok {
		t.Fatalf("httpfixture said %q", line)
	}
	return url
}
