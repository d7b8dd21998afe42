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
	"syscall"

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
// client to close its end. It switches the descriptor to non-blocking mode,
// which puts it under the runtime's poller; for inputs the poller cannot
// watch (regular files), reads never block anyway and the file is
// returned as is.
func PollableStdin() *os.File {
	fd := int(os.Stdin.Fd())
	if err := syscall.SetNonblock(fd, true); err != nil {
		return os.Stdin
	}
	return os.NewFile(uintptr(fd), "/dev/stdin")
}
