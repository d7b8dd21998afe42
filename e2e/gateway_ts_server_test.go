package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// tsServer starts the official TypeScript SDK's Streamable HTTP server of
// clients/ts/server.mjs (stateless, JSON responses) and returns its URL.
func tsServer(t *testing.T) string {
	t.Helper()
	requireTSClient(t)
	cmd := exec.Command("node", filepath.Join(tsClientDir, "server.mjs"))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("server.mjs: %v", err)
	}
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if !ok {
		t.Fatalf("server.mjs said %q", line)
	}
	return url
}

// TestGatewayTSServerDownstream: the gateway, with the default protocol
// (auto), connects to a stateless Streamable HTTP server on the official
// TypeScript SDK — which refuses server/discover with HTTP 400 and an
// error whose id is null — by falling back to initialize at once, and
// its tool is listed and called.
func TestGatewayTSServerDownstream(t *testing.T) {
	url := tsServer(t)
	mark := newMark()
	start := time.Now()
	g := startGateway(t, mark, fmt.Sprintf("  - name: ts\n    url: %s\n", url), "")
	if got := g.tools(); !slices.Equal(got, []string{"ts.echo"}) {
		t.Fatalf("tools %v; the gateway's log:\n%s", got, g.p.stderr.String())
	}
	r := g.call("ts.echo", map[string]any{"text": "hello " + mark})
	res := resultObj(t, r.msg(t))
	if !strings.Contains(fmt.Sprint(res["content"]), "hello "+mark) || res["isError"] == true {
		t.Errorf("ts.echo answered %v", res)
	}
	if logs := g.p.stderr.String(); strings.Contains(logs, "handshake failed") {
		t.Errorf("the handshake failed before it succeeded (after %v):\n%s", time.Since(start), logs)
	}
}
