package session_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/jsonrpc"
	"github.com/mcp-bastion/bastion/internal/mcp"
	"github.com/mcp-bastion/bastion/internal/session"
	"github.com/mcp-bastion/bastion/internal/tool"
)

// fakeRelay serves prompts and resources as the test sets them up:
// prompts/get of a prompt named "hang" waits for its context, "bad" is
// refused with -32602, anything else is answered.
type fakeRelay struct {
	mu      sync.Mutex
	offered mcp.Offered
	started chan string
	changes chan session.Change
	// follows receives the uris of each Follow, unfollows those of each
	// Unfollow (when the test made them).
	follows, unfollows chan []string
	// gate, when set, holds a Follow of a "slow:" URI until it closes;
	// unfollowGate holds every Unfollow.
	gate, unfollowGate chan struct{}
}

func newFakeRelay(off mcp.Offered) *fakeRelay {
	return &fakeRelay{offered: off, started: make(chan string, 16), changes: make(chan session.Change, 4)}
}

func (f *fakeRelay) Offered() mcp.Offered {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.offered
}

func (f *fakeRelay) Serve(ctx context.Context, version, method string, params jsontext.Value) ([]byte, *jsonrpc.Error) {
	f.started <- method
	switch {
	case strings.Contains(string(params), `"hang"`):
		<-ctx.Done()
		return nil, nil
	case strings.Contains(string(params), `"panic"`):
		panic("a bug in the relay")
	case strings.Contains(string(params), `"bad"`):
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Invalid params: bad"}
	}
	return []byte(`{"served":"` + method + `","version":"` + version + `"}`), nil
}

func (f *fakeRelay) Watch() (<-chan session.Change, func()) { return f.changes, func() {} }

// Follow follows every URI but those beginning with "deny:"; one
// beginning with "error:" refuses the whole request.
func (f *fakeRelay) Follow(_ context.Context, uris []string) ([]string, *jsonrpc.Error) {
	if f.follows != nil {
		f.follows <- uris
	}
	var out []string
	for _, u := range uris {
		if strings.HasPrefix(u, "slow:") && f.gate != nil {
			<-f.gate
		}
		if strings.HasPrefix(u, "touch:") {
			// Updated as soon as it is followed, before Follow returns.
			// Changes is unbuffered: the second send waits until the
			// watcher has handled the first.
			f.changes <- session.Change{Updated: u}
			f.changes <- session.Change{}
		}
		if strings.HasPrefix(u, "error:") {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Invalid params: too many"}
		}
		if !strings.HasPrefix(u, "deny:") {
			out = append(out, u)
		}
	}
	return out, nil
}

func (f *fakeRelay) Unfollow(_ context.Context, uris []string) {
	if f.unfollows != nil {
		f.unfollows <- uris
	}
	if f.unfollowGate != nil {
		<-f.unfollowGate
	}
}

// TestRelayServed: a Relay's methods are declared as it offers them,
// answered with the request's id, and refused -32601 when not offered;
// an error it returns is answered under the request's id.
func TestRelayServed(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rl := newFakeRelay(mcp.Offered{Prompts: true, Completions: true})
	h := newHarness(t, ctx, session.Options{Catalog: &changingCatalog{reg: newTools(t, nil)}, Relay: rl})
	stop := time.AfterFunc(30*time.Second, func() { h.in.Close(); cancel() })
	defer stop.Stop()

	h.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	caps := mustString(t, h.recv())
	if !strings.Contains(caps, `"prompts":{"listChanged":true}`) || !strings.Contains(caps, `"completions":{}`) || strings.Contains(caps, `"resources"`) {
		t.Fatalf("capabilities do not follow what the relay offers: %s", caps)
	}
	h.send(`{"jsonrpc":"2.0","id":1,"method":"prompts/list"}`)
	if m := mustString(t, h.recv()); !strings.Contains(m, `"id":1`) || !strings.Contains(m, `"served":"prompts/list","version":"2025-11-25"`) {
		t.Fatalf("prompts/list: %s", m)
	}
	h.send(`{"jsonrpc":"2.0","id":"r","method":"resources/read","params":{"uri":"a://b"}}`)
	if m := mustString(t, h.recv()); !strings.Contains(m, `"id":"r"`) || !strings.Contains(m, "-32601") {
		t.Fatalf("a method of a feature not offered: %s", m)
	}
	h.send(`{"jsonrpc":"2.0","id":"sub","method":"resources/subscribe","params":{"uri":"a://b"}}`)
	if m := mustString(t, h.recv()); !strings.Contains(m, `"id":"sub"`) || !strings.Contains(m, "-32601") {
		t.Fatalf("a subscription the relay does not offer: %s", m)
	}
	h.send(`{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"bad"}}`)
	if m := mustString(t, h.recv()); !strings.Contains(m, `"id":2`) || !strings.Contains(m, "-32602") {
		t.Fatalf("the relay's error: %s", m)
	}
	// A panic costs its request, not the session.
	h.send(`{"jsonrpc":"2.0","id":"p","method":"prompts/get","params":{"name":"panic"}}`)
	if m := mustString(t, h.recv()); !strings.Contains(m, `"id":"p"`) || !strings.Contains(m, "-32603") || strings.Contains(m, "a bug") {
		t.Fatalf("a panic in the relay: %s", m)
	}
	h.send(`{"jsonrpc":"2.0","id":3,"method":"completion/complete","params":{}}`)
	if m := mustString(t, h.recv()); !strings.Contains(m, `"served":"completion/complete"`) {
		t.Fatalf("completion/complete: %s", m)
	}
	// The 2026-07-28 era reaches it too, with its own version.
	h2 := newHarness(t, ctx, session.Options{Catalog: &changingCatalog{reg: newTools(t, nil)}, Relay: rl})
	h2.send(`{"jsonrpc":"2.0","id":1,"method":"prompts/list","params":{` + modernMeta + `}}`)
	if m := mustString(t, h2.recv()); !strings.Contains(m, `"served":"prompts/list","version":"2026-07-28"`) {
		t.Fatalf("a stateless prompts/list: %s", m)
	}
}

// TestRelayIsATask: a relayed request runs off the read loop (a ping is
// answered while it waits), a cancelled one gets no answer, and one still
// running when the input ends is answered once the drain grace is over.
func TestRelayIsATask(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rl := newFakeRelay(mcp.Offered{Prompts: true})
	h := newHarness(t, ctx, session.Options{Catalog: &changingCatalog{reg: newTools(t, nil)}, Relay: rl, DrainGrace: 50 * time.Millisecond})
	stop := time.AfterFunc(30*time.Second, func() { h.in.Close(); cancel() })
	defer stop.Stop()
	h.init()

	h.send(`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"hang"}}`)
	<-rl.started
	h.send(`{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"hang"}}`)
	<-rl.started
	h.send(`{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"x"}}`)
	if m := mustString(t, h.recv()); !strings.Contains(m, `"id":2`) || !strings.Contains(m, "-32600") {
		t.Fatalf("an id in flight reused: %s", m)
	}
	h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	h.send(`{"jsonrpc":"2.0","id":9,"method":"ping"}`)
	if m := mustString(t, h.recv()); !strings.Contains(m, `"id":9`) {
		t.Fatalf("the ping is not the next answer: %s", m)
	}
	h.in.Close()
	m := mustString(t, h.recv())
	if !strings.Contains(m, `"id":2`) || !strings.Contains(m, "shutting down") {
		t.Fatalf("the request in flight at the end: %s", m)
	}
	if line, err := h.out.ReadBytes('\n'); err == nil {
		t.Fatalf("more after the drain (the cancelled request answered?): %s", line)
	}
}

// TestRelayListChanged: the prompt and resource list changes the relay
// reports reach an initialized legacy session as notifications, and a
// 2026-07-28 subscription for the lists it asked for, even those no
// server offers yet; a server without a relay announces neither.
func TestRelayListChanged(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rl := newFakeRelay(mcp.Offered{Prompts: true, Resources: true})
	h := newHarness(t, ctx, session.Options{Catalog: &changingCatalog{reg: newTools(t, nil)}, Relay: rl})
	stop := time.AfterFunc(30*time.Second, func() { h.in.Close(); cancel() })
	defer stop.Stop()
	h.init()
	// The read loop lets changes through once the answer to initialize
	// is out: the answer to a ping after it says that moment has passed.
	h.send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	h.recv()
	rl.changes <- session.Change{Lists: mcp.Listen{Prompts: true}}
	if m := h.recv(); m["method"] != "notifications/prompts/list_changed" {
		t.Fatalf("after a prompt list change: %v", m)
	}
	rl.changes <- session.Change{Lists: mcp.Listen{Resources: true}}
	if m := h.recv(); m["method"] != "notifications/resources/list_changed" {
		t.Fatalf("after a resource list change: %v", m)
	}
	rl.changes <- session.Change{Updated: "file:///a \"b\".md"}
	if m := mustString(t, h.recv()); m != `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///a \"b\".md"}}` {
		t.Fatalf("after a resource update: %s", m)
	}

	// Nothing is offered yet: a server that connects later changes
	// the lists, so the subscription hears them.
	rl2 := newFakeRelay(mcp.Offered{})
	h2 := newHarness(t, ctx, session.Options{Catalog: &changingCatalog{reg: newTools(t, nil)}, Relay: rl2})
	h2.send(`{"jsonrpc":"2.0","id":"s","method":"subscriptions/listen","params":{"notifications":{"promptsListChanged":true,"resourcesListChanged":true},` + modernMeta + `}}`)
	ack := mustString(t, h2.recv())
	if !strings.Contains(ack, `"promptsListChanged":true`) || !strings.Contains(ack, `"resourcesListChanged":true`) {
		t.Fatalf("acknowledged: %s", ack)
	}
	rl2.changes <- session.Change{Lists: mcp.Listen{Resources: true}}
	if m := mustString(t, h2.recv()); !strings.Contains(m, `"method":"notifications/resources/list_changed"`) || !strings.Contains(m, `/subscriptionId":"s"`) {
		t.Fatalf("on the subscription: %s", m)
	}

	h3 := newHarness(t, ctx, session.Options{Catalog: &changingCatalog{reg: newTools(t, nil)}})
	h3.send(`{"jsonrpc":"2.0","id":"s","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"promptsListChanged":true},` + modernMeta + `}}`)
	if ack := mustString(t, h3.recv()); !strings.Contains(ack, `"toolsListChanged":true`) || strings.Contains(ack, "promptsListChanged") {
		t.Fatalf("acknowledged without a relay: %s", ack)
	}
}

// TestRelayListenFollows: a 2026-07-28 subscription that names resources
// is acknowledged with those the Relay follows, hears their updates (and
// only theirs) tagged with its id, and a resource is unfollowed once no
// open subscription follows it; a refusal by the Relay answers the
// subscription under its id; a Relay that offers no subscriptions is
// not asked, and the acknowledgement names no resource.
func TestRelayListenFollows(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rl := newFakeRelay(mcp.Offered{Resources: true, Subscribe: true})
	rl.follows, rl.unfollows = make(chan []string, 4), make(chan []string, 4)
	h := newHarness(t, ctx, session.Options{Catalog: &changingCatalog{reg: newTools(t, nil)}, Relay: rl})
	stop := time.AfterFunc(30*time.Second, func() { h.in.Close(); cancel() })
	defer stop.Stop()
	listen := func(id, uris string) {
		t.Helper()
		h.send(`{"jsonrpc":"2.0","id":"` + id + `","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":` + uris + `},` + modernMeta + `}}`)
	}
	want := func(what, m string) {
		t.Helper()
		if got := mustString(t, h.recv()); got != m {
			t.Fatalf("%s:\n got  %s\n want %s", what, got, m)
		}
	}
	const meta = `{"io.modelcontextprotocol/subscriptionId":`
	// took is what the relay was next asked to (un)follow.
	took := func(ch chan []string, what string) []string {
		t.Helper()
		select {
		case got := <-ch:
			return got
		case <-time.After(10 * time.Second):
			t.Fatalf("the relay was not asked to %s", what)
		}
		return nil
	}

	listen("a", `["file:///a","deny:b","file:///a"]`)
	if got := took(rl.follows, "follow"); strings.Join(got, " ") != "file:///a deny:b" {
		t.Fatalf("followed %q", got)
	}
	want("the acknowledgement", `{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":`+meta+`"a"},"notifications":{"resourceSubscriptions":["file:///a"]}}}`)
	listen("b", `["file:///a","file:///c"]`)
	took(rl.follows, "follow")
	want("the second acknowledgement", `{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":`+meta+`"b"},"notifications":{"resourceSubscriptions":["file:///a","file:///c"]}}}`)

	rl.changes <- session.Change{Updated: "deny:b"}
	rl.changes <- session.Change{Updated: "file:///c"}
	want("the update of c", `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"_meta":`+meta+`"b"},"uri":"file:///c"}}`)

	// a alone is cancelled: b still follows file:///a.
	h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}`)
	// Any answer to a request sent after the cancellation says it was read.
	h.send(`{"jsonrpc":"2.0","id":"p","method":"ping","params":{` + modernMeta + `}}`)
	if m := h.recv(); m["id"] != "p" {
		t.Fatalf("before the answer to the next request: %v", m)
	}
	rl.changes <- session.Change{Updated: "file:///a"}
	want("the update of a, after a ended", `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"_meta":`+meta+`"b"},"uri":"file:///a"}}`)
	select {
	case got := <-rl.unfollows:
		t.Fatalf("unfollowed %q while b follows it", got)
	default:
	}
	h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"b"}}`)
	got := slices.Sorted(slices.Values(took(rl.unfollows, "unfollow"))) // a copy: the slice is the session's
	if strings.Join(got, " ") != "file:///a file:///c" {
		t.Fatalf("after the last subscription ended, unfollowed %q", got)
	}

	listen("e", `["file:///a","error:x"]`)
	took(rl.follows, "follow")
	want("a refused subscription", `{"error":{"code":-32602,"message":"Invalid params: too many"},"id":"e","jsonrpc":"2.0"}`)

	// Without subscriptions on offer, nothing is followed.
	rl2 := newFakeRelay(mcp.Offered{Resources: true})
	h2 := newHarness(t, ctx, session.Options{Catalog: &changingCatalog{reg: newTools(t, nil)}, Relay: rl2})
	h2.send(`{"jsonrpc":"2.0","id":"s","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["file:///a"]},` + modernMeta + `}}`)
	if ack := mustString(t, h2.recv()); strings.Contains(ack, "resourceSubscriptions") {
		t.Fatalf("acknowledged without subscriptions: %s", ack)
	}
}

// TestRelayListenSlowFollow: a subscription whose resource's server is
// slow to follow holds no other subscription's acknowledgement; an update
// that comes once a resource is followed, before the acknowledgement,
// follows the acknowledgement.
func TestRelayListenSlowFollow(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rl := newFakeRelay(mcp.Offered{Resources: true, Subscribe: true})
	rl.follows, rl.gate, rl.changes = make(chan []string, 4), make(chan struct{}), make(chan session.Change)
	h := newHarness(t, ctx, session.Options{Catalog: &changingCatalog{reg: newTools(t, nil)}, Relay: rl})
	// The session cannot end while a's Follow waits for the gate: on
	// time-out the gate opens too, so that a test that fails fails in
	// seconds rather than at go test's own deadline.
	openGate := sync.OnceFunc(func() { close(rl.gate) })
	stop := time.AfterFunc(30*time.Second, func() { openGate(); h.in.Close(); cancel() })
	defer stop.Stop()
	h.send(`{"jsonrpc":"2.0","id":"a","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["slow:a"]},` + modernMeta + `}}`)
	<-rl.follows // a's Follow has begun, and waits for the gate
	h.send(`{"jsonrpc":"2.0","id":"b","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["touch:b"]},` + modernMeta + `}}`)
	<-rl.follows
	if m := mustString(t, h.recv()); !strings.Contains(m, `"method":"notifications/subscriptions/acknowledged"`) || !strings.Contains(m, `/subscriptionId":"b"`) {
		t.Fatalf("while a's server is slow, b got %s", m)
	}
	if m := mustString(t, h.recv()); !strings.Contains(m, `"method":"notifications/resources/updated"`) || !strings.Contains(m, `"uri":"touch:b"`) {
		t.Fatalf("after b's acknowledgement: %s, want the update of touch:b", m)
	}
	openGate()
	if m := mustString(t, h.recv()); !strings.Contains(m, `/subscriptionId":"a"`) {
		t.Fatalf("after the slow server followed: %s", m)
	}
}

// TestRelayListenAfterUnfollow: a subscription that asks for a resource
// while the session unfollows it waits for the unfollow to end before it
// follows, or the unfollow would undo what its Follow found followed.
func TestRelayListenAfterUnfollow(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rl := newFakeRelay(mcp.Offered{Resources: true, Subscribe: true})
	rl.follows, rl.unfollows, rl.unfollowGate = make(chan []string, 4), make(chan []string, 4), make(chan struct{})
	h := newHarness(t, ctx, session.Options{Catalog: &changingCatalog{reg: newTools(t, nil)}, Relay: rl})
	stop := time.AfterFunc(30*time.Second, func() { h.in.Close(); cancel() })
	defer stop.Stop()
	listen := func(id string) {
		h.send(`{"jsonrpc":"2.0","id":"` + id + `","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["file:///x"]},` + modernMeta + `}}`)
	}
	listen("a")
	<-rl.follows
	h.recv()
	h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}`)
	<-rl.unfollows // the unfollow of file:///x has begun, and waits
	listen("b")
	select {
	case got := <-rl.follows:
		t.Fatalf("followed %q while it was being unfollowed", got)
	case <-time.After(200 * time.Millisecond):
	}
	close(rl.unfollowGate)
	<-rl.follows
	if m := mustString(t, h.recv()); !strings.Contains(m, `/subscriptionId":"b"},"notifications":{"resourceSubscriptions":["file:///x"]}`) {
		t.Fatalf("b: %s", m)
	}
}

// TestRelayMessages: a relaying server's tool passes log messages on to
// the client while it serves a call, each one compact line before the
// answer; a server without a Relay gives its tools no way to.
func TestRelayMessages(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var hadMessages []bool
	reg := loggerTools(t, func(send func(jsontext.Value)) {
		hadMessages = append(hadMessages, send != nil)
		if send != nil {
			send(jsontext.Value("{\"level\":\"info\",\n\t\"data\": \"line\"\r\n}"))
		}
	})
	h := newHarness(t, ctx, session.Options{Catalog: &changingCatalog{reg: reg}, Relay: newFakeRelay(mcp.Offered{Logging: true})})
	stop := time.AfterFunc(30*time.Second, func() { h.in.Close(); cancel() })
	defer stop.Stop()
	h.init()
	h.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"logger","arguments":{}}}`)
	line, err := h.out.ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	if got := string(line); got != `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"line"}}`+"\n" {
		t.Fatalf("the log message: %q", got)
	}
	if m := h.recv(); m["id"] != float64(1) {
		t.Fatalf("after the log message: %v", m)
	}

	plain := newHarness(t, ctx, session.Options{Tools: reg})
	plain.init()
	plain.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"logger","arguments":{}}}`)
	if m := plain.recv(); m["id"] != float64(1) {
		t.Fatalf("without a relay: %v", m)
	}
	if len(hadMessages) != 2 || !hadMessages[0] || hadMessages[1] {
		t.Errorf("the tool had a way to send log messages: %v (with a relay, without)", hadMessages)
	}
}

// loggerTools is a registry of one tool, "logger", that calls logs with
// the way to send log messages its context gives it (nil for none).
func loggerTools(t *testing.T, logs func(send func(jsontext.Value))) *tool.Registry {
	t.Helper()
	logger := tool.MustNew(tool.Descriptor{
		Name:        "logger",
		InputSchema: jsontext.Value(`{"type":"object","additionalProperties":false}`),
	}, func(ctx context.Context, _ struct{}) (blockOut, error) {
		logs(tool.MessagesOf(ctx))
		return blockOut{OK: true}, nil
	})
	reg, err := tool.NewRegistry(logger)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// TestRelayMessagesLevel: once the client's logging/setLevel is accepted,
// a relaying server passes on only log messages of that level or more
// severe, whatever its downstream sends.
func TestRelayMessagesLevel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := loggerTools(t, func(send func(jsontext.Value)) {
		send(jsontext.Value(`{"level":"info","data":"chatter"}`))
		send(jsontext.Value(`{"level":"error","data":"broken"}`))
	})
	h := newHarness(t, ctx, session.Options{Catalog: &changingCatalog{reg: reg}, Relay: newFakeRelay(mcp.Offered{Logging: true})})
	stop := time.AfterFunc(30*time.Second, func() { h.in.Close(); cancel() })
	defer stop.Stop()
	h.init()
	h.send(`{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"warning"}}`)
	if m := h.recv(); m["id"] != float64(1) {
		t.Fatalf("logging/setLevel: %v", m)
	}
	h.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"logger","arguments":{}}}`)
	if m := mustString(t, h.recv()); m != `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"broken","level":"error"}}` {
		t.Fatalf("the first message after logging/setLevel warning: %s", m)
	}
	if m := h.recv(); m["id"] != float64(2) {
		t.Fatalf("after the log message: %v", m)
	}
}
