package wire

import (
	"bufio"
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// ErrClosed is returned by Conn methods after Close.
var ErrClosed = errors.New("wire: connection closed")

// WriteError reports that the output stream failed; the peer is gone or
// stdout is broken. Nothing more will be written.
type WriteError struct{ Err error }

func (e *WriteError) Error() string { return "wire: write: " + e.Err.Error() }

// Unwrap returns the underlying I/O error.
func (e *WriteError) Unwrap() error { return e.Err }

// Conn is a stdio-style connection: newline-framed input and output.
//
// Read is for a single reader goroutine. Write is safe for concurrent use;
// messages are written whole, one per line, in the order Write accepted
// them, by one writer goroutine owned by the Conn. Close stops the writer
// after flushing what was accepted and closes the input if it is an
// io.Closer, which unblocks a pending Read.
type Conn struct {
	in    *Reader
	inC   io.Closer
	out   *bufio.Writer
	queue chan []byte
	// maxQueued bounds the bytes of the messages accepted and not yet
	// written; see queueFrames.
	maxQueued int
	failed    chan struct{} // closed when the writer has failed
	done      chan struct{} // closed when the writer goroutine has returned

	// closing is closed when Shutdown begins. It releases Writes waiting
	// on a full queue, which hold mu shared and would otherwise keep
	// Shutdown from taking it.
	closing     chan struct{}
	closingOnce sync.Once

	// mu guards closed against the queue being closed under a sender:
	// senders hold it shared, Close exclusively.
	mu       sync.RWMutex
	closed   bool
	writeErr error // set once, before failed is closed
	closeIn  sync.Once

	// qmu guards queued, the bytes of the messages accepted and not yet
	// written (the one being written included), and waiting, the Writes
	// waiting for room in the order they came.
	qmu     sync.Mutex
	queued  int
	queuedN int       // the messages counted in queued
	waiting list.List // of *waiter, oldest first
}

// waiter is a Write waiting for room for n bytes. ready is closed, and
// the bytes counted as queued, when they fit and it is its turn or it
// may pass the oldest waiter (see maxPassed).
type waiter struct {
	n     int
	ready chan struct{}
	// passed counts the Writes admitted before this one while it was
	// the oldest waiting.
	passed int
}

// maxPassed bounds how many Writes that fit may pass the oldest waiting
// one (typically a large message, waiting for an empty queue). Passing is
// needed: a session's reader answers pings inline, and stuck behind a
// large answer it would stop reading, and so never read the cancellation
// that withdraws that answer. Passing without bound is starvation: a peer
// sending a steady stream of pings would keep the queue from emptying
// for ever. So a waiting message is passed by at most a quarter of the
// queue's count, and then waits only for what is ahead of it.
const maxPassed = queueLen / 4

// maxKeptLine is the largest line buffer the writer keeps between messages.
const maxKeptLine = 1 << 20

// queueLen bounds the messages waiting for the writer. Writers block beyond
// it, so a peer that stops reading cannot make the server buffer without
// bound.
const queueLen = 256

// queueFrames bounds the bytes waiting for the writer, as a multiple of
// the frame cap: 16 MiB with the default 1 MiB cap. A count alone bounds
// nothing when messages are large (256 answers of 6 MiB each are 1.5 GiB),
// so writers also block while the queue holds this many bytes. A message
// larger than the whole bound is accepted when the queue is empty, and
// holds it alone until written.
const queueFrames = 16

// NewConn returns a Conn reading frames from r (capped at maxFrame bytes)
// and writing to w. It starts the writer goroutine; call Close to stop it.
func NewConn(r io.Reader, w io.Writer, maxFrame int) *Conn {
	c := &Conn{
		in:  NewReader(r, maxFrame),
		out: bufio.NewWriterSize(w, 64<<10),
		// One more than the messages reserve admits beside the one
		// being written, so that a reserved message always has room.
		queue:     make(chan []byte, queueLen+1),
		maxQueued: queueFrames * max(maxFrame, 1),
		failed:    make(chan struct{}),
		done:      make(chan struct{}),
		closing:   make(chan struct{}),
	}
	if rc, ok := r.(io.Closer); ok {
		c.inC = rc
	}
	go c.writeLoop()
	return c
}

// Read returns the next input frame; see [Reader.Next]. The slice is valid
// until the next Read.
func (c *Conn) Read() ([]byte, error) { return c.in.Next() }

// Write queues msg, which must be one complete JSON message without a line
// terminator, for writing. It does not copy msg: the caller must not modify
// it afterwards. Write blocks while the queue is full (by count or by
// bytes, see queueFrames), until ctx ends, and fails with a *WriteError
// once the output has failed or ErrClosed once Close or Shutdown has begun.
func (c *Conn) Write(ctx context.Context, msg []byte) error {
	return c.WriteQueued(ctx, msg, nil)
}

// ErrWithdrawn is returned by WriteQueued when its queued func declined
// to send the message after all.
var ErrWithdrawn = errors.New("wire: message withdrawn")

// WriteQueued is Write, and when queued is not nil, runs it once msg has
// its place in the queue, before the writer can take it: whatever queued
// releases (the caller's count of answers waiting) is released before the
// peer can read msg, so a peer that answers at once is never judged
// against it. If queued returns false, msg is not sent, its place is
// given back and WriteQueued returns ErrWithdrawn. ctx bounds only the
// wait for a place.
func (c *Conn) WriteQueued(ctx context.Context, msg []byte, queued func() bool) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return ErrClosed
	}
	if c.isFailed() {
		return c.writeErr
	}
	if err := c.reserve(ctx, len(msg)); err != nil {
		return err
	}
	if queued != nil && !queued() {
		c.release(len(msg))
		return ErrWithdrawn
	}
	// reserve admitted msg, so the channel has room for it: the send
	// does not wait, and nothing (not ctx) can take back a message
	// whose place queued has already been told of.
	c.queue <- msg
	return nil
}

// reserve waits until n more bytes fit the queue's byte bound and one
// more message its count bound (queueLen beside the one being written),
// or the queue is empty, and counts them as queued.
//
// Writes that must wait are admitted in the order they came, and a Write
// that fits passes them only maxPassed times: a large message (one over
// the whole bound waits for an empty queue) is not overtaken for ever by
// small ones. This is not golang.org/x/sync/semaphore, which is FIFO
// without passing, and whose Acquire ends only with ctx, where a Write
// must also end when the output fails or Shutdown begins; and the queue
// has two bounds, not one weight.
func (c *Conn) reserve(ctx context.Context, n int) error {
	c.qmu.Lock()
	if c.fits(n) && c.mayPass() {
		c.take(n)
		c.qmu.Unlock()
		return nil
	}
	w := &waiter{n: n, ready: make(chan struct{})}
	elem := c.waiting.PushBack(w)
	c.qmu.Unlock()
	var err error
	select {
	case <-w.ready:
		return nil
	case <-c.failed:
		err = c.writeErr
	case <-c.closing:
		err = ErrClosed
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	c.qmu.Lock()
	defer c.qmu.Unlock()
	select {
	case <-w.ready:
		// Admitted while giving up: give the room back.
		c.queued -= n
		c.queuedN--
	default:
		c.waiting.Remove(elem)
	}
	// Whoever waited behind w may fit now.
	c.admit()
	return err
}

// fits reports whether n more bytes may be queued now. qmu is held.
func (c *Conn) fits(n int) bool {
	return c.queuedN == 0 || (c.queuedN <= queueLen && c.queued+n <= c.maxQueued)
}

// mayPass reports whether a Write may be admitted before the oldest
// waiting one, counting it as passed if so; true when none waits. qmu is
// held.
func (c *Conn) mayPass() bool {
	front := c.waiting.Front()
	if front == nil {
		return true
	}
	if oldest := front.Value.(*waiter); oldest.passed < maxPassed {
		oldest.passed++
		return true
	}
	return false
}

// take counts n bytes of one message as queued. qmu is held.
func (c *Conn) take(n int) {
	c.queued += n
	c.queuedN++
}

// admit lets the waiting Writes in, oldest first, while they fit; one
// that does not fit may be passed by those behind it, maxPassed times.
// qmu is held.
func (c *Conn) admit() {
	for e := c.waiting.Front(); e != nil && c.queuedN <= queueLen; {
		next := e.Next()
		w := e.Value.(*waiter)
		if c.fits(w.n) && (e == c.waiting.Front() || c.mayPass()) {
			c.take(w.n)
			c.waiting.Remove(e)
			close(w.ready)
		} else if e != c.waiting.Front() && c.waiting.Front().Value.(*waiter).passed >= maxPassed {
			return
		}
		e = next
	}
}

// release uncounts n bytes of the queue and admits the Writes waiting
// for room.
func (c *Conn) release(n int) {
	c.qmu.Lock()
	c.queued -= n
	c.queuedN--
	c.admit()
	c.qmu.Unlock()
}

// Failed returns a channel closed when the output has failed.
func (c *Conn) Failed() <-chan struct{} { return c.failed }

// Err returns the output failure, if any.
func (c *Conn) Err() error {
	if c.isFailed() {
		return c.writeErr
	}
	return nil
}

// CloseRead closes the input, unblocking a pending Read when the input
// supports it. It is safe to call more than once.
func (c *Conn) CloseRead() error {
	var err error
	c.closeIn.Do(func() {
		if c.inC != nil {
			err = c.inC.Close()
		}
	})
	return err
}

// Close closes the input, flushes every accepted message and stops the
// writer. It returns the output failure, if any. Close is idempotent.
func (c *Conn) Close() error { return c.Shutdown(context.Background()) }

// Shutdown is Close with a bound: if the output is blocked (a peer that no
// longer reads) it gives up waiting for the writer when ctx ends and
// returns ctx's error. The writer then exits when its pending write fails.
func (c *Conn) Shutdown(ctx context.Context) error {
	c.CloseRead()
	c.closingOnce.Do(func() { close(c.closing) })
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.queue)
	}
	c.mu.Unlock()
	select {
	case <-c.done:
		return c.Err()
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (c *Conn) writeLoop() {
	defer close(c.done)
	var line []byte
	for msg := range c.queue {
		if c.isFailed() {
			c.release(len(msg))
			continue // drain so blocked senders return
		}
		if cap(line) > maxKeptLine {
			line = nil // one huge message must not pin its buffer for the session
		}
		line = AppendASCII(line[:0], msg)
		line = append(line, '\n')
		_, err := c.out.Write(line)
		// Flush when nothing else is waiting: one write(2) per burst
		// instead of one per message.
		if err == nil && len(c.queue) == 0 {
			err = c.out.Flush()
		}
		if err != nil {
			c.fail(err)
		}
		// Counted until written: a message stuck in a write to a peer
		// that does not read still holds its room.
		c.release(len(msg))
	}
	if !c.isFailed() {
		if err := c.out.Flush(); err != nil {
			c.fail(err)
		}
	}
}

func (c *Conn) isFailed() bool {
	select {
	case <-c.failed:
		return true
	default:
		return false
	}
}

// fail records the output failure. Only the writer goroutine calls it, at
// most once; closing failed publishes writeErr to every reader.
func (c *Conn) fail(err error) {
	c.writeErr = &WriteError{Err: err}
	close(c.failed)
}

// String describes the connection for logs.
func (c *Conn) String() string { return fmt.Sprintf("wire.Conn(max=%d)", c.in.max) }
