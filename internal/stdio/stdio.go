// Package stdio runs one MCP session over a process's standard input and
// output: it makes stdin closable, turns signals into a drain (first) and a
// hard stop (second), and reports how the session ended. It is the shared
// tail of `bastion serve` and of every example server on the same core.
package stdio

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/mcp-bastion/bastion/internal/session"
	"github.com/mcp-bastion/bastion/internal/wire"
)

// ErrForced is the cause of a hard stop by a second signal.
var ErrForced = errors.New("stdio: forced shutdown by a second signal")

// Serve runs a session of srv on in and out until input ends, a signal
// drains it or output fails. The first value from sigs starts a graceful
// drain, the second forces a stop. It returns nil after a clean drain.
func Serve(ctx context.Context, srv *session.Server, in io.Reader, out io.Writer, maxFrame int, sigs <-chan os.Signal, log *slog.Logger) error {
	conn := wire.NewConn(in, out, maxFrame)
	sess := srv.NewSession(conn)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		n := 0
		for {
			select {
			case sig := <-sigs:
				n++
				if n == 1 {
					log.Info("signal received; draining", slog.String("signal", sig.String()))
					sess.Drain()
					continue
				}
				log.Warn("second signal; stopping now", slog.String("signal", sig.String()))
				cancel(ErrForced)
				return
			case <-stop:
				return
			}
		}
	}()
	err := sess.Run(ctx)
	close(stop)
	wg.Wait()
	return err
}

// OpenStdio returns standard input and output for a session, and a func
// that undoes what it changed; call it once the session is over.
//
// Input is a duplicate of descriptor 0 in non-blocking mode, which puts it
// under the runtime's poller: its Close unblocks a pending Read, so a drain
// never waits for the client to close its end, and closing it leaves
// descriptor 0 open. Non-blocking mode belongs to the open file
// description, which the process shares with whoever started it (a shell
// reads the rest of a pipe after we exit), so restore switches it back
// unless it was already on. For inputs the poller cannot watch (regular
// files), reads never block anyway and os.Stdin is returned as is.
//
// Output is os.Stdout, except when descriptors 0 and 1 are the same file
// (a terminal, or one socket for both as inetd and systemd hand it over):
// the non-blocking mode then applies to writes too, and a slow reader
// would fail them with EAGAIN. Output is then a duplicate of descriptor 1,
// which the poller waits on instead.
func OpenStdio() (in, out *os.File, restore func()) {
	restore = func() {}
	in, out = os.Stdin, os.Stdout
	flags, err := unix.FcntlInt(0, unix.F_GETFL, 0)
	if err != nil {
		return in, out, restore
	}
	fd, err := unix.Dup(0)
	if err != nil {
		return in, out, restore
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return in, out, restore
	}
	in = os.NewFile(uintptr(fd), "/dev/stdin")
	if sameFile(0, 1) {
		if fd, err := unix.Dup(1); err == nil {
			out = os.NewFile(uintptr(fd), "/dev/stdout")
		}
	}
	restore = func() {
		if out != os.Stdout {
			out.Close()
		}
		if flags&unix.O_NONBLOCK == 0 {
			_ = unix.SetNonblock(0, false)
		}
	}
	return in, out, restore
}

// InputClosed reports whether in is known to have ended with nothing left
// to read: its writer hung up (a pipe or a socket) and no byte is
// waiting. It reads nothing, so a session can still be served on in
// after it returned false. A file it cannot poll, or whose end it cannot
// tell without reading (a regular file), is never reported closed.
func InputClosed(in *os.File) bool {
	rc, err := in.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	_ = rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLRDHUP}}
		if n, err := unix.Poll(fds, 0); err != nil || n != 1 {
			return
		}
		ev := fds[0].Revents
		if ev&(unix.POLLHUP|unix.POLLRDHUP|unix.POLLERR) == 0 {
			return // the writer is still there
		}
		if ev&unix.POLLIN == 0 {
			closed = true // a pipe: hung up, and nothing to read
			return
		}
		// A socket reports its end as readable (a read returns EOF), as
		// a hung-up pipe with bytes left in it does: count what is left.
		// Node's child processes (libuv) get a socket pair for stdin.
		waiting, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ)
		closed = err == nil && waiting == 0
	})
	return closed
}

// sameFile reports whether descriptors a and b refer to the same file.
func sameFile(a, b int) bool {
	var sa, sb unix.Stat_t
	if unix.Fstat(a, &sa) != nil || unix.Fstat(b, &sb) != nil {
		return false
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino
}
