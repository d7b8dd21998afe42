package session_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/session"
	"github.com/mcp-bastion/bastion/internal/tool"
)

// lockedBuffer is a log sink the session's goroutines may share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestCallLogLine: every tools/call, answered or refused wherever it was
// refused, leaves exactly one info line naming the tool, the id and the
// outcome, with its duration; no line holds an argument value.
func TestCallLogLine(t *testing.T) {
	var logs lockedBuffer
	started := make(chan struct{}, 4)
	h := newHarness(t, context.Background(), session.Options{
		Tools: newTools(t, started), MaxConcurrency: 1, MaxPending: 1, QueueTimeout: time.Hour,
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	h.init()
	const marker = "marker-value-z3"
	h.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block","arguments":{"wait":false}}}`)
	h.recv()
	h.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"block","arguments":{"wait":"` + marker + `"}}}`)
	h.recv()
	h.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nope","arguments":{"x":"` + marker + `"}}}`)
	h.recv()
	h.send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"arguments":{"x":"` + marker + `"}}}`)
	h.recv()
	h.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"block","arguments":{"wait":true}}}`)
	<-started
	h.send(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"block","arguments":{"wait":true,"x":"` + marker + `"}}}`)
	h.recv() // the pending cap refuses 6 in-band
	h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}`)
	h.send(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"SECRET ` + marker + `","arguments":{}}}`)
	h.recv()
	h.send(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"block","arguments":{"wait":false},"bogus":"` + marker + `"}}`)
	h.recv()
	h.send(`{"jsonrpc":"2.0","id":7,"method":"ping"}`)
	h.recv()
	// A call before the session exists is refused, and logged too.
	h2 := newHarness(t, context.Background(), session.Options{
		Tools:  newTools(t, nil),
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	h2.send(`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"block","arguments":{"wait":"` + marker + `"}}}`)
	h2.recv()

	want := map[string]struct{ tool, outcome string }{
		"1":  {"block", "ok"},
		"2":  {"block", "MCP_VALIDATION_ERROR"},
		"3":  {"nope", "unknown_tool"},
		"4":  {"", "invalid_params"},
		"5":  {"block", "cancelled"},
		"6":  {"block", "MCP_CONCURRENCY_LIMIT"},
		"8":  {"(not a tool name)", "unknown_tool"},
		"9":  {"block", "invalid_params"},
		"10": {"block", "not_initialized"},
	}
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(logs.String(), `"msg":"tools/call"`) < len(want) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // call 5 logs when its task ends
	}
	got := map[string]map[string]any{}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, marker) {
			t.Errorf("a log line holds an argument value: %s", line)
		}
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != "tools/call" {
			continue
		}
		id, _ := rec["id"].(string)
		if got[id] != nil {
			t.Errorf("two lines for call %s", id)
		}
		got[id] = rec
		if rec["level"] != "INFO" {
			t.Errorf("call %s logged at %v, want INFO", id, rec["level"])
		}
		if _, ok := rec["duration"]; !ok {
			t.Errorf("call %s: no duration: %s", id, line)
		}
	}
	for id, w := range want {
		rec := got[id]
		if rec == nil {
			t.Errorf("call %s: no log line:\n%s", id, logs.String())
			continue
		}
		if rec["tool"] != w.tool || rec["outcome"] != w.outcome {
			t.Errorf("call %s: tool %v outcome %v, want %q %q", id, rec["tool"], rec["outcome"], w.tool, w.outcome)
		}
		// A call that ran carries the request id its tool was given;
		// one refused before it ran has none.
		rid, _ := rec["request_id"].(string)
		if ran := id == "1" || id == "2" || id == "5"; ran != (len(rid) == 16) {
			t.Errorf("call %s: request_id %q", id, rid)
		}
	}
}

// TestCallRequestID: the tool is told the request id its call's log line
// carries, so that what it records of the call (a gateway's audit event)
// can be matched with that line.
func TestCallRequestID(t *testing.T) {
	var logs lockedBuffer
	seen := make(chan string, 1)
	rec := tool.MustNew(tool.Descriptor{
		Name:        "rec",
		InputSchema: jsontext.Value(`{"type":"object","additionalProperties":false}`),
		Annotations: tool.ReadOnly,
	}, func(ctx context.Context, _ struct{}) (blockOut, error) {
		seen <- tool.RequestIDOf(ctx)
		return blockOut{OK: true}, nil
	})
	reg, err := tool.NewRegistry(rec)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, context.Background(), session.Options{Tools: reg,
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	h.init()
	h.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rec","arguments":{}}}`)
	h.recv()
	rid := <-seen
	if len(rid) != 16 {
		t.Fatalf("the tool was given request id %q", rid)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), `"msg":"tools/call"`) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), `"request_id":"`+rid+`"`) {
		t.Errorf("the call's log line does not carry the id its tool was given (%s):\n%s", rid, logs.String())
	}
}
