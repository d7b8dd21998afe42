package upstream

import (
	"context"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// TestNoProgressAfterCallReturned: once a call has returned, nothing
// queued for its caller reaches it (the --stdio front would write
// progress after the response), and what is skipped is counted.
func TestNoProgressAfterCallReturned(t *testing.T) {
	tr := &fuzzTransport{requests: make(chan outgoing, 1)}
	stats := &Stats{}
	c := newClient("fx", tr, slog.New(slog.DiscardHandler), stats, nil)
	defer c.Fail(ErrClosed)
	gate := make(chan struct{})
	entered := make(chan struct{}, 16)
	var ended atomic.Bool
	var late, calls atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = c.roundTrip(ctx, "tools/call", []byte(`{"name":"a"}`), nil, CallOptions{
			ProgressToken: jsontext.Value(`"t"`),
			Progress: func(jsontext.Value) {
				if ended.Load() {
					late.Add(1)
				}
				entered <- struct{}{}
				if calls.Add(1) == 1 {
					<-gate // the caller is slow with the first
				}
			}})
		ended.Store(true)
	}()
	out := <-tr.requests
	id := strconv.FormatInt(out.id, 10)
	for range 5 {
		c.deliver([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"gw-` + id + `","progress":1}}`))
	}
	<-entered
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("roundTrip did not return when its context ended")
	}
	close(gate)
	eventually(func() bool { return stats.Dropped.Load() >= 4 })
	if n := late.Load(); n > 0 {
		t.Errorf("%d progress callbacks ran after the call had returned", n)
	}
	if n := stats.Dropped.Load(); n != 4 {
		t.Errorf("%d skipped notifications counted, want 4", n)
	}
}

// TestAnsweredCallNotHeldByStalledCaller: a call that was answered
// returns soon even when its caller takes nothing of what is queued for
// it, instead of holding its in-flight slot until its deadline.
func TestAnsweredCallNotHeldByStalledCaller(t *testing.T) {
	tr := &fuzzTransport{requests: make(chan outgoing, 1)}
	c := newClient("fx", tr, slog.New(slog.DiscardHandler), &Stats{}, nil)
	defer c.Fail(ErrClosed)
	stuck := make(chan struct{})
	defer close(stuck)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // the server's timeout
	defer cancel()
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		_, _ = c.roundTrip(ctx, "tools/call", []byte(`{"name":"a"}`), nil, CallOptions{
			ProgressToken: jsontext.Value(`"t"`), Progress: func(jsontext.Value) { <-stuck }})
	}()
	out := <-tr.requests
	id := strconv.FormatInt(out.id, 10)
	c.deliver([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"gw-` + id + `","progress":1}}`))
	c.deliver([]byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{}}`))
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("the call was answered, but it is held by a caller that takes nothing")
	}
}
