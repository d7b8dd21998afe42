package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"
)

// Customer is a customer record.
type Customer struct {
	ID    string  `json:"customer_id"`
	Name  string  `json:"name"`
	Email string  `json:"email"`
	Tier  string  `json:"tier"`
	Spent float64 `json:"lifetime_spend"`
}

// Refund is an initiated refund.
type Refund struct {
	ID         string
	CustomerID string
	Amount     float64
	At         time.Time
}

// AuditEntry is one privileged or money-moving action.
type AuditEntry struct {
	At     time.Time `json:"at"`
	Action string    `json:"action"`
	Target string    `json:"target"`
}

// Store is the data the tools act on. Implementations must be safe for
// concurrent use. A missing customer is (nil, nil): not finding a customer
// is an answer, not a failure.
type Store interface {
	Customer(ctx context.Context, id string) (*Customer, error)
	Refund(ctx context.Context, customerID string, amount float64, reason string) (*Refund, error)
	ResetKey(ctx context.Context, keyID string) (fingerprint string, err error)
	AuditLog(ctx context.Context) ([]AuditEntry, error)
}

// memStore is the in-memory default: two customers, an audit trail of what
// the tools did, nothing persisted.
type memStore struct {
	now func() time.Time

	mu        sync.Mutex
	customers map[string]Customer
	audit     []AuditEntry
}

var _ Store = (*memStore)(nil)

func newMemStore(now func() time.Time) *memStore {
	return &memStore{
		now: now,
		customers: map[string]Customer{
			"CUST-00001": {ID: "CUST-00001", Name: "Ada Lovelace", Email: "ada@example.com", Tier: "gold", Spent: 1520.5},
			"CUST-00002": {ID: "CUST-00002", Name: "Alan Turing", Email: "alan@example.com", Tier: "standard", Spent: 89.99},
		},
	}
}

func (s *memStore) Customer(_ context.Context, id string) (*Customer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.customers[id]
	if !ok {
		return nil, nil
	}
	return &c, nil
}

func (s *memStore) Refund(_ context.Context, customerID string, amount float64, _ string) (*Refund, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.customers[customerID]; !ok {
		return nil, nil
	}
	r := &Refund{ID: "REF-" + randomHex(6), CustomerID: customerID, Amount: amount, At: s.now().UTC()}
	// The reason is the caller's free text: it is not kept in the audit
	// trail, which records names and identifiers only.
	s.audit = append(s.audit, AuditEntry{At: r.At, Action: "trigger_refund", Target: customerID})
	return r, nil
}

func (s *memStore) ResetKey(_ context.Context, keyID string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.audit = append(s.audit, AuditEntry{At: s.now().UTC(), Action: "admin_reset_key", Target: keyID})
	// Only a fingerprint of the new key ever leaves the store.
	return randomHex(8), nil
}

func (s *memStore) AuditLog(context.Context) ([]AuditEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]AuditEntry(nil), s.audit...), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
