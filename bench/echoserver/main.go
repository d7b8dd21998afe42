// Command echoserver is a benchmark-only MCP stdio server: the server core
// of `bastion serve`, run through stdio.Main (the same configuration,
// guardrails, logging, signal handling and exit codes as `bastion serve`
// and the example servers), offering one trivial tool, echo, which returns
// its text argument unchanged.
//
// It exists so that whole-process load tests (bench/mcpload) measure the
// cost of the core itself (framing, strict decoding, lifecycle, guardrails,
// schema validation and encoding) without a real tool's work in the way.
// It is not a product and must never be deployed.
//
// Set BASTION_CPUPROFILE=path to write a CPU profile of the whole run to
// path; the profile ends when the session does (end of input or a signal).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"

	"github.com/mcp-bastion/bastion/internal/config"
	"github.com/mcp-bastion/bastion/internal/mcp"
	"github.com/mcp-bastion/bastion/internal/stdio"
	"github.com/mcp-bastion/bastion/internal/tool"
)

// echoIn and echoOut are the echo tool's arguments and result.
type (
	echoIn struct {
		Text string `json:"text"`
	}
	echoOut struct {
		Text string `json:"text"`
	}
)

// textSchema is both the input and the output schema: one required string
// member, nothing else. bench/mcpgo advertises the same bytes.
const textSchema = `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`

func main() {
	os.Exit(run())
}

func run() int {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "echoserver: takes no arguments; configure it with MCP_* variables")
		return 2
	}
	if path := os.Getenv("BASTION_CPUPROFILE"); path != "" {
		stop, err := startCPUProfile(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "echoserver: %v\n", err)
			return 2
		}
		defer stop()
	}
	return stdio.Main(stdio.Program{
		Info:  mcp.Implementation{Name: "bastion-echo", Version: "0.0.0-bench"},
		Tools: func(*config.Config, *slog.Logger) ([]tool.Tool, error) { return newTools() },
	})
}

// newTools returns the echo tool.
func newTools() ([]tool.Tool, error) {
	echo, err := tool.New(tool.Descriptor{
		Name:         "echo",
		Title:        "Echo",
		Description:  "Return the text argument unchanged. Benchmark tool.",
		InputSchema:  []byte(textSchema),
		OutputSchema: []byte(textSchema),
		Annotations:  tool.ReadOnly,
	}, func(_ context.Context, in echoIn) (echoOut, error) {
		return echoOut(in), nil
	})
	if err != nil {
		return nil, err
	}
	return []tool.Tool{echo}, nil
}

// startCPUProfile writes a CPU profile to path until the returned func is
// called.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("BASTION_CPUPROFILE: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("BASTION_CPUPROFILE: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "echoserver: BASTION_CPUPROFILE: %v\n", err)
		}
	}, nil
}
