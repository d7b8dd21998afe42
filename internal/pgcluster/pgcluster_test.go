package pgcluster_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/goleak"

	"github.com/mcp-bastion/bastion/internal/pgcluster"
	"github.com/mcp-bastion/bastion/internal/pgcluster/pgtest"
)

// crashChildEnv makes the test binary, re-executed by
// TestWatchdogCleansUpAfterOwnerDies, start a cluster under the named
// directory and exit without stopping it.
const crashChildEnv = "PGCLUSTER_TEST_CRASH_CHILD_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		os.Exit(crashChild(dir))
	}
	goleak.VerifyTestMain(pgtest.Runner(m))
}

// startCluster starts a private cluster for t and stops it at clean-up. It
// skips or fails like pgtest when the binaries are missing.
func startCluster(t *testing.T, opts pgcluster.Options) *pgcluster.Cluster {
	t.Helper()
	requireBinaries(t)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	began := time.Now()
	c, err := pgcluster.Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("started in %v", time.Since(began))
	t.Cleanup(func() {
		if err := c.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return c
}

// requireBinaries mirrors pgtest's policy for tests that start their own
// cluster: skip without the server binaries, fail under CI.
func requireBinaries(t *testing.T) {
	t.Helper()
	if _, err := pgcluster.FindBinDir(); err != nil {
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatal("PostgreSQL server binaries not found; the test command must install postgresql:", err)
		}
		t.Skip(err)
	}
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// queryRow runs a one-row query on a connection of its own.
func queryRow(t *testing.T, dsn, sql string, dest ...any) {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, sql).Scan(dest...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// processGone reports whether pid has exited. A zombie counts as gone:
// the postmaster's parent is whoever adopted it, not this process.
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// The state follows the parenthesised command name.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z'
	}
	return false
}

// waitFor polls cond until it holds or timeout passes. The events waited
// for happen in other processes, so there is nothing to block on.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStartQueryStop(t *testing.T) {
	t.Parallel()
	c := startCluster(t, pgcluster.Options{})

	var user string
	var superuser bool
	queryRow(t, c.DSN(""), "SELECT current_user, (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)", &user, &superuser)
	if user != pgcluster.DefaultUser || superuser {
		t.Errorf("DSN connects as %q (superuser %v), want %q, not superuser", user, superuser, pgcluster.DefaultUser)
	}
	queryRow(t, c.SuperuserDSN(""), "SELECT current_user, (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)", &user, &superuser)
	if user != pgcluster.Superuser || !superuser {
		t.Errorf("SuperuserDSN connects as %q (superuser %v), want %q, superuser", user, superuser, pgcluster.Superuser)
	}

	// The settings that make the cluster throwaway and reproducible.
	var fsync, tz, listen, sockets, enc string
	var port int
	queryRow(t, c.SuperuserDSN(""), `SELECT current_setting('fsync'), current_setting('TimeZone'),
		current_setting('listen_addresses'), current_setting('unix_socket_directories'),
		current_setting('server_encoding'), current_setting('port')::int`, &fsync, &tz, &listen, &sockets, &enc, &port)
	if fsync != "off" || tz != "UTC" || listen != "127.0.0.1" || sockets != c.Dir() || enc != "UTF8" || port != c.Port() {
		t.Errorf("settings: fsync=%s TimeZone=%s listen_addresses=%s unix_socket_directories=%s server_encoding=%s port=%d",
			fsync, tz, listen, sockets, enc, port)
	}

	// TCP on loopback works too, for clients that cannot use a socket.
	conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(c.Port())))
	if err != nil {
		t.Errorf("TCP on 127.0.0.1:%d: %v", c.Port(), err)
	} else {
		conn.Close()
	}

	pid := pgcluster.PostmasterPID(c)
	if pid <= 0 || processGone(pid) {
		t.Fatalf("postmaster pid %d is not running", pid)
	}
	began := time.Now()
	if err := c.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped in %v", time.Since(began))
	if _, err := os.Stat(c.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cluster directory after Stop: %v, want it gone", err)
	}
	waitFor(t, 10*time.Second, "the postmaster to exit", func() bool { return processGone(pid) })
	if err := c.Stop(t.Context()); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := c.Exec(t.Context(), "", "SELECT 1"); err == nil {
		t.Error("Exec after Stop succeeded")
	}
}

func TestTwoClustersAtOnce(t *testing.T) {
	t.Parallel()
	requireBinaries(t)
	var (
		wg       sync.WaitGroup
		clusters [2]*pgcluster.Cluster
		errs     [2]error
	)
	for i := range clusters {
		wg.Go(func() { clusters[i], errs[i] = pgcluster.Start(t.Context(), pgcluster.Options{}) })
	}
	wg.Wait()
	for _, c := range clusters {
		if c != nil {
			t.Cleanup(func() {
				if err := c.Stop(context.Background()); err != nil {
					t.Error(err)
				}
			})
		}
	}
	if err := errors.Join(errs[:]...); err != nil {
		t.Fatal(err)
	}
	a, b := clusters[0], clusters[1]
	if a.Port() == b.Port() || a.Dir() == b.Dir() {
		t.Fatalf("clusters share port %d/%d or directory %s/%s", a.Port(), b.Port(), a.Dir(), b.Dir())
	}
	// Each cluster is its own server: a table made in one is absent from
	// the other.
	if err := a.Exec(t.Context(), "", "CREATE TABLE only_in_a (x int)"); err != nil {
		t.Fatal(err)
	}
	var inA, inB bool
	const q = "SELECT to_regclass('public.only_in_a') IS NOT NULL"
	queryRow(t, a.SuperuserDSN(""), q, &inA)
	queryRow(t, b.SuperuserDSN(""), q, &inB)
	if !inA || inB {
		t.Errorf("table in a: %v, in b: %v; want true, false", inA, inB)
	}
}

func TestDSNHasNoPassword(t *testing.T) {
	t.Parallel()
	c := pgtest.Start(t)
	for name, dsn := range map[string]string{"DSN": c.DSN("x"), "SuperuserDSN": c.SuperuserDSN("x")} {
		if strings.Contains(strings.ToLower(dsn), "password") {
			t.Errorf("%s %q mentions a password", name, dsn)
		}
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if cfg.Password != "" || cfg.Host != c.Dir() || int(cfg.Port) != c.Port() || cfg.Database != "x" || cfg.TLSConfig != nil {
			t.Errorf("%s parses to host=%q port=%d database=%q password set=%v TLS=%v",
				name, cfg.Host, cfg.Port, cfg.Database, cfg.Password != "", cfg.TLSConfig != nil)
		}
	}
}

func TestLoadSample(t *testing.T) {
	t.Parallel()
	db := pgtest.NewSampleDB(t)

	want := map[string]int{"customers": 8, "products": 10, "orders": 15, "order_items": 27, "order_totals": 15}
	total := 0
	for table, n := range want {
		var got int
		queryRow(t, db.DSN(), "SELECT count(*) FROM reporting."+table, &got)
		if got != n {
			t.Errorf("reporting.%s has %d rows, want %d", table, got, n)
		}
		if table != "order_totals" {
			total += got
		}
	}
	if total < 20 || total > 200 {
		t.Errorf("sample has %d rows, want 20 to 200", total)
	}

	// The values that break naive JSON encoders survive as text.
	var big, price, total1002, delivery, ip, thumb, attrs, tags string
	queryRow(t, db.DSN(), `SELECT
		(SELECT legacy_account_no::text FROM reporting.customers WHERE customer_id = 1),
		(SELECT unit_price::text FROM reporting.products WHERE sku = 'LB-STICKER'),
		(SELECT total::text FROM reporting.order_totals WHERE order_id = 1002),
		(SELECT delivery_time::text FROM reporting.orders WHERE order_id = 1001),
		(SELECT signup_ip::text FROM reporting.customers WHERE customer_id = 7),
		(SELECT encode(thumbnail, 'hex') FROM reporting.products WHERE product_id = 1),
		(SELECT attributes->>'layout' FROM reporting.products WHERE product_id = 1),
		(SELECT array_to_string(tags, '|') FROM reporting.products WHERE product_id = 10)`,
		&big, &price, &total1002, &delivery, &ip, &thumb, &attrs, &tags)
	for _, c := range []struct{ name, got, want string }{
		{"bigint beyond 2^53", big, "9007199254740993"},
		{"numeric(12,2)", price, "0.10"},
		{"order 1002 total after discount", total1002, "320.60"},
		{"interval", delivery, "2 days 03:30:00"},
		{"inet with netmask", ip, "198.51.100.42/24"},
		{"bytea", thumb, "89504e470d0a1a0a"},
		{"jsonb member", attrs, "ISO"},
		{"text[]", tags, "sticker|with space"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	var lastInvoice int64
	queryRow(t, db.DSN(), "SELECT max(invoice_no) FROM reporting.orders", &lastInvoice)
	if lastInvoice != 100015 {
		t.Errorf("last invoice_no = %d, want 100015", lastInvoice)
	}

	// The login role may read the sample and nothing more.
	err := db.Cluster.Exec(t.Context(), db.Name, "SELECT 1") // superuser: fine
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, db.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DELETE FROM reporting.orders")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		t.Errorf("DELETE as %s: %v, want SQLSTATE 42501", db.Cluster.User(), err)
	}
}

func TestLoadSampleIsAllOrNothing(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	db.Exec(t, "CREATE TABLE public.marker (x int)")
	if err := db.Cluster.LoadSample(t.Context(), db.Name); err != nil {
		t.Fatal(err)
	}
	// A second load fails on CREATE SCHEMA and must leave nothing half done.
	if err := db.Cluster.LoadSample(t.Context(), db.Name); err == nil {
		t.Fatal("loading the sample twice succeeded")
	}
	var n int
	queryRow(t, db.SuperuserDSN(), "SELECT count(*) FROM reporting.order_items", &n)
	if n != 27 {
		t.Errorf("order_items has %d rows after a failed reload, want 27", n)
	}
}

func TestSampleSQLIsEmbedded(t *testing.T) {
	t.Parallel()
	onDisk, err := os.ReadFile("sample.sql")
	if err != nil {
		t.Fatal(err)
	}
	if pgcluster.SampleSQL() != string(onDisk) {
		t.Error("SampleSQL differs from sample.sql")
	}
}

func TestStartFailureNamesTheCauseAndCleansUp(t *testing.T) {
	t.Parallel()
	requireBinaries(t)
	// A port the caller chose and someone else holds: the server cannot
	// start, and only its log says why.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	parent := searchableTempDir(t)

	_, err = pgcluster.Start(t.Context(), pgcluster.Options{Dir: parent, Port: l.Addr().(*net.TCPAddr).Port})
	if err == nil {
		t.Fatal("Start succeeded on a taken port")
	}
	for _, want := range []string{"pgcluster: pg_ctl start", "server log:", "Address already in use"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if left, _ := os.ReadDir(parent); len(left) != 0 {
		t.Errorf("failed Start left %d entries in %s", len(left), parent)
	}
}

func TestStartRefusesLongDir(t *testing.T) {
	t.Parallel()
	requireBinaries(t)
	parent := searchableTempDir(t)
	long := filepath.Join(parent, strings.Repeat("d", 100))
	if err := os.Mkdir(long, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := pgcluster.Start(t.Context(), pgcluster.Options{Dir: long})
	if err == nil || !strings.Contains(err.Error(), "socket path") {
		t.Fatalf("Start under a long directory: %v, want a socket path error", err)
	}
	if left, _ := os.ReadDir(long); len(left) != 0 {
		t.Errorf("failed Start left %d entries in %s", len(left), long)
	}
}

func TestStartRefusesSuperuserAsUser(t *testing.T) {
	t.Parallel()
	_, err := pgcluster.Start(t.Context(), pgcluster.Options{User: pgcluster.Superuser})
	if err == nil {
		t.Fatal("Start accepted the superuser's name as the login role")
	}
}

func TestCustomUser(t *testing.T) {
	t.Parallel()
	c := startCluster(t, pgcluster.Options{User: "Reader One"})
	var user string
	queryRow(t, c.DSN(""), "SELECT current_user", &user)
	if user != "Reader One" {
		t.Errorf("current_user = %q, want %q", user, "Reader One")
	}
}

func TestStopWithEndedContextStillStops(t *testing.T) {
	t.Parallel()
	c := startCluster(t, pgcluster.Options{})
	pid := pgcluster.PostmasterPID(c)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the postmaster to exit", func() bool { return processGone(pid) })
	if _, err := os.Stat(c.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cluster directory after Stop: %v, want it gone", err)
	}
}

func TestWatchdogCleansUpAfterOwnerDies(t *testing.T) {
	t.Parallel()
	requireBinaries(t)
	// Like /tmp: the watchdog runs as the server's OS user and needs to
	// remove the cluster directory from its parent.
	parent := searchableTempDir(t)
	if err := os.Chmod(parent, 0o1777); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+parent)
	cmd.Stderr = tWriter{t}
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("child: %v, want exit status 3", err)
	}
	var dir string
	var pid int
	if _, err := fmt.Sscan(string(out), &dir, &pid); err != nil {
		t.Fatalf("child output %q: %v", out, err)
	}
	if filepath.Dir(dir) != parent {
		t.Fatalf("child's cluster %s is not under %s", dir, parent)
	}
	waitFor(t, 30*time.Second, "the watchdog to stop the orphaned server", func() bool { return processGone(pid) })
	waitFor(t, 30*time.Second, "the watchdog to remove the cluster directory", func() bool {
		_, err := os.Stat(dir)
		return errors.Is(err, os.ErrNotExist)
	})
}

// crashChild starts a cluster, reports its directory and postmaster pid,
// and exits without stopping it, as a test binary that panics would.
func crashChild(parent string) int {
	c, err := pgcluster.Start(context.Background(), pgcluster.Options{Dir: parent})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(w, c.Dir(), pgcluster.PostmasterPID(c))
	if err := w.Flush(); err != nil {
		return 1
	}
	return 3
}

// searchableTempDir returns a fresh directory the server's OS user can
// enter. t.TempDir is 0700 and owned by root when tests run as root.
func searchableTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgct-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// BenchmarkCreateDatabase measures what pgtest.NewDB adds to each test.
func BenchmarkCreateDatabase(b *testing.B) {
	c := pgtest.Start(b)
	ctx := b.Context()
	n := 0
	for b.Loop() {
		n++
		name := fmt.Sprintf("bench_create_%d", n)
		if err := c.CreateDatabase(ctx, name); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := c.DropDatabase(ctx, name); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkLoadSample measures what pgtest.NewSampleDB adds to NewDB.
func BenchmarkLoadSample(b *testing.B) {
	c := pgtest.Start(b)
	ctx := b.Context()
	if err := c.CreateDatabase(ctx, "bench_sample"); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := c.LoadSample(ctx, "bench_sample"); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := c.Exec(ctx, "bench_sample", "DROP SCHEMA reporting CASCADE"); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
