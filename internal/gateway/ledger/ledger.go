// Package ledger keeps the admission gate's pins: one [admit.Record] per
// qualified tool name, in a bbolt file in the state directory. Every
// change is one transaction, so a crash in the middle of an admission
// leaves the previous state intact, and changes of one server and a
// reviewer's approval never interleave (bbolt serializes writers).
//
// bbolt holds an exclusive lock on its file: while a gateway runs, review
// goes through it (decision 15), not through a second opener.
package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/mcp-bastion/bastion/internal/gateway/admit"
)

// Store is a ledger.
type Store interface {
	// Transact runs fn on every record of server, by key (admit.Key), and
	// writes the records it returns and deletes the keys it names, in one
	// transaction: all of it or, when fn or the write fails, none.
	Transact(ctx context.Context, server string, fn func(map[string]admit.Record) (Changes, error)) error
	// Update applies fn to the record of one key, in one
	// transaction. ErrNotFound when there is none.
	Update(ctx context.Context, qualified string, fn func(*admit.Record) error) error
	// All returns every record, ordered by qualified name.
	All(ctx context.Context) ([]admit.Record, error)
	// Revocations keeps the legacy sessions a DELETE ended beside the
	// records, so that they stay ended wherever the ledger is read.
	Revocations
	Close() error
}

// Changes are what a Transact writes: the records to put, and the keys
// of the server's records to delete.
type Changes struct {
	Put    []admit.Record
	Delete []string
}

// ErrNotFound is an Update of a name the ledger does not hold.
var ErrNotFound = errors.New("ledger: no such tool")

// ErrLocked is an Open of a file another process holds: a gateway runs.
var ErrLocked = errors.New("ledger: the file is in use by another process (a running gateway?)")

var toolsBucket = []byte("tools")

// Bolt is a Store in a bbolt file.
type Bolt struct {
	db *bolt.DB
}

// Open opens (creating when needed, with mode 0600) the ledger file.
// wait bounds how long a lock held by another process is waited for.
func Open(path string, wait time.Duration) (*Bolt, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	// The initial map is address space, not memory: reserving room for a
	// large ledger up front spares the remaps a first admission of
	// thousands of tools would otherwise make inside its one commit.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: wait, InitialMmapSize: 64 << 20, FreelistType: bolt.FreelistMapType})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, ErrLocked
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: open: %w", err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(toolsBucket)
		return err
	}); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("ledger: %w", err)
	}
	return &Bolt{db: db}, nil
}

// Transact implements Store. Keys are <server>.<tool> or
// <server>.<kind>:<name> (admit.Key) and server names hold no dot, so a
// server's records are the keys with the prefix "<server>.".
func (b *Bolt) Transact(ctx context.Context, server string, fn func(map[string]admit.Record) (Changes, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(toolsBucket)
		prefix := []byte(server + ".")
		recs := map[string]admit.Record{}
		cur := bk.Cursor()
		for k, v := cur.Seek(prefix); k != nil && strings.HasPrefix(string(k), string(prefix)); k, v = cur.Next() {
			var r admit.Record
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("ledger: record %q: %w", k, err)
			}
			recs[string(k)] = r
		}
		out, err := fn(recs)
		if err != nil {
			return err
		}
		for _, r := range out.Put {
			if !strings.HasPrefix(r.Key(), string(prefix)) {
				return fmt.Errorf("ledger: record %q is not of server %q", r.Key(), server)
			}
			if err := put(bk, r); err != nil {
				return err
			}
		}
		for _, k := range out.Delete {
			if !strings.HasPrefix(k, string(prefix)) {
				return fmt.Errorf("ledger: record %q is not of server %q", k, server)
			}
			if err := bk.Delete([]byte(k)); err != nil {
				return err
			}
		}
		return nil
	})
}

// Update implements Store.
func (b *Bolt) Update(ctx context.Context, qualified string, fn func(*admit.Record) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(toolsBucket)
		v := bk.Get([]byte(qualified))
		if v == nil {
			return ErrNotFound
		}
		next, err := apply(qualified, v, fn)
		if err != nil {
			return err
		}
		return bk.Put([]byte(qualified), next)
	})
}

// apply is the heart of both stores' Update: the stored record decoded,
// changed by fn, refused if fn renamed it, and encoded again.
func apply(qualified string, stored []byte, fn func(*admit.Record) error) ([]byte, error) {
	var r admit.Record
	if err := json.Unmarshal(stored, &r); err != nil {
		return nil, fmt.Errorf("ledger: record %q: %w", qualified, err)
	}
	if err := fn(&r); err != nil {
		return nil, err
	}
	if r.Key() != qualified {
		return nil, fmt.Errorf("ledger: an update may not rename %q", qualified)
	}
	v, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("ledger: record %q: %w", qualified, err)
	}
	return v, nil
}

// All implements Store.
func (b *Bolt) All(ctx context.Context) ([]admit.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []admit.Record
	err := b.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(toolsBucket).ForEach(func(k, v []byte) error {
			var r admit.Record
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("ledger: record %q: %w", k, err)
			}
			out = append(out, r)
			return nil
		})
	})
	return out, err
}

// Close implements Store.
func (b *Bolt) Close() error { return b.db.Close() }

func put(bk *bolt.Bucket, r admit.Record) error {
	v, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("ledger: record %q: %w", r.Key(), err)
	}
	return bk.Put([]byte(r.Key()), v)
}
