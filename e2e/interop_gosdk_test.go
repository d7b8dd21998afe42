package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The official Go SDK (github.com/modelcontextprotocol/go-sdk) is a client
// peer here: it drives `bastion serve` through its own CommandTransport,
// so what is tested is the wire as a third-party implementation reads it.
// By default the SDK (v1.8.0) opens with the stateless 2026-07-28
// server/discover; the legacy test pins 2025-11-25 and so runs initialize.

// goSDKSession connects the Go SDK client to a fresh `bastion serve`,
// asking for protocol version (empty: the SDK's choice). The caller closes
// the session; the CommandTransport's Close waits for the process and
// returns its exit error, so a nil error means the server exited 0.
func goSDKSession(t *testing.T, version string) *mcp.ClientSession {
	t.Helper()
	return goSDKCommandSession(t, version, baseEnv(), "serve")
}

// goSDKCommandSession is goSDKSession with the bastion subcommand and
// arguments args, run with env.
func goSDKCommandSession(t *testing.T, version string, env []string, args ...string) *mcp.ClientSession {
	t.Helper()
	return goSDKClientSession(t, version, nil, env, args...)
}

// goSDKClientSession is goSDKCommandSession with the client's options.
func goSDKClientSession(t *testing.T, version string, copts *mcp.ClientOptions, env []string, args ...string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(bin("bastion"), args...)
	cmd.Env = env
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "bastion-e2e-gosdk", Version: "1.0.0"}, copts)
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := client.Connect(ctxT(t), &mcp.CommandTransport{Command: cmd, TerminateDuration: waitLimit}, opts)
	if err != nil {
		t.Fatalf("connect: %v; server stderr:\n%s", err, stderr.String())
	}
	t.Cleanup(func() {
		// Close is idempotent: this only matters when a test failed
		// before its own Close, and then the process must not outlive it.
		_ = cs.Close()
		if t.Failed() {
			t.Logf("server stderr:\n%s", stderr.String())
		}
	})
	return cs
}

func TestGoSDKClient(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version string // asked for; "" lets the SDK choose
		want    string // negotiated
	}{
		{name: "sdk-default", version: "", want: "2026-07-28"},
		{name: "legacy-2025-11-25", version: "2025-11-25", want: "2025-11-25"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			cs := goSDKSession(t, tc.version)
			init := cs.InitializeResult()
			if init.ProtocolVersion != tc.want {
				t.Errorf("negotiated protocol version = %q, want %q", init.ProtocolVersion, tc.want)
			}
			if init.ServerInfo == nil || init.ServerInfo.Name != "mcp-bastion" {
				t.Errorf("serverInfo = %+v, want name mcp-bastion", init.ServerInfo)
			}
			if init.Capabilities == nil || init.Capabilities.Tools == nil {
				t.Errorf("capabilities = %+v, want tools", init.Capabilities)
			}

			list, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			var metrics *mcp.Tool
			for _, tl := range list.Tools {
				if tl.Name == "system_metrics" {
					metrics = tl
				}
			}
			if metrics == nil {
				t.Fatalf("tools/list has no system_metrics: %+v", list.Tools)
			}
			if metrics.OutputSchema == nil {
				t.Fatal("system_metrics has no outputSchema")
			}
			if a := metrics.Annotations; a == nil || !a.ReadOnlyHint || a.DestructiveHint == nil || *a.DestructiveHint {
				t.Errorf("annotations = %+v, want read-only and not destructive", a)
			}

			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "system_metrics", Arguments: map[string]any{}})
			if err != nil {
				t.Fatalf("tools/call system_metrics: %v", err)
			}
			if res.IsError {
				t.Fatalf("system_metrics isError; content: %s", contentText(res))
			}
			checkMetrics(t, res.StructuredContent)
			validateOutput(t, metrics.OutputSchema, res.StructuredContent)
			// The text block must carry the same result, for clients that
			// read only content.
			var fromText any
			if err := json.Unmarshal([]byte(contentText(res)), &fromText); err != nil {
				t.Fatalf("text block is not JSON: %v", err)
			}
			if a, b := mustJSON(t, fromText), mustJSON(t, res.StructuredContent); a != b {
				t.Errorf("text block %s differs from structuredContent %s", a, b)
			}

			// Close ends the server's stdin; the CommandTransport then waits
			// for the process, so a nil error is a clean exit 0.
			if err := cs.Close(); err != nil {
				t.Fatalf("close: %v (the server must exit 0 after stdin closes)", err)
			}
		})
	}
}

func TestGoSDKClientUnknownTool(t *testing.T) {
	ctx := ctxT(t)
	cs := goSDKSession(t, "")
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{}})
	if err == nil {
		t.Fatal("calling an unknown tool succeeded")
	}
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		t.Fatalf("error %v (%T) is not a JSON-RPC error", err, err)
	}
	if werr.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("code = %d, want %d (-32602)", werr.Code, jsonrpc.CodeInvalidParams)
	}
	mustContain(t, werr.Message, `Unknown tool: "no_such_tool"`)

	// The session survives a refused call.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "system_metrics", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("system_metrics after an unknown tool: err=%v result=%+v", err, res)
	}
	if err := cs.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// TestGoSDKClientInvalidArguments checks that arguments the input schema
// refuses come back in-band (isError) rather than as a protocol error, so a
// model using the SDK can read the problem and retry.
func TestGoSDKClientInvalidArguments(t *testing.T) {
	ctx := ctxT(t)
	cs := goSDKSession(t, "2025-11-25")
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "system_metrics", Arguments: map[string]any{"unexpected": 1}})
	if err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	if !res.IsError {
		t.Fatalf("isError = false for an unknown argument; result %+v", res)
	}
	if res.StructuredContent != nil {
		t.Errorf("structuredContent = %v on an error result, want none", res.StructuredContent)
	}
	mustContain(t, contentText(res), "MCP_VALIDATION_ERROR")
	if err := cs.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// contentText returns the text of the result's single text block.
func contentText(res *mcp.CallToolResult) string {
	var texts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	return strings.Join(texts, "\n")
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkMetrics asserts the shape of a system_metrics result as decoded by
// a client: every advertised member present, percentages in [0, 100].
func checkMetrics(t *testing.T, structured any) {
	t.Helper()
	m, ok := structured.(map[string]any)
	if !ok {
		t.Fatalf("structuredContent is %T, want an object", structured)
	}
	for _, k := range []string{"cpu_percent", "cpu_count", "memory", "disk", "load_average", "uptime_seconds"} {
		if _, ok := m[k]; !ok {
			t.Errorf("structuredContent lacks %q: %v", k, m)
		}
	}
	if n, _ := m["cpu_count"].(float64); n < 1 {
		t.Errorf("cpu_count = %v, want >= 1", m["cpu_count"])
	}
	pcts := map[string]any{"cpu_percent": m["cpu_percent"]}
	for _, k := range []string{"memory", "disk"} {
		sub, _ := m[k].(map[string]any)
		pcts[k+".percent"] = sub["percent"]
	}
	for k, v := range pcts {
		p, ok := v.(float64)
		if !ok || p < 0 || p > 100 {
			t.Errorf("%s = %v, want a number in [0, 100]", k, v)
		}
	}
	load, _ := m["load_average"].(map[string]any)
	for _, k := range []string{"one", "five", "fifteen"} {
		if _, ok := load[k].(float64); !ok {
			t.Errorf("load_average.%s = %v, want a number", k, load[k])
		}
	}
}

// validateOutput validates a structured result against an outputSchema as
// the client received it, with a 2020-12 validator independent of the
// server's own.
func validateOutput(t *testing.T, schema, structured any) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(mustJSON(t, schema))))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("urn:e2e:output", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("urn:e2e:output")
	if err != nil {
		t.Fatalf("outputSchema does not compile: %v", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(mustJSON(t, structured))))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(inst); err != nil {
		t.Errorf("structuredContent fails the outputSchema: %v", err)
	}
}
