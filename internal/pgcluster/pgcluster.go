// Package pgcluster runs a throwaway PostgreSQL cluster from the server
// binaries installed on the machine: initdb into a fresh temporary
// directory, a Unix socket in that directory, a random loopback port, trust
// authentication and durability switched off. It exists so that tests and
// the README's demo talk to a real server, never a mock.
//
// It is not a way to run PostgreSQL for real data: nothing is fsynced, any
// local user can connect without a password, and [Cluster.Stop] deletes
// everything.
//
// # Binaries and users
//
// [FindBinDir] locates initdb and pg_ctl ($PG_BIN, then
// /usr/lib/postgresql/<highest version>/bin, then pg_config --bindir).
// scripts/ensure-postgres.sh installs them when they are missing. initdb and
// postgres refuse to run as root, so when the caller is root they run as the
// "postgres" OS user, which owns the cluster directory.
//
// # Roles
//
// The cluster has two roles: the superuser "postgres", for fixture set-up
// ([Cluster.SuperuserDSN], [Cluster.Exec]), and an ordinary login role
// ([Options.User], "bastion" by default) that code under test connects as
// ([Cluster.DSN]). Neither has a password.
//
// # Clean-up
//
// [Cluster.Stop] stops the server and removes the directory. A watchdog
// process does the same if the Go process dies first, so a test binary that
// panics or is interrupted leaves no server behind. The watchdog runs as the
// server's OS user; as root, it can remove the cluster directory itself only
// when [Options.Dir] is writable by that user or sticky like /tmp (the
// default), and otherwise leaves it behind empty.
//
// # Sample data
//
// [Cluster.LoadSample] loads sample.sql (in this package's directory): a
// small "reporting" schema of customers, products, orders and order items
// covering the awkward types (numeric, bigint beyond 2^53, timestamptz,
// interval, jsonb, uuid, inet, bytea, arrays, NULLs).
//
// Tests use the pgtest subpackage, which shares one cluster per test binary
// and gives every test its own database.
package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Superuser is the name of the cluster's superuser role.
const Superuser = "postgres"

// DefaultUser is the ordinary login role created when [Options.User] is
// empty.
const DefaultUser = "bastion"

// maxSocketPath is the longest Unix socket path Linux accepts (sun_path is
// 108 bytes including the terminating NUL).
const maxSocketPath = 107

// portAttempts bounds the retries when another process takes the random
// port between our probe and the server's bind.
const portAttempts = 3

// Options configures [Start]. The zero value is ready to use.
type Options struct {
	// Dir is the directory under which the cluster's own temporary
	// directory is created; "" means [os.TempDir]. When running as root,
	// every directory above it must be searchable by the "postgres" OS
	// user. It must be short enough for the socket path to fit the
	// kernel's limit: at most about 70 bytes.
	Dir string
	// Logger receives start and stop events; nil discards them.
	Logger *slog.Logger
	// BinDir is the directory holding initdb and pg_ctl; "" means
	// [FindBinDir].
	BinDir string
	// User is the ordinary login role created for code under test; ""
	// means [DefaultUser]. It may not be the superuser's name.
	User string
	// Port is the TCP port on 127.0.0.1; 0 picks a free one.
	Port int
}

// Cluster is a running throwaway cluster. Its methods are safe for
// concurrent use.
type Cluster struct {
	root    string // the cluster's temporary directory; also the socket directory
	dataDir string
	logPath string
	port    int
	pid     int
	user    string
	run     *runner
	log     *slog.Logger
	dog     *watchdog

	mu      sync.Mutex
	stopped bool
	stopErr error
}

// Start creates and starts a new cluster in a fresh temporary directory
// under opts.Dir. It returns once the server accepts connections, which
// takes about a second on an idle machine, nearly all of it initdb. If ctx
// ends first, Start cleans up and returns an error. On success the caller
// must call [Cluster.Stop].
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	began := time.Now()
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.WithGroup("pgcluster")
	user := opts.User
	if user == "" {
		user = DefaultUser
	}
	if user == Superuser {
		return nil, fmt.Errorf("pgcluster: user %q is the superuser's name", user)
	}
	if opts.Port < 0 || opts.Port > 65535 {
		return nil, fmt.Errorf("pgcluster: port %d out of range [0, 65535]", opts.Port)
	}
	binDir := opts.BinDir
	if binDir == "" {
		var err error
		if binDir, err = FindBinDir(); err != nil {
			return nil, err // already names the room
		}
	}
	run, err := newRunner(binDir)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}

	root, err := os.MkdirTemp(opts.Dir, "pgcluster-")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	if root, err = filepath.Abs(root); err != nil {
		os.RemoveAll(root)
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	c := &Cluster{
		root:    root,
		dataDir: filepath.Join(root, "data"),
		logPath: filepath.Join(root, "server.log"),
		user:    user,
		run:     run,
		log:     log,
	}
	if err := c.start(ctx, opts.Port); err != nil {
		// Stop copes with every stage start can fail in. It must run even
		// when ctx has ended, or a server could be left behind.
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		return nil, errors.Join(err, c.Stop(stopCtx))
	}
	log.LogAttrs(ctx, slog.LevelInfo, "cluster started",
		slog.String("dir", c.root), slog.Int("port", c.port), slog.Int("pid", c.pid),
		slog.String("bin_dir", binDir), slog.Duration("duration", time.Since(began)))
	return c, nil
}

func (c *Cluster) start(ctx context.Context, port int) error {
	// The socket lives in the cluster directory, so its path must fit.
	if n := len(filepath.Join(c.root, ".s.PGSQL.65535")); n > maxSocketPath {
		return fmt.Errorf("pgcluster: socket path under %q would be %d bytes, the limit is %d: choose a shorter Options.Dir", c.root, n, maxSocketPath)
	}
	// The directory goes into postgresql.conf as an element of a
	// comma-separated list; these would need escapes no caller should need.
	if strings.ContainsAny(c.root, ",\"\\\n\r") {
		return fmt.Errorf("pgcluster: directory %q holds a comma, quote, backslash or line break", c.root)
	}
	if err := c.run.chown(c.root); err != nil {
		return fmt.Errorf("pgcluster: chown: %w", err)
	}
	dog, err := c.run.startWatchdog(c.root, c.dataDir)
	if err != nil {
		return fmt.Errorf("pgcluster: watchdog: %w", err)
	}
	c.dog = dog

	began := time.Now()
	if err := c.run.run(ctx, c.root, "initdb", "-D", c.dataDir,
		"--auth=trust", "--no-sync", "-U", Superuser, "-E", "UTF8", "--locale=C"); err != nil {
		return fmt.Errorf("pgcluster: initdb: %w", err)
	}
	c.log.LogAttrs(ctx, slog.LevelDebug, "initdb done", slog.Duration("duration", time.Since(began)))
	if err := c.writeConfig(); err != nil {
		return fmt.Errorf("pgcluster: config: %w", err)
	}

	for attempt := 1; ; attempt++ {
		p := port
		if p == 0 {
			if p, err = freePort(); err != nil {
				return fmt.Errorf("pgcluster: free port: %w", err)
			}
		}
		err = c.pgCtlStart(ctx, p)
		if err == nil {
			c.port = p
			break
		}
		// Only a port we picked ourselves may be lost to a race; a port the
		// caller chose is the caller's problem.
		if port != 0 || attempt == portAttempts || !errors.Is(err, errPortTaken) {
			return err
		}
		c.log.LogAttrs(ctx, slog.LevelDebug, "port taken, retrying", slog.Int("port", p))
	}

	pid, err := c.readPID()
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	c.pid = pid
	if err := c.Exec(ctx, "postgres", "CREATE ROLE "+quoteIdent(c.user)+
		" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"); err != nil {
		return fmt.Errorf("pgcluster: create role: %w", err)
	}
	return nil
}

// serverSettings are appended to postgresql.conf rather than passed on the
// pg_ctl command line: pg_ctl hands -o to a shell, and a path would need
// quoting for that shell and again for PostgreSQL's list syntax.
func (c *Cluster) serverSettings() []string {
	return []string{
		// Durability buys nothing for a cluster that is deleted afterwards.
		"fsync = off",
		"full_page_writes = off",
		"synchronous_commit = off",
		// Loopback only, and a socket that only this cluster uses.
		"listen_addresses = '127.0.0.1'",
		"unix_socket_directories = " + quoteConfString(c.root),
		"max_connections = 50",
		// Same results on every machine, whatever its local time zone.
		"timezone = 'UTC'",
		"log_timezone = 'UTC'",
	}
}

func (c *Cluster) writeConfig() error {
	f, err := os.OpenFile(filepath.Join(c.dataDir, "postgresql.conf"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	text := "\n# Added by pgcluster: a throwaway test cluster.\n" + strings.Join(c.serverSettings(), "\n") + "\n"
	_, werr := f.WriteString(text)
	return errors.Join(werr, f.Close())
}

// errPortTaken marks a start that failed because the port was in use.
var errPortTaken = errors.New("port in use")

func (c *Cluster) pgCtlStart(ctx context.Context, port int) error {
	var offset int64
	if fi, err := os.Stat(c.logPath); err == nil {
		offset = fi.Size()
	}
	began := time.Now()
	err := c.run.run(ctx, c.root, "pg_ctl", "start", "-w", "-t", "60",
		"-D", c.dataDir, "-l", c.logPath, "-o", "-p "+strconv.Itoa(port))
	if err == nil {
		c.log.LogAttrs(ctx, slog.LevelDebug, "pg_ctl start done", slog.Duration("duration", time.Since(began)))
		return nil
	}
	tail := logTail(c.logPath, offset)
	if strings.Contains(tail, "Address already in use") {
		err = fmt.Errorf("%w: %w", errPortTaken, err)
	}
	return fmt.Errorf("pgcluster: pg_ctl start on port %d: %w\nserver log:\n%s", port, err, tail)
}

// readPID returns the postmaster's process id from postmaster.pid.
func (c *Cluster) readPID() (int, error) {
	data, err := os.ReadFile(filepath.Join(c.dataDir, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(data), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return 0, fmt.Errorf("postmaster.pid: %w", err)
	}
	return pid, nil
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	return port, l.Close()
}

// Stop stops the server (fast shutdown, then immediate if that fails) and
// removes the cluster's directory. It is safe to call more than once and
// from several goroutines: later calls return the first call's result. If
// ctx ends before the fast shutdown completes, Stop still shuts the server
// down immediately rather than leave it running.
func (c *Cluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return c.stopErr
	}
	c.stopped = true
	began := time.Now()
	c.stopErr = c.stop(ctx)
	c.log.LogAttrs(ctx, slog.LevelInfo, "cluster stopped",
		slog.String("dir", c.root), slog.Duration("duration", time.Since(began)), slog.Any("error", c.stopErr))
	return c.stopErr
}

func (c *Cluster) stop(ctx context.Context) error {
	var errs []error
	// No postmaster.pid means no server: start failed before it, or the
	// server is already gone.
	if _, err := os.Stat(filepath.Join(c.dataDir, "postmaster.pid")); err == nil {
		if err := c.pgCtlStop(ctx, "fast"); err != nil {
			c.log.LogAttrs(ctx, slog.LevelWarn, "fast shutdown failed", slog.Any("error", err))
			immCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if err := c.pgCtlStop(immCtx, "immediate"); err != nil {
				// Removing the directory below still ends the server: the
				// postmaster shuts down when its lock file disappears.
				errs = append(errs, fmt.Errorf("pgcluster: stop: %w", err))
			}
		}
	}
	if c.dog != nil {
		if err := c.dog.disarm(); err != nil {
			errs = append(errs, fmt.Errorf("pgcluster: watchdog: %w", err))
		}
	}
	if err := os.RemoveAll(c.root); err != nil {
		errs = append(errs, fmt.Errorf("pgcluster: remove: %w", err))
	}
	return errors.Join(errs...)
}

func (c *Cluster) pgCtlStop(ctx context.Context, mode string) error {
	if err := c.run.run(ctx, c.root, "pg_ctl", "stop", "-w", "-t", "30", "-D", c.dataDir, "-m", mode); err != nil {
		return fmt.Errorf("pg_ctl stop -m %s: %w", mode, err)
	}
	return nil
}

// Dir returns the cluster's directory. It holds the data directory
// ("data"), the server log ("server.log") and the Unix socket. It no longer
// exists after [Cluster.Stop].
func (c *Cluster) Dir() string { return c.root }

// Port returns the TCP port the server listens on, on 127.0.0.1 and as the
// number in the socket file's name.
func (c *Cluster) Port() int { return c.port }

// User returns the name of the ordinary login role that [Cluster.DSN]
// connects as.
func (c *Cluster) User() string { return c.user }

// DSN returns a keyword/value connection string for database db ("" means
// "postgres") as the ordinary login role, over the Unix socket. It carries
// no password: the cluster trusts local connections.
func (c *Cluster) DSN(db string) string { return c.dsn(c.user, db) }

// SuperuserDSN is [Cluster.DSN] for the superuser. Use it for fixture set-up
// only; code under test should connect with [Cluster.DSN].
func (c *Cluster) SuperuserDSN(db string) string { return c.dsn(Superuser, db) }

func (c *Cluster) dsn(user, db string) string {
	if db == "" {
		db = "postgres"
	}
	return strings.Join([]string{
		"host=" + quoteDSNValue(c.root),
		"port=" + strconv.Itoa(c.port),
		"user=" + quoteDSNValue(user),
		"dbname=" + quoteDSNValue(db),
		// The socket carries no TLS anyway; saying so keeps a client from
		// trying it when someone swaps the host for 127.0.0.1.
		"sslmode=disable",
	}, " ")
}

// quoteDSNValue quotes a keyword/value connection string value when it
// needs it.
func quoteDSNValue(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\n\r\v\f'\\") {
		return v
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// quoteConfString quotes a postgresql.conf string value.
func quoteConfString(v string) string {
	return "'" + strings.ReplaceAll(v, "'", "''") + "'"
}
