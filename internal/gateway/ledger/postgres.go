package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcp-bastion/bastion/internal/gateway/admit"
)

// Advisory lock classes: the two-key form of pg_advisory_xact_lock has a
// key space of its own, apart from the one-key form, and the class keeps
// the ledger's locks apart from those of any other application sharing the
// database. The values are arbitrary ("ledg", "ledh" in ASCII) but fixed:
// every replica must compute the same keys.
const (
	serverLockClass int32 = 0x6c656467 // objid: hashtext(server)
	schemaLockClass int32 = 0x6c656468 // objid: 0
)

// The schema. Choices:
//
//   - record is bytea, the exact bytes that Bolt stores. jsonb would
//     rewrite them (it reorders members and reformats numbers), and the
//     canonical descriptor inside a record is the preimage of its pinned
//     digest, so it must come back byte for byte. The json type keeps the
//     text, but converts it to the database's encoding, which fails on a
//     descriptor a non-UTF-8 database cannot represent; bytea depends on
//     nothing. Read it in psql with convert_from(record, 'UTF8')::jsonb.
//   - qualified is collated "C" so that its primary-key index orders by
//     bytes, as bbolt does: All returns the same order from both stores,
//     whatever the database's default collation.
//   - server is the server a Transact wrote the row for, indexed, so a
//     Transact reads its server's rows without a prefix scan; the check
//     holds every writer, not only this code, to names of that server.
//   - updated_at is when the row was last written, on the database's
//     clock, for operators; the record carries the gateway's own time.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS bastion_ledger (
		qualified  text COLLATE "C" PRIMARY KEY,
		server     text NOT NULL,
		record     bytea NOT NULL,
		updated_at timestamptz NOT NULL,
		CHECK (starts_with(qualified, server || '.'))
	)`,
	`CREATE INDEX IF NOT EXISTS bastion_ledger_server ON bastion_ledger (server)`,
}

const upsertSQL = `INSERT INTO bastion_ledger (qualified, server, record, updated_at)
	VALUES ($1, $2, $3, now())
	ON CONFLICT (qualified) DO UPDATE SET record = excluded.record, updated_at = excluded.updated_at`

// Postgres is a Store in a PostgreSQL table, for gateway replicas that
// share one ledger. Unlike [Bolt] it takes no exclusive lock: any number
// of gateways and review tools may open it at once, and its transactions
// keep them from interleaving (see [Postgres.Transact]).
type Postgres struct {
	pool *pgxpool.Pool
}

var _ Store = (*Postgres)(nil)

// OpenPostgres connects to the database dsn names (a keyword/value string
// or a postgres:// URL, as libpq takes; PG* environment variables and the
// password file apply, so the password need not be in dsn) and creates the
// ledger's table when it is missing. Any number of replicas may open the
// same database at once. The table is created in the first schema of the
// search_path; set it in dsn (options='-c search_path=...') to choose.
// Creating it takes the CREATE privilege on that schema; once it exists,
// SELECT, INSERT, UPDATE and DELETE on it are enough (a table made by an
// earlier version that lacks a later column also needs its owner, once,
// to add it). Pool settings
// (pool_max_conns and the like) may be given in dsn too.
//
// No error carries dsn: it may hold a password.
func OpenPostgres(ctx context.Context, dsn string) (*Postgres, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// Not wrapped: pgx's parse error quotes the string, and redacts
		// passwords only on a best-effort basis, and url.Parse's errors
		// inside it quote the URL whole.
		return nil, errors.New("ledger: the PostgreSQL connection string does not parse (not shown: it may hold a password)")
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("ledger: postgres: %w", err)
	}
	p := &Postgres{pool: pool}
	if err := p.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return p, nil
}

// migrate creates the schema in one transaction. CREATE ... IF NOT EXISTS
// alone is not safe against a concurrent creator (the loser fails on a
// unique violation in the catalog), so openers take turns on an advisory
// lock, and a later one finds everything in place.
//
// An existing table is left alone without running CREATE at all: even with
// IF NOT EXISTS, PostgreSQL checks the CREATE privilege on the schema
// first, and a gateway whose role may only read and write the table an
// administrator created must still open it.
func (p *Postgres) migrate(ctx context.Context) error {
	return p.inTx(ctx, "create schema", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, 0)`, schemaLockClass); err != nil {
			return fmt.Errorf("ledger: create schema: %w", err)
		}
		// A fresh snapshot, taken after the lock: a table another opener
		// created while this one waited is seen. Each table is created
		// only when it is missing (the revocations' table came later).
		for _, t := range []struct {
			name  string
			stmts []string
			added []addedColumn
		}{{"bastion_ledger", schema, nil}, {"bastion_revoked", []string{revokedSchema}, revokedAdded}} {
			var exists bool
			if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, t.name).Scan(&exists); err != nil {
				return fmt.Errorf("ledger: create schema: %w", err)
			}
			if exists {
				if err := addColumns(ctx, tx, t.name, t.added); err != nil {
					return err
				}
				continue
			}
			for _, stmt := range t.stmts {
				if _, err := tx.Exec(ctx, stmt); err != nil {
					return fmt.Errorf("ledger: create schema: %w", err)
				}
			}
		}
		return nil
	})
}

// addColumnLockTimeout bounds how long adding a missing column waits for
// the transactions already holding its table.
const addColumnLockTimeout = 3 * time.Second

// addedColumn is a column a table gained after its first version: a
// table an earlier gateway created lacks it until stmt adds it.
type addedColumn struct {
	name, stmt string
}

// addColumns adds to the existing table each of added it lacks. Like the
// tables, a column is added only when missing, so a role that may not
// alter the table opens it once an administrator has.
func addColumns(ctx context.Context, tx pgx.Tx, table string, added []addedColumn) error {
	for _, c := range added {
		var has bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute
			WHERE attrelid = to_regclass($1) AND attname = $2 AND attnum > 0 AND NOT attisdropped)`, table, c.name).Scan(&has); err != nil {
			return fmt.Errorf("ledger: create schema: %w", err)
		}
		if has {
			continue
		}
		// ALTER TABLE waits for every open transaction on the table, and
		// every later statement on it queues behind the ALTER: other
		// replicas would stop reading revocations while this one waited.
		// It waits a bounded time instead, and start-up fails saying so.
		if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", addColumnLockTimeout.Milliseconds())); err != nil {
			return fmt.Errorf("ledger: create schema: %w", err)
		}
		if _, err := tx.Exec(ctx, c.stmt); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "55P03" /* lock_not_available */ {
				return fmt.Errorf("ledger: create schema: table %s, made by an earlier version, lacks column %s, and other transactions held the table for %s; start again when they are done, or have an administrator run: %s",
					table, c.name, addColumnLockTimeout, c.stmt)
			}
			return fmt.Errorf("ledger: create schema: table %s, made by an earlier version, lacks column %s (%s): %w", table, c.name, c.stmt, err)
		}
	}
	return nil
}

// Transact implements Store. It runs at READ COMMITTED under two locks,
// so fn runs exactly once and never sees a state another writer is
// changing:
//
//   - an advisory transaction lock on the server's name, so that two
//     replicas admitting the same server take turns — a row lock alone
//     would not cover the rows the first one inserts;
//   - FOR UPDATE on the server's rows, so that an [Postgres.Update] (which
//     locks its one row) waits for this transaction or this one for it;
//     a statement that waited reads the row as the other one committed it.
//
// A later Transact of the server waits for the lock and then reads what
// the earlier one committed, since each statement at READ COMMITTED takes
// a fresh snapshot. Server names hold no dot; the rows read are those
// written by Transacts of server.
func (p *Postgres) Transact(ctx context.Context, server string, fn func(map[string]admit.Record) (Changes, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	prefix := server + "."
	return p.inTx(ctx, "transact "+server, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, serverLockClass, server); err != nil {
			return fmt.Errorf("ledger: lock server %q: %w", server, err)
		}
		rows, err := tx.Query(ctx, `SELECT qualified, record FROM bastion_ledger WHERE server = $1 FOR UPDATE`, server)
		if err != nil {
			return fmt.Errorf("ledger: read server %q: %w", server, err)
		}
		recs := map[string]admit.Record{}
		var q string
		var v []byte
		_, err = pgx.ForEachRow(rows, []any{&q, &v}, func() error {
			var r admit.Record
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("record %q: %w", q, err)
			}
			recs[q] = r
			return nil
		})
		if err != nil {
			return fmt.Errorf("ledger: read server %q: %w", server, err)
		}
		out, err := fn(recs)
		if err != nil {
			return err
		}
		// Everything is checked and encoded before the first write: a
		// refusal then costs no round trip, though the rollback alone
		// would also undo what was written.
		b := &pgx.Batch{}
		for _, r := range out.Put {
			if !strings.HasPrefix(r.Key(), prefix) {
				return fmt.Errorf("ledger: record %q is not of server %q", r.Key(), server)
			}
			v, err := json.Marshal(r)
			if err != nil {
				return fmt.Errorf("ledger: record %q: %w", r.Key(), err)
			}
			b.Queue(upsertSQL, r.Key(), server, v)
		}
		for _, k := range out.Delete {
			if !strings.HasPrefix(k, prefix) {
				return fmt.Errorf("ledger: record %q is not of server %q", k, server)
			}
		}
		if len(out.Delete) > 0 {
			b.Queue(`DELETE FROM bastion_ledger WHERE server = $1 AND qualified = ANY($2)`, server, out.Delete)
		}
		if b.Len() == 0 {
			return nil
		}
		// One round trip for a server's changes, however many tools it
		// has: the locks are held until the commit.
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("ledger: write server %q: %w", server, err)
		}
		return nil
	})
}

// Update implements Store. FOR UPDATE holds the row until the commit, so
// concurrent Updates of one name, and a Transact of its server, take turns
// rather than lose a change.
func (p *Postgres) Update(ctx context.Context, qualified string, fn func(*admit.Record) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return p.inTx(ctx, "update "+qualified, func(tx pgx.Tx) error {
		var v []byte
		err := tx.QueryRow(ctx, `SELECT record FROM bastion_ledger WHERE qualified = $1 FOR UPDATE`, qualified).Scan(&v)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("ledger: read %q: %w", qualified, err)
		}
		if v, err = apply(qualified, v, fn); err != nil {
			return err
		}
		// The row's server stays what its Transact wrote: a rename is
		// refused above, so the name still has that prefix.
		if _, err := tx.Exec(ctx, `UPDATE bastion_ledger SET record = $2, updated_at = now() WHERE qualified = $1`, qualified, v); err != nil {
			return fmt.Errorf("ledger: write %q: %w", qualified, err)
		}
		return nil
	})
}

// All implements Store. One statement reads one snapshot, so the records
// are consistent with each other even while other replicas write.
func (p *Postgres) All(ctx context.Context) ([]admit.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rows, err := p.pool.Query(ctx, `SELECT qualified, record FROM bastion_ledger ORDER BY qualified`)
	if err != nil {
		return nil, fmt.Errorf("ledger: read all: %w", err)
	}
	var out []admit.Record
	var q string
	var v []byte
	_, err = pgx.ForEachRow(rows, []any{&q, &v}, func() error {
		var r admit.Record
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("record %q: %w", q, err)
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: read all: %w", err)
	}
	return out, nil
}

// Close implements Store: it closes the pool, waiting for connections in
// use to be returned.
func (p *Postgres) Close() error {
	p.pool.Close()
	return nil
}

// inTx runs fn in a transaction and commits when it returns nil. fn's
// error is returned as it is, so that callers can match it (ErrNotFound,
// or the error of a Transact's or Update's own fn).
func (p *Postgres) inTx(ctx context.Context, what string, fn func(pgx.Tx) error) error {
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("ledger: %s: begin: %w", what, err)
	}
	if err := fn(tx); err != nil {
		// The error that matters is fn's; a failed rollback closes the
		// connection, which ends the transaction on the server too.
		_ = tx.Rollback(ctx)
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("ledger: %s: commit: %w", what, err)
	}
	return nil
}
