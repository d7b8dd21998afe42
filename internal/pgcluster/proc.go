package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// serverOSUser is the account the server runs as when the caller is root:
// initdb and postgres refuse to run as root, and the Debian package creates
// this user.
const serverOSUser = "postgres"

// runner starts the server binaries, as [serverOSUser] when the caller is
// root and as the caller otherwise.
type runner struct {
	binDir string
	// cred is nil when the binaries run as the caller.
	cred *syscall.Credential
	env  []string
}

func newRunner(binDir string) (*runner, error) {
	r := &runner{binDir: binDir, env: childEnv(os.Environ())}
	if os.Geteuid() != 0 {
		return r, nil
	}
	// Switching credentials in the child (setgroups, setgid, setuid) does
	// what `runuser -u postgres --` does, without PAM, an extra process or
	// a second round of argument parsing.
	u, err := user.Lookup(serverOSUser)
	if err != nil {
		return nil, fmt.Errorf("running as root needs an OS user %q to run the server as: %w", serverOSUser, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("uid of %q: %w", serverOSUser, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("gid of %q: %w", serverOSUser, err)
	}
	r.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	return r, nil
}

// childEnv is the caller's environment without the variables that would
// change what the server binaries do behind our backs (PGDATA, PGPORT,
// PGOPTIONS, locale), and with the C locale so that messages, which the
// start-up retry matches, are in English.
func childEnv(environ []string) []string {
	env := make([]string, 0, len(environ)+1)
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "PG") || strings.HasPrefix(name, "LC_") || name == "LANG" || name == "LANGUAGE" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C")
}

// chown gives path to the server's OS user, so that it can write there.
func (r *runner) chown(path string) error {
	if r.cred == nil {
		return nil
	}
	return os.Chown(path, int(r.cred.Uid), int(r.cred.Gid))
}

// command prepares a server binary to run in dir.
func (r *runner) command(ctx context.Context, dir, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(r.binDir, name), args...)
	r.setup(cmd, dir)
	return cmd
}

func (r *runner) setup(cmd *exec.Cmd, dir string) {
	// The working directory must be one the server user may enter; the
	// caller's (a package directory under root's home, say) may not be.
	cmd.Dir = dir
	cmd.Env = r.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: r.cred}
	// If ctx ends, the child is killed; do not wait forever for output
	// pipes that a grandchild might hold.
	cmd.WaitDelay = 5 * time.Second
}

// run runs a server binary and returns an error carrying its output.
func (r *runner) run(ctx context.Context, dir, name string, args ...string) error {
	out, err := r.command(ctx, dir, name, args...).CombinedOutput()
	if err != nil {
		if msg := strings.TrimSpace(string(out)); msg != "" {
			return fmt.Errorf("%w: %s", err, msg)
		}
		return err
	}
	return nil
}

// watchdogScript stops the cluster and removes its directory once its
// standard input reaches end of file without having said "disarm". The
// kernel closes the other end of that pipe when the Go process dies, so a
// test binary that panics, times out or is interrupted does not leave a
// server running. Paths arrive as positional parameters, never spliced into
// the script text.
const watchdogScript = `read -r word
[ "$word" = disarm ] && exit 0
"$1" stop -D "$2" -m immediate -w -t 30 >/dev/null 2>&1
rm -rf -- "$3"
`

// watchdog is the separate process that cleans up after a dead owner.
type watchdog struct {
	cmd  *exec.Cmd
	pipe *os.File // write end; only this process holds it
}

// startWatchdog starts a watchdog for the cluster in root.
func (r *runner) startWatchdog(root, dataDir string) (*watchdog, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	// Not CommandContext: the watchdog must outlive every context, since
	// its whole point is to act when nobody else can.
	cmd := exec.Command("/bin/sh", "-c", watchdogScript, "pgcluster-watchdog",
		filepath.Join(r.binDir, "pg_ctl"), dataDir, root)
	r.setup(cmd, root)
	cmd.Stdin = pr
	// Its own process group: a Ctrl-C in the terminal signals the test
	// binary's group, and the watchdog must survive it to clean up.
	cmd.SysProcAttr.Setpgid = true
	err = cmd.Start()
	pr.Close() // the child has its copy
	if err != nil {
		pw.Close()
		return nil, err
	}
	return &watchdog{cmd: cmd, pipe: pw}, nil
}

// disarm tells the watchdog that the owner cleaned up itself, and waits for
// it to exit.
func (w *watchdog) disarm() error {
	_, werr := w.pipe.WriteString("disarm\n")
	cerr := w.pipe.Close()
	return errors.Join(werr, cerr, w.cmd.Wait())
}

// logTail returns the last lines of the server log from offset on, for
// error messages: a failed start is explained there, not by pg_ctl.
func logTail(path string, offset int64) string {
	const maxBytes = 2048
	data, err := os.ReadFile(path)
	if err != nil {
		return "(no server log: " + err.Error() + ")"
	}
	if offset > 0 && offset <= int64(len(data)) {
		data = data[offset:]
	}
	if len(data) > maxBytes {
		data = data[len(data)-maxBytes:]
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	return strings.TrimSpace(string(data))
}
