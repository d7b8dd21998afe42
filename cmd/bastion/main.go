// Command bastion is mcp-bastion: a hardened MCP server (serve) and, later,
// an MCP security gateway. main only hands off to run; see run.go.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/mcp-bastion/bastion/internal/stdio"
)

func main() {
	// A closed stdout must be an error the session drains on, not a
	// SIGPIPE that kills the process mid-flush.
	signal.Ignore(syscall.SIGPIPE)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	os.Exit(run(context.Background(), os.Args[1:], env{
		stdio: func() (io.Reader, io.Writer, func()) {
			return stdio.OpenStdio()
		},
		stdout:  os.Stdout,
		stderr:  os.Stderr,
		environ: os.Environ(),
		signals: sigs,
	}))
}
