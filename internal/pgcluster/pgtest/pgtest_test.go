package pgtest_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/mcp-bastion/bastion/internal/pgcluster/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Runner(m)) }

func TestNewDBIsolatesTests(t *testing.T) {
	t.Parallel()
	a, b := pgtest.NewDB(t), pgtest.NewDB(t)
	if a.Cluster != b.Cluster {
		t.Error("two databases in one test binary live in different clusters")
	}
	if a.Name == b.Name {
		t.Fatalf("two databases share the name %q", a.Name)
	}
	a.Exec(t, "CREATE TABLE only_in_a (x int)")
	for _, c := range []struct {
		db   *pgtest.DB
		want bool
	}{{a, true}, {b, false}} {
		conn, err := pgx.Connect(t.Context(), c.db.DSN())
		if err != nil {
			t.Fatal(err)
		}
		var got bool
		err = conn.QueryRow(t.Context(), "SELECT to_regclass('public.only_in_a') IS NOT NULL").Scan(&got)
		conn.Close(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("table visible in %s: %v, want %v", c.db.Name, got, c.want)
		}
	}
}

func TestNewDBIsDroppedAtCleanup(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("user", func(t *testing.T) { name = pgtest.NewDB(t).Name })
	c := pgtest.Start(t)
	conn, err := pgx.Connect(t.Context(), c.SuperuserDSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var exists bool
	if err := conn.QueryRow(t.Context(), "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Errorf("database %s still exists after its test ended", name)
	}
}

func TestNewSampleDB(t *testing.T) {
	t.Parallel()
	db := pgtest.NewSampleDB(t)
	conn, err := pgx.Connect(t.Context(), db.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM reporting.customers").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 8 {
		t.Errorf("reporting.customers has %d rows, want 8", n)
	}
}

// TestMissingBinariesSkipOutsideCIFailInCI runs a database test in a child
// process whose PG_BIN names nothing: outside CI the test skips with the
// reason, under CI it fails loudly.
func TestMissingBinariesSkipOutsideCIFailInCI(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		ci       string
		wantFail bool
		want     string
	}{
		{"", false, "--- SKIP: TestNewSampleDB"},
		{"false", false, "--- SKIP: TestNewSampleDB"},
		{"true", true, "--- FAIL: TestNewSampleDB"},
	} {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestNewSampleDB$", "-test.v")
		cmd.Env = append(os.Environ(), "PG_BIN="+t.TempDir(), "CI="+c.ci)
		out, err := cmd.CombinedOutput()
		if failed := err != nil; failed != c.wantFail {
			t.Errorf("CI=%q: child failed: %v, want %v\n%s", c.ci, failed, c.wantFail, out)
		}
		for _, want := range []string{c.want, "PostgreSQL server binaries not found; the test command must install postgresql"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("CI=%q: output does not contain %q:\n%s", c.ci, want, out)
			}
		}
	}
}
