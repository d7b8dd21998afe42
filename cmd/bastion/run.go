package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
)

// version is set at link time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

// Exit codes.
const (
	exitOK      = 0 // clean drain
	exitFailure = 1 // the session ended abnormally (output failed, forced stop)
	exitUsage   = 2 // bad flags or configuration: restarting will not help
)

// env is everything run may touch of the process.
type env struct {
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
	environ []string
	signals <-chan os.Signal
}

const usage = `Usage: bastion <command> [flags]

Commands:
  serve     run the hardened MCP server on stdin/stdout
  version   print the version

Run "bastion <command> --help" for a command's flags.
`

// run dispatches a subcommand and returns the process exit code.
func run(ctx context.Context, args []string, e env) int {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], e)
	case "version", "--version":
		fmt.Fprintf(e.stdout, "bastion %s %s %s/%s\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return exitOK
	case "help", "-h", "--help":
		fmt.Fprint(e.stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(e.stderr, "bastion: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
}

// parseFlags parses a subcommand's flags. It reports whether to go on and,
// if not, the exit code.
func parseFlags(fs *flag.FlagSet, args []string, e env) (bool, int) {
	fs.SetOutput(e.stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return false, exitOK
		}
		return false, exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "bastion %s: unexpected arguments: %s\n", fs.Name(), strings.Join(fs.Args(), " "))
		return false, exitUsage
	}
	return true, exitOK
}
