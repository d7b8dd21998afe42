// Command bastion is mcp-bastion: a hardened MCP server (serve) and, later,
// an MCP security gateway. main only hands off to run; see run.go.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/mcp-bastion/bastion/internal/stdio"
)

func main() {
	// A closed stdout must be an error the session drains on, not a
	// SIGPIPE that kills the process mid-flush.
	signal.Ignore(syscall.SIGPIPE)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	// BASTION_CPUPROFILE=path writes a CPU profile of the whole run to
	// path, for the load benchmarks (bench/run-gateway-load.sh). It is
	// written when run returns (after the drain SIGTERM starts, or a
	// forced stop); a SIGKILL leaves it unwritten.
	stopProfile := func() {}
	if path := os.Getenv("BASTION_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bastion: BASTION_CPUPROFILE: %v\n", err)
			os.Exit(exitUsage)
		}
		stopProfile = func() {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				fmt.Fprintf(os.Stderr, "bastion: BASTION_CPUPROFILE: %v\n", err)
			}
		}
	}
	code := run(context.Background(), os.Args[1:], env{
		stdio: func() (io.Reader, io.Writer, func()) {
			return stdio.OpenStdio()
		},
		stdout:  os.Stdout,
		stderr:  os.Stderr,
		environ: os.Environ(),
		signals: sigs,
	})
	stopProfile()
	os.Exit(code)
}
