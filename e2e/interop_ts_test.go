package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// tsClientDir holds the TypeScript SDK client (clients/ts/client.mjs) and
// its pinned dependencies.
var tsClientDir = filepath.Join("clients", "ts")

// tsCall is one tools/call for the TypeScript client. Expect is "ok" (the
// default), "toolError" (isError true) or "protocolError" (JSON-RPC error).
type tsCall struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments,omitempty"`
	Expect    string         `json:"expect,omitempty"`
}

// tsSummary is the JSON line client.mjs prints.
type tsSummary struct {
	OK                       bool           `json:"ok"`
	RequestedProtocolVersion string         `json:"requestedProtocolVersion"`
	ProtocolVersion          string         `json:"protocolVersion"`
	ServerInfo               map[string]any `json:"serverInfo"`
	Tools                    []string       `json:"tools"`
	Calls                    []tsCallResult `json:"calls"`
	ServerExit               *tsExit        `json:"serverExit"`
	SessionID                *bool          `json:"sessionId"`
	Failures                 []string       `json:"failures"`
}

// tsExit is how the server process ended, as the client saw it.
type tsExit struct {
	Code   *int    `json:"code"`
	Signal *string `json:"signal"`
}

// tsCallResult is what the client observed of one call.
type tsCallResult struct {
	Name                  string         `json:"name"`
	IsError               *bool          `json:"isError"`
	StructuredContent     map[string]any `json:"structuredContent"`
	TextMatchesStructured *bool          `json:"textMatchesStructured"`
	Error                 *struct {
		Code    *int   `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// requireTSClient skips the test, or fails it in CI, when the TypeScript
// client cannot run: node is missing or its dependencies are not installed.
// CI must never pass by skipping an interop test.
func requireTSClient(t *testing.T) {
	t.Helper()
	missing := func(why string) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s; the test command must run `npm ci --prefix e2e/clients/ts` before `go test`", why)
		}
		t.Skipf("%s; run `npm ci --prefix e2e/clients/ts` to enable this test", why)
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing("node is not on PATH")
	}
	if _, err := os.Stat(filepath.Join(tsClientDir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		missing("e2e/clients/ts/node_modules is missing")
	}
}

// runTSClient runs the TypeScript SDK client against server (a command and
// its arguments) with the extra environment env and the calls, and returns
// its summary. The client itself exits non-zero when any expectation
// failed; that fails the test here, with the client's own failure list.
func runTSClient(t *testing.T, server []string, env map[string]string, calls []tsCall) tsSummary {
	t.Helper()
	envJSON, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	if env == nil {
		envJSON = []byte("{}")
	}
	callsJSON, err := json.Marshal(calls)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--env", string(envJSON), "--calls", string(callsJSON), "--"}
	return runTSClientArgs(t, append(args, server...))
}

// runTSClientURL runs the TypeScript SDK client over Streamable HTTP
// against url.
func runTSClientURL(t *testing.T, url string, calls []tsCall) tsSummary {
	t.Helper()
	callsJSON, err := json.Marshal(calls)
	if err != nil {
		t.Fatal(err)
	}
	return runTSClientArgs(t, []string{"--url", url, "--calls", string(callsJSON)})
}

// runTSClientArgs runs client.mjs with args.
func runTSClientArgs(t *testing.T, args []string) tsSummary {
	t.Helper()
	cmd := exec.CommandContext(ctxT(t), "node", append([]string{filepath.Join(tsClientDir, "client.mjs")}, args...)...)
	// node itself gets only PATH and HOME; the client passes the server
	// only those plus env.
	cmd.Env = baseEnv()
	var stdout bytes.Buffer
	stderr := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	// If the context kills node, the server it spawned may hold the
	// pipes open; WaitDelay bounds that.
	cmd.WaitDelay = waitLimit
	runErr := cmd.Run()
	defer func() {
		if t.Failed() {
			t.Logf("client and server stderr:\n%s", stderr.String())
		}
	}()
	var ee *exec.ExitError
	if runErr != nil && !errors.As(runErr, &ee) {
		t.Fatalf("run TypeScript client: %v", runErr)
	}
	var s tsSummary
	line := bytes.TrimSpace(stdout.Bytes())
	if err := json.Unmarshal(line, &s); err != nil {
		t.Fatalf("TypeScript client output is not one JSON summary (%v): %q", err, line)
	}
	if runErr != nil || !s.OK {
		t.Fatalf("TypeScript client failed (%v): %s", runErr, strings.Join(s.Failures, "; "))
	}
	return s
}

func TestTypeScriptSDKClient(t *testing.T) {
	requireTSClient(t)
	s := runTSClient(t, []string{bin("bastion"), "serve"}, map[string]string{"MCP_LOG_LEVEL": "warn"}, []tsCall{
		{Name: "system_metrics", Arguments: map[string]any{}},
		{Name: "no_such_tool", Expect: "protocolError"},
		{Name: "system_metrics", Arguments: map[string]any{"unexpected": 1}, Expect: "toolError"},
	})

	// The SDK asks for its latest version; a version bastion supports is
	// answered as asked.
	if s.ProtocolVersion != s.RequestedProtocolVersion || s.ProtocolVersion != "2025-11-25" {
		t.Errorf("protocol version: asked %q, negotiated %q; want both 2025-11-25",
			s.RequestedProtocolVersion, s.ProtocolVersion)
	}
	if s.ServerInfo["name"] != "mcp-bastion" {
		t.Errorf("serverInfo = %v, want name mcp-bastion", s.ServerInfo)
	}
	if len(s.Tools) != 1 || s.Tools[0] != "system_metrics" {
		t.Errorf("tools = %v, want [system_metrics]", s.Tools)
	}
	if len(s.Calls) != 3 {
		t.Fatalf("got %d call results, want 3", len(s.Calls))
	}

	ok := s.Calls[0]
	if ok.IsError == nil || *ok.IsError {
		t.Fatalf("system_metrics isError = %v, want false", ok.IsError)
	}
	checkMetrics(t, ok.StructuredContent)
	if ok.TextMatchesStructured == nil || !*ok.TextMatchesStructured {
		t.Error("the text block does not hold the structured result")
	}

	unknown := s.Calls[1]
	if unknown.Error == nil || unknown.Error.Code == nil || *unknown.Error.Code != -32602 {
		t.Errorf("unknown tool: error = %+v, want code -32602", unknown.Error)
	}

	bad := s.Calls[2]
	if bad.IsError == nil || !*bad.IsError || bad.StructuredContent != nil {
		t.Errorf("invalid arguments: isError = %v, structuredContent = %v; want an in-band error without structuredContent",
			bad.IsError, bad.StructuredContent)
	}

	if s.ServerExit == nil || s.ServerExit.Code == nil || *s.ServerExit.Code != 0 {
		t.Errorf("server exit = %+v, want code 0 after the client closed stdin", s.ServerExit)
	}
}
