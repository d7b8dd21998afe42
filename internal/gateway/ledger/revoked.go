package ledger

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	bolt "go.etcd.io/bbolt"
)

// Revocation is a legacy session id a DELETE ended (GATEWAY.md decision
// 10): its nonce, and when the id would have expired anyway, after which
// the revocation is forgotten.
type Revocation struct {
	Nonce string
	Until time.Time
	// Owner is who ended it (the front's digest of its principal), so
	// that each principal's share of the table holds after a restart
	// and on every replica.
	Owner string
}

// Revocations keeps the ended sessions beside the ledger, so that an id
// stays ended after a restart and on every replica that shares the
// ledger, as the README's error table says (a deleted session id is 404).
type Revocations interface {
	// Revoke records r.
	Revoke(ctx context.Context, r Revocation) error
	// Revoked returns the revocations in force that were recorded at or
	// after since (a time Revoked returned; the zero time for all), and
	// the time to pass next. Expired ones are forgotten on the way.
	Revoked(ctx context.Context, since time.Time) (rs []Revocation, next time.Time, err error)
}

var revokedBucket = []byte("revoked")

var (
	_ Revocations = (*Bolt)(nil)
	_ Revocations = (*Postgres)(nil)
)

// Revoke implements Revocations: the nonce's key holds the expiry and
// the time it was recorded, each as Unix nanoseconds, then the owner.
func (b *Bolt) Revoke(ctx context.Context, r Revocation) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	v := binary.BigEndian.AppendUint64(nil, uint64(r.Until.UnixNano()))
	v = binary.BigEndian.AppendUint64(v, uint64(time.Now().UnixNano()))
	v = append(v, r.Owner...)
	return b.db.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(revokedBucket)
		if err != nil {
			return fmt.Errorf("ledger: revoke: %w", err)
		}
		if bk.Get([]byte(r.Nonce)) != nil {
			return nil // ended already: the first record stands, as in PostgreSQL
		}
		return bk.Put([]byte(r.Nonce), v)
	})
}

// Revoked implements Revocations. A bbolt file has one gateway, which
// reads it at start; a scan of the bucket is then the whole cost.
func (b *Bolt) Revoked(ctx context.Context, since time.Time) ([]Revocation, time.Time, error) {
	if err := ctx.Err(); err != nil {
		return nil, since, err
	}
	now := time.Now()
	var out []Revocation
	err := b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(revokedBucket)
		if bk == nil {
			return nil
		}
		var expired [][]byte
		err := bk.ForEach(func(k, v []byte) error {
			if len(v) < 16 {
				expired = append(expired, k) // not one of ours: forgotten
				return nil
			}
			until := time.Unix(0, int64(binary.BigEndian.Uint64(v)))
			at := time.Unix(0, int64(binary.BigEndian.Uint64(v[8:])))
			switch {
			case !until.After(now):
				expired = append(expired, k)
			case !at.Before(since):
				out = append(out, Revocation{Nonce: string(k), Until: until, Owner: string(v[16:])})
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range expired {
			if err := bk.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, since, fmt.Errorf("ledger: revoked: %w", err)
	}
	return out, now, nil
}

// revokedSchema is the revocations' table: recorded_at is the database's
// clock at the insert, which every replica reads by.
var revokedSchema = `CREATE TABLE IF NOT EXISTS bastion_revoked (
		nonce       text COLLATE "C" PRIMARY KEY,
		until       timestamptz NOT NULL,
		owner       text COLLATE "C" NOT NULL DEFAULT '',
		recorded_at timestamptz NOT NULL DEFAULT clock_timestamp()
	)`

// revokedAdded are the revocations' columns of later versions than the
// table's first: a table made before owners were kept gains the column,
// its rows owned by no one (as Bolt's records of that time load).
var revokedAdded = []addedColumn{
	{"owner", `ALTER TABLE bastion_revoked ADD COLUMN IF NOT EXISTS owner text COLLATE "C" NOT NULL DEFAULT ''`},
}

// revokedSlack is how far back a replica reads past the time of its last
// read: an insert's recorded_at is taken before its commit, so a row can
// become visible after a read that began later than it was recorded.
const revokedSlack = 10 * time.Second

// Revoke implements Revocations.
func (p *Postgres) Revoke(ctx context.Context, r Revocation) error {
	if _, err := p.pool.Exec(ctx, `INSERT INTO bastion_revoked (nonce, until, owner) VALUES ($1, $2, $3) ON CONFLICT (nonce) DO NOTHING`, r.Nonce, r.Until, r.Owner); err != nil {
		return fmt.Errorf("ledger: revoke: %w", err)
	}
	return nil
}

// Revoked implements Revocations, on the database's clock.
func (p *Postgres) Revoked(ctx context.Context, since time.Time) ([]Revocation, time.Time, error) {
	var out []Revocation
	next := since
	err := p.inTx(ctx, "revoked", func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&next); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM bastion_revoked WHERE until <= clock_timestamp()`); err != nil {
			return err
		}
		from := since
		if !since.IsZero() {
			from = since.Add(-revokedSlack)
		}
		rows, err := tx.Query(ctx, `SELECT nonce, until, owner FROM bastion_revoked WHERE recorded_at >= $1`, from)
		if err != nil {
			return err
		}
		var r Revocation
		_, err = pgx.ForEachRow(rows, []any{&r.Nonce, &r.Until, &r.Owner}, func() error {
			out = append(out, r)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, since, fmt.Errorf("ledger: revoked: %w", err)
	}
	return out, next, nil
}
