// Package pgtest gives tests a real PostgreSQL database: one throwaway
// [pgcluster.Cluster] per test binary, started on first use, and a fresh
// database per test, so that tests are isolated from each other yet pay
// the cluster's start-up (about a second) once; a fresh database costs tens
// of milliseconds.
//
// A package that uses it must route TestMain through it, so that the
// cluster is stopped when the tests end:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// or, with goleak:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Runner(m)) }
//
// When the server binaries are missing, tests are skipped with the reason,
// except under CI (CI=true), where they fail: a test command that forgot to
// install PostgreSQL must not pass by skipping every SQL test.
//
// Databases are isolated; roles are not, since PostgreSQL keeps them per
// cluster. A test that creates roles must name them uniquely.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-bastion/bastion/internal/pgcluster"
)

// startTimeout bounds the shared cluster's start-up; it is independent of
// any one test, since the cluster outlives the test that starts it.
const startTimeout = 2 * time.Minute

// shared is the test binary's one cluster. It is the package's only state,
// and the reason the package exists.
var shared struct {
	mu      sync.Mutex
	main    bool // Run is in charge of stopping the cluster
	started bool
	cluster *pgcluster.Cluster
	err     error
	dbs     int // databases created, for unique names
}

// Main runs the tests, stops the shared cluster and exits. Call it from
// TestMain.
func Main(m *testing.M) { os.Exit(Runner(m).Run()) }

// Runner wraps m so that Run also stops the shared cluster after the
// tests. It fits goleak.VerifyTestMain.
func Runner(m *testing.M) *TestRunner { return &TestRunner{m: m} }

// TestRunner runs a package's tests and then stops the shared cluster.
type TestRunner struct{ m *testing.M }

// Run runs the tests, then stops the shared cluster if one was started. It
// returns the exit code, which is non-zero if stopping failed.
func (r *TestRunner) Run() int {
	shared.mu.Lock()
	shared.main = true
	shared.mu.Unlock()

	code := r.m.Run()

	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.cluster == nil {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := shared.cluster.Stop(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "pgtest: stopping the shared cluster:", err)
		if code == 0 {
			code = 1
		}
	}
	shared.cluster = nil
	return code
}

// Start returns the test binary's shared cluster, starting it on first
// use. It skips the test when the server binaries are missing, unless CI
// is set, and fails it when the cluster cannot start. Tests should prefer
// [NewDB]; Start is for tests of the cluster itself.
func Start(t testing.TB) *pgcluster.Cluster {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.main {
		t.Fatal("pgtest: TestMain must call pgtest.Main(m) or run pgtest.Runner(m), so that the shared cluster is stopped")
	}
	if !shared.started {
		// One attempt per test binary: a second start-up would fail the
		// same way and cost every test another second or more.
		shared.started = true
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		shared.cluster, shared.err = pgcluster.Start(ctx, pgcluster.Options{})
		cancel()
	}
	if err := shared.err; err != nil {
		if errors.Is(err, pgcluster.ErrNotFound) {
			msg := "PostgreSQL server binaries not found; the test command must install postgresql (scripts/ensure-postgres.sh): " + err.Error()
			if inCI() {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
		t.Fatal("pgtest: starting the shared cluster:", err)
	}
	return shared.cluster
}

// inCI reports whether the tests run under CI, where a missing server is a
// failure rather than a reason to skip.
func inCI() bool {
	ci, err := strconv.ParseBool(os.Getenv("CI"))
	return err == nil && ci
}

// DB is a database of the shared cluster that belongs to one test.
type DB struct {
	// Cluster is the shared cluster; do not stop it.
	Cluster *pgcluster.Cluster
	// Name is the database's name, unique within the test binary.
	Name string
}

// NewDB creates a fresh, empty database for t in the shared cluster and
// drops it when t ends (after t's own clean-ups, so connections opened by
// the test should be closed by then; any left are ended).
func NewDB(t testing.TB) *DB {
	t.Helper()
	c := Start(t)
	shared.mu.Lock()
	shared.dbs++
	name := dbName(t.Name(), shared.dbs)
	shared.mu.Unlock()

	if err := c.CreateDatabase(t.Context(), name); err != nil {
		t.Fatal("pgtest:", err)
	}
	// Registered after the database exists, so it runs after any clean-up
	// the test registers later (clean-ups run last in, first out).
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.DropDatabase(ctx, name); err != nil {
			t.Error("pgtest:", err)
		}
	})
	return &DB{Cluster: c, Name: name}
}

// NewSampleDB is [NewDB] with the sample dataset loaded (schema
// reporting; see [pgcluster.Cluster.LoadSample]).
func NewSampleDB(t testing.TB) *DB {
	t.Helper()
	db := NewDB(t)
	if err := db.Cluster.LoadSample(t.Context(), db.Name); err != nil {
		t.Fatal("pgtest:", err)
	}
	return db
}

// DSN returns the connection string of the ordinary login role for this
// database.
func (d *DB) DSN() string { return d.Cluster.DSN(d.Name) }

// SuperuserDSN returns the superuser's connection string for this
// database, for fixture set-up.
func (d *DB) SuperuserDSN() string { return d.Cluster.SuperuserDSN(d.Name) }

// Exec runs fixture SQL in this database as the superuser and fails t on
// error. See [pgcluster.Cluster.Exec].
func (d *DB) Exec(t testing.TB, sql string) {
	t.Helper()
	if err := d.Cluster.Exec(t.Context(), d.Name, sql); err != nil {
		t.Fatal("pgtest:", err)
	}
}

var notIdent = regexp.MustCompile(`[^a-z0-9_]+`)

// dbName derives a readable database name from a test name, so that a
// database left behind by a crash can be traced to its test. PostgreSQL
// truncates identifiers at 63 bytes, hence the cut before the number that
// makes the name unique.
func dbName(testName string, n int) string {
	base := notIdent.ReplaceAllString(strings.ToLower(testName), "_")
	base = strings.Trim(base, "_")
	if len(base) > 40 {
		base = base[:40]
	}
	return fmt.Sprintf("t_%s_%d", base, n)
}
