package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestGatewayDiscovery: every server's list is read whole, across pages,
// in both eras and each legacy version; a list that cannot be completed
// (a repeated cursor, a cycle, no end, an error or a hang mid-way, a
// malformed page) exposes nothing of its server and leaves the others
// alone; the merged list is the qualified names, sorted, and the
// gateway's own pages (100 tools each, its own cursors) hold each tool
// once.
func TestGatewayDiscovery(t *testing.T) {
	mark := newMark()
	many := make([]string, 150)
	for i := range many {
		many[i] = fmt.Sprintf("m%03d", i)
	}
	servers := fixture("paged", mark, map[string]string{"FIXTURE_PAGES": "3", "FIXTURE_TOOLS": "a,b,c,d,e,f"}) +
		fixture("emptycursor", mark, map[string]string{"FIXTURE_PAGES": "empty-cursor", "FIXTURE_TOOLS": "x,y"}) +
		fixture("emptypage", mark, map[string]string{"FIXTURE_PAGES": "empty-page", "FIXTURE_TOOLS": "x,y"}) +
		fixture("many", mark, map[string]string{"FIXTURE_PAGES": "7", "FIXTURE_TOOLS": strings.Join(many, ",")}) +
		fixture("repeat", mark, map[string]string{"FIXTURE_PAGES": "repeat", "FIXTURE_TOOLS": "x,y"}) +
		fixture("cycle", mark, map[string]string{"FIXTURE_PAGES": "cycle", "FIXTURE_TOOLS": "x,y"}) +
		fixture("endless", mark, map[string]string{"FIXTURE_PAGES": "endless"}) +
		fixture("errorat2", mark, map[string]string{"FIXTURE_PAGES": "error-at-2", "FIXTURE_TOOLS": "x,y"}) +
		fixture("hangat2", mark, map[string]string{"FIXTURE_PAGES": "hang-at-2", "FIXTURE_TOOLS": "x,y"}) +
		fixture("badtools", mark, map[string]string{"FIXTURE_PAGES": "bad-tools"}) +
		fixture("badcursor", mark, map[string]string{"FIXTURE_PAGES": "bad-cursor"})
	versions := []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}
	for i, v := range versions {
		servers += fixture(fmt.Sprintf("legacy%d", i), mark, map[string]string{"FIXTURE_ERA": "legacy", "FIXTURE_VERSION": v})
	}
	url := httpFixture(t, "--page-size", "3", "--tools", "5")
	servers += fmt.Sprintf("  - name: http\n    url: %s\n", url)
	g := startGateway(t, mark, servers, "discovery:\n  pages: 50\n  list_timeout: 3s\n")

	var want []string
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		want = append(want, "paged."+n)
	}
	want = append(want, "emptycursor.x", "emptycursor.y", "emptypage.x", "emptypage.y")
	for _, n := range many {
		want = append(want, "many."+n)
	}
	for i := range versions {
		want = append(want, fmt.Sprintf("legacy%d.echo", i))
	}
	want = append(want, "http.echo", "http.headers", "http.slow", "http.whoami")
	for i := range 5 {
		want = append(want, fmt.Sprintf("http.t%02d", i))
	}
	slices.Sort(want)

	got := g.tools()
	if !slices.IsSorted(got) {
		t.Errorf("the merged list is not sorted by qualified name: %v", got)
	}
	if !slices.Equal(got, want) {
		t.Errorf("tools:\n got %v\nwant %v", got, want)
	}
	for _, name := range []string{"repeat", "cycle", "endless", "errorat2", "hangat2", "badtools", "badcursor"} {
		for _, tl := range got {
			if strings.HasPrefix(tl, name+".") {
				t.Errorf("%s exposes %s, though its list could not be completed", name, tl)
			}
		}
	}
	for i, v := range versions {
		mustContain(t, g.p.stderr.String(), fmt.Sprintf(`"server":"legacy%d","protocol_version":%q`, i, v))
	}
	// Every listed tool can be called: the backend map agrees with the list.
	for _, name := range []string{"paged.f", "emptypage.y", "many.m149", "legacy0.echo", "http.t04"} {
		if sc := structured(t, g.call(name, map[string]any{"k": name})); sc["k"] != name {
			t.Errorf("%s echoed %v", name, sc)
		}
	}

	// A forged, altered or foreign cursor is -32602.
	for _, c := range []string{"", "AAAA", strings.Repeat("A", 43)} {
		r := g.mustPost(modernHeaders("tools/list", ""), modernBody(1, "tools/list", map[string]any{"cursor": c}))
		if code, _ := errorOf(t, r.msg(t)); code != -32602 {
			t.Errorf("cursor %q: code %d, want -32602", c, code)
		}
	}
}

// TestGatewayCollisions: two servers offering the same tool names are
// told apart by qualification, and each call reaches its own server.
func TestGatewayCollisions(t *testing.T) {
	mark := newMark()
	servers := fixture("alpha", mark, map[string]string{"FIXTURE_TOOLS": "echo,whoami", "FIXTURE_NAME": "alpha"}) +
		fixture("beta", mark, map[string]string{"FIXTURE_TOOLS": "echo,whoami", "FIXTURE_NAME": "beta"}) +
		fmt.Sprintf("  - name: gamma\n    url: %s\n", httpFixture(t, "--name", "gamma", "--tools", "0"))
	g := startGateway(t, mark, servers, "")
	want := []string{"alpha.echo", "alpha.whoami", "beta.echo", "beta.whoami", "gamma.echo", "gamma.headers", "gamma.slow", "gamma.whoami"}
	if got := g.tools(); !slices.Equal(got, want) {
		t.Fatalf("tools = %v, want %v", got, want)
	}
	for _, server := range []string{"alpha", "beta", "gamma"} {
		if sc := structured(t, g.call(server+".whoami", map[string]any{})); sc["name"] != server {
			t.Errorf("%s.whoami answered by %v", server, sc["name"])
		}
	}
	for _, name := range []string{"whoami", "delta.whoami", "alpha.", ".whoami", "alpha.whoami.x"} {
		r := g.call(name, map[string]any{})
		if code, _ := errorOf(t, r.msg(t)); code != -32602 {
			t.Errorf("%q: code %d, want -32602 (unknown tool)", name, code)
		}
	}
}

// fixtureLog returns a file the fixture logs every line it reads to, and
// a func that reads it.
func fixtureLog(t *testing.T) (string, func() string) {
	path := filepath.Join(t.TempDir(), "fixture.log")
	return path, func() string {
		b, _ := os.ReadFile(path)
		return string(b)
	}
}

// TestGatewayCancellation: a legacy client's notifications/cancelled and a
// 2026-07-28 client's closed request both reach the downstream as
// notifications/cancelled for the gateway's own id, and the client gets
// no response to the cancelled request.
func TestGatewayCancellation(t *testing.T) {
	mark := newMark()
	logPath, log := fixtureLog(t)
	g := startGateway(t, mark, fixture("fx", mark, map[string]string{"FIXTURE_TOOLS": "hang,echo", "FIXTURE_LOG": logPath}), "")

	t.Run("legacy notifications/cancelled", func(t *testing.T) {
		s := g.legacy("2025-11-25")
		before := strings.Count(log(), `"fixture":"cancelled"`)
		done := make(chan httpReply, 1)
		// The id is long and written with an escape; the cancellation
		// names the same id in another spelling, as JSON allows.
		long := strings.Repeat("x", 70)
		go func() {
			done <- s.post(context.Background(), `{"jsonrpc":"2.0","id":"c-`+long+`\u00e9","method":"tools/call","params":{"name":"fx.hang","arguments":{}}}`)
		}()
		waitUntil(t, "the call reaches the downstream", func() bool { return strings.Count(log(), `"name":"hang"`) >= 1 })
		// Another session cannot cancel it.
		other := g.legacy("2025-11-25")
		other.post(ctxT(t), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c-`+long+`é"}}`)
		select {
		case r := <-done:
			t.Fatalf("another session's cancellation ended the call: %d %s", r.status, r.body)
		case <-time.After(300 * time.Millisecond):
		}
		s.post(ctxT(t), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c-`+long+`é","reason":"user"}}`)
		var r httpReply
		select {
		case r = <-done:
		case <-time.After(waitLimit):
			t.Fatal("the cancelled call did not end")
		}
		if r.status != http.StatusNoContent || len(r.body) != 0 {
			t.Errorf("the cancelled request got HTTP %d %q, want 204 and no response", r.status, r.body)
		}
		waitUntil(t, "the downstream hears of the cancellation", func() bool {
			return strings.Count(log(), `"fixture":"cancelled"`) > before
		})
		mustContain(t, log(), `"method":"notifications/cancelled"`)
	})

	t.Run("legacy notifications/cancelled of a call answered as a stream", func(t *testing.T) {
		s := g.legacy("2025-11-25")
		calls := strings.Count(log(), `"name":"hang"`)
		done := make(chan httpReply, 1)
		go func() {
			r, _ := g.post(context.Background(), map[string]string{"Mcp-Session-Id": s.id, "MCP-Protocol-Version": s.version, "Accept": "text/event-stream"},
				`{"jsonrpc":"2.0","id":"sse-1","method":"tools/call","params":{"name":"fx.hang","arguments":{}}}`)
			done <- r
		}()
		waitUntil(t, "the call reaches the downstream", func() bool { return strings.Count(log(), `"name":"hang"`) > calls })
		s.post(ctxT(t), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"sse-1"}}`)
		select {
		case r := <-done:
			if r.status != http.StatusNoContent || len(r.body) != 0 {
				t.Errorf("the cancelled request got HTTP %d %q, want 204 and no response, as on the JSON path", r.status, r.body)
			}
		case <-time.After(waitLimit):
			t.Fatal("the cancelled call did not end")
		}
	})

	t.Run("modern client disconnect", func(t *testing.T) {
		before := strings.Count(log(), `"fixture":"cancelled"`)
		calls := strings.Count(log(), `"name":"hang"`)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := g.post(ctx, modernHeaders("tools/call", "fx.hang"), modernBody(2, "tools/call", map[string]any{"name": "fx.hang", "arguments": map[string]any{}}))
			done <- err
		}()
		waitUntil(t, "the call reaches the downstream", func() bool { return strings.Count(log(), `"name":"hang"`) > calls })
		cancel()
		<-done
		waitUntil(t, "the downstream hears of the cancellation", func() bool {
			return strings.Count(log(), `"fixture":"cancelled"`) > before
		})
	})
	// The server still serves.
	if sc := structured(t, g.call("fx.echo", map[string]any{"v": 1})); sc["v"] != float64(1) {
		t.Errorf("echo after cancellations: %v", sc)
	}
}

// TestGatewayDownstreamCrashLeavingGrandchild: a downstream that dies
// while a process it started still holds its stdout fails the call in
// flight at once with -32003 (502), not at the call's deadline (504), and
// is restarted; what it left in its process group does not outlive the
// gateway.
func TestGatewayDownstreamCrashLeavingGrandchild(t *testing.T) {
	mark := newMark()
	// The shell starts the grandchild with its stdout and becomes the
	// fixture, which exits on a call of crash.
	servers := fmt.Sprintf("  - name: fx\n    command: [\"/bin/sh\", \"-c\", %q, %q]\n    env:\n      E2E_MARK: %q\n      FIXTURE_TOOLS: \"crash,echo\"\n    timeout: 20s\n",
		`sleep 60 & exec "$0"`, bin("mcpfixture"), mark)
	g := startGateway(t, mark, servers, "")

	start := time.Now()
	r := g.call("fx.crash", map[string]any{})
	if r.status != http.StatusBadGateway {
		t.Errorf("HTTP %d after %s, want 502; stderr:\n%s", r.status, time.Since(start), g.p.stderr.String())
	}
	if code, _ := errorOf(t, r.msg(t)); code != -32003 {
		t.Errorf("code %d, want -32003", code)
	}
	waitUntil(t, "fx is restarted and serves again", func() bool {
		r := g.call("fx.echo", map[string]any{"v": "back"})
		return r.status == http.StatusOK && strings.Contains(string(r.body), `"back"`)
	})
	if !strings.Contains(g.p.stderr.String(), `"msg":"downstream exited"`) {
		t.Errorf("stderr:\n%s", g.p.stderr.String())
	}
}

// TestGatewayDownstreamFaults: a crash mid-call fails that call with
// -32003 (502) while every other server keeps serving, and the crashed
// server is restarted; a hung call meets the deadline (-32003, 504) and
// the downstream is told; garbage and oversized lines are dropped and
// counted, never fatal.
func TestGatewayDownstreamFaults(t *testing.T) {
	mark := newMark()
	logPath, log := fixtureLog(t)
	servers := fixture("fx", mark, map[string]string{"FIXTURE_TOOLS": "crash,hang,garbage,oversize,duplicate,wrong-id,echo", "FIXTURE_LOG": logPath}, "timeout: 1s") +
		fixture("other", mark, map[string]string{"FIXTURE_TOOLS": "echo,slow"})
	g := startGateway(t, mark, servers, "limits:\n  downstream_message: 1MiB\n")

	t.Run("crash", func(t *testing.T) {
		slow := make(chan httpReply, 1)
		go func() { slow <- g.call("other.slow", map[string]any{"ms": 300}) }()
		r := g.call("fx.crash", map[string]any{})
		if r.status != http.StatusBadGateway {
			t.Errorf("HTTP %d, want 502", r.status)
		}
		if code, _ := errorOf(t, r.msg(t)); code != -32003 {
			t.Errorf("code %d, want -32003", code)
		}
		if sc := structured(t, <-slow); sc["ms"] != float64(300) {
			t.Errorf("the other server's call in flight: %v", sc)
		}
		if sc := structured(t, g.call("other.echo", map[string]any{"v": "still"})); sc["v"] != "still" {
			t.Errorf("the other server after the crash: %v", sc)
		}
		waitUntil(t, "fx is restarted and serves again", func() bool {
			r := g.call("fx.echo", map[string]any{"v": "back"})
			return r.status == http.StatusOK && strings.Contains(string(r.body), `"back"`)
		})
		waitUntil(t, "the restart logged", func() bool { return strings.Contains(g.p.stderr.String(), "downstream will be restarted") })
	})

	t.Run("deadline", func(t *testing.T) {
		before := strings.Count(log(), `"fixture":"cancelled"`)
		start := time.Now()
		r := g.call("fx.hang", map[string]any{})
		if r.status != http.StatusGatewayTimeout {
			t.Errorf("HTTP %d, want 504", r.status)
		}
		if code, _ := errorOf(t, r.msg(t)); code != -32003 {
			t.Errorf("code %d, want -32003", code)
		}
		if el := time.Since(start); el < time.Second {
			t.Errorf("the call ended after %s, before its 1s deadline", el)
		}
		waitUntil(t, "the downstream hears the call was given up", func() bool {
			return strings.Count(log(), `"fixture":"cancelled"`) > before
		})
	})

	t.Run("garbage, oversized, duplicate and misaddressed lines", func(t *testing.T) {
		for _, name := range []string{"fx.garbage", "fx.oversize", "fx.duplicate", "fx.wrong-id"} {
			if sc := structured(t, g.call(name, map[string]any{"n": name})); sc["n"] != name {
				t.Errorf("%s: %v", name, sc)
			}
		}
		if sc := structured(t, g.call("fx.echo", map[string]any{"v": 2})); sc["v"] != float64(2) {
			t.Errorf("echo afterwards: %v", sc)
		}
		errLog := g.p.stderr.String()
		mustContain(t, errLog, "downstream sent something that is not a JSON-RPC message")
		mustContain(t, errLog, "downstream sent a message over the size cap; dropped")
	})
}

// TestGatewayShutdown: SIGTERM ends the gateway cleanly and every child
// with it, a child that ignores SIGTERM included (it is killed), and none
// is left behind.
func TestGatewayShutdown(t *testing.T) {
	mark := newMark()
	servers := fixture("stubborn", mark, map[string]string{"FIXTURE_IGNORE_TERM": "1"}) +
		fixture("polite", mark, nil)
	g := startGateway(t, mark, servers, "")
	if n := len(leftovers(mark)); n != 2 {
		t.Fatalf("%d marked children running, want 2", n)
	}
	if code := g.stop(); code != 0 {
		t.Errorf("exit %d, want 0; stderr:\n%s", code, g.p.stderr.String())
	}
	waitUntil(t, "no child left", func() bool { return len(leftovers(mark)) == 0 })
}

// waitUntil is waitFor that says what it waited for.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, waitLimit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
