package session_test

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-bastion/bastion/internal/jsonrpc"
	"github.com/mcp-bastion/bastion/internal/mcp"
	"github.com/mcp-bastion/bastion/internal/session"
	"github.com/mcp-bastion/bastion/internal/tool"
	"github.com/mcp-bastion/bastion/internal/wire"
)

// changingCatalog is a catalog whose changes the test makes.
type changingCatalog struct {
	reg         *tool.Registry
	beforeWatch func() // when set, run as Watch is called

	mu       sync.Mutex
	watchers []chan struct{}
}

func (c *changingCatalog) List(string, *string) ([]byte, *jsonrpc.Error) {
	return []byte(`{"tools":[]}`), nil
}

func (c *changingCatalog) Lookup(name string) (tool.Tool, bool) { return c.reg.Lookup(name) }

func (c *changingCatalog) Watch() (<-chan struct{}, func()) {
	if c.beforeWatch != nil {
		c.beforeWatch()
	}
	ch := make(chan struct{}, 1)
	c.mu.Lock()
	c.watchers = append(c.watchers, ch)
	c.mu.Unlock()
	return ch, func() {}
}

func (c *changingCatalog) change() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// TestSubscriptionsListen: a 2026-07-28 stream hears of catalog changes
// only on the subscriptions/listen it holds open: acknowledged at once,
// each change tagged with the request's id, nothing after the client
// cancels it, and the request answered when the session ends.
func TestSubscriptionsListen(t *testing.T) {
	cat := &changingCatalog{reg: newTools(t, nil)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newHarness(t, ctx, session.Options{Catalog: cat})
	// A message that never comes fails the test instead of hanging it.
	stop := time.AfterFunc(30*time.Second, func() { h.in.Close(); cancel() })
	defer stop.Stop()

	h.send(`{"jsonrpc":"2.0","id":"s1","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + modernMeta + `}}`)
	ack := h.recv()
	if ack["method"] != "notifications/subscriptions/acknowledged" || !strings.Contains(mustString(t, ack), `"toolsListChanged":true`) ||
		!strings.Contains(mustString(t, ack), `"io.modelcontextprotocol/subscriptionId":"s1"`) {
		t.Fatalf("acknowledgement: %v", ack)
	}
	// A second subscription that asks for nothing hears nothing.
	h.send(`{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"notifications":{},` + modernMeta + `}}`)
	if ack := h.recv(); !strings.Contains(mustString(t, ack), `"notifications":{}`) {
		t.Fatalf("acknowledgement of an empty filter: %v", ack)
	}
	// An id in use is refused, and bad params are -32602.
	h.send(`{"jsonrpc":"2.0","id":"s1","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + modernMeta + `}}`)
	if m := h.recv(); m["id"] != "s1" || !strings.Contains(mustString(t, m), "-32600") {
		t.Fatalf("a reused id: %v", m)
	}
	h.send(`{"jsonrpc":"2.0","id":"bad","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"extra":1,` + modernMeta + `}}`)
	if m := h.recv(); m["id"] != "bad" || !strings.Contains(mustString(t, m), "-32602") {
		t.Fatalf("unknown params member: %v", m)
	}

	cat.change()
	m := h.recv()
	if m["method"] != "notifications/tools/list_changed" || !strings.Contains(mustString(t, m), `"io.modelcontextprotocol/subscriptionId":"s1"`) {
		t.Fatalf("after a change: %v", m)
	}

	// Cancelled: no answer, and no more notifications.
	h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"s1"}}`)
	h.send(`{"jsonrpc":"2.0","id":"s2","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + modernMeta + `}}`)
	if m := h.recv(); !strings.Contains(mustString(t, m), `/subscriptionId":"s2"`) {
		t.Fatalf("acknowledgement of s2: %v", m)
	}
	cat.change()
	if m := h.recv(); !strings.Contains(mustString(t, m), `/subscriptionId":"s2"`) {
		t.Fatalf("after the cancellation, a change is heard on %v", m)
	}

	// The end of input answers the subscriptions still open.
	h.in.Close()
	got := map[string]bool{}
	for range 2 {
		m := h.recv()
		if m["result"] == nil {
			t.Fatalf("at the end: %v", m)
		}
		got[mustString(t, m["id"])] = true
	}
	if !got[`"s2"`] || !got[`7`] || len(got) != 2 {
		t.Errorf("answered at the end: %v", got)
	}
}

// TestSubscriptionsListenFixedTools: a server whose tools never change
// announces no change, so it has no subscriptions/listen.
func TestSubscriptionsListenFixedTools(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newHarness(t, ctx, session.Options{Tools: newTools(t, nil)})
	h.send(`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + modernMeta + `}}`)
	if m := h.recv(); !strings.Contains(mustString(t, m), "-32601") {
		t.Fatalf("%v", m)
	}
}

func mustString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSubscriptionsListenAtDrain: a listen read just as the session
// begins to drain, after the drain has answered the open subscriptions,
// is acknowledged and answered at once: nothing would answer it later.
// The drain is run from inside the listen, before it takes its lock, so
// the interleaving is the same every time.
func TestSubscriptionsListenAtDrain(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newHarness(t, ctx, session.Options{Catalog: &changingCatalog{reg: newTools(t, nil)}})
	stop := time.AfterFunc(30*time.Second, func() { h.in.Close(); cancel() })
	defer stop.Stop()
	reached := false
	session.SetBeforeListen(h.sess, func() {
		reached = true
		h.sess.Drain()
		for !session.Drained(h.sess) {
			time.Sleep(time.Millisecond)
		}
	})
	h.send(`{"jsonrpc":"2.0","id":"s","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + modernMeta + `}}`)
	acked, answered := false, false
	for {
		line, err := h.out.ReadBytes('\n')
		if err != nil {
			break
		}
		s := string(line)
		acked = acked || strings.Contains(s, `"notifications/subscriptions/acknowledged"`)
		answered = answered || strings.Contains(s, `"id":"s"`)
	}
	if !reached {
		t.Fatal("the listen was not read")
	}
	if !acked || !answered {
		t.Fatalf("a listen read at the drain: acknowledged %v, answered %v; want both", acked, answered)
	}
}

// TestCatalogWatchedBeforeReading: a session watches its catalog before it
// reads its first message, so no change the client could have caused, or
// been told of, falls between the two. Watch waits a while for the first
// line to be read; a session that read it first fails.
func TestCatalogWatchedBeforeReading(t *testing.T) {
	read := make(chan struct{})
	var readFirst atomic.Bool
	cat := &changingCatalog{reg: newTools(t, nil), beforeWatch: func() {
		select {
		case <-read:
			readFirst.Store(true)
		case <-time.After(100 * time.Millisecond):
		}
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newHarness(t, ctx, session.Options{Catalog: cat})
	h.send(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{` + modernMeta + `}}`)
	close(read)
	h.recv()
	if readFirst.Load() {
		t.Fatal("the session read a message before it watched its catalog")
	}
}

// stuckConn is a Conn whose client reads nothing more once a
// subscription has been acknowledged: every write after that waits
// until its ctx ends.
type stuckConn struct {
	*wire.Conn
	stuck atomic.Bool
	acked chan struct{}
}

func (c *stuckConn) WriteQueued(ctx context.Context, msg []byte, queued func() bool) error {
	if c.stuck.Load() {
		<-ctx.Done()
		return context.Cause(ctx)
	}
	if strings.Contains(string(msg), "notifications/subscriptions/acknowledged") {
		c.stuck.Store(true)
		defer close(c.acked)
	}
	return c.Conn.WriteQueued(ctx, msg, queued)
}

// TestDrainWithOpenSubscriptionsBounded: a drain answers the open
// subscriptions, and a client that no longer reads does not hold it
// there: the session ends within its bounds, not at the next signal.
func TestDrainWithOpenSubscriptionsBounded(t *testing.T) {
	srv, err := session.NewServer(session.Options{Info: mcp.Implementation{Name: "test", Version: "1"},
		Catalog: &changingCatalog{reg: newTools(t, nil)}, DrainGrace: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	defer inW.Close()
	conn := &stuckConn{Conn: wire.NewConn(inR, io.Discard, 1<<20), acked: make(chan struct{})}
	sess := srv.NewSession(conn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- sess.Run(ctx) }()
	if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","id":"s","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},`+modernMeta+`}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-conn.acked:
	case <-time.After(10 * time.Second):
		t.Fatal("the subscription was not acknowledged")
	}
	sess.Drain()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cancel() // the hard stop, as a second signal would
		<-done
		t.Fatal("the drain waited for a client that does not read to take the subscription's answer")
	}
}
