// Command testserver is an MCP stdio server on the same core as
// `bastion serve` (wire, jsonrpc, session, guardrails, stdio) whose tools
// exist only to make the end-to-end tests deterministic: a call that sleeps
// until cancelled, one that panics, one that reports the goroutine count.
// It is never shipped.
package main

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/config"
	"github.com/mcp-bastion/bastion/internal/mcp"
	"github.com/mcp-bastion/bastion/internal/stdio"
	"github.com/mcp-bastion/bastion/internal/tool"
)

type sleepIn struct {
	MS int64 `json:"ms"`
}

type sleepOut struct {
	SleptMS int64 `json:"slept_ms"`
}

type emptyIn struct{}

type countOut struct {
	Goroutines int `json:"goroutines"`
}

func main() {
	os.Exit(stdio.Main(stdio.Program{
		Info: mcp.Implementation{Name: "testserver", Version: "0"},
		Tools: func(*config.Config, *slog.Logger) ([]tool.Tool, error) {
			return tools(), nil
		},
	}))
}

func tools() []tool.Tool {
	noArgs := jsontext.Value(`{"type":"object","additionalProperties":false}`)
	return []tool.Tool{
		tool.MustNew(tool.Descriptor{
			Name:         "sleep",
			Description:  "Sleeps ms milliseconds or until cancelled.",
			InputSchema:  jsontext.Value(`{"type":"object","properties":{"ms":{"type":"integer","minimum":0}},"required":["ms"],"additionalProperties":false}`),
			OutputSchema: jsontext.Value(`{"type":"object","properties":{"slept_ms":{"type":"integer"}},"required":["slept_ms"],"additionalProperties":false}`),
			Annotations:  tool.ReadOnly,
		}, func(ctx context.Context, in sleepIn) (sleepOut, error) {
			t := time.NewTimer(time.Duration(in.MS) * time.Millisecond)
			defer t.Stop()
			select {
			case <-t.C:
				return sleepOut{SleptMS: in.MS}, nil
			case <-ctx.Done():
				return sleepOut{}, context.Cause(ctx)
			}
		}),
		tool.MustNew(tool.Descriptor{
			Name: "panic", Description: "Panics.", InputSchema: noArgs, Annotations: tool.ReadOnly,
		}, func(ctx context.Context, in emptyIn) (countOut, error) {
			panic("testserver: deliberate panic with secret detail")
		}),
		tool.MustNew(tool.Descriptor{
			Name: "goroutines", Description: "Reports the number of goroutines.", InputSchema: noArgs, Annotations: tool.ReadOnly,
		}, func(ctx context.Context, in emptyIn) (countOut, error) {
			return countOut{Goroutines: runtime.NumGoroutine()}, nil
		}),
	}
}
