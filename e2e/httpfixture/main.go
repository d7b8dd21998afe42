// Command httpfixture is a Streamable HTTP MCP server for the gateway's
// end-to-end tests, built on the official Go SDK so that the gateway's
// HTTP connector is tried against an implementation nobody here wrote.
// It listens on 127.0.0.1 at a port of the kernel's choosing, prints
// "LISTEN <url>" on stdout once it accepts connections, and serves until
// stdin closes.
//
// Its tools: echo (returns its arguments), whoami (returns --name), slow
// (sleeps arguments.ms, or until cancelled), headers (the identity and
// credential headers the request carried), and t00 … t<N-1> (echo) to
// fill several pages of tools/list, which the SDK cuts at --page-size.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	name := flag.String("name", "httpfixture", "the server's name, returned by whoami")
	pageSize := flag.Int("page-size", 3, "tools per tools/list page")
	extra := flag.Int("tools", 5, "how many filler tools t00… to offer")
	flag.Parse()

	srv := mcp.NewServer(&mcp.Implementation{Name: *name, Version: "1.0.0"}, &mcp.ServerOptions{PageSize: *pageSize})
	object := json.RawMessage(`{"type":"object"}`)
	text := func(v any) *mcp.CallToolResult {
		b, _ := json.Marshal(v)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: v}
	}
	args := func(req *mcp.CallToolRequest) map[string]any {
		m := map[string]any{}
		_ = json.Unmarshal(req.Params.Arguments, &m)
		return m
	}
	srv.AddTool(&mcp.Tool{Name: "echo", Description: "returns its arguments", InputSchema: object},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(args(req)), nil
		})
	srv.AddTool(&mcp.Tool{Name: "whoami", Description: "returns the server's name", InputSchema: object},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(map[string]any{"name": *name}), nil
		})
	srv.AddTool(&mcp.Tool{Name: "slow", Description: "sleeps arguments.ms", InputSchema: object},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ms, _ := args(req)["ms"].(float64)
			select {
			case <-time.After(time.Duration(ms) * time.Millisecond):
				return text(map[string]any{"slept_ms": ms}), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	srv.AddTool(&mcp.Tool{Name: "headers", Description: "returns the request's X-MCP-Gateway-* and credential headers", InputSchema: object},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			got := map[string][]string{}
			if req.Extra != nil {
				for k, v := range req.Extra.Header {
					l := strings.ToLower(k)
					if strings.HasPrefix(l, "x-mcp-gateway-") || l == "authorization" || l == "cookie" || l == "proxy-authorization" || l == "x-forwarded-for" {
						got[l] = v
					}
				}
			}
			return text(got), nil
		})
	for i := range *extra {
		srv.AddTool(&mcp.Tool{Name: fmt.Sprintf("t%02d", i), Description: "filler", InputSchema: object},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return text(args(req)), nil
			})
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp", handler)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && err != http.ErrServerClosed {
			log.Fatal(err)
		}
	}()
	fmt.Printf("LISTEN http://%s/mcp\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin) // until the test closes stdin
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = hs.Shutdown(ctx)
}
