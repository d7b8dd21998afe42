package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
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
	// stdio opens standard input and output for a session and returns a
	// func that undoes what opening changed. Only serve calls it, right
	// before the session: other commands leave the descriptors alone.
	stdio   func() (io.Reader, io.Writer, func())
	stdout  io.Writer
	stderr  io.Writer
	environ []string
	signals <-chan os.Signal
}

const usage = `Usage: bastion <command> [flags]

Commands:
  serve     run the hardened MCP server on stdin/stdout
  gateway   run the MCP security gateway in front of downstream servers
  admit     the gateway's admission gate: evidence and review
  version   print the version

Run "bastion <command> --help" for a command's flags.
`

const versionUsage = `Usage: bastion version

Prints the version, the Go version and the platform.
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
	case "gateway":
		return gatewayCmd(ctx, args[1:], e)
	case "admit":
		return admitCmd(ctx, args[1:], e)
	case "version", "--version":
		if slices.ContainsFunc(flagArgs(args[1:]), isHelpFlag) {
			fmt.Fprint(e.stdout, versionUsage)
			return exitOK
		}
		fs := flag.NewFlagSet("version", flag.ContinueOnError)
		fs.Usage = func() { fmt.Fprint(e.stderr, versionUsage) }
		if ok, code := parseFlags(fs, args[1:], e); !ok {
			return code
		}
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
	if err := parseWithHint(fs, func(fs *flag.FlagSet) error { return fs.Parse(args) }, e); err != nil {
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

// parseWithHint runs parse on fs with fs's errors to stderr. A mistake
// in the flags is answered with the error and where the help is, not with
// the whole help, which would bury the error under it; -h and --help
// still get the whole help.
func parseWithHint(fs *flag.FlagSet, parse func(*flag.FlagSet) error, e env) error {
	fs.SetOutput(e.stderr)
	full := fs.Usage
	fs.Usage = func() {}
	defer func() { fs.Usage = full }()
	err := parse(fs)
	switch {
	case errors.Is(err, flag.ErrHelp):
		full()
	case err != nil:
		fmt.Fprintf(e.stderr, "Run 'bastion %s --help' for its usage.\n", fs.Name())
	}
	return err
}
