// Package review is the reviewer's side of the admission gate: listing
// what waits, showing a held descriptor with its scanner findings and a
// field-level diff against what was pinned, and approving (by digest) or
// rejecting it. A running gateway serves it on a Unix socket in its state
// directory (decision 15: bbolt holds an exclusive lock on the ledger);
// without one, `bastion admit review` works on the ledger file itself and
// the next start admits what was approved.
package review

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcp-bastion/bastion/internal/gateway/admit"
	"github.com/mcp-bastion/bastion/internal/gateway/audit"
	"github.com/mcp-bastion/bastion/internal/gateway/ledger"
)

// Item is one ledger record as a reviewer sees it: for a changed
// descriptor, the changes from the pinned one to the one waiting.
type Item struct {
	admit.Record
	Changes []admit.Change `json:"changes,omitempty"`
}

// ItemOf is r with its diff.
func ItemOf(r admit.Record) Item {
	it := Item{Record: r}
	if r.Pending != nil && len(r.Descriptor) > 0 && len(r.Pending.Descriptor) > 0 {
		it.Changes = admit.Diff(r.Descriptor, r.Pending.Descriptor)
	}
	return it
}

// Service is review.
type Service interface {
	// List returns every record of the ledger, by reference (a tool's
	// qualified name, prompt:<qualified> for a prompt: admit.Ref).
	List(ctx context.Context) ([]admit.Record, error)
	// Show returns the record of one reference.
	Show(ctx context.Context, name string) (Item, error)
	// Approve pins digest, which must be the one waiting under name.
	Approve(ctx context.Context, name, digest, by string) error
	// Reject refuses what waits under name.
	Reject(ctx context.Context, name, by string) error
	// Forget deletes the record of a name its server no longer lists
	// (admit.CheckForget), making room in the server's share of the
	// ledger.
	Forget(ctx context.Context, name, by string) error
}

// ErrNotFound is a name the ledger does not hold.
var ErrNotFound = ledger.ErrNotFound

// Ledger is review on a ledger store.
type Ledger struct {
	Store ledger.Store
	// Audit receives an approval event for each decision (nil: none).
	Audit *audit.Sink
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Changed, when set, is told the server whose record changed, so that
	// a running gateway admits what was approved without a restart. The
	// decision is answered once it returns: a gateway that judges again
	// before returning has the decision in effect by then.
	Changed func(server string)
}

// List implements Service.
func (l *Ledger) List(ctx context.Context) ([]admit.Record, error) {
	recs, err := l.Store.All(ctx)
	slices.SortFunc(recs, func(a, b admit.Record) int { return strings.Compare(a.Ref(), b.Ref()) })
	return recs, err
}

// Show implements Service.
func (l *Ledger) Show(ctx context.Context, name string) (Item, error) {
	recs, err := l.Store.All(ctx)
	if err != nil {
		return Item{}, err
	}
	key := admit.KeyOfRef(name)
	for _, r := range recs {
		if r.Key() == key {
			return ItemOf(r), nil
		}
	}
	return Item{}, ErrNotFound
}

// Approve implements Service.
func (l *Ledger) Approve(ctx context.Context, name, digest, by string) error {
	return l.decide(ctx, name, by, func(r admit.Record, now time.Time) (admit.Record, error) {
		return admit.Approve(r, digest, by, now)
	})
}

// Reject implements Service.
func (l *Ledger) Reject(ctx context.Context, name, by string) error {
	return l.decide(ctx, name, by, func(r admit.Record, now time.Time) (admit.Record, error) {
		return admit.Reject(r, now)
	})
}

// Forget implements Service. The record is read again in the
// transaction that deletes it, so a name its server listed again
// meanwhile is kept.
func (l *Ledger) Forget(ctx context.Context, name, by string) error {
	if by == "" {
		return errors.New("review: a decision needs the reviewer's name")
	}
	it, err := l.Show(ctx, name)
	if err != nil {
		return fmt.Errorf("review: %s: %w", name, err)
	}
	key := it.Key()
	var gone admit.Record
	err = l.Store.Transact(ctx, it.Server, func(recs map[string]admit.Record) (ledger.Changes, error) {
		r, ok := recs[key]
		if !ok {
			return ledger.Changes{}, ErrNotFound
		}
		if err := admit.CheckForget(r); err != nil {
			return ledger.Changes{}, err
		}
		gone = r
		return ledger.Changes{Delete: []string{key}}, nil
	})
	if err != nil {
		return fmt.Errorf("review: %s: %w", name, err)
	}
	l.decided(by, gone, statusForgotten)
	return nil
}

// statusForgotten is the audited status of a record a reviewer deleted.
const statusForgotten = "forgotten"

func (l *Ledger) decide(ctx context.Context, name, by string, fn func(admit.Record, time.Time) (admit.Record, error)) error {
	if by == "" {
		return errors.New("review: a decision needs the reviewer's name")
	}
	now := time.Now
	if l.Now != nil {
		now = l.Now
	}
	var after admit.Record
	err := l.Store.Update(ctx, admit.KeyOfRef(name), func(r *admit.Record) error {
		next, err := fn(*r, now().UTC())
		if err != nil {
			return err
		}
		*r, after = next, next
		return nil
	})
	if err != nil {
		return fmt.Errorf("review: %s: %w", name, err)
	}
	l.decided(by, after, string(after.Status))
	return nil
}

// decided audits a reviewer's decision on r, which left it in status,
// and tells the running gateway.
func (l *Ledger) decided(by string, r admit.Record, status string) {
	e := audit.Event{Kind: audit.KindApproval, Server: r.Server, Subject: by,
		Digest: digestOf(r), Status: status, Reason: r.Reason, Mode: "review"}
	audit.Name(&e, string(r.Kind), r.Qualified, r.Name)
	l.Audit.Record(e)
	if l.Changed != nil {
		l.Changed(r.Server)
	}
}

// digestOf is the digest a decision was about: the one pinned by an
// approval, the one refused by a rejection.
func digestOf(r admit.Record) string {
	if r.Status == admit.Rejected && r.Pending != nil {
		return r.Pending.Digest
	}
	return r.Digest
}
