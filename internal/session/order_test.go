package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/session"
	"github.com/mcp-bastion/bastion/internal/tool"
)

type recordIn struct {
	N int `json:"n"`
}

// recorder is a tool that notes the order in which calls start.
type recorder struct {
	mu    sync.Mutex
	order []int
}

func (r *recorder) tools(t *testing.T) *tool.Registry {
	t.Helper()
	rec := tool.MustNew(tool.Descriptor{
		Name:        "record",
		InputSchema: jsontext.Value(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}`),
		Annotations: tool.ReadOnly,
	}, func(ctx context.Context, in recordIn) (blockOut, error) {
		r.mu.Lock()
		r.order = append(r.order, in.N)
		r.mu.Unlock()
		return blockOut{OK: true}, nil
	})
	reg, err := tool.NewRegistry(rec)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// TestCallsStartInArrivalOrder: with one slot, calls get it in the order
// the read loop received them, not in the order their goroutines are
// scheduled. Repeated, so that a scheduling race would show.
func TestCallsStartInArrivalOrder(t *testing.T) {
	const calls, rounds = 40, 25
	for round := range rounds {
		r := &recorder{}
		h := newHarness(t, context.Background(), session.Options{Tools: r.tools(t), MaxConcurrency: 1, MaxPending: calls, QueueTimeout: time.Minute})
		h.init()
		var b strings.Builder
		for n := range calls {
			fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"record","arguments":{"n":%d}}}`+"\n", n+1, n)
		}
		h.send(strings.TrimSuffix(b.String(), "\n"))
		for range calls {
			h.recv()
		}
		want := make([]int, calls)
		for i := range want {
			want[i] = i
		}
		r.mu.Lock()
		got := slices.Clone(r.order)
		r.mu.Unlock()
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: calls started in the order %v, want arrival order", round, got)
		}
	}
}

// TestInvalidCallsBeforeCapacity: with the pending cap full, a call that
// is invalid on its own still gets its own error, and only a valid call
// is refused for capacity.
func TestInvalidCallsBeforeCapacity(t *testing.T) {
	started := make(chan struct{}, 1)
	h := newHarness(t, context.Background(), session.Options{
		Tools: newTools(t, started), MaxConcurrency: 1, MaxPending: 1, QueueTimeout: time.Hour,
	})
	h.init()
	h.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block","arguments":{"wait":true}}}`)
	<-started
	for _, c := range []struct {
		params, want string
	}{
		{`{"arguments":{}}`, "-32602"},
		{`{"name":"nosuch","arguments":{}}`, "-32602"},
		{`{"name":"block","arguments":[]}`, "-32602"},
		{`{"name":"block","arguments":{"wait":true},"task":{}}`, "-32601"},
		{`{"name":"block","arguments":{"bad-name":true}}`, "sanitizer"},
		{`{"name":"block","arguments":{"wait":true}}`, "MCP_CONCURRENCY_LIMIT"},
	} {
		h.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":` + c.params + `}`)
		m := h.recv()
		raw, _ := json.Marshal(m)
		switch c.want {
		case "sanitizer":
			r, ok := m["result"].(map[string]any)
			if !ok || r["isError"] != true || !strings.Contains(string(raw), "MCP_VALIDATION_ERROR") ||
				!strings.Contains(string(raw), "bad-name") {
				t.Errorf("%s: %s, want the sanitizer's problem", c.params, raw)
			}
		case "MCP_CONCURRENCY_LIMIT":
			if !strings.Contains(string(raw), "MCP_CONCURRENCY_LIMIT") {
				t.Errorf("%s: %s, want a capacity refusal", c.params, raw)
			}
		default:
			if e, ok := m["error"].(map[string]any); !ok || fmt.Sprint(e["code"]) != c.want {
				t.Errorf("%s: %s, want error %s", c.params, raw, c.want)
			}
		}
	}
	h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
}

// TestBatchAnsweredAsOneArray: a 2025-03-26 batch is answered by one JSON
// array holding a response for each request member (a tools/call member
// included, which runs as its own task), in any order; a batch of
// notifications only gets no output; a cancelled member is absent.
func TestBatchAnsweredAsOneArray(t *testing.T) {
	started := make(chan struct{}, 1)
	h := newHarness(t, context.Background(), session.Options{Tools: newTools(t, started)})
	h.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	h.recv()

	h.send(`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"},` +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"block","arguments":{"wait":false}}},` +
		`{"jsonrpc":"2.0","id":"three","method":"nosuch"},{"jsonrpc":"2.0","id":9,"result":{}},7]`)
	<-started
	// The invalid member's error has no id: it had none (ids sort as
	// their JSON text, the absent one first).
	if got := h.recvBatch(); !slices.Equal(got, []string{"", `"three"`, "1", "2"}) {
		t.Errorf("batch answered with ids %q, want the invalid member's none, \"three\", 1 and 2", got)
	}

	// Notifications only: nothing comes back, so the next line answers
	// the ping after it.
	h.send(`[{"jsonrpc":"2.0","method":"notifications/x"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`)
	h.send(`{"jsonrpc":"2.0","id":10,"method":"ping"}`)
	if m := h.recv(); m["id"] != float64(10) {
		t.Fatalf("after a batch of notifications: %v, want the answer to ping 10", m)
	}

	// A member cancelled while it runs is left out of the array.
	h.send(`[{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"block","arguments":{"wait":true}}},{"jsonrpc":"2.0","id":12,"method":"ping"}]`)
	<-started
	h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":11}}`)
	if got := h.recvBatch(); !slices.Equal(got, []string{"12"}) {
		t.Errorf("batch with a cancelled member answered with ids %v, want [12]", got)
	}

	h.send(`[]`)
	if m := h.recv(); m["error"].(map[string]any)["code"] != float64(-32600) {
		t.Fatalf("empty batch: %v, want one -32600 object", m)
	}
}

// recvBatch reads one line that must be a JSON array of responses and
// returns their ids, sorted.
func (h *harness) recvBatch() []string {
	h.t.Helper()
	line, err := h.out.ReadBytes('\n')
	if err != nil {
		h.t.Fatalf("read: %v", err)
	}
	var arr []map[string]json.RawMessage
	if err := json.Unmarshal(line, &arr); err != nil {
		h.t.Fatalf("want one JSON array: %v: %q", err, line)
	}
	var ids []string
	for _, m := range arr {
		ids = append(ids, string(m["id"]))
	}
	slices.Sort(ids)
	return ids
}

// TestBatchAnswersHeldCountAgainstCap: a batch member that finished
// keeps its place in the pending cap until its batch is written, so the
// answers a slow member holds back are bounded by the cap; and a member
// cancelled after it finished, while its answer waits, is left out.
func TestBatchAnswersHeldCountAgainstCap(t *testing.T) {
	started := make(chan struct{}, 4)
	h := newHarness(t, context.Background(), session.Options{Tools: newTools(t, started), MaxPending: 2, QueueTimeout: time.Minute})
	h.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	h.recv()
	h.send(`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block","arguments":{"wait":false}}},` +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"block","arguments":{"wait":true}}}]`)
	<-started
	<-started
	// Member 1 is done, member 2 runs: both hold the cap's two places.
	for i := range 50 {
		h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"block","arguments":{"wait":false}}}`, 100+i))
		m := h.recv()
		raw, _ := json.Marshal(m)
		if !strings.Contains(string(raw), "MCP_CONCURRENCY_LIMIT") {
			t.Fatalf("probe %d: %s; the finished batch member no longer counts against the cap", i, raw)
		}
	}
	// Withdraw member 1 (finished, answer waiting) and end member 2:
	// nothing is written, so the next line answers the ping.
	h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`)
	h.send(`{"jsonrpc":"2.0","id":9,"method":"ping"}`)
	if m := h.recv(); m["id"] != float64(9) {
		t.Fatalf("got %v, want only the ping's answer: both members were cancelled", m)
	}
}
