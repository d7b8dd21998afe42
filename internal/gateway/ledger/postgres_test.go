package ledger_test

import (
	"context"
	"maps"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"

	"github.com/mcp-bastion/bastion/internal/gateway/ledger"
	"github.com/mcp-bastion/bastion/internal/pgcluster/pgtest"
)

// TestMain shares one throwaway PostgreSQL cluster among the package's
// tests and stops it at the end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Runner(m)) }

// newDSN creates a fresh database for t and returns the ordinary login
// role's connection string for it. The role gets CREATE on schema public
// (PostgreSQL 15 leaves it to the owner), as a deployment that lets the
// gateway create its table would grant.
func newDSN(t *testing.T) string {
	t.Helper()
	db := pgtest.NewDB(t)
	db.Exec(t, "GRANT CREATE ON SCHEMA public TO "+pgx.Identifier{db.Cluster.User()}.Sanitize())
	return db.DSN()
}

// openPostgres opens the ledger in dsn and closes it when t ends.
func openPostgres(t *testing.T, dsn string) *ledger.Postgres {
	t.Helper()
	s, err := ledger.OpenPostgres(t.Context(), dsn)
	if err != nil {
		t.Fatal("OpenPostgres:", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error("Close:", err)
		}
	})
	return s
}

func TestPostgres(t *testing.T) {
	dsn := perTest(newDSN)
	testStore(t, func(t *testing.T) ledger.Store {
		t.Helper()
		return openPostgres(t, dsn(t))
	})
}

// TestPostgresReplicas: gateways sharing a ledger are separate pools on
// one database; their admissions of one server and reviewers' updates
// through either take turns.
func TestPostgresReplicas(t *testing.T) {
	dsn := newDSN(t)
	hammer(t, []ledger.Store{openPostgres(t, dsn), openPostgres(t, dsn), openPostgres(t, dsn)})
}

// TestPostgresConcurrentOpen: replicas starting together on an empty
// database all open it; one of them creates the table.
func TestPostgresConcurrentOpen(t *testing.T) {
	dsn := newDSN(t)
	const n = 8
	stores := make([]*ledger.Postgres, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = ledger.OpenPostgres(t.Context(), dsn) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("opener %d: %v", i, err)
			continue
		}
		t.Cleanup(func() { _ = stores[i].Close() })
	}
	if !t.Failed() {
		put(t, stores[0], "srv", rec("srv.a", ""))
		wantAll(t, stores[n-1], rec("srv.a", ""))
	}
}

// TestPostgresExistingTable: a role that may read and write the table an
// administrator created, but not create anything, opens the ledger.
func TestPostgresExistingTable(t *testing.T) {
	db := pgtest.NewDB(t)
	role := pgx.Identifier{db.Cluster.User()}.Sanitize()
	db.Exec(t, "GRANT CREATE ON SCHEMA public TO "+role)
	openPostgres(t, db.DSN()).Close()
	db.Exec(t, "REVOKE CREATE ON SCHEMA public FROM "+role)
	s := openPostgres(t, db.DSN())
	put(t, s, "srv", rec("srv.a", ""))
	wantAll(t, s, rec("srv.a", ""))
}

// TestPostgresRevokedTableFromBefore: the revocations' table an earlier
// gateway made, before owners were kept, gains the owner column when the
// ledger opens; the sessions it ended stay ended, owned by no one.
func TestPostgresRevokedTableFromBefore(t *testing.T) {
	db, role := revokedTableFromBefore(t)
	db.Exec(t, `INSERT INTO bastion_revoked (nonce, until) VALUES ('ended-before', now() + interval '1 hour')`)

	s := openPostgres(t, db.DSN())
	if err := s.Revoke(t.Context(), ledger.Revocation{Nonce: "ended-after", Until: time.Now().Add(time.Hour), Owner: "alice"}); err != nil {
		t.Fatal("Revoke:", err)
	}
	got, _, err := s.Revoked(t.Context(), time.Time{})
	if err != nil {
		t.Fatal("Revoked:", err)
	}
	owners := map[string]string{}
	for _, r := range got {
		owners[r.Nonce] = r.Owner
	}
	if want := map[string]string{"ended-before": "", "ended-after": "alice"}; !maps.Equal(owners, want) {
		t.Errorf("revocations by owner = %v, want %v", owners, want)
	}

	// A role that may not alter the table is told what is missing.
	db.Exec(t, "ALTER TABLE bastion_revoked DROP COLUMN owner")
	db.Exec(t, "ALTER TABLE bastion_revoked OWNER TO CURRENT_USER")
	db.Exec(t, "GRANT ALL ON bastion_revoked TO "+role)
	_, err = ledger.OpenPostgres(t.Context(), db.DSN())
	if err == nil || !strings.Contains(err.Error(), "lacks column owner") {
		t.Errorf("OpenPostgres on a table it may not alter: %v, want it to name the missing column", err)
	}
	// Once an administrator has added it, the role opens the table.
	db.Exec(t, `ALTER TABLE bastion_revoked ADD COLUMN owner text COLLATE "C" NOT NULL DEFAULT ''`)
	openPostgres(t, db.DSN())
}

// revokedTableFromBefore is a database whose bastion_revoked is as a
// gateway made it before owners were kept, owned by the test's role
// (returned quoted), which may also create tables.
func revokedTableFromBefore(t *testing.T) (*pgtest.DB, string) {
	t.Helper()
	db := pgtest.NewDB(t)
	role := pgx.Identifier{db.Cluster.User()}.Sanitize()
	db.Exec(t, "GRANT CREATE ON SCHEMA public TO "+role)
	db.Exec(t, `CREATE TABLE bastion_revoked (
		nonce text COLLATE "C" PRIMARY KEY,
		until timestamptz NOT NULL,
		recorded_at timestamptz NOT NULL DEFAULT clock_timestamp())`)
	db.Exec(t, "ALTER TABLE bastion_revoked OWNER TO "+role)
	return db, role
}

// TestPostgresAddColumnWaitsBounded: a column missing from a table of an
// earlier version is added without waiting for ever behind a transaction
// that holds the table (every other replica's reads would queue behind
// the ALTER meanwhile): start-up fails, saying why, and succeeds once the
// table is free.
func TestPostgresAddColumnWaitsBounded(t *testing.T) {
	db, _ := revokedTableFromBefore(t)

	holder, err := pgx.Connect(t.Context(), db.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	tx, err := holder.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), "SELECT count(*) FROM bastion_revoked"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	_, err = ledger.OpenPostgres(ctx, db.DSN())
	if err == nil || !strings.Contains(err.Error(), "other transactions held the table") {
		t.Fatalf("OpenPostgres behind a transaction on the table: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("OpenPostgres waited for its context, not for its lock timeout")
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	openPostgres(t, db.DSN())
}

// TestPostgresSameBytesAsBolt: both stores hold a record as the same
// bytes, so the canonical descriptor in it — a digest's preimage — is not
// rewritten by either.
func TestPostgresSameBytesAsBolt(t *testing.T) {
	r := rec("srv.a", "r")

	path := filepath.Join(t.TempDir(), "ledger.db")
	b, err := ledger.Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	put(t, b, "srv", r)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var fromBolt []byte
	err = raw.View(func(tx *bolt.Tx) error {
		fromBolt = append([]byte(nil), tx.Bucket([]byte("tools")).Get([]byte(r.Qualified))...)
		return nil
	})
	if cerr := raw.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	dsn := newDSN(t)
	put(t, openPostgres(t, dsn), "srv", r)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var fromPG []byte
	var server string
	if err := conn.QueryRow(t.Context(), `SELECT record, server FROM bastion_ledger WHERE qualified = $1`, r.Qualified).Scan(&fromPG, &server); err != nil {
		t.Fatal(err)
	}
	if len(fromBolt) == 0 || string(fromPG) != string(fromBolt) {
		t.Errorf("record bytes differ:\npostgres %s\n    bolt %s", fromPG, fromBolt)
	}
	if !strings.Contains(string(fromPG), `1e+30`) {
		t.Errorf("descriptor rewritten: %s", fromPG)
	}
	if server != "srv" {
		t.Errorf("server column = %q", server)
	}
}

// TestPostgresSecretNotInErrors: a connection string may carry a
// password; no error of OpenPostgres shows it, whether the string does
// not parse or the server cannot be reached.
func TestPostgresSecretNotInErrors(t *testing.T) {
	const secret = "s3cr3t-pw"
	for _, tc := range []struct{ name, dsn string }{
		{"bad URL", "postgres://user:" + secret + "@[::1:5432/db"},
		{"bad URL escape", "postgres://user:" + secret + "%zz@localhost/db"},
		{"unterminated quote", "host=localhost password='" + secret},
		{"bad port", "host=localhost port=x password=" + secret},
		{"unreachable socket", "host=/nonexistent/bastion port=1 user=u dbname=d connect_timeout=2 password=" + secret},
		{"unreachable URL", "postgres://u:" + secret + "@127.0.0.1:1/d?sslmode=disable&connect_timeout=2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			s, err := ledger.OpenPostgres(ctx, tc.dsn)
			if err == nil {
				_ = s.Close()
				t.Fatal("OpenPostgres succeeded")
			}
			if msg := err.Error(); strings.Contains(msg, secret) || !strings.HasPrefix(msg, "ledger: ") {
				t.Errorf("error %q", msg)
			}
			t.Log(err)
		})
	}
}
