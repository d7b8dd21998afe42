package session_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/goleak"

	"github.com/mcp-bastion/bastion/internal/mcp"
	"github.com/mcp-bastion/bastion/internal/session"
	"github.com/mcp-bastion/bastion/internal/tool"
	"github.com/mcp-bastion/bastion/internal/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type blockIn struct {
	Wait bool `json:"wait"`
}
type blockOut struct {
	OK bool `json:"ok"`
}

// started is signalled by the block tool when it begins, so tests know a
// call is in flight without sleeping.
func newTools(t *testing.T, started chan<- struct{}) *tool.Registry {
	t.Helper()
	block := tool.MustNew(tool.Descriptor{
		Name:        "block",
		InputSchema: jsontext.Value(`{"type":"object","properties":{"wait":{"type":"boolean"}},"required":["wait"],"additionalProperties":false}`),
		Annotations: tool.ReadOnly,
	}, func(ctx context.Context, in blockIn) (blockOut, error) {
		if started != nil {
			started <- struct{}{}
		}
		if in.Wait {
			<-ctx.Done()
			return blockOut{}, context.Cause(ctx)
		}
		return blockOut{OK: true}, nil
	})
	reg, err := tool.NewRegistry(block)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// harness runs a session on pipes.
type harness struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *bufio.Reader
	sess *session.Session
	done chan error
}

func newHarness(t *testing.T, ctx context.Context, opts session.Options) *harness {
	t.Helper()
	if opts.Info.Name == "" {
		opts.Info = mcp.Implementation{Name: "test", Version: "1"}
	}
	srv, err := session.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	conn := wire.NewConn(inR, outW, 1<<20)
	h := &harness{t: t, in: inW, out: bufio.NewReader(outR), sess: srv.NewSession(conn), done: make(chan error, 1)}
	go func() {
		err := h.sess.Run(ctx)
		outW.Close()
		h.done <- err
	}()
	t.Cleanup(func() {
		inW.Close()
		go io.Copy(io.Discard, outR) // let the writer finish flushing
		select {
		case <-h.done:
		case <-time.After(10 * time.Second):
			t.Error("session did not end")
		}
	})
	return h
}

func (h *harness) send(s string) {
	h.t.Helper()
	if _, err := io.WriteString(h.in, s+"\n"); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) recv() map[string]any {
	h.t.Helper()
	line, err := h.out.ReadBytes('\n')
	if err != nil {
		h.t.Fatalf("read: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		h.t.Fatalf("%v: %q", err, line)
	}
	return m
}

func (h *harness) init() {
	h.t.Helper()
	h.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	h.recv()
}

func TestEOFEndsCleanly(t *testing.T) {
	h := newHarness(t, context.Background(), session.Options{Tools: newTools(t, nil)})
	h.init()
	h.in.Close()
	if _, err := h.out.ReadBytes('\n'); err != io.EOF {
		t.Fatalf("expected EOF, got %v", err)
	}
	if err := <-h.done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	h.done <- nil
}

func TestDrainCompletesThenCancelsAfterGrace(t *testing.T) {
	started := make(chan struct{}, 1)
	h := newHarness(t, context.Background(), session.Options{Tools: newTools(t, started), DrainGrace: 50 * time.Millisecond})
	h.init()
	h.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block","arguments":{"wait":true}}}`)
	<-started
	h.sess.Drain()
	m := h.recv()
	if m["id"] != float64(1) || m["error"].(map[string]any)["code"] != float64(-32603) {
		t.Fatalf("got %v", m)
	}
	if err := <-h.done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	h.done <- nil
}

func TestHardStop(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	started := make(chan struct{}, 1)
	h := newHarness(t, ctx, session.Options{Tools: newTools(t, started), DrainGrace: time.Hour})
	h.init()
	h.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block","arguments":{"wait":true}}}`)
	<-started
	stop := errors.New("stop now")
	cancel(stop)
	go io.Copy(io.Discard, h.out)
	if err := <-h.done; !errors.Is(err, stop) {
		t.Fatalf("Run = %v, want the cancel cause", err)
	}
	h.done <- nil
}

func TestArgumentErrorModes(t *testing.T) {
	cases := []struct {
		mode    session.ArgumentErrorMode
		args    string
		wantErr bool // JSON-RPC error rather than in-band
	}{
		{session.ArgumentErrorsInBand, `{"wait":"yes"}`, false},
		{session.ArgumentErrorsInBand, `{"wait":false,"extra":1}`, false},
		{session.ArgumentErrorsInBand, `{"w-a-i-t":false}`, false}, // sanitizer
		{session.ArgumentErrorsProtocol, `{"wait":"yes"}`, true},
		{session.ArgumentErrorsProtocol, `{"wait":false,"extra":1}`, true},
		{session.ArgumentErrorsProtocol, `{"w-a-i-t":false}`, true},
	}
	for _, c := range cases {
		h := newHarness(t, context.Background(), session.Options{Tools: newTools(t, nil), ArgumentErrors: c.mode})
		h.init()
		h.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block","arguments":` + c.args + `}}`)
		m := h.recv()
		if c.wantErr {
			e, ok := m["error"].(map[string]any)
			if !ok || e["code"] != float64(-32602) || e["data"].(map[string]any)["code"] != "MCP_VALIDATION_ERROR" {
				t.Errorf("%s: got %v", c.args, m)
			}
			continue
		}
		r, ok := m["result"].(map[string]any)
		if !ok || r["isError"] != true {
			t.Errorf("%s: got %v", c.args, m)
			continue
		}
		text := r["content"].([]any)[0].(map[string]any)["text"].(string)
		if !strings.Contains(text, "MCP_VALIDATION_ERROR") {
			t.Errorf("%s: problem %s", c.args, text)
		}
	}
}

// TestCancelledCallGetsNoResponse cancels a call and checks that the next
// message is the answer to a later request, not to the cancelled one.
func TestCancelledCallGetsNoResponse(t *testing.T) {
	started := make(chan struct{}, 1)
	h := newHarness(t, context.Background(), session.Options{Tools: newTools(t, started)})
	h.init()
	h.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block","arguments":{"wait":true}}}`)
	<-started
	h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	h.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"block","arguments":{"wait":false}}}`)
	<-started
	if m := h.recv(); m["id"] != float64(2) {
		t.Fatalf("got %v", m)
	}
	h.in.Close()
	if line, err := h.out.ReadBytes('\n'); err != io.EOF {
		t.Fatalf("unexpected %q", line)
	}
	<-h.done
	h.done <- nil
}

// TestCoreDependencies keeps the core free of features: session must not
// reach any tool implementation or their heavy dependencies.
func TestCoreDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/mcp-bastion/bastion/internal/session").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{
			"github.com/mcp-bastion/bastion/internal/tools/",
			"github.com/jackc/pgx",
			"github.com/pganalyze/pg_query_go",
			"github.com/shirou/gopsutil",
		} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("internal/session depends on %s", dep)
			}
		}
	}
}

// stuckWriter is an output whose reader never reads: the first Write
// signals started and then blocks until the writer is released.
type stuckWriter struct {
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func (w *stuckWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.started) })
	<-w.release
	return 0, io.ErrClosedPipe
}

// TestDrainEndsWhenOutputIsBlocked: a peer that stops reading its output
// cannot hold a graceful drain open; Run returns after the grace periods,
// reporting that responses could not be flushed.
func TestDrainEndsWhenOutputIsBlocked(t *testing.T) {
	srv, err := session.NewServer(session.Options{Tools: newTools(t, nil), Info: mcp.Implementation{Name: "t", Version: "1"}, DrainGrace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	out := &stuckWriter{started: make(chan struct{}), release: make(chan struct{})}
	defer close(out.release)
	sess := srv.NewSession(wire.NewConn(inR, out, 1<<20))
	done := make(chan error, 1)
	go func() { done <- sess.Run(context.Background()) }()
	if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	<-out.started // the response is stuck in the output
	sess.Drain()
	select {
	case err := <-done:
		if !errors.Is(err, session.ErrOutputFailed) {
			t.Fatalf("Run = %v, want an output failure (responses not flushed)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after a drain with blocked output")
	}
	inW.Close()
}

// TestPendingCallsAreCapped: with one slot and room for two pending calls,
// a third call is refused at once, in-band, without waiting for a slot.
func TestPendingCallsAreCapped(t *testing.T) {
	started := make(chan struct{}, 4)
	h := newHarness(t, context.Background(), session.Options{
		Tools: newTools(t, started), MaxConcurrency: 1, MaxPending: 2, QueueTimeout: time.Hour,
	})
	h.init()
	h.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block","arguments":{"wait":true}}}`)
	h.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"block","arguments":{"wait":true}}}`)
	h.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"block","arguments":{"wait":true}}}`)
	m := h.recv()
	r, ok := m["result"].(map[string]any)
	if m["id"] != float64(3) || !ok || r["isError"] != true {
		t.Fatalf("got %v, want an in-band refusal of call 3", m)
	}
	if text := r["content"].([]any)[0].(map[string]any)["text"].(string); !strings.Contains(text, "MCP_CONCURRENCY_LIMIT") {
		t.Fatalf("problem = %s", text)
	}
	h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`)
}
