// Command echohttp is a benchmark-only MCP server over Streamable HTTP: the
// echo tool of bench/echoserver (the same name, title, description,
// annotations and input and output schemas, byte for byte; the same
// result: the text argument back as structuredContent plus its JSON as one
// text block), served by the official Go SDK,
// github.com/modelcontextprotocol/go-sdk, with mcp.NewStreamableHTTPHandler.
//
// It is the downstream of the gateway benchmark (bench/run-gateway-load.sh):
// the same process answers mcpload directly and through bastion gateway, so
// the difference between the two is the gateway's. It is not a product and
// must never be deployed.
//
// The SDK serves here, not the project's own core, because the core serves
// stdio only (bastion serve has no HTTP transport), and an SDK server is
// what a real Streamable HTTP downstream looks like. Its cost is the SDK's:
// on the benchmark machine about 0.4 to 0.6 ms of CPU per call, much of it
// in its JSON decoding (a fresh segmentio decoder, with its buffer, per
// message) and the garbage that makes: more than the gateway spends on
// a call, and several times what bastion's core does (bench/echoserver);
// docs/performance.md says what that does to the ratios. The handler runs in its default, stateful mode with JSON
// responses (JSONResponse: true):
//
//   - JSON: a tools/call is answered in the POST's body, with no SSE
//     framing or stream to keep open, which is the cheapest answer the
//     transport has and the one the gateway's front gives as well.
//   - Stateful (the default): a legacy client keeps one session, and its
//     calls are served on it. Both of echohttp's clients are legacy
//     clients at 2025-11-25: mcpload when it calls directly, and the
//     gateway, whose server/discover probe finds no 2026-07-28 among the
//     versions this SDK offers by default and which then initializes a
//     session like any legacy client. So echohttp does the same work per
//     call on both paths. The SDK's Stateless mode would instead build and
//     tear down a session on every POST, for both clients alike: a cost of
//     that mode, not of a gateway.
//
// The SDK validates the arguments against the input schema and the result
// against the output schema on every call, as bastion's core does for the
// arguments; nothing here turns validation off.
//
// Usage:
//
//	echohttp [-addr 127.0.0.1:0] [-path /mcp]
//
// It prints "LISTEN <url>" on stdout once it accepts connections, and
// serves until SIGINT or SIGTERM, then shuts down (at most 5 s) and exits 0.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// textSchema is the input and the output schema of echo, byte for byte the
// one bench/echoserver advertises.
const textSchema = `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`

// echoIn and echoOut are the echo tool's arguments and result.
type (
	echoIn struct {
		Text string `json:"text"`
	}
	echoOut struct {
		Text string `json:"text"`
	}
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("echohttp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen address (host:port; port 0 picks a free one)")
	path := fs.String("path", "/mcp", "the MCP endpoint's path")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "echohttp: unexpected arguments")
		return 2
	}

	srv := mcp.NewServer(&mcp.Implementation{Name: "sdk-echo", Version: "0.0.0-bench"}, nil)
	mcp.AddTool(srv, &mcp.Tool{
		Name:         "echo",
		Title:        "Echo",
		Description:  "Return the text argument unchanged. Benchmark tool.",
		InputSchema:  json.RawMessage(textSchema),
		OutputSchema: json.RawMessage(textSchema),
		Annotations: &mcp.ToolAnnotations{
			Title:           "Echo",
			ReadOnlyHint:    true,
			DestructiveHint: ptr(false),
			IdempotentHint:  true,
			OpenWorldHint:   ptr(false),
		},
	}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
		// A nil result lets the SDK fill it in: structuredContent is
		// the output (checked against the output schema) and the one
		// text block its JSON, which is bench/echoserver's result.
		return nil, echoOut(in), nil
	})

	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{JSONResponse: true})
	mux := http.NewServeMux()
	mux.Handle(*path, handler)

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "echohttp: %v\n", err)
		return 1
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	fmt.Fprintf(stdout, "LISTEN http://%s%s\n", ln.Addr(), *path)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	select {
	case err := <-served:
		fmt.Fprintf(stderr, "echohttp: %v\n", err)
		return 1
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		fmt.Fprintf(stderr, "echohttp: shutdown: %v\n", err)
		return 1
	}
	return 0
}

func ptr[T any](v T) *T { return &v }
