package front

import (
	"testing"
	"time"
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
	// Expired, mallory's revocations no longer count.
	s.mu.Lock()
	for n, r := range s.revoked {
		r.until = time.Now().Add(-time.Second)
		s.revoked[n] = r
	}
	s.mu.Unlock()
	if !s.revoke(t.Context(), ss, mallory) {
		t.Error("mallory's expired revocations still fill her share")
	}
}
