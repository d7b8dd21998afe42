package upstream

import (
	"bytes"
	"context"
	stdjson "encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/jsonrpc"
	"github.com/mcp-bastion/bastion/internal/mcp"
)

// fuzzTransport records what a Client sends: the calls' requests on a
// channel, as they go (so the test learns the minted ids), everything else
// (answers to the downstream's requests) in order.
type fuzzTransport struct {
	requests chan outgoing

	mu    sync.Mutex
	other []outgoing
}

func (t *fuzzTransport) send(_ context.Context, out outgoing) error {
	if out.id != 0 {
		t.requests <- out
		return nil
	}
	t.mu.Lock()
	t.other = append(t.other, out)
	t.mu.Unlock()
	return nil
}

func (t *fuzzTransport) sent() []outgoing {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]outgoing(nil), t.other...)
}

// fuzzCalls are the calls in flight while the downstream's lines arrive;
// call i gets id i+1. token is the caller's progress token ("" for a call
// that asks for no progress).
var fuzzCalls = []struct {
	method, params, name, token string
}{
	{"tools/call", `{"name":"a","arguments":{}}`, "a", ""},
	{"tools/call", `{"name":"b","arguments":{"x":1}}`, "b", `"caller-tok"`},
	{"tools/list", "", "", ""},
	{"tools/call", `{"name":"c","arguments":{},"_meta":{"progressToken":"old"}}`, "c", `42`},
}

// errFuzzDone is what the test fails the client with at the end.
var errFuzzDone = errors.New("fuzz: the connection ends")

// fuzzWait bounds every wait of the test for the client: only a hang
// reaches it.
const fuzzWait = 10 * time.Second

var fuzzResponseSeeds = []string{
	// Valid answers to every call.
	`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"result":{}}` + "\n" +
		`{"jsonrpc":"2.0","id":3,"result":{"tools":[]}}` + "\n" +
		`{"jsonrpc":"2.0","id":4,"result":{"isError":true,"content":[]}}`,
	// Error answers, well-formed and not.
	`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad","data":{"x":[1, 2]}}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"error":{"code":1.5,"message":"fraction"}}` + "\n" +
		`{"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":null}}` + "\n" +
		`{"jsonrpc":"2.0","id":4,"error":{"code":-0,"message":"\u00e9","data":null}}`,
	// Both result and error, and results that are not objects.
	`{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"result":[]}` + "\n" + `{"jsonrpc":"2.0","id":3,"result":"x"}` + "\n" + `{"jsonrpc":"2.0","id":4,"result":null}`,
	// Ids of every type.
	`{"jsonrpc":"2.0","id":"1","result":{}}` + "\n" + `{"jsonrpc":"2.0","id":null,"result":{}}` + "\n" +
		`{"jsonrpc":"2.0","id":2.0,"result":{}}` + "\n" + `{"jsonrpc":"2.0","id":3e0,"result":{}}` + "\n" +
		`{"jsonrpc":"2.0","id":9223372036854775808,"result":{}}` + "\n" + `{"jsonrpc":"2.0","id":-1,"result":{}}` + "\n" +
		`{"jsonrpc":"2.0","id":0,"result":{}}` + "\n" + `{"jsonrpc":"2.0","id":4,"result":{}}`,
	// Duplicate and late answers.
	`{"jsonrpc":"2.0","id":1,"result":{"n":1}}` + "\n" + `{"jsonrpc":"2.0","id":1,"result":{"n":2}}` + "\n" +
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"late"}}` + "\n" + `{"jsonrpc":"2.0","id":99,"result":{}}`,
	// Progress: to the right call, to calls that asked for none, with
	// foreign tokens, and after the answer.
	`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"gw-2","progress":1,"total":2}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"gw-1","progress":1}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"caller-tok","progress":1}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":2,"progress":1}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"gw-9","progress":1}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1,"message":"gw-4","progressToken":"gw-4"}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"result":{}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"gw-2","progress":2}}`,
	// Garbage.
	"not json\n\n{\n\xff\xfe\n[]\n{}\n" + `{"jsonrpc":"1.0","id":1,"result":{}}` + "\n" + `{"jsonrpc":"2.0","id":1,"result":{},"extra":1}`,
	// A batch of everything.
	`[{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"gw-4","progress":1}},` +
		`{"jsonrpc":"2.0","id":4,"result":{}},{"jsonrpc":"2.0","id":"s1","method":"ping"},` +
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"},7,{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"x"}}]`,
	// Requests of the downstream.
	`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n" + `{"jsonrpc":"2.0","id":"r","method":"sampling/createMessage","params":{}}` + "\n" +
		`{"jsonrpc":"2.0","id":-9223372036854775808,"method":"roots/list"}` + "\n" + `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`,
	// Notifications outside a call.
	`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/progress"}`,
	// Oversized numbers.
	`{"jsonrpc":"2.0","id":1,"result":{"n":1e999999}}` + "\n" + `{"jsonrpc":"2.0","id":1e400,"result":{}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"error":{"code":99999999999999999999,"message":"m"}}`,
	// Deep nesting: at the limit, and past it.
	`{"jsonrpc":"2.0","id":1,"result":` + strings.Repeat(`{"a":`, 62) + `1` + strings.Repeat(`}`, 62) + `}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"result":` + strings.Repeat(`{"a":`, 64) + `1` + strings.Repeat(`}`, 64) + `}`,
}

// FuzzClientResponses feeds a Client that has calls in flight (two with
// progress, two without) one input's lines as the downstream's frames,
// then fails the client, and checks that
//
//   - nothing panics or hangs, and every Call returns;
//   - each call gets exactly the first well-formed answer whose id is its
//     minted id (a result object, an RPCError with the error's code,
//     message and data, or -32603 for a malformed error or a result that
//     is no object), or, when none came, the client's failure; the client
//     holds no call it answered, and only those;
//   - progress reaches only a call in flight that asked for it, with the
//     caller's own token in place of the gateway's gw-<id> and the rest of
//     the params unchanged; no progress is a notification to OnNotify, and
//     every other notification is, in order;
//   - every request of the downstream gets exactly one answer, in order:
//     ping an empty result, anything else -32601;
//   - the counters say how many frames were garbage and how many answers
//     reached no call;
//   - the requests the client sent carry the minted ids, the gateway's own
//     progress tokens and never the caller's.
func FuzzClientResponses(f *testing.F) {
	for _, s := range fuzzResponseSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := bytes.Split(data, []byte("\n"))
		tr := &fuzzTransport{requests: make(chan outgoing, len(fuzzCalls))}
		var notes []Notification
		stats := &Stats{}
		c := newClient("fuzz", tr, slog.New(slog.DiscardHandler), stats, func(n Notification) {
			notes = append(notes, Notification{Method: n.Method, Params: bytes.Clone(n.Params)})
		})
		c.info.Store(&Info{Version: mcp.V20260728, Modern: true})

		type result struct {
			res jsontext.Value
			err error
		}
		results := make([]chan result, len(fuzzCalls))
		progress := make([][]jsontext.Value, len(fuzzCalls)) // written for each call before it returns
		for i, call := range fuzzCalls {
			results[i] = make(chan result, 1)
			var opts CallOptions
			opts.Name = call.name
			if call.token != "" {
				opts.ProgressToken = jsontext.Value(call.token)
				opts.Progress = func(p jsontext.Value) { progress[i] = append(progress[i], bytes.Clone(p)) }
			}
			var params []byte
			if call.params != "" {
				params = []byte(call.params)
			}
			go func() {
				res, err := c.Call(context.Background(), call.method, params, opts)
				results[i] <- result{res, err}
			}()
			select {
			case out := <-tr.requests:
				checkFuzzRequest(t, i, out)
			case <-time.After(fuzzWait):
				t.Fatalf("call %d was never sent", i+1)
			}
		}

		want := fuzzExpect(lines)
		for _, line := range lines {
			c.deliver(line)
		}

		// Notifications.
		if len(notes) != len(want.notes) {
			t.Fatalf("OnNotify got %d notifications, want %d: %+v", len(notes), len(want.notes), notes)
		}
		for i, n := range notes {
			if n.Method != want.notes[i].Method || !bytes.Equal(n.Params, want.notes[i].Params) {
				t.Fatalf("notification %d is %s %q, want %s %q", i, n.Method, n.Params, want.notes[i].Method, want.notes[i].Params)
			}
		}
		// Answers to the downstream's requests.
		answers := tr.sent()
		if len(answers) != len(want.answers) {
			var msgs []string
			for _, out := range answers {
				msgs = append(msgs, string(out.msg))
			}
			t.Fatalf("%d answers sent to the downstream's %d requests: %q", len(answers), len(want.answers), msgs)
		}
		for i, out := range answers {
			checkFuzzAnswer(t, out, want.answers[i])
		}
		// Counters and the calls still held.
		if g, u := stats.Garbage.Load(), stats.Unexpected.Load(); g != want.garbage || u != want.unexpected || stats.Oversized.Load() != 0 {
			t.Fatalf("garbage %d unexpected %d oversized %d, want %d %d 0", g, u, stats.Oversized.Load(), want.garbage, want.unexpected)
		}
		c.mu.Lock()
		for i := range fuzzCalls {
			id := int64(i + 1)
			if _, held := c.pending[id]; held == want.answered(id) {
				c.mu.Unlock()
				t.Fatalf("call %d: held %v after the lines, answered %v", id, held, want.answered(id))
			}
		}
		if len(c.pending) != len(fuzzCalls)-len(want.replies) {
			c.mu.Unlock()
			t.Fatalf("%d calls held, want %d", len(c.pending), len(fuzzCalls)-len(want.replies))
		}
		c.mu.Unlock()

		// The end of the connection answers the rest.
		c.Fail(errFuzzDone)
		deadline := time.After(fuzzWait)
		for i := range fuzzCalls {
			id := int64(i + 1)
			var got result
			select {
			case got = <-results[i]:
			case <-deadline:
				t.Fatalf("call %d did not return", id)
			}
			r, answered := want.replies[id]
			switch {
			case !answered:
				if !errors.Is(got.err, errFuzzDone) || got.res != nil {
					t.Fatalf("call %d with no answer returned %q, %v; want the client's failure", id, got.res, got.err)
				}
			case r.malformed:
				if !errors.Is(got.err, ErrMalformed) || got.res != nil {
					t.Fatalf("call %d returned %q, %v; want ErrMalformed", id, got.res, got.err)
				}
			case r.result != nil:
				if got.err != nil || !bytes.Equal(got.res, r.result) {
					t.Fatalf("call %d returned %q, %v; want the result %q", id, got.res, got.err, r.result)
				}
			default:
				var rpcErr *RPCError
				if !errors.As(got.err, &rpcErr) || got.res != nil || rpcErr.Code != r.code || rpcErr.Message != r.message ||
					!bytes.Equal(rpcErr.Data, r.data) {
					t.Fatalf("call %d returned %q, %#v; want the error %d %q %q", id, got.res, got.err, r.code, r.message, r.data)
				}
			}
		}
		if c.InFlight() != 0 {
			t.Fatalf("%d calls held after Fail", c.InFlight())
		}
		// Progress: each call's reached its caller before the call
		// returned, in order, but for what a full queue dropped (counted).
		dropped := stats.Dropped.Load()
		var missing int64
		for i := range fuzzCalls {
			if dropped == 0 && len(progress[i]) != len(want.progress[i]) {
				t.Fatalf("call %d got %d progress notifications, want %d: %q", i+1, len(progress[i]), len(want.progress[i]), progress[i])
			}
			if len(progress[i]) > len(want.progress[i]) {
				t.Fatalf("call %d got %d progress notifications, more than the %d sent: %q", i+1, len(progress[i]), len(want.progress[i]), progress[i])
			}
			missing += int64(len(want.progress[i]) - len(progress[i]))
			if dropped == 0 {
				for j, p := range progress[i] {
					checkFuzzProgress(t, p, want.progress[i][j], fuzzCalls[i].token)
				}
			}
		}
		if missing != dropped {
			t.Fatalf("%d progress notifications missing, %d counted as dropped", missing, dropped)
		}
		// Nothing reaches a call that has ended.
		got := make([]int, len(fuzzCalls))
		for i := range fuzzCalls {
			got[i] = len(progress[i])
		}
		for _, line := range lines {
			c.deliver(line)
		}
		for i := range fuzzCalls {
			if len(progress[i]) != got[i] {
				t.Fatalf("call %d got progress after it ended: %q", i+1, progress[i][got[i]:])
			}
		}
		if _, err := c.Call(context.Background(), "ping", nil, CallOptions{}); !errors.Is(err, errFuzzDone) {
			t.Fatalf("a call after Fail: %v", err)
		}
	})
}

// fuzzReply is the answer a call must get.
type fuzzReply struct {
	result    jsontext.Value // a result object, or nil for an error
	code      int
	message   string
	data      jsontext.Value
	malformed bool // ErrMalformed: an answer with the call's id the strict reader refused
}

// fuzzAnswer is the answer owed to one request of the downstream.
type fuzzAnswer struct {
	id   jsonrpc.ID
	ping bool
}

// fuzzExpected is what the client must make of the lines.
type fuzzExpected struct {
	replies             map[int64]fuzzReply
	progress            [][]jsontext.Value // per call, the downstream's params
	notes               []Notification
	answers             []fuzzAnswer
	garbage, unexpected int64
}

func (w *fuzzExpected) answered(id int64) bool {
	_, ok := w.replies[id]
	return ok
}

var fuzzInteger = regexp.MustCompile(`\A-?(0|[1-9][0-9]*)\z`)

// fuzzExpect is the reference: it reads the lines with the strict decoder
// and follows the rules of the package documentation, message by message.
func fuzzExpect(lines [][]byte) *fuzzExpected {
	w := &fuzzExpected{replies: map[int64]fuzzReply{}, progress: make([][]jsontext.Value, len(fuzzCalls))}
	inFlight := func(id int64) bool { return id >= 1 && id <= int64(len(fuzzCalls)) && !w.answered(id) }
	for _, line := range lines {
		f := jsonrpc.DecodeFrame(line)
		for _, it := range f.Items {
			if it.Err != nil {
				w.garbage++
				if id, ok := fuzzSalvage(line); ok && !f.Batch && inFlight(id) {
					w.replies[id] = fuzzReply{malformed: true}
				}
				continue
			}
			m := it.Msg
			switch m.Kind {
			case jsonrpc.KindRequest:
				w.answers = append(w.answers, fuzzAnswer{id: m.ID, ping: m.Method == "ping"})
			case jsonrpc.KindNotification:
				if m.Method != "notifications/progress" {
					w.notes = append(w.notes, Notification{Method: m.Method, Params: m.Params})
					continue
				}
				var p map[string]jsontext.Value
				if m.Params == nil || json.Unmarshal(m.Params, &p) != nil {
					continue
				}
				tok, ok := fuzzString(p["progressToken"])
				if !ok || !strings.HasPrefix(tok, "gw-") || len(tok) < 4 {
					continue
				}
				// The client reads the id after "gw-" as strconv.ParseInt
				// does (so "gw-+2" and "gw-02" are call 2's too).
				id, err := strconv.ParseInt(tok[3:], 10, 64)
				if err != nil || !inFlight(id) || fuzzCalls[id-1].token == "" {
					continue
				}
				w.progress[id-1] = append(w.progress[id-1], m.Params)
			case jsonrpc.KindResponse:
				id, ok := m.ID.Int()
				if !ok || !inFlight(id) {
					w.unexpected++
					continue
				}
				w.replies[id] = fuzzReplyOf(m)
			}
		}
	}
	return w
}

// fuzzSalvage is the reference for unreadableResponseID, on the standard
// library's decoder, which reads invalid UTF-8 and repeated names: the
// integer id of a line that is one JSON object naming "id" once and no
// "method".
func fuzzSalvage(line []byte) (int64, bool) {
	d := stdjson.NewDecoder(bytes.NewReader(line))
	if tok, err := d.Token(); err != nil || tok != stdjson.Delim('{') {
		return 0, false
	}
	var (
		id    int64
		ids   int
		valid bool
	)
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return 0, false
		}
		var v stdjson.RawMessage
		if err := d.Decode(&v); err != nil {
			return 0, false
		}
		switch tok {
		case "method":
			return 0, false
		case "id":
			ids++
			n, err := strconv.ParseInt(string(v), 10, 64)
			valid = fuzzInteger.Match(v) && string(v) != "-0" && err == nil
			id = n
		}
	}
	if _, err := d.Token(); err != nil {
		return 0, false
	}
	return id, ids == 1 && valid
}

func fuzzReplyOf(m *jsonrpc.Message) fuzzReply {
	if m.Error != nil {
		malformed := fuzzReply{code: jsonrpc.CodeInternalError, message: "malformed error response"}
		var e map[string]jsontext.Value
		if json.Unmarshal(m.Error, &e) != nil {
			return malformed
		}
		code, hasCode := e["code"]
		msg, isString := fuzzString(e["message"])
		if !hasCode || code.Kind() != '0' || !fuzzInteger.Match(code) || !isString {
			return malformed
		}
		n, err := strconv.ParseInt(string(code), 10, 0)
		if err != nil {
			return malformed
		}
		return fuzzReply{code: int(n), message: msg, data: e["data"]}
	}
	if jsontext.Value(m.Result).Kind() != '{' {
		return fuzzReply{code: jsonrpc.CodeInternalError, message: "the result is not a JSON object"}
	}
	return fuzzReply{result: m.Result}
}

func fuzzString(v jsontext.Value) (string, bool) {
	if v.Kind() != '"' {
		return "", false
	}
	b, err := jsontext.AppendUnquote(nil, v)
	return string(b), err == nil
}

// fuzzDecode decodes JSON text into plain values, numbers kept as text.
func fuzzDecode(b []byte) (any, error) {
	d := stdjson.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// checkFuzzRequest checks the request call i sent.
func checkFuzzRequest(t *testing.T, i int, out outgoing) {
	t.Helper()
	call := fuzzCalls[i]
	id := int64(i + 1)
	if out.id != id || out.method != call.method || out.name != call.name {
		t.Fatalf("call %d was sent as id %d method %q name %q", id, out.id, out.method, out.name)
	}
	f := jsonrpc.DecodeFrame(out.msg)
	if f.Batch || f.Items[0].Msg == nil {
		t.Fatalf("call %d sent %q, not a message: %v", id, out.msg, f.Items[0].Err)
	}
	m := f.Items[0].Msg
	if m.Kind != jsonrpc.KindRequest || m.ID != jsonrpc.Int64ID(id) || m.Method != call.method {
		t.Fatalf("call %d sent %q", id, out.msg)
	}
	var p struct {
		Meta map[string]jsontext.Value `json:"_meta"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		t.Fatalf("call %d sent params %q: %v", id, m.Params, err)
	}
	if v, _ := fuzzString(p.Meta[mcp.MetaProtocolVersion]); v != mcp.V20260728 {
		t.Fatalf("call %d sent no protocol version: %q", id, out.msg)
	}
	tok, hasTok := p.Meta["progressToken"]
	switch {
	case call.token == "" && hasTok:
		t.Fatalf("call %d asked for no progress but sent a token: %q", id, out.msg)
	case call.token != "":
		if s, _ := fuzzString(tok); s != "gw-"+strconv.FormatInt(id, 10) {
			t.Fatalf("call %d sent progress token %s, want the gateway's own", id, tok)
		}
		if strings.HasPrefix(call.token, `"`) && bytes.Contains(out.msg, []byte(call.token)) {
			t.Fatalf("call %d sent the caller's token: %q", id, out.msg)
		}
	}
}

// checkFuzzProgress checks one progress notification as the caller got it
// against the downstream's params.
func checkFuzzProgress(t *testing.T, got, sent jsontext.Value, token string) {
	t.Helper()
	if !got.IsValid() || got.Kind() != '{' {
		t.Fatalf("progress params %q are not a strict JSON object", got)
	}
	g, err1 := fuzzDecode(got)
	s, err2 := fuzzDecode(sent)
	tok, err3 := fuzzDecode([]byte(token))
	if err1 != nil || err2 != nil || err3 != nil {
		t.Fatalf("decoding %q, %q: %v %v %v", got, sent, err1, err2, err3)
	}
	s.(map[string]any)["progressToken"] = tok
	if !reflect.DeepEqual(g, s) {
		t.Fatalf("progress params %q, sent as %q: want the same with the caller's token %s", got, sent, token)
	}
}

// checkFuzzAnswer checks one answer to a request of the downstream.
func checkFuzzAnswer(t *testing.T, out outgoing, want fuzzAnswer) {
	t.Helper()
	f := jsonrpc.DecodeFrame(out.msg)
	if out.id != 0 || f.Batch || f.Items[0].Msg == nil || f.Items[0].Msg.Kind != jsonrpc.KindResponse {
		t.Fatalf("answer %q is not a response", out.msg)
	}
	m := f.Items[0].Msg
	if m.ID != want.id {
		t.Fatalf("answer %q to request id %s", out.msg, want.id.AppendJSON(nil))
	}
	if want.ping {
		if string(m.Result) != "{}" {
			t.Fatalf("ping answered with %q", out.msg)
		}
		return
	}
	var e struct {
		Code int `json:"code"`
	}
	if m.Error == nil || json.Unmarshal(m.Error, &e) != nil || e.Code != jsonrpc.CodeMethodNotFound {
		t.Fatalf("a request answered with %q, want -32601", out.msg)
	}
}
