package front

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcp-bastion/bastion/internal/gateway"
	"github.com/mcp-bastion/bastion/internal/gateway/ledger"
)

// TestRevokeShare: one principal that ends sessions until its share of
// the table of ended sessions is full cannot end more, while another
// principal still ends its own; ended sessions that have expired free
// their owner's share.
func TestRevokeShare(t *testing.T) {
	s := newSessions(make([]byte, 32), time.Hour, nil)
	mallory, alice := ownerOf("static", "mallory"), ownerOf("static", "alice")
	for i := range maxRevokedPerPrincipal {
		_, ss := s.mint("2025-11-25", mallory, 0)
		if !s.revoke(t.Context(), ss, mallory) {
			t.Fatalf("revocation %d of mallory's share of %d was refused", i, maxRevokedPerPrincipal)
		}
	}
	_, ss := s.mint("2025-11-25", mallory, 0)
	if s.revoke(t.Context(), ss, mallory) {
		t.Error("mallory ended a session past her share")
	}
	id, mine := s.mint("2025-11-25", alice, 0)
	if !s.revoke(t.Context(), mine, alice) {
		t.Fatal("alice could not end her session while mallory's share is full")
	}
	if _, err := s.open(id, alice); err == nil {
		t.Error("alice's ended session is still open")
	}
	// Expired, mallory's revocations no longer count, once the table is
	// swept (at most once a sweepEvery).
	s.mu.Lock()
	for n, r := range s.revoked {
		r.until = time.Now().Add(-time.Second)
		s.revoked[n] = r
	}
	s.swept = time.Now().Add(-sweepEvery)
	s.mu.Unlock()
	if !s.revoke(t.Context(), ss, mallory) {
		t.Error("mallory's expired revocations still fill her share")
	}
}

// TestOneStreamPerMessage: a session's message goes on one of its open
// streams, never on each (the spec's Streamable HTTP transport), while
// every session, and every listen stream, hears it.
func TestOneStreamPerMessage(t *testing.T) {
	s := newSessions(make([]byte, 32), time.Hour, nil)
	a1, a2 := s.stream("session-a", "p"), s.stream("session-a", "p")
	b := s.stream("session-b", "p")
	woken := func(ch *notifier) bool {
		select {
		case <-ch.wake:
			return true
		default:
			return false
		}
	}
	s.broadcast(changedTools)
	if n := btoi(woken(a1)) + btoi(woken(a2)); n != 1 || !woken(b) {
		t.Errorf("a list change reached %d of session a's two streams (want 1), and session b: see above", n)
	}
	s.resourceUpdated([]string{"session-a"}, "file:///x")
	if n := btoi(woken(a1)) + btoi(woken(a2)); n != 1 {
		t.Errorf("a resource update reached %d of session a's two streams, want 1", n)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestRevokeShareKeptInTheStore: a principal's share of the table of
// ended sessions holds after a restart (and on another replica): the
// store keeps who ended each session, and a gateway that reads the store
// counts them; every ended session it reads is ended, whatever the bound.
func TestRevokeShareKeptInTheStore(t *testing.T) {
	store := &memRevocations{}
	mallory := ownerOf("static", "mallory")
	before := newSessions(make([]byte, 32), time.Hour, store)
	for range 3 {
		_, ss := before.mint("2025-11-25", mallory, 0)
		if !before.revoke(t.Context(), ss, mallory) {
			t.Fatal("a revocation within the share was refused")
		}
	}
	after := newSessions(make([]byte, 32), time.Hour, store) // a restart
	if _, err := after.load(t.Context(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	if n := after.revokedBy[hex.EncodeToString(mallory)]; n != 3 {
		t.Errorf("after a restart mallory is counted for %d ended sessions, want 3", n)
	}
	if len(after.revoked) != 3 {
		t.Errorf("after a restart %d ended sessions are known, want 3", len(after.revoked))
	}
}

// TestRevokedElsewhereEndsStreams: a session ended on another replica
// (read from the shared store) ends its streams here too, and frees their
// slots, as a DELETE here does.
func TestRevokedElsewhereEndsStreams(t *testing.T) {
	store := &memRevocations{}
	alice := ownerOf("static", "alice")
	here := newSessions(make([]byte, 32), time.Hour, store)
	there := newSessions(make([]byte, 32), time.Hour, store)
	_, ss := here.mint("2025-11-25", alice, 0)
	ch := here.stream(ss.nonce, "alice")
	other := here.stream("another-session", "alice")
	if ch == nil || other == nil {
		t.Fatal("no stream")
	}
	if !there.revoke(t.Context(), ss, alice) {
		t.Fatal("the revocation was refused")
	}
	if _, err := here.load(t.Context(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	select {
	case _, open := <-ch.wake:
		if open {
			t.Error("the stream was woken, not ended")
		}
	default:
		t.Error("the stream of a session ended on another replica is still open")
	}
	select {
	case <-other.wake:
		t.Error("another session's stream ended too")
	default:
	}
	if n := here.owned["alice"]; n != 1 {
		t.Errorf("alice holds %d stream slots, want 1", n)
	}
}

// memRevocations is a store of revocations in memory.
type memRevocations struct {
	mu sync.Mutex
	rs []ledger.Revocation
}

func (m *memRevocations) Revoke(_ context.Context, r ledger.Revocation) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rs = append(m.rs, r)
	return nil
}

func (m *memRevocations) Revoked(context.Context, time.Time) ([]ledger.Revocation, time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.rs), time.Now(), nil
}

// TestSessionSealReused: the MAC states are reused, and every use starts
// afresh: an id opens however often and from however many goroutines,
// each one it was not minted as (another key, another owner, a changed
// MAC) is refused however many were opened before it.
func TestSessionSealReused(t *testing.T) {
	s := newSessions(bytes.Repeat([]byte{1}, 32), time.Hour, nil)
	other := newSessions(bytes.Repeat([]byte{2}, 32), time.Hour, nil)
	alice, bob := ownerOf("static", "alice"), ownerOf("static", "bob")
	id, minted := s.mint("2025-06-18", alice, 0)
	raw, err := gateway.DecodeSealed(id)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-1] ^= 1
	tampered := base64.RawURLEncoding.EncodeToString(raw)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if got, err := s.open(id, alice); err != nil || got.nonce != minted.nonce {
					t.Errorf("open: %+v, %v", got, err)
					return
				}
				for _, bad := range []struct {
					s     *sessions
					id    string
					owner []byte
				}{{other, id, alice}, {s, id, bob}, {s, tampered, alice}} {
					if _, err := bad.s.open(bad.id, bad.owner); !errors.Is(err, errSessionGone) {
						t.Errorf("an id it was not minted as opened: %v", err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}
