// Command mcpgo is the baseline of the whole-process load benchmark: the
// same echo tool as bench/echoserver (one required string "text" in, the
// same object out, identical input and output schemas), served by
// github.com/mark3labs/mcp-go's stdio server with its defaults
// (server.NewMCPServer + server.ServeStdio).
//
// It lives in its own module so that mcp-go never enters the dependency
// graph of mcp-bastion itself. It exists only for benchmarks.
//
// -validate turns on mcp-go's opt-in input and output schema validation,
// which bastion always performs on input; it gives a like-for-like
// figure next to the default one.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// textSchema is the input and the output schema of echo, byte for byte
// the one bench/echoserver advertises.
const textSchema = `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`

// echoOut is echo's structured result.
type echoOut struct {
	Text string `json:"text"`
}

func main() {
	validate := flag.Bool("validate", false, "enable mcp-go's input and output schema validation")
	flag.Parse()

	var opts []server.ServerOption
	opts = append(opts, server.WithToolCapabilities(false))
	if *validate {
		opts = append(opts, server.WithInputSchemaValidation(), server.WithOutputSchemaValidation())
	}
	s := server.NewMCPServer("mcp-go-echo", "0.0.0-bench", opts...)

	tool := mcp.NewToolWithRawSchema("echo", "Return the text argument unchanged. Benchmark tool.", json.RawMessage(textSchema))
	tool.Title = "Echo"
	tool.RawOutputSchema = json.RawMessage(textSchema)
	tool.Annotations = mcp.ToolAnnotation{
		Title:           "Echo",
		ReadOnlyHint:    mcp.ToBoolPtr(true),
		DestructiveHint: mcp.ToBoolPtr(false),
		IdempotentHint:  mcp.ToBoolPtr(true),
		OpenWorldHint:   mcp.ToBoolPtr(false),
	}
	s.AddTool(tool, func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		text, err := req.RequireString("text")
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		out := echoOut{Text: text}
		b, err := json.Marshal(out)
		if err != nil {
			return nil, err
		}
		return mcp.NewToolResultStructured(out, string(b)), nil
	})

	if err := server.ServeStdio(s); err != nil {
		fmt.Fprintf(os.Stderr, "mcpgo: %v\n", err)
		os.Exit(1)
	}
}
