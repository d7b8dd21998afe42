package review_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcp-bastion/bastion/internal/gateway/admit"
	"github.com/mcp-bastion/bastion/internal/gateway/audit"
	"github.com/mcp-bastion/bastion/internal/gateway/ledger"
	"github.com/mcp-bastion/bastion/internal/gateway/review"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// events reads the audit lines the sink wrote to path.
func events(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for line := range strings.Lines(string(data)) {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// TestForget: a reviewer forgets a name its server no longer lists, with
// its pin, so that the server's share of the ledger has room again; a
// name still listed, or one the ledger does not hold, is refused with the
// error the caller can tell apart — on the ledger and through a running
// gateway's socket alike.
func TestForget(t *testing.T) {
	for _, via := range []string{"ledger", "socket"} {
		t.Run(via, func(t *testing.T) {
			st, err := ledger.Open(filepath.Join(t.TempDir(), "ledger.db"), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
			pin := &admit.Approval{By: "first use", At: at, Mode: "pin"}
			recs := []admit.Record{
				{Qualified: "s.kept", Server: "s", Name: "kept", Status: admit.Admitted, Digest: "d-kept", Approval: pin},
				{Qualified: "s.gone", Server: "s", Name: "gone", Status: admit.Removed, Digest: "d-gone", Approval: pin},
				{Kind: admit.KindPrompt, Qualified: "s.p", Server: "s", Name: "p", Status: admit.Removed, Digest: "d-p", Approval: pin},
				// Held when their server stopped listing them.
				{Qualified: "s.changed", Server: "s", Name: "changed", Status: admit.Removed, Reason: admit.ReasonDigestChanged, Digest: "d-changed", Approval: pin},
				{Qualified: "s.refused", Server: "s", Name: "refused", Status: admit.Removed, RejectedDigests: []string{"d-bad"}},
			}
			if err := st.Transact(t.Context(), "s", func(map[string]admit.Record) (ledger.Changes, error) {
				return ledger.Changes{Put: recs}, nil
			}); err != nil {
				t.Fatal(err)
			}
			auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
			auditFile, err := os.Create(auditPath)
			if err != nil {
				t.Fatal(err)
			}
			defer auditFile.Close()
			var mu sync.Mutex
			var changed []string
			var svc review.Service = &review.Ledger{Store: st, Audit: audit.New(auditFile), Changed: func(server string) {
				mu.Lock()
				defer mu.Unlock()
				changed = append(changed, server)
			}}
			if via == "socket" {
				dir, err := os.MkdirTemp("", "rv") // short: a socket's path is bounded
				if err != nil {
					t.Fatal(err)
				}
				defer os.RemoveAll(dir)
				path := filepath.Join(dir, "review.sock")
				ctx, cancel := context.WithCancel(t.Context())
				served := make(chan error, 1)
				onLedger := svc
				go func() { served <- review.Serve(ctx, path, onLedger) }()
				defer func() {
					cancel()
					if err := <-served; err != nil {
						t.Error("Serve:", err)
					}
				}()
				var c *review.Client
				for range 100 {
					if c, err = review.Dial(t.Context(), path); err == nil {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
				if err != nil {
					t.Fatal("Dial:", err)
				}
				svc = c
			}

			err = svc.Forget(t.Context(), "s.kept", "alice")
			if !errors.Is(err, admit.ErrStillListed) || strings.Count(err.Error(), "admit:") != 1 {
				t.Errorf("forgetting a listed name: %v, want %v once", err, admit.ErrStillListed)
			}
			for _, name := range []string{"s.changed", "s.refused"} {
				if err := svc.Forget(t.Context(), name, "alice"); !errors.Is(err, admit.ErrHeld) {
					t.Errorf("forgetting %s, held when it went: %v, want %v", name, err, admit.ErrHeld)
				}
			}
			if err := svc.Forget(t.Context(), "s.nope", "alice"); !errors.Is(err, review.ErrNotFound) {
				t.Errorf("forgetting a name the ledger does not hold: %v", err)
			}
			if err := svc.Forget(t.Context(), "s.gone", ""); err == nil {
				t.Error("a reviewer with no name forgot a record")
			}
			for _, name := range []string{"s.gone", "prompt:s.p"} {
				if err := svc.Forget(t.Context(), name, "alice"); err != nil {
					t.Errorf("forgetting %s: %v", name, err)
				}
			}
			if err := svc.Forget(t.Context(), "s.gone", "alice"); !errors.Is(err, review.ErrNotFound) {
				t.Errorf("forgetting a name twice: %v", err)
			}

			left, err := svc.List(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var refs []string
			for _, r := range left {
				refs = append(refs, r.Ref())
			}
			if want := []string{"s.changed", "s.kept", "s.refused"}; !slices.Equal(refs, want) {
				t.Errorf("left in the ledger: %v, want %v", refs, want)
			}
			var forgotten []string
			for _, e := range events(t, auditPath) {
				if e["event"] == "approval" && e["status"] == "forgotten" && e["subject"] == "alice" && e["server"] == "s" {
					forgotten = append(forgotten, e["digest"].(string))
				}
			}
			if slices.Sort(forgotten); !slices.Equal(forgotten, []string{"d-gone", "d-p"}) {
				t.Errorf("audited forgotten digests %v, want d-gone and d-p: %v", forgotten, events(t, auditPath))
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(changed, []string{"s", "s"}) {
				t.Errorf("the gateway was told of %v, want s twice", changed)
			}
		})
	}
}

// TestClientOfAnOlderGateway: a route the running gateway does not know
// (a command newer than it) is not reported as a name the ledger does
// not hold.
func TestClientOfAnOlderGateway(t *testing.T) {
	dir, err := os.MkdirTemp("", "rv")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "review.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	c, err := review.Dial(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Forget(t.Context(), "s.gone", "alice")
	if err == nil || errors.Is(err, review.ErrNotFound) || !strings.Contains(err.Error(), "older version") {
		t.Errorf("a command the gateway does not know: %v", err)
	}
}
