package upstream

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/jsonrpc"
	"github.com/mcp-bastion/bastion/internal/wire"
)

// TestStdioWriterOneLine: whatever a caller hands the stdio writer, the
// downstream reads one message per line: a message with raw CR or LF
// (JSON whitespace) is compacted, and one that is not valid JSON is not
// sent at all.
func TestStdioWriterOneLine(t *testing.T) {
	pr, pw := io.Pipe()
	conn := wire.NewConn(strings.NewReader(""), pw, 1<<20)
	tr := stdioTransport{conn: conn}
	ctx := context.Background()
	injected := `{"jsonrpc":"2.0","id":4242,"method":"tools/call","params":{"name":"echo","arguments":{}}}`
	msg := "{\"jsonrpc\":\"2.0\",\"id\":\"r\",\"result\":{\"pad\":[\n" + injected + "\r\n]}}"
	if err := tr.send(ctx, outgoing{msg: []byte(msg)}); err != nil {
		t.Fatal(err)
	}
	if err := tr.send(ctx, outgoing{msg: []byte("{\"a\":\n" + injected)}); err == nil {
		t.Error("a message that is not valid JSON was sent")
	}
	if err := tr.send(ctx, outgoing{msg: []byte(`{"jsonrpc":"2.0","method":"last"}`)}); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	want := []string{`{"jsonrpc":"2.0","id":"r","result":{"pad":[` + injected + `]}}`, `{"jsonrpc":"2.0","method":"last"}`}
	for _, w := range want {
		select {
		case got := <-lines:
			if got != w {
				t.Fatalf("the downstream read the line %q, want %q", got, w)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("nothing written")
		}
	}
	conn.Close()
	pw.Close()
	for range lines {
	}
}

// TestRelayedAnswerCompact: the caller's answer to a downstream's request
// is compacted before it is framed for the downstream, whatever the
// transport; an answer that is not an object is an error.
func TestRelayedAnswerCompact(t *testing.T) {
	for _, tc := range []struct{ res, want string }{
		{"{\"role\":\"assistant\",\r\n\"pad\":[\n{\"x\":1}\n]}", `{"jsonrpc":"2.0","id":"s","result":{"role":"assistant","pad":[{"x":1}]}}`},
		{"[1]", `"code":-32603`},
	} {
		tr := &fuzzTransport{requests: make(chan outgoing, 1)}
		c := newClient("fx", tr, slog.New(slog.DiscardHandler), &Stats{}, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = c.roundTrip(ctx, "tools/call", []byte(`{"name":"a"}`), nil, CallOptions{
				Requests: func(context.Context, string, jsontext.Value) (jsontext.Value, *jsonrpc.Error) {
					return jsontext.Value(tc.res), nil
				}})
		}()
		<-tr.requests
		c.deliver([]byte(`{"jsonrpc":"2.0","id":"s","method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}`))
		eventually(func() bool { return len(tr.sent()) > 0 })
		sent := tr.sent()
		if len(sent) != 1 {
			t.Fatalf("sent %d answers", len(sent))
		}
		if got := string(sent[0].msg); !strings.Contains(got, tc.want) || strings.ContainsAny(got, "\r\n") {
			t.Errorf("the downstream was answered %q, want %q", got, tc.want)
		}
		cancel()
		<-done
	}
}

// TestProgressParamsCompact: progress params re-encoded with the
// caller's token are compact, whatever whitespace the downstream used:
// they go on to an SSE data line, which a CR or LF would end.
func TestProgressParamsCompact(t *testing.T) {
	got, err := replaceProgressToken([]byte("{\"progressToken\":\"gw-1\",\r\"progress\":\r1,\"message\":{\"a\":\r\n[1,\n2]}}"), jsontext.Value(`"tok"`))
	if err != nil || string(got) != `{"progressToken":"tok","progress":1,"message":{"a":[1,2]}}` {
		t.Errorf("progress params %q (%v)", got, err)
	}
}

// TestSlowCallerDoesNotStallConnection: a caller that does not take its
// progress or log messages (a client that stopped reading its event stream) never
// holds up the goroutine that reads the downstream: past a bound its
// messages are dropped and counted, and another call on the connection
// is still answered.
func TestSlowCallerDoesNotStallConnection(t *testing.T) {
	tr := &fuzzTransport{requests: make(chan outgoing, 2)}
	stats := &Stats{}
	c := newClient("fx", tr, slog.New(slog.DiscardHandler), stats, nil)
	stuck := make(chan struct{})
	defer close(stuck)
	slowDone := make(chan error, 1)
	go func() {
		_, err := c.roundTrip(context.Background(), "tools/call", []byte(`{"name":"slow"}`), nil, CallOptions{
			ProgressToken: jsontext.Value(`"t"`), Progress: func(jsontext.Value) { <-stuck },
			Messages: func(jsontext.Value) { <-stuck }})
		slowDone <- err
	}()
	slow := <-tr.requests // the only call in flight: the messages are its own
	read := make(chan struct{})
	go func() { // the downstream's read loop
		defer close(read)
		for range 2 * relayQueueLen {
			c.deliver([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"gw-` + strconv.FormatInt(slow.id, 10) + `","progress":1}}`))
			c.deliver([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"` + strings.Repeat("x", 1024) + `"}}`))
		}
	}()
	select {
	case <-read:
	case <-time.After(5 * time.Second):
		t.Fatal("the read loop is blocked on a caller that does not read")
	}
	if stats.Dropped.Load() == 0 {
		t.Error("nothing was dropped for a caller that does not read")
	}
	otherDone := make(chan error, 1)
	go func() {
		_, err := c.roundTrip(context.Background(), "tools/call", []byte(`{"name":"echo"}`), nil, CallOptions{})
		otherDone <- err
	}()
	other := <-tr.requests
	go c.deliver([]byte(`{"jsonrpc":"2.0","id":` + strconv.FormatInt(other.id, 10) + `,"result":{}}`))
	select {
	case err := <-otherDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("another call on the connection was not answered")
	}
	c.Fail(ErrClosed)
}

// TestProgressBeforeAnswer: a call's progress and log messages, queued
// for its caller, all reach it before the call returns its answer.
func TestProgressBeforeAnswer(t *testing.T) {
	tr := &fuzzTransport{requests: make(chan outgoing, 1)}
	c := newClient("fx", tr, slog.New(slog.DiscardHandler), &Stats{}, nil)
	var mu sync.Mutex
	var got []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = c.roundTrip(context.Background(), "tools/call", []byte(`{"name":"a"}`), nil, CallOptions{
			ProgressToken: jsontext.Value(`"t"`),
			Progress: func(p jsontext.Value) {
				time.Sleep(time.Millisecond)
				mu.Lock()
				got = append(got, "progress")
				mu.Unlock()
			},
			Messages: func(jsontext.Value) {
				mu.Lock()
				got = append(got, "message")
				mu.Unlock()
			}})
	}()
	out := <-tr.requests
	id := strconv.FormatInt(out.id, 10)
	for range 5 {
		c.deliver([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"gw-` + id + `","progress":1}}`))
		c.deliver([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`))
	}
	c.deliver([]byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{}}`))
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 10 || got[0] != "progress" || got[9] != "message" {
		t.Errorf("before the answer the caller got %v", got)
	}
}

// TestRelayQueueBytes: what waits for a caller that does not read is
// bounded by bytes as well as by number, so large progress or log
// messages cannot pile up hundreds deep; a queue with nothing waiting
// still takes one message of any size.
func TestRelayQueueBytes(t *testing.T) {
	var dropped atomic.Int64
	r := startRelay(&dropped)
	stuck := make(chan struct{})
	const size = 256 << 10
	taken := 0
	for range relayQueueLen {
		if r.post(size, func() { <-stuck }) {
			taken++
		}
	}
	if taken < 1 || taken > relayQueueBytes/size {
		t.Errorf("the queue took %d messages of %d bytes; its bound is %d bytes", taken, size, relayQueueBytes)
	}
	close(stuck)
	r.finish(t.Context())
	big := startRelay(&dropped)
	ran := make(chan struct{})
	if !big.post(4*relayQueueBytes, func() { close(ran) }) {
		t.Error("an empty queue refused one message over the byte bound")
	}
	<-ran
	big.finish(t.Context())
}

// TestRequestFloodBounded: a server's requests of one call are relayed
// at most maxAsksPerCall at a time; the rest are refused at once, to the
// server, and counted, so that a server flooding requests holds no
// goroutine and no caller's attention for each.
func TestRequestFloodBounded(t *testing.T) {
	tr := &fuzzTransport{requests: make(chan outgoing, 1)}
	stats := &Stats{}
	c := newClient("fx", tr, slog.New(slog.DiscardHandler), stats, nil)
	var asking, most atomic.Int32
	release := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = c.roundTrip(ctx, "tools/call", []byte(`{"name":"a"}`), nil, CallOptions{
			Requests: func(context.Context, string, jsontext.Value) (jsontext.Value, *jsonrpc.Error) {
				n := asking.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				<-release
				asking.Add(-1)
				return jsontext.Value(`{}`), nil
			}})
	}()
	<-tr.requests
	const flood = 200
	for i := range flood {
		c.deliver([]byte(`{"jsonrpc":"2.0","id":"s` + strconv.Itoa(i) + `","method":"roots/list"}`))
	}
	if got := stats.Refused.Load(); got != flood-maxAsksPerCall {
		t.Errorf("Refused = %d, want %d", got, flood-maxAsksPerCall)
	}
	refused := 0
	for _, out := range tr.sent() {
		if strings.Contains(string(out.msg), `"code":-32603`) {
			refused++
		}
	}
	if refused != flood-maxAsksPerCall {
		t.Errorf("%d requests were refused to the server, want %d", refused, flood-maxAsksPerCall)
	}
	close(release)
	eventually(func() bool { return len(tr.sent()) == flood })
	if m := most.Load(); m > maxAsksPerCall {
		t.Errorf("%d requests of one call were relayed at once, past the bound of %d", m, maxAsksPerCall)
	}
	cancel()
	<-done
}
