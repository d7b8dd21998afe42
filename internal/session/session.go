package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/jsonrpc"
	"github.com/mcp-bastion/bastion/internal/mcp"
	"github.com/mcp-bastion/bastion/internal/wire"
)

// Conn is the transport a session runs on. Read is called by one goroutine
// only; Write is safe for concurrent use and writes whole messages;
// CloseRead must unblock a pending Read; Failed is closed when output has
// failed; Shutdown flushes what Write accepted and stops the output.
type Conn interface {
	Read() ([]byte, error)
	// WriteQueued queues msg for writing, waiting for room until ctx
	// ends, and runs queued (when not nil) once msg has its place and
	// before the peer can read it; queued returning false withdraws
	// msg. See [wire.Conn.WriteQueued].
	WriteQueued(ctx context.Context, msg []byte, queued func() bool) error
	CloseRead() error
	Failed() <-chan struct{}
	Err() error
	Shutdown(ctx context.Context) error
}

var _ Conn = (*wire.Conn)(nil)

// Causes of task cancellation, as seen by context.Cause.
var (
	// ErrPeerCancelled: the client sent notifications/cancelled.
	ErrPeerCancelled = errors.New("session: cancelled by the client")
	// ErrShutdown: the drain grace expired or the session is stopping.
	ErrShutdown = errors.New("session: shutting down")
	// ErrOutputFailed: the output stream failed; nobody can be answered.
	ErrOutputFailed = errors.New("session: output failed")
)

type era uint8

const (
	eraUndecided era = iota
	eraLegacy
	eraModern
)

// call is one in-flight tools/call.
type call struct {
	cancel        context.CancelCauseFunc
	peerCancelled bool // guarded by Session.mu
	// withdraw, once the call has ended outside a batch, abandons the
	// write of its answer; guarded by Session.mu.
	withdraw context.CancelCauseFunc
	// slot, when set, releases the call's concurrency slot. Only the
	// call's own task touches it: guarded sets it, finish calls it once
	// the answer is queued, so a client that does not read its output
	// holds at most MCP_MAX_CONCURRENCY answers in memory, not one per
	// pending call.
	slot func()
}

// Session serves one connection. Create it with [Server.NewSession] and run
// it with [Session.Run].
type Session struct {
	srv  *Server
	conn Conn
	log  *slog.Logger

	// Read-loop state: only the read loop touches these.
	era         era
	version     string         // negotiated legacy version
	initialized bool           // initialize answered (legacy)
	clientCaps  jsontext.Value // the capabilities the client declared at initialize

	// listChanged is set by the read loop once the client may be told of
	// changes to the tool list (a legacy session, initialized); the
	// catalog watcher reads it.
	listChanged atomic.Bool

	// logLevel is the client's last accepted logging/setLevel, as one
	// plus its index in logLevels; 0 until it sets one. Log messages
	// below it are not passed on.
	logLevel atomic.Int32

	// subMu guards subs, the open 2026-07-28 subscriptions/listen
	// requests. It is held while their messages are written, so that
	// none follows the answer ending one. It also guards following, the
	// resources the session has had its Relay follow for them and not
	// since unfollow, and unfollowing, those being unfollowed now, each
	// with a channel closed when that is done.
	subMu       sync.Mutex
	subs        map[jsonrpc.ID]*listenSub
	following   map[string]bool
	unfollowing map[string]chan struct{}

	mu       sync.Mutex
	inflight map[jsonrpc.ID]*call
	// batchBytes are the bytes of the answers held for batches not yet
	// queued, at most MaxBatchBytes; guarded by mu.
	batchBytes int
	// draining is set, under mu, before Run waits for the tasks: no task
	// may be added after that (WaitGroup.Add must not race Wait).
	draining bool

	// asks are the requests out to the client (a relaying server's:
	// a downstream's sampling, elicitation or roots), each waiting for
	// its response.
	asks *jsonrpc.Pending

	tasks    sync.WaitGroup
	workers  *workers
	taskCtx  context.Context
	stopping atomic.Bool

	drainOnce sync.Once
	drainCh   chan struct{}
	// writeCtx bounds writes of responses; it ends on a hard stop.
	writeCtx context.Context

	// beforeListen, when set (only by this package's tests), runs as a
	// subscriptions/listen is about to take subMu: the one interleaving
	// of a listen with a drain that no test can force from outside.
	beforeListen func()
}

// NewSession returns a session of s on conn.
func (s *Server) NewSession(conn Conn) *Session {
	return &Session{
		srv:      s,
		conn:     conn,
		log:      s.log,
		inflight: make(map[jsonrpc.ID]*call),
		drainCh:  make(chan struct{}),
		workers:  newWorkers(),
		asks:     jsonrpc.NewPending("bastion-ask-", maxAsks),
	}
}

// Drain starts a graceful drain: reading stops, in-flight calls get the
// drain grace to finish and are then cancelled, and Run returns. It may be
// called from any goroutine, any number of times.
func (ss *Session) Drain() {
	ss.drainOnce.Do(func() { close(ss.drainCh) })
}

// Run serves the connection until its input ends, [Session.Drain] is
// called, its output fails or ctx ends, and returns once every task and the
// read loop have finished and accepted responses are flushed.
//
// End of input and Drain are graceful: reading stops, in-flight calls get
// the drain grace to finish and are then cancelled (each answered with
// -32603), and the remaining responses get one more grace period to be
// flushed; a peer that stops reading cannot hold the drain open past that.
// A graceful drain returns nil, unless input failed with an error other
// than EOF or responses could not be flushed. Cancelling ctx is the hard
// stop: in-flight calls and pending writes are abandoned at once and Run
// returns ctx's cause. An output failure cancels every call and returns an
// error wrapping ErrOutputFailed.
func (ss *Session) Run(ctx context.Context) error {
	writeCtx, cancelWrites := context.WithCancelCause(ctx)
	defer cancelWrites(nil)
	ss.writeCtx = writeCtx
	taskCtx, cancelTasks := context.WithCancelCause(ctx)
	defer cancelTasks(nil)
	ss.taskCtx = taskCtx

	// Watch before reading: a change between the first message read and
	// the watch would be lost to a subscription opened by that message.
	if c := ss.srv.opts.Catalog; c != nil {
		stopWatch := ss.watchCatalog(c)
		defer stopWatch()
	}
	if rl := ss.srv.opts.Relay; rl != nil {
		stopWatch := ss.watchRelay(rl)
		defer stopWatch()
	}
	readDone := make(chan error, 1)
	go func() { readDone <- ss.readLoop() }()

	var (
		result    error
		readerOut bool
	)
	select {
	case err := <-readDone:
		readerOut = true
		if err != nil {
			ss.log.Warn("input failed; draining", slog.String("error", err.Error()))
			result = fmt.Errorf("session: input: %w", err)
		} else {
			ss.log.Debug("input ended; draining")
		}
	case <-ss.drainCh:
		ss.log.Info("drain requested")
	case <-ctx.Done():
	case <-ss.conn.Failed():
	}

	ss.stopping.Store(true)
	ss.conn.CloseRead()
	// Nothing the client sends is read any more: a request out to it
	// can no longer be answered, and a call waiting on one ends now
	// rather than at the end of the grace.
	ss.asks.Abandon("")
	ss.endSubscriptions()
	ss.mu.Lock()
	ss.draining = true
	ss.mu.Unlock()

	tasksDone := make(chan struct{})
	go func() { ss.tasks.Wait(); close(tasksDone) }()

	switch {
	case ctx.Err() != nil:
		cancelTasks(context.Cause(ctx))
	case isClosed(ss.conn.Failed()):
		cancelTasks(ErrOutputFailed)
	default:
		grace := time.NewTimer(ss.srv.opts.DrainGrace)
		select {
		case <-tasksDone:
		case <-grace.C:
			ss.log.Warn("drain grace expired; cancelling in-flight calls", slog.Int("in_flight", ss.inFlight()))
			cancelTasks(ErrShutdown)
		case <-ctx.Done():
			cancelTasks(context.Cause(ctx))
		case <-ss.conn.Failed():
			cancelTasks(ErrOutputFailed)
		}
		grace.Stop()
	}

	// Whatever is still running has been cancelled. What remains is to
	// let it answer and to flush, bounded once more by the grace: a peer
	// that no longer reads its output must not hold the process. When
	// the bound ends, pending writes are abandoned.
	flushCtx, cancelFlush := context.WithTimeoutCause(ctx, ss.srv.opts.DrainGrace, errFlushTimeout)
	defer cancelFlush()
	stopAbandon := context.AfterFunc(flushCtx, func() { cancelWrites(context.Cause(flushCtx)) })
	defer stopAbandon()
	<-tasksDone
	if !readerOut {
		<-readDone
	}
	ss.workers.stop()
	shutErr := ss.conn.Shutdown(flushCtx)

	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case isClosed(ss.conn.Failed()):
		return fmt.Errorf("%w: %w", ErrOutputFailed, ss.conn.Err())
	case shutErr != nil || context.Cause(flushCtx) == errFlushTimeout:
		return fmt.Errorf("%w: responses could not be flushed within %s", ErrOutputFailed, ss.srv.opts.DrainGrace)
	}
	return result
}

// watchCatalog sends notifications/tools/list_changed after each change of
// the catalog, to a client that may hear it. It returns a func that stops
// the watcher and waits for it.
func (ss *Session) watchCatalog(c Catalog) func() {
	changes, stop := c.Watch()
	return follow(changes, stop, func(struct{}) { ss.announce(mcp.Listen{Tools: true}) })
}

// errFlushTimeout ends the final flush of a drain.
var errFlushTimeout = errors.New("session: flush timed out")

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func (ss *Session) inFlight() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.inflight)
}

// readLoop reads and dispatches frames until input ends (nil), input fails
// (the error) or the session stops.
func (ss *Session) readLoop() error {
	for !ss.stopping.Load() {
		frame, err := ss.conn.Read()
		if ss.stopping.Load() {
			return nil
		}
		if err != nil {
			var tooLarge *wire.FrameTooLargeError
			switch {
			case errors.As(err, &tooLarge):
				ss.log.Warn("oversized frame discarded", slog.Int("max_frame_bytes", tooLarge.Limit))
				ss.send(jsonrpc.AppendError(nil, &jsonrpc.Error{
					Code:    jsonrpc.CodeInvalidRequest,
					Message: fmt.Sprintf("Invalid request: message exceeds %d bytes", tooLarge.Limit),
					Data:    fmt.Appendf(nil, `{"max_frame_bytes":%d}`, tooLarge.Limit),
				}))
				continue
			case errors.Is(err, io.EOF):
				return nil
			default:
				return err
			}
		}
		ss.handleFrame(frame)
	}
	return nil
}

// send writes one message; failures surface through Conn.Failed.
func (ss *Session) send(msg []byte) { ss.sendQueued(ss.writeCtx, msg, nil) }

// sendQueued is send bounded by ctx, which must end no later than
// writeCtx, running queued as [Conn.WriteQueued] does.
func (ss *Session) sendQueued(ctx context.Context, msg []byte, queued func() bool) {
	if err := ss.conn.WriteQueued(ctx, msg, queued); err != nil && !errors.Is(err, wire.ErrWithdrawn) {
		ss.log.Debug("response not written", slog.String("error", err.Error()))
	}
}
