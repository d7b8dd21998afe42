package front_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mcp-bastion/bastion/internal/gateway/front"
)

// TestGuardListener: another listener of the gateway on a loopback
// address (the metrics endpoint) answers only its own Host — the address
// bound, or localhost at its port — and no foreign Origin, so that a page
// reached through a DNS name rebound to 127.0.0.1 reads nothing; off
// loopback it answers whatever Host a scraper asks by.
func TestGuardListener(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	for _, tc := range []struct {
		addr, host string
		origins    []string
		status     int
	}{
		{"127.0.0.1:9464", "127.0.0.1:9464", nil, http.StatusOK},
		{"127.0.0.1:9464", "LOCALHOST:9464", nil, http.StatusOK},
		{"[::1]:9464", "[::1]:9464", nil, http.StatusOK},
		{"127.0.0.1:9464", "rebound.example:9464", nil, http.StatusForbidden},
		{"127.0.0.1:9464", "rebound.example", nil, http.StatusForbidden},
		{"127.0.0.1:9464", "localhost:9465", nil, http.StatusForbidden},
		{"127.0.0.1:9464", "127.0.0.1:9464", []string{"http://rebound.example:9464"}, http.StatusForbidden},
		{"127.0.0.1:9464", "127.0.0.1:9464", []string{"http://127.0.0.1:9464", "http://rebound.example"}, http.StatusForbidden},
		{"127.0.0.1:9464", "127.0.0.1:9464", []string{"http://127.0.0.1:9464"}, http.StatusOK},
		{"0.0.0.0:9464", "10.1.2.3:9464", nil, http.StatusOK},
		{"10.1.2.3:9464", "metrics.internal:9464", nil, http.StatusOK},
	} {
		h := front.GuardListener(tc.addr, ok, slog.New(slog.DiscardHandler))
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		r.Host = tc.host
		for _, o := range tc.origins {
			r.Header.Add("Origin", o)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.status {
			t.Errorf("listening on %s, Host %q, Origin %q: %d, want %d", tc.addr, tc.host, tc.origins, w.Code, tc.status)
		}
	}
}
