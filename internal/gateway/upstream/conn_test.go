package upstream

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
)

// TestConnectBeforeLive: a new connection is handed to its owner
// (OnConnect) before any call can reach it, so that what the owner must
// judge of the server it now is (a changed identity) is judged before it
// is called under the old approvals.
func TestConnectBeforeLive(t *testing.T) {
	var s *conn
	heard := false
	s = &conn{onConnect: func(*Client) {
		heard = true
		if s.Connected() {
			t.Error("the connection was live before its owner heard of it")
		}
	}}
	c := newClient("fx", &fuzzTransport{requests: make(chan outgoing, 1)}, slog.New(slog.DiscardHandler), &Stats{}, nil)
	s.setState(Connected, c)
	if !heard || !s.Connected() {
		t.Errorf("heard %v, connected %v", heard, s.Connected())
	}
}

// TestCurrentFailsUnsent: a request whose Current check fails once the
// connection is chosen is never sent.
func TestCurrentFailsUnsent(t *testing.T) {
	tr := &fuzzTransport{requests: make(chan outgoing, 1)}
	c := newClient("fx", tr, slog.New(slog.DiscardHandler), &Stats{}, nil)
	s := &conn{}
	s.setState(Connected, c)
	stale := errors.New("the pin no longer holds")
	if _, err := s.Call(context.Background(), "tools/call", []byte(`{"name":"a"}`), CallOptions{Current: func() error { return stale }}); !errors.Is(err, stale) {
		t.Errorf("Call = %v, want the Current error", err)
	}
	if len(tr.requests) != 0 {
		t.Error("the request was sent")
	}
}

// countingHandler counts the records logged at warn.
type countingHandler struct {
	slog.Handler
	n *atomic.Int64
}

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn {
		h.n.Add(1)
	}
	return nil
}

// TestGarbageWarningsBounded: a downstream writing junk lines as fast as
// it can makes the gateway log a bounded number of warnings (the rest
// counted), never one line of log per line of junk.
func TestGarbageWarningsBounded(t *testing.T) {
	var warned atomic.Int64
	stats := &Stats{}
	c := newClient("fx", &fuzzTransport{requests: make(chan outgoing, 1)}, slog.New(countingHandler{slog.DiscardHandler, &warned}), stats, nil)
	for range 10_000 {
		c.deliver([]byte("x"))
	}
	if stats.Garbage.Load() != 10_000 {
		t.Errorf("Garbage = %d", stats.Garbage.Load())
	}
	if n := warned.Load(); n > stderrBurst+1 {
		t.Errorf("%d warnings logged for 10,000 junk lines; the bound is %d a window", n, stderrBurst)
	}
}
