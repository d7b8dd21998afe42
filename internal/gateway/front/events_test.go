package front

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// TestEventsCompact: every message sent as an SSE event is one data line
// of compact JSON: a raw CR or LF (JSON whitespace, the end of a data
// line) is compacted away, and a message that is not valid JSON is not
// sent.
func TestEventsCompact(t *testing.T) {
	rec := httptest.NewRecorder()
	ev := startEvents(rec)
	ev.send([]byte("{\"jsonrpc\":\"2.0\",\r\"method\":\"m\",\n\"params\":{\"a\":\r\n[1,\r2]}}"))
	ev.send([]byte("{\"jsonrpc\":\r\"2.0\",\"method\":\"cut"))
	ev.send([]byte(`{"jsonrpc":"2.0","method":"last"}`))
	want := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{\"a\":[1,2]}}\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"last\"}\n\n"
	if got := rec.Body.String(); got != want {
		t.Errorf("the stream is %q, want %q", got, want)
	}
}

// TestAskParamsCompact: the request the gateway sends a client for a
// downstream carries the downstream's params compact, whatever
// whitespace they came with.
func TestAskParamsCompact(t *testing.T) {
	var pushed []string
	ctx, cancel := context.WithCancel(context.Background())
	x := &exchange{s: &Server{asks: newAsks()}, sess: session{nonce: "n"}, push: func(msg []byte) {
		pushed = append(pushed, string(msg))
		cancel()
	}}
	x.ask(ctx, "sampling/createMessage", jsontext.Value("{\"messages\":[],\r\"maxTokens\":\n1}"))
	if len(pushed) == 0 || pushed[0] != `{"jsonrpc":"2.0","id":"gw-ask-1","method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}` {
		t.Errorf("the client was sent %q", pushed)
	}
	if strings.ContainsAny(strings.Join(pushed, ""), "\r\n") {
		t.Errorf("the client was sent %q", pushed)
	}
}

// TestCallProgressToken: a call's progress token is found however its
// name is spelled, and a call without one is read as asking for none.
func TestCallProgressToken(t *testing.T) {
	for _, tc := range []struct{ params, want string }{
		{`{"name":"a","arguments":{}}`, ""},
		{`{"name":"a","_meta":{"progressToken":"p1"}}`, `"p1"`},
		{`{"name":"a","_meta":{"progressToken":7}}`, `7`},
		{`{"name":"a","_meta":{"\u0070rogressToken":"p2"}}`, `"p2"`},
		{`{"name":"a","_m\u0065ta":{"progressToken":"p3"}}`, `"p3"`},
		{`{"name":"progressToken","_meta":{}}`, ""},
		{`{"name":"a","_meta":{"progressToken":1.5}}`, ""},
	} {
		if got := string(callProgressToken([]byte(tc.params))); got != tc.want {
			t.Errorf("callProgressToken(%s) = %q, want %q", tc.params, got, tc.want)
		}
	}
}
