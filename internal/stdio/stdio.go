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

// PollableStdin returns standard input as a file whose Close unblocks a
// pending Read, so a drain can stop the read loop without waiting for the
// client to close its end, and a func that undoes what it changed; call it
// once reading is over.
//
// The file is a duplicate of descriptor 0 in non-blocking mode, which puts
// it under the runtime's poller, and closing it leaves descriptor 0 open.
// Non-blocking mode belongs to the open file description, which the
// process shares with whoever started it (a shell reads the rest of a pipe
// after we exit), so restore switches it back unless it was already on.
// For inputs the poller cannot watch (regular files), reads never block
// anyway and os.Stdin is returned as is.
func PollableStdin() (f *os.File, restore func()) {
	noop := func() {}
	flags, err := unix.FcntlInt(0, unix.F_GETFL, 0)
	if err != nil {
		return os.Stdin, noop
	}
	fd, err := unix.Dup(0)
	if err != nil {
		return os.Stdin, noop
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return os.Stdin, noop
	}
	restore = noop
	if flags&unix.O_NONBLOCK == 0 {
		restore = func() { _ = unix.SetNonblock(0, false) }
	}
	return os.NewFile(uintptr(fd), "/dev/stdin"), restore
}
