package session_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/session"
	"github.com/mcp-bastion/bastion/internal/tool"
)

// roundTool hands every call a round of input and records what the call
// said about rounds.
type roundTool struct {
	mu   sync.Mutex
	seen []*tool.Rounds
}

func (r *roundTool) Descriptor() tool.Descriptor {
	return tool.Descriptor{Name: "ask", InputSchema: jsontext.Value(`{"type":"object"}`)}
}

func (r *roundTool) Call(ctx context.Context, _ jsontext.Value) (tool.Result, error) {
	rounds := tool.RoundsOf(ctx)
	r.mu.Lock()
	r.seen = append(r.seen, rounds)
	r.mu.Unlock()
	return tool.Result{Relayed: &tool.Relayed{Input: &tool.InputRequired{
		Requests: jsontext.Value(`{"confirm":{"method":"elicitation/create","params":{"message":"?"}}}`), State: "sealed"}}}, nil
}

func (r *roundTool) TakesRounds() {}

// TestCallRounds: a 2026-07-28 call tells a RoundTaker what it declared
// and answers, and gets the round that tool hands out as an input_required
// result; a session-era call carries no rounds (the members are refused,
// and a round a tool hands it anyway is an internal error); a tool that
// takes no rounds refuses a requestState it cannot have handed out.
func TestCallRounds(t *testing.T) {
	rt := &roundTool{}
	plain := newTools(t, nil).Tools()[0]
	reg, err := tool.NewRegistry(rt, plain)
	if err != nil {
		t.Fatal(err)
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	modern := newHarness(t, t.Context(), session.Options{Tools: reg})
	call := func(h *harness, params string) map[string]any {
		t.Helper()
		h.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + params + `}`)
		return h.recv()
	}
	invalid := func(what string, m map[string]any, want string) {
		t.Helper()
		e, _ := m["error"].(map[string]any)
		if code, _ := e["code"].(float64); code != -32602 || !strings.Contains(e["message"].(string), want) {
			t.Errorf("%s: %v", what, m)
		}
	}

	m := call(modern, `{"name":"ask","arguments":{},`+meta+`}`)
	res, _ := m["result"].(map[string]any)
	if res["resultType"] != "input_required" || res["requestState"] != "sealed" || res["inputRequests"] == nil || res["content"] != nil {
		t.Errorf("the round handed out: %v", m)
	}
	m = call(modern, `{"name":"ask","arguments":{},"inputResponses":{"confirm":{"action":"accept"}},"requestState":"sealed",`+meta+`}`)
	if res, _ := m["result"].(map[string]any); res["resultType"] != "input_required" {
		t.Errorf("the retry: %v", m)
	}
	rt.mu.Lock()
	if len(rt.seen) != 2 || rt.seen[0] == nil || string(rt.seen[0].Capabilities) != `{"elicitation":{}}` || rt.seen[0].State != nil ||
		rt.seen[1] == nil || rt.seen[1].State == nil || *rt.seen[1].State != "sealed" || string(rt.seen[1].Responses) != `{"confirm":{"action":"accept"}}` {
		b, _ := json.Marshal(rt.seen)
		t.Errorf("the tool saw %s", b)
	}
	rt.mu.Unlock()
	invalid("answers without a state", call(modern, `{"name":"ask","arguments":{},"inputResponses":{},`+meta+`}`), "need the requestState")
	invalid("a state for a tool that hands out none", call(modern, `{"name":"block","arguments":{"wait":false},"requestState":"sealed",`+meta+`}`),
		"not one this server handed out")

	legacy := newHarness(t, t.Context(), session.Options{Tools: reg})
	legacy.init()
	invalid("a session-era retry", call(legacy, `{"name":"ask","arguments":{},"requestState":"sealed"}`), "belong to 2026-07-28 calls")
	m = call(legacy, `{"name":"ask","arguments":{}}`)
	if e, _ := m["error"].(map[string]any); e == nil || e["code"].(float64) != -32603 {
		t.Errorf("a round handed to a session-era client: %v", m)
	}
	rt.mu.Lock()
	if last := rt.seen[len(rt.seen)-1]; last != nil {
		t.Errorf("a session-era call carried rounds: %+v", last)
	}
	rt.mu.Unlock()
}
