package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/gateway/admit"
	"github.com/mcp-bastion/bastion/internal/gateway/ledger"
)

var errBoom = errors.New("boom")

// rec is a record of qualified name q ("<server>.<tool>"). Its descriptor
// holds what a JSON store could rewrite (member order, an exponent, a
// non-ASCII string), so that a round trip shows the bytes come back.
func rec(q, reason string) admit.Record {
	server, name, _ := strings.Cut(q, ".")
	desc := jsontext.Value(`{"name":"` + name + `","z":1e+30,"a":"é ✓","inputSchema":{"type":"object"}}`)
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	return admit.Record{
		Qualified:  q,
		Server:     server,
		Name:       name,
		Status:     admit.Pending,
		Reason:     reason,
		Descriptor: desc,
		Pending:    &admit.Candidate{Digest: "d-" + q, Descriptor: desc, Identity: admit.Identity{Name: server, Version: "1"}, Seen: at},
		Updated:    at,
	}
}

// perTest makes open functions for [testStore]: mk creates t's storage
// (a file name, a database) on the first call for t, and later calls for
// the same t get the same one, so that a store can be reopened.
func perTest[K any](mk func(t *testing.T) K) func(t *testing.T) K {
	var mu sync.Mutex
	m := map[*testing.T]K{}
	return func(t *testing.T) K {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		k, ok := m[t]
		if !ok {
			k = mk(t)
			m[t] = k
			t.Cleanup(func() {
				mu.Lock()
				delete(m, t)
				mu.Unlock()
			})
		}
		return k
	}
}

// put writes recs through Transact of server and fails t on error.
func put(t *testing.T, s ledger.Store, server string, recs ...admit.Record) {
	t.Helper()
	if err := s.Transact(t.Context(), server, func(map[string]admit.Record) (ledger.Changes, error) {
		return ledger.Changes{Put: recs}, nil
	}); err != nil {
		t.Fatal("Transact:", err)
	}
}

// all returns s.All and fails t on error.
func all(t *testing.T, s ledger.Store) []admit.Record {
	t.Helper()
	got, err := s.All(t.Context())
	if err != nil {
		t.Fatal("All:", err)
	}
	return got
}

// wantAll fails t unless s holds exactly want, in that order.
func wantAll(t *testing.T, s ledger.Store, want ...admit.Record) {
	t.Helper()
	got := all(t, s)
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("All:\n got %s\nwant %s", names(got), names(want))
	}
}

func names(recs []admit.Record) string {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "%s(%s) ", r.Qualified, r.Reason)
	}
	return b.String()
}

// testStore is the behaviour every Store shares. open opens t's store: a
// fresh, empty one on the first call for t, the same data on later calls
// (after the previous one is closed); the store is closed when t ends.
func testStore(t *testing.T, open func(t *testing.T) ledger.Store) {
	t.Run("empty", func(t *testing.T) {
		wantAll(t, open(t))
	})

	t.Run("transact writes and reads back", func(t *testing.T) {
		s := open(t)
		// Byte order, as bbolt keeps it, not a locale's: B < _ < a.
		a, b, c := rec("srv.a", "r1"), rec("srv.B", "r2"), rec("srv._c", "r3")
		put(t, s, "srv", a, b)
		put(t, s, "srv", c)
		put(t, s, "srvx", rec("srvx.d", ""))
		put(t, s, "other", rec("other.e", ""))
		// A Transact sees its server's records and no other's ("srvx"
		// shares the prefix "srv" but not "srv.").
		var seen map[string]admit.Record
		if err := s.Transact(t.Context(), "srv", func(prev map[string]admit.Record) (ledger.Changes, error) {
			seen = prev
			return ledger.Changes{}, nil
		}); err != nil {
			t.Fatal(err)
		}
		want := map[string]admit.Record{"srv.a": a, "srv.B": b, "srv._c": c}
		if !reflect.DeepEqual(seen, want) {
			t.Errorf("Transact saw %v, want %v", seen, want)
		}
		wantAll(t, s, rec("other.e", ""), b, c, a, rec("srvx.d", ""))
	})

	t.Run("fn error writes nothing", func(t *testing.T) {
		s := open(t)
		a, b := rec("srv.a", "r1"), rec("srv.b", "r2")
		put(t, s, "srv", a, b)
		err := s.Transact(t.Context(), "srv", func(prev map[string]admit.Record) (ledger.Changes, error) {
			changed := prev["srv.a"]
			changed.Reason = "changed"
			return ledger.Changes{Put: []admit.Record{changed, rec("srv.new", "")}, Delete: []string{"srv.b"}}, errBoom
		})
		if !errors.Is(err, errBoom) {
			t.Fatalf("Transact = %v, want fn's error", err)
		}
		wantAll(t, s, a, b)
	})

	t.Run("transact deletes", func(t *testing.T) {
		s := open(t)
		a, b, c := rec("srv.a", "r1"), rec("srv.b", "r2"), rec("srv.c", "r3")
		put(t, s, "srv", a, b, c)
		put(t, s, "other", rec("other.a", ""))
		if err := s.Transact(t.Context(), "srv", func(map[string]admit.Record) (ledger.Changes, error) {
			return ledger.Changes{Put: []admit.Record{rec("srv.d", "")}, Delete: []string{"srv.a", "srv.c", "srv.nothing"}}, nil
		}); err != nil {
			t.Fatal(err)
		}
		wantAll(t, s, rec("other.a", ""), b, rec("srv.d", ""))
		for _, bad := range []string{"other.a", "srvx.a", ""} {
			if err := s.Transact(t.Context(), "srv", func(map[string]admit.Record) (ledger.Changes, error) {
				return ledger.Changes{Delete: []string{"srv.b", bad}}, nil
			}); err == nil || !strings.Contains(err.Error(), "is not of server") {
				t.Errorf("deleting %q: %v", bad, err)
			}
		}
		wantAll(t, s, rec("other.a", ""), b, rec("srv.d", ""))
	})

	t.Run("record of another server refused", func(t *testing.T) {
		for _, bad := range []string{"other.x", "srvx.y", "srv", "", ".srv.z"} {
			t.Run(bad, func(t *testing.T) {
				s := open(t)
				a := rec("srv.a", "")
				put(t, s, "srv", a)
				// The refused record comes after a valid one and a change:
				// neither may be written.
				changed := rec("srv.a", "changed")
				b := rec("srv.b", "")
				odd := rec("srv.c", "")
				odd.Qualified = bad
				err := s.Transact(t.Context(), "srv", func(map[string]admit.Record) (ledger.Changes, error) {
					return ledger.Changes{Put: []admit.Record{changed, b, odd}}, nil
				})
				if err == nil || !strings.HasPrefix(err.Error(), "ledger: ") || !strings.Contains(err.Error(), "is not of server") {
					t.Fatalf("Transact = %v, want a refusal", err)
				}
				wantAll(t, s, a)
			})
		}
	})

	t.Run("update", func(t *testing.T) {
		setReason := func(r *admit.Record) error { r.Reason = "changed"; return nil }
		for _, tc := range []struct {
			name    string
			q       string
			fn      func(*admit.Record) error
			wantErr func(error) bool
			changed bool
		}{
			{"changes one", "srv.a", setReason, func(err error) bool { return err == nil }, true},
			{"unknown name", "srv.nope", setReason, func(err error) bool { return errors.Is(err, ledger.ErrNotFound) }, false},
			{"unknown server", "nope.a", setReason, func(err error) bool { return errors.Is(err, ledger.ErrNotFound) }, false},
			{"fn error", "srv.a", func(r *admit.Record) error { r.Reason = "changed"; return errBoom }, func(err error) bool { return errors.Is(err, errBoom) }, false},
			{"rename", "srv.a", func(r *admit.Record) error { r.Reason = "changed"; r.Qualified = "srv.b2"; return nil }, isRefusal("rename"), false},
			{"rename to another server", "srv.a", func(r *admit.Record) error { r.Qualified = "other.a"; return nil }, isRefusal("rename"), false},
			{"rename onto another record", "srv.a", func(r *admit.Record) error { r.Qualified = "srv.b"; return nil }, isRefusal("rename"), false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				s := open(t)
				a, b := rec("srv.a", ""), rec("srv.b", "")
				put(t, s, "srv", a, b)
				err := s.Update(t.Context(), tc.q, tc.fn)
				if !tc.wantErr(err) {
					t.Fatalf("Update = %v", err)
				}
				if tc.changed {
					a.Reason = "changed"
				}
				wantAll(t, s, a, b)
			})
		}
	})

	t.Run("canceled context", func(t *testing.T) {
		s := open(t)
		put(t, s, "srv", rec("srv.a", ""))
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		called := false
		if err := s.Transact(ctx, "srv", func(map[string]admit.Record) (ledger.Changes, error) {
			called = true
			return ledger.Changes{Put: []admit.Record{rec("srv.b", "")}}, nil
		}); !errors.Is(err, context.Canceled) {
			t.Errorf("Transact = %v", err)
		}
		if err := s.Update(ctx, "srv.a", func(*admit.Record) error { called = true; return nil }); !errors.Is(err, context.Canceled) {
			t.Errorf("Update = %v", err)
		}
		if _, err := s.All(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("All = %v", err)
		}
		if called {
			t.Error("fn ran under a canceled context")
		}
		wantAll(t, s, rec("srv.a", ""))
	})

	t.Run("revocations", func(t *testing.T) {
		s := open(t)
		rv, ok := s.(ledger.Revocations)
		if !ok {
			t.Fatalf("%T keeps no revocations", s)
		}
		ctx := t.Context()
		now := time.Now()
		for _, r := range []ledger.Revocation{{Nonce: "live", Until: now.Add(time.Hour), Owner: "0a1b"}, {Nonce: "expired", Until: now.Add(-time.Second)}} {
			if err := rv.Revoke(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		got, next, err := rv.Revoked(ctx, time.Time{})
		if err != nil || len(got) != 1 || got[0].Nonce != "live" || !got[0].Until.Equal(now.Add(time.Hour).Truncate(time.Microsecond)) && !got[0].Until.Equal(now.Add(time.Hour)) {
			t.Fatalf("Revoked = %v, %v", got, err)
		}
		if err := rv.Revoke(ctx, ledger.Revocation{Nonce: "later", Until: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		got, _, err = rv.Revoked(ctx, next)
		nonces := map[string]bool{}
		for _, r := range got {
			nonces[r.Nonce] = true
		}
		if err != nil || !nonces["later"] || nonces["expired"] {
			t.Errorf("Revoked since the last read = %v, %v", got, err)
		}
		// Revoking again is no error, and the revocation survives a reopen.
		if err := rv.Revoke(ctx, ledger.Revocation{Nonce: "live", Until: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal("Close:", err)
		}
		got, _, err = open(t).(ledger.Revocations).Revoked(ctx, time.Time{})
		nonces = map[string]bool{}
		for _, r := range got {
			nonces[r.Nonce] = true
		}
		if err != nil || len(got) != 2 || !nonces["live"] || !nonces["later"] {
			t.Errorf("after a reopen: %v, %v", got, err)
		}
		for _, r := range got {
			if r.Nonce == "live" && r.Owner != "0a1b" {
				t.Errorf("the owner of a revocation came back as %q", r.Owner)
			}
		}
	})

	t.Run("persists across reopen", func(t *testing.T) {
		s := open(t)
		a, b := rec("srv.a", "r1"), rec("other.b", "r2")
		put(t, s, "srv", a)
		put(t, s, "other", b)
		if err := s.Update(t.Context(), "srv.a", func(r *admit.Record) error { r.Status = admit.Rejected; return nil }); err != nil {
			t.Fatal(err)
		}
		a.Status = admit.Rejected
		if err := s.Close(); err != nil {
			t.Fatal("Close:", err)
		}
		wantAll(t, open(t), b, a)
	})

	t.Run("concurrent writers lose nothing", func(t *testing.T) {
		s := open(t)
		hammer(t, []ledger.Store{s})
	})
}

func isRefusal(word string) func(error) bool {
	return func(err error) bool {
		return err != nil && strings.HasPrefix(err.Error(), "ledger: ") && strings.Contains(err.Error(), word)
	}
}

// hammer runs Transacts and Updates of one server from many goroutines,
// spread over stores (replicas of one ledger, or one store), and checks
// that none is lost. Every one of them reads, changes and writes back the
// same record, so an interleaving would drop a mark; each Transact also
// adds a record of its own, and Transacts of another server run beside.
func hammer(t *testing.T, stores []ledger.Store) {
	t.Helper()
	const n = 20
	put(t, stores[0], "srv", rec("srv.counter", ""))
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		s := stores[i%len(stores)]
		wg.Go(func() {
			if i%2 == 0 {
				errs <- s.Update(context.Background(), "srv.counter", func(r *admit.Record) error {
					r.Reason += "u"
					return nil
				})
			} else {
				errs <- s.Transact(context.Background(), "srv", func(prev map[string]admit.Record) (ledger.Changes, error) {
					c, ok := prev["srv.counter"]
					if !ok {
						return ledger.Changes{}, errors.New("no counter")
					}
					c.Reason += "t"
					return ledger.Changes{Put: []admit.Record{c, rec(fmt.Sprintf("srv.t%02d", i), "")}}, nil
				})
			}
		})
		wg.Go(func() {
			errs <- s.Transact(context.Background(), "bystander", func(prev map[string]admit.Record) (ledger.Changes, error) {
				return ledger.Changes{Put: []admit.Record{rec(fmt.Sprintf("bystander.t%02d", i), fmt.Sprint(len(prev)))}}, nil
			})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	got := map[string]admit.Record{}
	for _, r := range all(t, stores[0]) {
		got[r.Qualified] = r
	}
	c := got["srv.counter"].Reason
	if strings.Count(c, "u") != n/2 || strings.Count(c, "t") != n/2 {
		t.Errorf("counter = %q, want %d u and %d t", c, n/2, n/2)
	}
	// Bystander i saw as many records as were written before it, each
	// count once: its Transacts took turns too.
	counts := map[string]bool{}
	for i := range n {
		if _, ok := got[fmt.Sprintf("srv.t%02d", i)]; i%2 == 1 && !ok {
			t.Errorf("srv.t%02d lost", i)
		}
		r, ok := got[fmt.Sprintf("bystander.t%02d", i)]
		if !ok {
			t.Errorf("bystander.t%02d lost", i)
		}
		if counts[r.Reason] {
			t.Errorf("two bystanders saw %s records", r.Reason)
		}
		counts[r.Reason] = true
	}
	if want := 1 + n/2 + n; len(got) != want {
		t.Errorf("%d records, want %d", len(got), want)
	}
}

func TestBolt(t *testing.T) {
	path := perTest(func(t *testing.T) string { return filepath.Join(t.TempDir(), "ledger.db") })
	testStore(t, func(t *testing.T) ledger.Store {
		t.Helper()
		s, err := ledger.Open(path(t), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Error("Close:", err)
			}
		})
		return s
	})
}

// TestBoltLocked: a second opener of a file a Bolt holds waits about as
// long as it was told to, then gives up with ErrLocked; once the file is
// free it opens.
func TestBoltLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "ledger.db")
	first, err := ledger.Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	const wait = 200 * time.Millisecond
	start := time.Now()
	second, err := ledger.Open(path, wait)
	elapsed := time.Since(start)
	if !errors.Is(err, ledger.ErrLocked) {
		if second != nil {
			_ = second.Close()
		}
		t.Fatalf("Open of a held file = %v, want ErrLocked", err)
	}
	// bbolt retries every 50ms and stops a retry short of the timeout, so
	// it gives up somewhat before wait; it must have waited, though.
	if elapsed < wait/2 || elapsed > wait+5*time.Second {
		t.Errorf("Open gave up after %v, want about %v", elapsed, wait)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	third, err := ledger.Open(path, wait)
	if err != nil {
		t.Fatal("Open of a released file:", err)
	}
	if err := third.Close(); err != nil {
		t.Fatal(err)
	}
}
