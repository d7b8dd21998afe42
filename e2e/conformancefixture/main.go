// Command conformancefixture is a stdio MCP server, built on the official
// Go SDK, that offers the tool fixtures of the official MCP conformance
// suite (@modelcontextprotocol/conformance, server mode) under the names
// and with the behaviour its scenarios check, so that the gateway's
// conformance test (e2e/gateway_conformance_test.go) can put it behind
// `bastion gateway` and run the suite through the gateway.
//
// The tools, each named as the scenario calls it:
//
//	test_simple_text             tools-call-simple-text: one text block
//	test_image_content           tools-call-image: a 1x1 red PNG
//	test_audio_content           tools-call-audio: a short silent audio/wav
//	test_embedded_resource       tools-call-embedded-resource: a text resource
//	test_multiple_content_types  tools-call-mixed-content: text, image, resource
//	test_tool_with_logging       tools-call-with-logging: three info log
//	                             messages 50 ms apart (sent only once the
//	                             client has called logging/setLevel, as the
//	                             SDK does)
//	test_error_handling          tools-call-error: a result with isError true
//	test_tool_with_progress      tools-call-with-progress: progress 0, 50 and
//	                             100 of 100, 50 ms apart, to the request's token
//	test_sampling                tools-call-sampling: sampling/createMessage
//	test_elicitation             tools-call-elicitation: elicitation/create
//	json_schema_2020_12_tool     json-schema-2020-12: an inputSchema with
//	                             $schema, $defs and additionalProperties
//
// It serves on stdin and stdout until stdin closes.
package main

//lint:file-ignore SA1019 the conformance suite tests logging and sampling, which the SDK deprecates as of 2026-07-28 (SEP-2577); the fixture must offer them

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"log"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	srv := mcp.NewServer(&mcp.Implementation{Name: "conformancefixture", Version: "1.0.0"}, nil)
	for _, t := range tools() {
		srv.AddTool(t.tool, t.handler)
	}
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}

type tool struct {
	tool    *mcp.Tool
	handler mcp.ToolHandler
}

// noArgs is the input schema of a tool without arguments.
var noArgs = json.RawMessage(`{"type":"object","properties":{}}`)

// step is the pause between a tool's notifications, as the scenarios ask.
const step = 50 * time.Millisecond

func tools() []tool {
	pngData, wavData := redPixelPNG(), silentWAV()
	result := func(c ...mcp.Content) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: c}, nil
	}
	text := func(s string) *mcp.TextContent { return &mcp.TextContent{Text: s} }
	return []tool{
		{&mcp.Tool{Name: "test_simple_text", Description: "Returns one text block", InputSchema: noArgs},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return result(text("This is a simple text response for testing."))
			}},
		{&mcp.Tool{Name: "test_image_content", Description: "Returns a 1x1 red PNG", InputSchema: noArgs},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return result(&mcp.ImageContent{Data: pngData, MIMEType: "image/png"})
			}},
		{&mcp.Tool{Name: "test_audio_content", Description: "Returns a short silent WAV", InputSchema: noArgs},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return result(&mcp.AudioContent{Data: wavData, MIMEType: "audio/wav"})
			}},
		{&mcp.Tool{Name: "test_embedded_resource", Description: "Returns an embedded text resource", InputSchema: noArgs},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return result(&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
					URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource content.",
				}})
			}},
		{&mcp.Tool{Name: "test_multiple_content_types", Description: "Returns text, an image and a resource", InputSchema: noArgs},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return result(
					text("Multiple content types test:"),
					&mcp.ImageContent{Data: pngData, MIMEType: "image/png"},
					&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
						URI: "test://mixed-content-resource", MIMEType: "application/json", Text: `{"test":"data","value":123}`,
					}})
			}},
		{&mcp.Tool{Name: "test_tool_with_logging", Description: "Sends three log messages while it runs", InputSchema: noArgs},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				for i, m := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
					if i > 0 {
						if err := sleep(ctx, step); err != nil {
							return nil, err
						}
					}
					if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "conformancefixture", Data: m}); err != nil {
						return nil, err
					}
				}
				return result(text("Tool with logging executed successfully"))
			}},
		{&mcp.Tool{Name: "test_error_handling", Description: "Always fails, in band", InputSchema: noArgs},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{IsError: true,
					Content: []mcp.Content{text("This tool intentionally returns an error for testing")}}, nil
			}},
		{&mcp.Tool{Name: "test_tool_with_progress", Description: "Reports progress 0, 50 and 100 of 100", InputSchema: noArgs},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				token := req.Params.GetProgressToken()
				for i, p := range []float64{0, 50, 100} {
					if i > 0 {
						if err := sleep(ctx, step); err != nil {
							return nil, err
						}
					}
					if token == nil {
						continue
					}
					if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
						ProgressToken: token, Progress: p, Total: 100, Message: fmt.Sprintf("%.0f%%", p),
					}); err != nil {
						return nil, err
					}
				}
				return result(text("Tool with progress executed successfully"))
			}},
		{&mcp.Tool{Name: "test_sampling", Description: "Asks the client's LLM to answer arguments.prompt",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"prompt":{"type":"string","description":"The prompt to send to the LLM"}},"required":["prompt"]}`)},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var args struct {
					Prompt string `json:"prompt"`
				}
				_ = json.Unmarshal(req.Params.Arguments, &args)
				res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{
					Messages:  []*mcp.SamplingMessage{{Role: "user", Content: text(args.Prompt)}},
					MaxTokens: 100,
				})
				if err != nil {
					return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{text("sampling failed: " + err.Error())}}, nil
				}
				answer := ""
				if t, ok := res.Content.(*mcp.TextContent); ok {
					answer = t.Text
				}
				return result(text("LLM response: " + answer))
			}},
		{&mcp.Tool{Name: "test_elicitation", Description: "Asks the user for a username and an email",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"message":{"type":"string","description":"The message to show the user"}},"required":["message"]}`)},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var args struct {
					Message string `json:"message"`
				}
				_ = json.Unmarshal(req.Params.Arguments, &args)
				res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
					Message: args.Message,
					RequestedSchema: json.RawMessage(`{"type":"object","properties":{` +
						`"username":{"type":"string","description":"User's response"},` +
						`"email":{"type":"string","description":"User's email address"}},` +
						`"required":["username","email"]}`),
				})
				if err != nil {
					return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{text("elicitation failed: " + err.Error())}}, nil
				}
				content, _ := json.Marshal(res.Content)
				return result(text(fmt.Sprintf("User response: action=%s, content=%s", res.Action, content)))
			}},
		{&mcp.Tool{Name: "json_schema_2020_12_tool", Description: "Tool with JSON Schema 2020-12 features",
			InputSchema: json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",` +
				`"$defs":{"address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},` +
				`"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"}},` +
				`"additionalProperties":false}`)},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return result(text("received: " + string(req.Params.Arguments)))
			}},
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// redPixelPNG is a valid 1x1 PNG of one red pixel.
func redPixelPNG() []byte {
	img := image.NewNRGBA(image.Rect(0, 0, 1, 1))
	img.Set(0, 0, color.NRGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// silentWAV is a valid RIFF/WAVE file: 10 ms of silence, 8 kHz, 8-bit mono.
func silentWAV() []byte {
	const rate, samples = 8000, 80
	var b bytes.Buffer
	w := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	w(uint32(36 + samples))
	b.WriteString("WAVEfmt ")
	w(uint32(16))   // fmt chunk size
	w(uint16(1))    // PCM
	w(uint16(1))    // mono
	w(uint32(rate)) // sample rate
	w(uint32(rate)) // byte rate
	w(uint16(1))    // block align
	w(uint16(8))    // bits per sample
	b.WriteString("data")
	w(uint32(samples))
	b.Write(bytes.Repeat([]byte{0x80}, samples)) // 8-bit PCM silence is 128
	return b.Bytes()
}
