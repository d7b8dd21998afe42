package session_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-bastion/bastion/internal/mcp"
	"github.com/mcp-bastion/bastion/internal/session"
	"github.com/mcp-bastion/bastion/internal/wire"
)

// heldConn is a Conn whose output the test controls: every message is
// handed to the test on written; a tool's successful answer (one that
// holds "isError":false) then waits until its ctx ends or the conn is released,
// as a write to a client that no longer reads waits for room. Everything
// else (the read loop's own answers and refusals) passes.
type heldConn struct {
	*wire.Conn
	written  chan []byte
	returned chan []byte // held messages whose write ended with ctx
	release  chan struct{}
	holding  atomic.Int32 // held writes waiting now
}

func (h *heldConn) WriteQueued(ctx context.Context, msg []byte, queued func() bool) error {
	h.written <- msg
	if bytes.Contains(msg, []byte(`"isError":false`)) {
		h.holding.Add(1)
		defer h.holding.Add(-1)
		select {
		case <-h.release:
		case <-ctx.Done():
			h.returned <- msg
			return context.Cause(ctx)
		}
	}
	if queued != nil && !queued() {
		return wire.ErrWithdrawn
	}
	return nil
}

// heldHarness runs a session on a heldConn.
type heldHarness struct {
	t    *testing.T
	in   *io.PipeWriter
	conn *heldConn
	sess *session.Session
}

func newHeldHarness(t *testing.T, opts session.Options) *heldHarness {
	t.Helper()
	opts.Info = mcp.Implementation{Name: "test", Version: "1"}
	srv, err := session.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	conn := &heldConn{
		Conn:    wire.NewConn(inR, io.Discard, 1<<20),
		written: make(chan []byte, 64), returned: make(chan []byte, 64),
		release: make(chan struct{}),
	}
	h := &heldHarness{t: t, in: inW, conn: conn, sess: srv.NewSession(conn)}
	done := make(chan error, 1)
	go func() { done <- h.sess.Run(context.Background()) }()
	t.Cleanup(func() {
		close(conn.release)
		inW.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("session did not end")
		}
	})
	return h
}

func (h *heldHarness) send(s string) {
	h.t.Helper()
	if _, err := io.WriteString(h.in, s+"\n"); err != nil {
		h.t.Fatal(err)
	}
}

// next is the next message the session wrote, decoded; a batch's array
// is unwrapped when it holds one answer.
func (h *heldHarness) next() map[string]any {
	h.t.Helper()
	select {
	case msg := <-h.conn.written:
		var v any
		if err := json.Unmarshal(msg, &v); err != nil {
			h.t.Fatalf("%v: %q", err, msg)
		}
		if a, ok := v.([]any); ok && len(a) == 1 {
			v = a[0]
		}
		m, ok := v.(map[string]any)
		if !ok {
			h.t.Fatalf("wrote %s, want one answer", msg)
		}
		return m
	case <-time.After(10 * time.Second):
		h.t.Fatal("nothing written")
		return nil
	}
}

// refused reports whether m is the in-band MCP_CONCURRENCY_LIMIT refusal.
func refused(m map[string]any) bool {
	r, ok := m["result"].(map[string]any)
	if !ok || r["isError"] != true {
		return false
	}
	text, _ := r["content"].([]any)[0].(map[string]any)["text"].(string)
	return strings.Contains(text, "MCP_CONCURRENCY_LIMIT")
}

// TestUnreadAnswersCountAsPending: a call whose answer waits for room in
// the output queue (a client that does not read) keeps its slot and its
// place under the pending cap though its tool has returned: the next call
// waits for the slot instead of running and holding one more answer, and
// the one after it is refused by the pending cap. Memory held for a client
// that does not read is so one answer per slot. A batch member frees its
// slot when it hands its answer to the batch (the batch bound holds the
// bytes), but its call still counts as pending until the array is
// queued. A cancellation withdraws a waiting answer and frees its slot
// for the call that waits.
func TestUnreadAnswersCountAsPending(t *testing.T) {
	call := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"block","arguments":{"wait":false}}}`
	}
	cases := []struct {
		name    string
		version string
		frame   func(string) string
		// withdraw: a cancelled waiting answer frees its place (a
		// batch's answer is one array, written whole or not at all).
		withdraw bool
	}{
		{"direct", "2025-11-25", func(s string) string { return s }, true},
		{"batch", "2025-03-26", func(s string) string { return "[" + s + "]" }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// In a batch, the tool waits on started until the read loop
			// has dispatched the whole frame (the ping after it is
			// answered): a batch whose last member ends first is written
			// by the read loop, and a held write there would stop the
			// reading this test needs.
			var started chan struct{}
			if !c.withdraw {
				started = make(chan struct{})
			}
			h := newHeldHarness(t, session.Options{Tools: newTools(t, started), MaxConcurrency: 1, MaxPending: 2, QueueTimeout: time.Minute})
			h.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + c.version + `","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
			h.next()
			send := func(id string) {
				h.send(c.frame(call(id)))
				if started == nil {
					return
				}
				h.send(`{"jsonrpc":"2.0","id":"p` + id + `","method":"ping"}`)
				if m := h.next(); m["id"] != "p"+id {
					t.Fatalf("wrote %v, want the answer to ping p%s", m, id)
				}
				select {
				case <-started:
				case <-time.After(10 * time.Second):
					t.Fatalf("call %s did not start", id)
				}
			}
			send("1")
			if m := h.next(); m["id"] != float64(1) || refused(m) {
				t.Fatalf("call 1: wrote %v, want its answer", m)
			}
			// Call 2 waits for the slot call 1 holds while its answer
			// waits (in a batch, it runs, and its answer waits too); it
			// is pending, so call 3 is refused.
			send("2")
			waitFor(t, func() bool { return session.Pending(h.sess) == 2 })
			if !c.withdraw {
				if m := h.next(); m["id"] != float64(2) || refused(m) {
					t.Fatalf("batch call 2: wrote %v, want its answer", m)
				}
			}
			h.send(c.frame(call("3")))
			if m := h.next(); m["id"] != float64(3) || !refused(m) {
				t.Fatalf("call 3 with two calls pending: wrote %v, want the MCP_CONCURRENCY_LIMIT refusal", m)
			}
			if !c.withdraw {
				waitFor(t, func() bool { return h.conn.holding.Load() == 2 })
				return
			}
			// One answer waits (its Write counts itself just after the
			// test sees it), and call 2 has written nothing.
			waitFor(t, func() bool { return h.conn.holding.Load() == 1 })
			select {
			case msg := <-h.conn.written:
				t.Fatalf("wrote %s while call 1's answer waits, want nothing: one answer per slot", msg)
			case <-time.After(50 * time.Millisecond):
			}
			h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
			select {
			case <-h.conn.returned:
			case <-time.After(10 * time.Second):
				t.Fatal("the cancelled call's answer is still waiting to be written")
			}
			// The slot is free: call 2 runs, and its answer waits.
			if m := h.next(); m["id"] != float64(2) || refused(m) {
				t.Fatalf("call 2 after call 1 was withdrawn: wrote %v, want its answer", m)
			}
			waitFor(t, func() bool { return session.Pending(h.sess) == 1 })
		})
	}
}

// waitFor polls cond until it holds, failing after 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestBatchAnswersBounded: the answers a session holds for its batches,
// each until its whole array is written, are bounded in bytes. A member
// whose answer would pass the bound is answered -32602 with an
// MCP_PAYLOAD_TOO_LARGE problem instead, and the bound is free again once
// the batch is written.
func TestBatchAnswersBounded(t *testing.T) {
	const maxBytes = 300
	h := newHarness(t, context.Background(), session.Options{Tools: newTools(t, nil), MaxBatchBytes: maxBytes})
	h.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	h.recv()
	call := func(id int) string {
		return `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"block","arguments":{"wait":false}}}`
	}
	// The size of one answer, alone on its line (ids 1 to 9 keep it).
	h.send(call(1))
	line, err := h.out.ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	size := len(line) - 1
	fit := maxBytes / size
	if fit < 1 || fit >= 8 {
		t.Fatalf("an answer of %d bytes: pick another bound", size)
	}
	for round := range 2 {
		calls := make([]string, 8)
		for i := range calls {
			calls[i] = call(i + 2)
		}
		h.send("[" + strings.Join(calls, ",") + "]")
		line, err := h.out.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		var answers []map[string]any
		if err := json.Unmarshal(line, &answers); err != nil {
			t.Fatalf("%v: %q", err, line)
		}
		results, refused := 0, 0
		for _, a := range answers {
			switch e, _ := a["error"].(map[string]any); {
			case a["result"] != nil:
				results++
			case e != nil && e["code"] == float64(-32602) && e["data"].(map[string]any)["code"] == "MCP_PAYLOAD_TOO_LARGE":
				refused++
			default:
				t.Errorf("round %d: unexpected answer %v", round, a)
			}
		}
		if results != fit || refused != 8-fit {
			t.Errorf("round %d: %d results and %d refusals, want the %d answers of %d bytes that fit %d bytes and %d refusals",
				round, results, refused, fit, size, maxBytes, 8-fit)
		}
	}
}

// handConn is a Conn that hands each message to the test as it is
// queued, and returns from the write only once the test lets it: the
// test sees an answer while the task that wrote it has not yet gone on,
// as a client may read an answer before its writer is scheduled again.
type handConn struct {
	*wire.Conn
	out chan []byte
	ack chan struct{}
}

func (h *handConn) WriteQueued(ctx context.Context, msg []byte, queued func() bool) error {
	if queued != nil && !queued() {
		return wire.ErrWithdrawn
	}
	h.out <- msg
	<-h.ack
	return nil
}

// TestAnsweredCallNoLongerCounts: a call stops counting (against the
// pending cap, its slot, its id, the batch bound) once its answer has its
// place in the output, before the client can read it: a client that reads
// an answer and at once sends the next call, reusing the id, or the next
// batch, is never refused on account of the call it has just been
// answered.
func TestAnsweredCallNoLongerCounts(t *testing.T) {
	for _, version := range []string{"2025-11-25", "2025-03-26"} {
		t.Run(version, func(t *testing.T) {
			srv, err := session.NewServer(session.Options{Info: mcp.Implementation{Name: "test", Version: "1"},
				Tools: newTools(t, nil), MaxConcurrency: 1, MaxPending: 1, MaxBatchBytes: 500})
			if err != nil {
				t.Fatal(err)
			}
			// A kernel pipe, which buffers: the test writes the next call
			// while the read loop may be held in a write.
			inR, inW, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			conn := &handConn{Conn: wire.NewConn(inR, io.Discard, 1<<20), out: make(chan []byte), ack: make(chan struct{})}
			sess := srv.NewSession(conn)
			done := make(chan error, 1)
			go func() { done <- sess.Run(context.Background()) }()
			defer func() {
				inW.Close()
				go func() {
					for range conn.out {
					}
				}()
				close(conn.ack)
				<-done
				close(conn.out) // no writer is left: Run has returned
			}()
			send := func(s string) {
				if _, err := io.WriteString(inW, s+"\n"); err != nil {
					t.Fatal(err)
				}
			}
			// A session that writes nothing, or takes no ack, fails the
			// test rather than hanging it.
			out := func() []byte {
				t.Helper()
				select {
				case msg := <-conn.out:
					return msg
				case <-time.After(10 * time.Second):
					t.Fatal("nothing written")
					return nil
				}
			}
			ack := func() {
				t.Helper()
				select {
				case conn.ack <- struct{}{}:
				case <-time.After(10 * time.Second):
					t.Fatal("no write waits for its ack")
				}
			}
			send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
			out()
			ack()
			call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block","arguments":{"wait":false}}}`
			if version == "2025-03-26" {
				call = "[" + call + "]"
			}
			send(call)
			acks := 0
			for round := range 20 {
				first := out() // its writer waits for the ack
				send(call)
				var next []byte
				select {
				case next = <-conn.out:
				case <-time.After(100 * time.Millisecond):
					// The read loop wrote the first answer itself (a
					// batch answered before it was fully read) and reads
					// on only once the write returns; that path has no
					// window to test.
					ack()
					acks++
					next = out()
				}
				for _, msg := range [][]byte{first, next} {
					if bytes.Contains(msg, []byte(`"error"`)) || bytes.Contains(msg, []byte(`"isError":true`)) {
						t.Fatalf("round %d: %s, want the answer: the call answered before still counted", round, msg)
					}
				}
				for range 2 - acks {
					ack()
				}
				acks = 0
				send(call)
			}
			out()
			ack()
		})
	}
}
