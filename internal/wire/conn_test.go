package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitTimeout bounds every wait in these tests, so that a bug fails the
// test instead of hanging it. Nothing sleeps.
const waitTimeout = 10 * time.Second

// wait fails the test unless c is closed within waitTimeout.
func wait(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(waitTimeout):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// fillQueue blocks c's writer on one message to out and fills the queue
// behind it to its count bound: the next Write has to wait for room.
func fillQueue(t *testing.T, c *Conn, out *gateWriter) {
	t.Helper()
	if err := c.Write(t.Context(), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	wait(t, out.entered, "the writer to block")
	for range queueLen {
		if err := c.Write(t.Context(), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
}

// newConn returns a Conn over in and out that is closed when the test ends.
func newConn(t *testing.T, in io.Reader, out io.Writer) *Conn {
	t.Helper()
	c := NewConn(in, out, 1024)
	t.Cleanup(func() { c.Close() })
	return c
}

// gateWriter blocks every Write until release is closed, then fails with
// err or appends to buf.
type gateWriter struct {
	entered chan struct{} // gets a token when a Write starts waiting
	release chan struct{}
	err     error

	mu  sync.Mutex
	buf bytes.Buffer
}

func newGateWriter(err error) *gateWriter {
	return &gateWriter{entered: make(chan struct{}, 1), release: make(chan struct{}), err: err}
}

func (g *gateWriter) Write(p []byte) (int, error) {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.release
	if g.err != nil {
		return 0, g.err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.Write(p)
}

func (g *gateWriter) String() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.String()
}

// errWriter always fails.
type errWriter struct{ err error }

func (w errWriter) Write([]byte) (int, error) { return 0, w.err }

type connMsg struct {
	G   int    `json:"g"`
	I   int    `json:"i"`
	Pad string `json:"pad"`
}

// TestConnConcurrentWriters has 100 goroutines write 100 messages each and
// checks that every message arrives whole, on its own line, once, ASCII
// only, and in each writer's order.
func TestConnConcurrentWriters(t *testing.T) {
	const writers, perWriter = 100, 100
	var out bytes.Buffer // only the Conn's writer goroutine touches it before Close returns
	c := NewConn(strings.NewReader(""), &out, 1024)

	pad := func(g, i int) string {
		if g%25 == 0 && i%20 == 0 {
			return strings.Repeat("é😀", 5000) // escaped, larger than the output buffer
		}
		return strings.Repeat("é", (g*7+i)%60)
	}
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range perWriter {
				msg, err := json.Marshal(connMsg{G: g, I: i, Pad: pad(g, i)})
				if err != nil {
					t.Error(err)
					return
				}
				if err := c.Write(t.Context(), msg); err != nil {
					t.Errorf("Write: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	text := out.String()
	if !strings.HasSuffix(text, "\n") {
		t.Fatal("output does not end with a line terminator")
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) != writers*perWriter {
		t.Fatalf("got %d lines, want %d", len(lines), writers*perWriter)
	}
	next := make([]int, writers)
	for n, line := range lines {
		if !IsASCIILine([]byte(line)) {
			t.Fatalf("line %d is not ASCII-only", n)
		}
		var m connMsg
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %d is not one whole message: %v", n, err)
		}
		if m.G < 0 || m.G >= writers || m.I != next[m.G] {
			t.Fatalf("line %d: message %d/%d out of order (want %d)", n, m.G, m.I, next[m.G])
		}
		if m.Pad != pad(m.G, m.I) {
			t.Fatalf("line %d: message %d/%d garbled", n, m.G, m.I)
		}
		next[m.G]++
	}
}

// TestConnCloseFlushes blocks the output, queues messages, and checks that
// Close writes every accepted message before it returns.
func TestConnCloseFlushes(t *testing.T) {
	out := newGateWriter(nil)
	c := NewConn(strings.NewReader(""), out, 1024)
	const n = queueLen + 1 // one in the writer, a full queue behind it
	for i := range n {
		if err := c.Write(t.Context(), fmt.Appendf(nil, `{"n":%d}`, i)); err != nil {
			t.Fatalf("Write %d: %v", i, err)
		}
		if i == 0 {
			wait(t, out.entered, "the writer to block")
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	close(out.release)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Close did not return")
	}
	var want strings.Builder
	for i := range n {
		fmt.Fprintf(&want, "{\"n\":%d}\n", i)
	}
	if got := out.String(); got != want.String() {
		t.Errorf("output after Close has %d lines, want %d", strings.Count(got, "\n"), n)
	}
}

func TestConnWriteASCII(t *testing.T) {
	var out bytes.Buffer
	c := NewConn(strings.NewReader(""), &out, 1024)
	if err := c.Write(t.Context(), []byte("{\"s\":\"é\u2028\x7f😀\"}")); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), `{"s":"\u00e9\u2028\u007f\ud83d\ude00"}`+"\n"; got != want {
		t.Errorf("output = %q, want %q", got, want)
	}
}

// TestConnWriteFailure checks that a failing output closes Failed and that
// every later Write, Err and Close report a *WriteError wrapping the cause.
func TestConnWriteFailure(t *testing.T) {
	errBroken := errors.New("broken pipe")
	c := newConn(t, strings.NewReader(""), errWriter{errBroken})
	if err := c.Write(t.Context(), []byte(`{}`)); err != nil {
		t.Fatalf("first Write: %v (it is accepted before the output fails)", err)
	}
	wait(t, c.Failed(), "Failed")

	check := func(what string, err error) {
		t.Helper()
		var we *WriteError
		if !errors.As(err, &we) {
			t.Fatalf("%s = %v (%T), want *WriteError", what, err, err)
		}
		if !errors.Is(err, errBroken) {
			t.Errorf("%s = %v, does not wrap the cause", what, err)
		}
		if got, want := err.Error(), "wire: write: broken pipe"; got != want {
			t.Errorf("%s text = %q, want %q", what, got, want)
		}
	}
	check("Write after failure", c.Write(t.Context(), []byte(`{}`)))
	check("Err", c.Err())
	check("Close", c.Close())
}

// TestConnFailureReleasesBlockedWriters checks that writers blocked on a
// full queue return once the output fails, instead of waiting forever.
func TestConnFailureReleasesBlockedWriters(t *testing.T) {
	errBroken := errors.New("broken pipe")
	out := newGateWriter(errBroken)
	c := newConn(t, strings.NewReader(""), out)
	fillQueue(t, c, out)
	// The queue is full: these block until the output fails.
	const blocked = 8
	errs := make(chan error, blocked)
	for range blocked {
		go func() { errs <- c.Write(context.Background(), []byte(`{}`)) }()
	}
	close(out.release)
	for range blocked {
		select {
		case err := <-errs:
			var we *WriteError
			if err != nil && !errors.As(err, &we) {
				t.Errorf("blocked Write = %v, want nil or *WriteError", err)
			}
		case <-time.After(waitTimeout):
			t.Fatal("a blocked Write did not return after the output failed")
		}
	}
	if err := c.Close(); !errors.Is(err, errBroken) {
		t.Errorf("Close = %v, want the write error", err)
	}
}

func TestConnWriteContext(t *testing.T) {
	out := newGateWriter(nil)
	c := NewConn(strings.NewReader(""), out, 1024)
	t.Cleanup(func() {
		close(out.release)
		c.Close()
	})
	fillQueue(t, c, out)
	errGone := errors.New("caller gone")
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(errGone)
	if err := c.Write(ctx, []byte(`{}`)); !errors.Is(err, errGone) {
		t.Errorf("Write on a full queue with a cancelled ctx = %v, want the cause %v", err, errGone)
	}
}

// TestConnQueueBytes checks that the queue is bounded by bytes as well as
// by count: with the writer stuck, messages that together pass
// queueFrames × the frame cap wait (here a cancelled ctx makes them
// return its cause) though the count bound is far off, and a message
// larger than the whole bound still goes once the queue is empty.
func TestConnQueueBytes(t *testing.T) {
	const maxFrame = 1024
	out := newGateWriter(nil)
	c := NewConn(strings.NewReader(""), out, maxFrame)
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(out.release) }) }
	t.Cleanup(func() {
		release() // a failed test must not leave Close flushing into the gate
		c.Close()
	})
	if err := c.Write(t.Context(), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	wait(t, out.entered, "the writer to block")
	msg := func(n int) []byte { return []byte(`"` + strings.Repeat("a", n-2) + `"`) }
	// The stuck message holds 2 bytes; 15 of maxFrame bytes fit beside it.
	for range queueFrames - 1 {
		if err := c.Write(t.Context(), msg(maxFrame)); err != nil {
			t.Fatal(err)
		}
	}
	errFull := errors.New("no room")
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(errFull)
	// A Write that fits the count bound would race the cancelled ctx in
	// one select; one that waits for room returns the cause every time.
	for i := range 32 {
		if err := c.Write(ctx, msg(maxFrame)); !errors.Is(err, errFull) {
			t.Fatalf("Write %d over the byte bound = %v, want the cause %v", i, err, errFull)
		}
	}
	big := msg(queueFrames*maxFrame + 1)
	done := make(chan error, 1)
	go func() { done <- c.Write(context.Background(), big) }()
	release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Write of a message over the whole bound = %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("a message over the whole bound never went, though the queue emptied")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Count(out.String(), "\n"), queueFrames+1; got != want {
		t.Errorf("wrote %d lines, want %d", got, want)
	}
}

// TestConnQueuePassingBounded checks how Writes pass one waiting for
// room. A Write that fits passes a message over the whole byte bound,
// which waits for an empty queue: a session's reader answers pings
// inline, and stuck behind the large answer it would never read the
// cancellation that withdraws it. But only maxPassed of them: beyond,
// Writes wait their turn, or a peer sending a steady stream of small
// requests could keep the large answer from ever being written.
func TestConnQueuePassingBounded(t *testing.T) {
	const maxFrame = 1024
	out := newGateWriter(nil)
	c := NewConn(strings.NewReader(""), out, maxFrame)
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(out.release) }) }
	t.Cleanup(func() {
		release()
		c.Close()
	})
	if err := c.Write(t.Context(), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	wait(t, out.entered, "the writer to block")

	big := []byte(`"` + strings.Repeat("a", queueFrames*maxFrame) + `"`)
	bigCtx := &doneSignal{Context: t.Context(), waiting: make(chan struct{})}
	bigDone := make(chan error, 1)
	go func() { bigDone <- c.Write(bigCtx, big) }()
	wait(t, bigCtx.waiting, "the large Write to wait for an empty queue")

	// A cancelled ctx makes a Write that has to wait return at once
	// with its cause; one that may pass is accepted.
	errLate := errors.New("not its turn")
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(errLate)
	for i := range maxPassed {
		if err := c.Write(ctx, fmt.Appendf(nil, `{"pass":%d}`, i)); err != nil {
			t.Fatalf("small Write %d passing the waiting large one = %v, want it accepted", i, err)
		}
	}
	if err := c.Write(ctx, []byte(`{"late":0}`)); !errors.Is(err, errLate) {
		t.Fatalf("a small Write after %d passed the large one = %v, want to wait its turn (the cause %v)", maxPassed, err, errLate)
	}
	lateCtx := &doneSignal{Context: t.Context(), waiting: make(chan struct{})}
	lateDone := make(chan error, 1)
	go func() { lateDone <- c.Write(lateCtx, []byte(`{"late":1}`)) }()
	select {
	case <-lateCtx.waiting:
	case err := <-lateDone:
		t.Fatalf("a small Write passed the large one more than %d times (Write = %v)", maxPassed, err)
	case <-time.After(waitTimeout):
		t.Fatal("timed out waiting for the small Write to queue")
	}

	release()
	for what, done := range map[string]chan error{"large": bigDone, "small": lateDone} {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s Write = %v", what, err)
			}
		case <-time.After(waitTimeout):
			t.Fatalf("the %s Write never went, though the queue emptied", what)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	want := []string{`{}`}
	for i := range maxPassed {
		want = append(want, fmt.Sprintf(`{"pass":%d}`, i))
	}
	want = append(want, string(big), `{"late":1}`)
	if !slices.Equal(lines, want) {
		short := func(ls []string) []string {
			out := make([]string, len(ls))
			for i, l := range ls {
				out[i] = l[:min(len(l), 12)]
			}
			return out
		}
		t.Errorf("output lines = %q, want %q", short(lines), short(want))
	}
}

// TestConnQueueWithdrawnAdmitsNext checks that when the Write at the head
// of the queue gives up, the ones behind it that fit are admitted at once,
// not at the next message written.
func TestConnQueueWithdrawnAdmitsNext(t *testing.T) {
	const maxFrame = 1024
	out := newGateWriter(nil)
	c := NewConn(strings.NewReader(""), out, maxFrame)
	t.Cleanup(func() {
		close(out.release)
		c.Close()
	})
	if err := c.Write(t.Context(), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	wait(t, out.entered, "the writer to block")

	errGone := errors.New("caller gone")
	bigBase, cancelBig := context.WithCancelCause(t.Context())
	bigCtx := &doneSignal{Context: bigBase, waiting: make(chan struct{})}
	bigDone := make(chan error, 1)
	big := []byte(`"` + strings.Repeat("a", queueFrames*maxFrame) + `"`)
	go func() { bigDone <- c.Write(bigCtx, big) }()
	wait(t, bigCtx.waiting, "the large Write to wait")
	// No more may pass it. (Bounded: were passing broken, these would
	// wait for good.)
	pass, stop := context.WithTimeout(t.Context(), waitTimeout)
	defer stop()
	for range maxPassed {
		if err := c.Write(pass, []byte(`{}`)); err != nil {
			t.Fatalf("a small Write passing the large one: %v", err)
		}
	}

	smallCtx := &doneSignal{Context: t.Context(), waiting: make(chan struct{})}
	smallDone := make(chan error, 1)
	go func() { smallDone <- c.Write(smallCtx, []byte(`{"small":1}`)) }()
	wait(t, smallCtx.waiting, "the small Write to wait behind it")

	cancelBig(errGone)
	select {
	case err := <-bigDone:
		if !errors.Is(err, errGone) {
			t.Fatalf("cancelled large Write = %v, want the cause %v", err, errGone)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the cancelled large Write did not return")
	}
	select {
	case err := <-smallDone:
		if err != nil {
			t.Fatalf("small Write = %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the small Write stayed waiting after the one before it gave up, with room in the queue")
	}
}

// TestConnQueueCancelledWaitersGiveBack checks the queue's accounting
// when Writes give up just as they are admitted: the room they were
// given must be given back, or the queue would shrink for good. Many
// waiters are cancelled and then admitted at once, so that some see both
// at the same time.
func TestConnQueueCancelledWaitersGiveBack(t *testing.T) {
	for round := range 20 {
		out := newGateWriter(nil)
		c := NewConn(strings.NewReader(""), out, 1024)
		fillQueue(t, c, out)
		const waiters = 64
		ctx, cancel := context.WithCancel(t.Context())
		var started, done sync.WaitGroup
		for range waiters {
			started.Add(1)
			done.Add(1)
			wctx := &doneSignal{Context: ctx, waiting: make(chan struct{})}
			go func() {
				defer done.Done()
				go func() { <-wctx.waiting; started.Done() }()
				c.Write(wctx, []byte(`{}`))
			}()
		}
		started.Wait()
		cancel()
		close(out.release)
		done.Wait()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		c.qmu.Lock()
		queued, n, w := c.queued, c.queuedN, c.waiting.Len()
		c.qmu.Unlock()
		if queued != 0 || n != 0 || w != 0 {
			t.Fatalf("round %d: after Close the queue counts %d bytes in %d messages and %d waiters, want none", round, queued, n, w)
		}
	}
}

// TestConnShutdownBlockedOutput checks that Shutdown gives up at ctx end
// when the peer has stopped reading, and that a later Close still flushes
// once the output moves again.
func TestConnShutdownBlockedOutput(t *testing.T) {
	out := newGateWriter(nil)
	c := NewConn(strings.NewReader(""), out, 1024)
	if err := c.Write(t.Context(), []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	wait(t, out.entered, "the writer to block")

	errGiveUp := errors.New("grace over")
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(errGiveUp)
	if err := c.Shutdown(ctx); !errors.Is(err, errGiveUp) {
		t.Errorf("Shutdown = %v, want the ctx cause %v", err, errGiveUp)
	}
	if err := c.Write(t.Context(), []byte(`{}`)); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Shutdown = %v, want ErrClosed", err)
	}

	close(out.release)
	if err := c.Close(); err != nil {
		t.Errorf("Close after the output moved = %v", err)
	}
	if got, want := out.String(), "{\"a\":1}\n"; got != want {
		t.Errorf("output = %q, want %q", got, want)
	}
}

// doneSignal is a context whose Done reports that it was called: Write
// calls it only when it is about to wait on a full queue.
type doneSignal struct {
	context.Context
	waiting chan struct{}
	once    sync.Once
}

func (d *doneSignal) Done() <-chan struct{} {
	d.once.Do(func() { close(d.waiting) })
	return d.Context.Done()
}

// TestConnShutdownBlockedWrite checks that Shutdown also returns at ctx end
// while a Write that will never time out waits on a full queue, and that
// this Write is then refused with ErrClosed.
func TestConnShutdownBlockedWrite(t *testing.T) {
	out := newGateWriter(nil)
	c := NewConn(strings.NewReader(""), out, 1024)
	fillQueue(t, c, out)
	ctx := &doneSignal{Context: context.Background(), waiting: make(chan struct{})}
	writeErr := make(chan error, 1)
	go func() { writeErr <- c.Write(ctx, []byte(`{}`)) }()
	wait(t, ctx.waiting, "Write to wait on the full queue")

	sctx, cancel := context.WithCancel(t.Context())
	cancel()
	shut := make(chan error, 1)
	go func() { shut <- c.Shutdown(sctx) }()
	select {
	case err := <-shut:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Shutdown = %v, want context.Canceled", err)
		}
	case <-time.After(waitTimeout):
		close(out.release) // let everything finish so the leak check can pass
		<-shut
		t.Fatal("Shutdown did not return at ctx end while a Write waited on a full queue")
	}
	select {
	case err := <-writeErr:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("waiting Write = %v, want ErrClosed", err)
		}
	case <-time.After(waitTimeout):
		t.Error("the waiting Write did not return after Shutdown")
	}
	close(out.release)
	if err := c.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	if got := strings.Count(out.String(), "\n"); got != queueLen+1 {
		t.Errorf("flushed %d messages, want the %d accepted", got, queueLen+1)
	}
}

func TestConnWriteAfterClose(t *testing.T) {
	var out bytes.Buffer
	c := NewConn(strings.NewReader(""), &out, 1024)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(t.Context(), []byte(`{}`)); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close = %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	if err := c.Shutdown(t.Context()); err != nil {
		t.Errorf("Shutdown after Close = %v, want nil", err)
	}
	if got, want := ErrClosed.Error(), "wire: connection closed"; got != want {
		t.Errorf("ErrClosed text = %q, want %q", got, want)
	}
	if out.Len() != 0 {
		t.Errorf("output = %q, want nothing", out.String())
	}
}

// countingCloser is an input that counts Close calls.
type countingCloser struct {
	io.Reader
	closes atomic.Int32
	err    error
}

func (c *countingCloser) Close() error {
	c.closes.Add(1)
	return c.err
}

func TestConnCloseReadOnce(t *testing.T) {
	errClose := errors.New("close failed")
	in := &countingCloser{Reader: strings.NewReader(""), err: errClose}
	c := NewConn(in, io.Discard, 1024)
	if err := c.CloseRead(); !errors.Is(err, errClose) {
		t.Errorf("first CloseRead = %v, want %v", err, errClose)
	}
	if err := c.CloseRead(); err != nil {
		t.Errorf("second CloseRead = %v, want nil", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	if n := in.closes.Load(); n != 1 {
		t.Errorf("input closed %d times, want once", n)
	}
}

func TestConnCloseReadWithoutCloser(t *testing.T) {
	c := newConn(t, strings.NewReader("{}\n"), io.Discard)
	if err := c.CloseRead(); err != nil {
		t.Errorf("CloseRead of a plain reader = %v", err)
	}
}

// TestConnCloseUnblocksRead checks that Close ends a Read waiting on a
// silent peer.
func TestConnCloseUnblocksRead(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	c := NewConn(pr, io.Discard, 1024)
	readErr := make(chan error, 1)
	go func() {
		_, err := c.Read()
		readErr <- err
	}()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-readErr:
		if !errors.Is(err, io.ErrClosedPipe) {
			t.Errorf("Read after Close = %v, want io.ErrClosedPipe", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Close did not unblock Read")
	}
}

func TestConnRead(t *testing.T) {
	c := newConn(t, strings.NewReader("{\"a\":1}\r\n\n"+strings.Repeat("x", 1025)+"\n{}"), io.Discard)
	var got []string
	for {
		frame, err := c.Read()
		var fte *FrameTooLargeError
		if errors.As(err, &fte) {
			got = append(got, tooLarge)
			continue
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(frame))
	}
	if want := []string{`{"a":1}`, tooLarge, `{}`}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("Read frames = %q, want %q", got, want)
	}
}

func TestConnString(t *testing.T) {
	c := newConn(t, strings.NewReader(""), io.Discard)
	if got, want := c.String(), "wire.Conn(max=1024)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
