package upstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/wire"
)

// Timing of a child server's life. Variables, not constants, so that
// tests can shorten them.
var (
	// handshakeTimeout bounds the handshake of a new connection.
	handshakeTimeout = 10 * time.Second
	// minBackoff and maxBackoff bound the wait before a restart; it
	// doubles after every failure and starts over once a child has lived
	// for healthyAfter.
	minBackoff   = 100 * time.Millisecond
	maxBackoff   = 30 * time.Second
	healthyAfter = 30 * time.Second
	// cancelSendTimeout bounds sending a notifications/cancelled or an
	// answer to a downstream request.
	cancelSendTimeout = 2 * time.Second
	// stderrGrace is how long a child's stderr may stay open once it
	// has exited, so that its last lines are logged: a grandchild that
	// left the process group can hold it for as long as it lives.
	stderrGrace = time.Second
	// exitGrace is how long a child whose stdout ended has to exit before
	// it is taken for one that closed its output and is stopped.
	exitGrace = time.Second
	// drainGrace is how long the output of a child that exited may take
	// to end before the calls still waiting on it fail: what it wrote
	// before it died is read first, but a grandchild that holds the pipe
	// must not hold the calls up.
	drainGrace = 100 * time.Millisecond
)

// State is a downstream's connection state.
type State int

// States.
const (
	// Connecting: starting, or waiting to restart.
	Connecting State = iota
	// Connected: the handshake completed; calls go through.
	Connected
	// Closed: shut down for good.
	Closed
	// Failed: an attempt to connect failed (the process did not start,
	// or the handshake did not complete); another follows the backoff.
	Failed
)

func (s State) String() string {
	switch s {
	case Connected:
		return "connected"
	case Closed:
		return "closed"
	case Failed:
		return "failed"
	}
	return "connecting"
}

// StdioOptions configure a child server.
type StdioOptions struct {
	// Legacy skips server/discover: the session era only.
	Legacy bool
	// Name is the configured server name, for logs.
	Name string
	// Command is the child's argv.
	Command []string
	// Env is the child's environment besides PATH, which is the
	// gateway's own. Nothing else of the gateway's environment is passed.
	Env map[string]string
	// Dir is the child's working directory ("" for the gateway's).
	Dir string
	// MaxMessage caps one message read from the child.
	MaxMessage int
	// StopGrace is how long the child gets after EOF on its stdin, and
	// then after SIGTERM, before the next step of shutting it down.
	StopGrace time.Duration
	// Logger receives the gateway's logs and the child's stderr, each
	// tagged with the server's name; nil discards them.
	Logger *slog.Logger
	// OnNotify receives the notifications the server sends outside a
	// call (list_changed, log messages).
	OnNotify func(Notification)
	// OnState is told of every change of state, with the new client on
	// Connected.
	OnState func(State, *Client)
	// OnConnect is handed each new connection's client after its
	// handshake and before any call can use it (calls fail as the server
	// being unavailable until it returns).
	OnConnect func(*Client)
}

// StdioServer supervises one child MCP server: it starts it, handshakes,
// restarts it with backoff when it dies (calls in flight then fail with
// ErrConnectionLost), and on Close gives it EOF, then SIGTERM, then
// SIGKILL of its whole process group. All its goroutines are waited for by
// Close.
type StdioServer struct {
	opts StdioOptions
	log  *slog.Logger
	conn

	pid int // of the child running now, 0 when none; under mu

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// StartStdio starts supervising a child server and returns at once; the
// first connection is made in the background.
func StartStdio(opts StdioOptions) *StdioServer {
	if opts.MaxMessage <= 0 {
		opts.MaxMessage = 16 << 20
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = 2 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &StdioServer{opts: opts, log: log.With(slog.String("server", opts.Name)), conn: conn{onState: opts.OnState, onConnect: opts.OnConnect},
		stop: make(chan struct{}), done: make(chan struct{})}
	go s.supervise()
	return s
}

// PID returns the process id of the child running now, or 0.
func (s *StdioServer) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pid
}

// Close shuts the child down and waits for it and for every goroutine of
// the server. ctx bounds the wait; the child is killed when it ends.
func (s *StdioServer) Close(ctx context.Context) error {
	s.once.Do(func() { close(s.stop) })
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// supervise runs the child, again and again, until Close.
func (s *StdioServer) supervise() {
	defer close(s.done)
	defer s.setState(Closed, nil)
	backoff := minBackoff
	for first := true; ; first = false {
		if !first {
			s.mu.Lock()
			s.restarts++
			s.mu.Unlock()
		}
		started := time.Now()
		stopped := s.runOnce()
		if stopped {
			return
		}
		if time.Since(started) >= healthyAfter {
			backoff = minBackoff
		}
		s.log.Info("downstream will be restarted", slog.Duration("after", backoff))
		select {
		case <-s.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// child is one running process.
type child struct {
	cmd        *exec.Cmd
	stdin      io.WriteCloser
	conn       *wire.Conn
	stderr     *os.File // the gateway's end of the child's stderr
	stderrDone chan struct{}
	readDone   chan struct{} // closed when its output has ended
	exited     chan struct{} // closed once Wait returned: it was reaped
	waitErr    error
}

// runOnce starts the child and serves it until it exits (false) or Close
// (true).
func (s *StdioServer) runOnce() (stopped bool) {
	ch, err := s.start()
	if err != nil {
		s.log.Error("downstream did not start", slog.String("error", err.Error()))
		s.setState(Failed, nil)
		return false
	}
	c := newClient(s.opts.Name, stdioTransport{ch.conn}, s.log, &s.stats, s.opts.OnNotify)
	if s.opts.Legacy {
		c.Legacy()
	}
	go func() {
		defer close(ch.readDone)
		s.read(ch.conn, c)
	}()

	hctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	hsDone := make(chan error, 1)
	go func() { hsDone <- c.handshake(hctx) }()
	var hsErr error
	lost := false
	select {
	case hsErr = <-hsDone:
	case <-ch.readDone:
		lost = true
	case <-ch.exited:
		lost = true
	case <-s.stop:
		cancel()
		<-hsDone
		c.Fail(ErrClosed)
		s.shutdown(ch)
		return true
	}
	cancel()
	if lost {
		// The child ended (or closed its output) before its handshake:
		// said as that, at once, not as the handshake's timeout.
		c.Fail(ErrConnectionLost)
		<-hsDone
		s.ended(ch, c, "downstream exited before its handshake", "downstream closed its output before its handshake; stopping it")
		s.setState(Failed, nil)
		return false
	}
	if hsErr != nil {
		s.log.Error("downstream handshake failed", slog.String("error", hsErr.Error()))
		c.Fail(ErrConnectionLost)
		s.shutdown(ch)
		s.setState(Failed, nil)
		return false
	}
	info, _ := c.Info()
	name, version := info.Name()
	s.log.Info("downstream connected", slog.String("protocol_version", info.Version),
		slog.String("server_name", truncate(name, 64)), slog.String("server_version", truncate(version, 64)))
	// A legacy server writes its notifications to stdout unasked; a
	// 2026-07-28 one only on a subscription, which stays pending for as
	// long as the child lives.
	if info.Modern {
		defer startListening(c, s.log, c.subscribe, s.stop)()
	}
	s.setState(Connected, c)

	select {
	case <-ch.readDone:
	case <-ch.exited:
	case <-s.stop:
		s.setState(Closed, nil)
		c.Fail(ErrClosed)
		s.shutdown(ch)
		return true
	}
	// The process died (though its output may live on in a process it
	// started), or it closed its stdout and can no longer answer. Either
	// way it is done.
	s.setState(Connecting, nil)
	s.ended(ch, c, "downstream exited", "downstream closed its output; stopping it")
	return false
}

// ended settles a child that died or closed its output: it fails c's
// calls in flight with ErrConnectionLost and logs the child as exited,
// with its status, or as having closed its output and able to answer no
// more, which is then stopped. It returns once the child and its readers
// are gone.
func (s *StdioServer) ended(ch *child, c *Client, exited, closed string) {
	failed := 0
	fail := func() {
		failed += c.InFlight()
		c.Fail(ErrConnectionLost)
	}
	select {
	case <-ch.readDone:
		// All it wrote has been read; its exit, if it died, follows.
		fail()
		select {
		case <-ch.exited:
		case <-time.After(exitGrace):
			s.log.Warn(closed, slog.Int("calls_failed", failed))
			s.shutdown(ch)
			return
		}
	case <-ch.exited:
	}
	// The leader is gone; what it left in its group goes too, SIGTERM
	// and then SIGKILL after StopGrace, which also ends its output unless
	// a process that left the group holds it. Until then what the child
	// wrote before it died is still read, but only briefly.
	pgid := ch.cmd.Process.Pid
	left := s.signalGroup(pgid, syscall.SIGTERM)
	select {
	case <-ch.readDone:
	case <-time.After(drainGrace):
	}
	fail()
	s.log.Warn(exited, slog.String("status", exitStatus(ch.waitErr)), slog.Int("calls_failed", failed))
	if left && !groupGone(pgid, s.opts.StopGrace) {
		s.signalGroup(pgid, syscall.SIGKILL)
	}
	s.release(ch)
}

// groupPoll is how often groupGone looks: nothing tells the gateway when
// the last process of a group that is not its children is gone.
const groupPoll = 10 * time.Millisecond

// groupGone reports whether the process group pgid is empty, or becomes
// so within d.
func groupGone(pgid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for syscall.Kill(-pgid, 0) == nil {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(groupPoll)
	}
	return true
}

// signalGroup sends sig to the process group pgid and reports whether
// any process was left in it to receive it.
func (s *StdioServer) signalGroup(pgid int, sig syscall.Signal) bool {
	err := syscall.Kill(-pgid, sig)
	if err != nil {
		if !errors.Is(err, syscall.ESRCH) {
			s.log.Warn("signalling the downstream's process group failed", slog.String("signal", sig.String()), slog.String("error", err.Error()))
		}
		return false
	}
	s.log.Info("what the downstream left in its process group signalled", slog.String("signal", sig.String()))
	return true
}

// release waits, once the child has exited, for the readers of its
// output. The gateway's end of stdout is closed at once, so that a
// grandchild that left the group holding the pipe cannot keep the reader
// waiting; stderr has stderrGrace to end on its own first. It also stops
// the writer, which ends on stdin, closed by Wait.
func (s *StdioServer) release(ch *child) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.StopGrace)
	_ = ch.conn.Shutdown(ctx)
	cancel()
	<-ch.readDone
	select {
	case <-ch.stderrDone:
	case <-time.After(stderrGrace):
	}
	ch.stderr.Close()
	<-ch.stderrDone
}

// start starts the process with an explicit environment, in a process
// group of its own (so shutdown reaches whatever it spawned), and with
// its death tied to the gateway's, and waits for it in the background.
func (s *StdioServer) start() (*child, error) {
	cmd := exec.Command(s.opts.Command[0], s.opts.Command[1:]...)
	cmd.Dir = s.opts.Dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range s.opts.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// stdout and stderr are pipes of the gateway's own, not exec's: Wait
	// neither waits for nor closes an *os.File, so it can run from the
	// start, and the child's death is seen when it happens even while a
	// process it started holds its output open.
	stdout, stdoutW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("upstream: stdout pipe: %w", err)
	}
	stderr, stderrW, err := os.Pipe()
	if err != nil {
		stdout.Close()
		stdoutW.Close()
		return nil, fmt.Errorf("upstream: stderr pipe: %w", err)
	}
	cmd.Stdout, cmd.Stderr = stdoutW, stderrW
	stdin, err := cmd.StdinPipe()
	if err == nil {
		err = cmd.Start() // on failure, it closes stdin's pipe
	}
	// The child has its own copies of the write ends now; the output
	// would never end while the gateway kept these.
	stdoutW.Close()
	stderrW.Close()
	if err != nil {
		stdout.Close()
		stderr.Close()
		return nil, fmt.Errorf("upstream: start %s: %w", s.opts.Command[0], err)
	}
	s.mu.Lock()
	s.pid = cmd.Process.Pid
	s.mu.Unlock()
	ch := &child{cmd: cmd, stdin: stdin, conn: wire.NewConn(stdout, stdin, s.opts.MaxMessage), stderr: stderr,
		stderrDone: make(chan struct{}), readDone: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		ch.waitErr = cmd.Wait()
		close(ch.exited)
	}()
	go func() {
		defer close(ch.stderrDone)
		s.relayStderr(stderr)
	}()
	return ch, nil
}

// read delivers the child's messages to c until its output ends.
func (s *StdioServer) read(conn *wire.Conn, c *Client) {
	for {
		frame, err := conn.Read()
		var tooLarge *wire.FrameTooLargeError
		switch {
		case errors.As(err, &tooLarge):
			s.stats.Oversized.Add(1)
			s.stats.noise.warn(s.log, "downstream sent a message over the size cap; dropped", slog.Int("max_message_bytes", tooLarge.Limit))
			continue
		case err != nil:
			return
		}
		c.deliver(frame)
	}
}

// stderrLineBytes and stderrBurst bound what of a child's stderr reaches
// the log: lines are cut, and past a burst of lines in a window the rest
// are counted instead of logged.
const (
	stderrLineBytes = 1024
	stderrBurst     = 100
	stderrWindow    = 10 * time.Second
)

func (s *StdioServer) relayStderr(r io.Reader) {
	br := bufio.NewReaderSize(r, stderrLineBytes)
	windowStart, inWindow, dropped := time.Now(), 0, 0
	for {
		line, isPrefix, err := br.ReadLine()
		if len(line) > 0 || (err == nil && !isPrefix) {
			if time.Since(windowStart) > stderrWindow {
				if dropped > 0 {
					s.log.Warn("downstream stderr lines dropped", slog.Int("lines", dropped))
				}
				windowStart, inWindow, dropped = time.Now(), 0, 0
			}
			inWindow++
			if inWindow <= stderrBurst {
				s.log.Info("downstream stderr", slog.String("line", string(line)))
			} else {
				dropped++
			}
		}
		for isPrefix && err == nil { // the rest of a long line
			_, isPrefix, err = br.ReadLine()
		}
		if err != nil {
			if dropped > 0 {
				s.log.Warn("downstream stderr lines dropped", slog.Int("lines", dropped))
			}
			return
		}
	}
}

// shutdown ends the child: EOF on its stdin, then SIGTERM, then SIGKILL
// of its process group, each after StopGrace, and waits for it and for
// the readers of its output (see release).
func (s *StdioServer) shutdown(ch *child) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.StopGrace)
	_ = ch.conn.Shutdown(ctx) // flush what was accepted, close our end of stdin's writer
	cancel()
	ch.stdin.Close()
	pgid := ch.cmd.Process.Pid
	for _, sig := range []syscall.Signal{0, syscall.SIGTERM, syscall.SIGKILL} {
		if sig != 0 {
			if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
				s.log.Warn("signalling the downstream failed", slog.String("signal", sig.String()), slog.String("error", err.Error()))
			}
			s.log.Info("downstream signalled", slog.String("signal", sig.String()))
		}
		select {
		case <-ch.exited:
			// The leader is gone; what it left in its group goes too.
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			s.release(ch)
			return
		case <-time.After(s.opts.StopGrace):
		}
	}
	<-ch.exited
	s.release(ch)
}

func exitStatus(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.String()
	}
	if err != nil {
		return err.Error()
	}
	return "exit status 0"
}

// stdioTransport writes one message per line to the child's stdin.
type stdioTransport struct{ conn *wire.Conn }

// errNotOneLine: a message to a stdio downstream is not valid JSON, so it
// cannot be made one line; it is not sent.
var errNotOneLine = errors.New("upstream: a message to the downstream is not valid JSON; not sent")

// oneLine returns msg as one line: a raw CR or LF in a JSON message is
// whitespace, which would end the frame there and let what follows pass
// for a message of its own (a client's answer relayed to the downstream,
// say), so such a message is compacted. Whatever a caller embedded, the
// writer guarantees one message per line.
func oneLine(msg []byte) ([]byte, error) {
	if !bytes.ContainsAny(msg, "\r\n") {
		return msg, nil
	}
	v := jsontext.Value(bytes.Clone(msg))
	if err := v.Compact(); err != nil {
		return nil, errNotOneLine
	}
	return v, nil
}

func (t stdioTransport) send(ctx context.Context, out outgoing) error {
	msg, err := oneLine(out.msg)
	if err != nil {
		return err
	}
	if err := t.conn.Write(ctx, msg); err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return ErrConnectionLost
	}
	return nil
}
