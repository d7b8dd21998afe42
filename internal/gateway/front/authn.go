package front

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/mcp-bastion/bastion/internal/gateway"
	"github.com/mcp-bastion/bastion/internal/gateway/audit"
	"github.com/mcp-bastion/bastion/internal/gateway/auth"
	"github.com/mcp-bastion/bastion/internal/jsonrpc"
)

// Anonymous is the principal of every caller under auth mode none.
var Anonymous = auth.Principal{Subject: "anonymous", Roles: []string{"anonymous"}, Issuer: "none"}

// wellKnown is RFC 9728's protected resource metadata path.
const wellKnown = "/.well-known/oauth-protected-resource"

// authenticate establishes the caller of r: Anonymous under auth mode
// none, else the bearer token's principal. A failure is answered here,
// 401 with the challenge, and recorded; ok is false then.
func (x *exchange) authenticate(w http.ResponseWriter, id jsonrpc.ID, notification bool) bool {
	s := x.s
	if s.authn == nil {
		x.p = Anonymous
		return true
	}
	p, err := s.authn.Authenticate(x.r.Context(), x.r.Header.Values("Authorization"))
	if err == nil {
		x.p = p
		return true
	}
	ae, _ := err.(*auth.Error)
	reason := "unauthenticated"
	presented := false
	if ae != nil {
		reason, presented = ae.Reason, ae.Presented
	}
	s.metrics.AuthFailure()
	s.log.Warn("request refused: not authenticated", slog.String("request_id", x.rid), slog.String("reason", reason))
	s.g.Audit().Record(audit.Event{RequestID: x.rid, Method: x.method, Outcome: audit.Unauthenticated,
		Reason: reason, Code: gateway.CodeUnauthenticated})
	w.Header().Set("WWW-Authenticate", s.challenge(presented))
	writeError(w, http.StatusUnauthorized, jsonrpc.NewError(id, gateway.CodeUnauthenticated, "Unauthenticated: "+reason), notification)
	return false
}

// challenge is the WWW-Authenticate value of a 401 (RFC 6750 §3, RFC 9728
// §5.1): where the metadata is, and invalid_token when a token was
// presented.
func (s *Server) challenge(presented bool) string {
	var b strings.Builder
	b.WriteString(`Bearer realm="mcp-bastion"`)
	if s.metadataURL != "" {
		fmt.Fprintf(&b, `, resource_metadata=%q`, s.metadataURL)
	}
	if presented {
		b.WriteString(`, error="invalid_token"`)
	}
	return b.String()
}

// resourceMetadata serves RFC 9728 metadata: the resource is the public
// URL, the one audience of accepted tokens.
func (s *Server) resourceMetadata(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "max-age=300")
	w.Write(s.metadata)
}

// buildMetadata renders the metadata document once.
func (s *Server) buildMetadata() {
	m := s.cfg.Auth.ResourceMetadata
	if m == nil {
		return
	}
	doc := map[string]any{
		"resource":                 s.cfg.PublicURL,
		"bearer_methods_supported": []string{"header"},
		"resource_name":            "mcp-bastion gateway",
	}
	if len(m.AuthorizationServers) > 0 {
		doc["authorization_servers"] = m.AuthorizationServers
	}
	if len(m.ScopesSupported) > 0 {
		doc["scopes_supported"] = m.ScopesSupported
	}
	s.metadata, _ = json.Marshal(doc)
	base := strings.TrimSuffix(s.cfg.PublicURL, s.cfg.Path)
	s.metadataURL = base + wellKnown + s.cfg.Path
}

// maxLimiters bounds the per-principal rate limiters held: a flood of
// distinct subjects (JWTs are cheap to mint for an IdP) must not grow the
// map without end.
const maxLimiters = 10_000

// limiters are token buckets per principal.
type limiters struct {
	every time.Duration
	burst int

	mu sync.Mutex
	m  map[string]*limiter
}

type limiter struct {
	lim  *rate.Limiter
	seen time.Time
}

func newLimiters(every time.Duration, burst int) *limiters {
	return &limiters{every: every, burst: burst, m: map[string]*limiter{}}
}

// allow takes one token of p's bucket, or reports how long until one is
// there.
func (l *limiters) allow(p auth.Principal) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	key := p.Issuer + "\x00" + p.Subject
	now := time.Now()
	l.mu.Lock()
	e := l.m[key]
	if e == nil {
		if len(l.m) >= maxLimiters {
			l.evict(now)
		}
		e = &limiter{lim: rate.NewLimiter(rate.Every(l.every), l.burst)}
		l.m[key] = e
	}
	e.seen = now
	l.mu.Unlock()
	r := e.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// evict drops the buckets that have refilled (unused for long enough to
// be full again: forgetting them changes nothing), and when none has, the
// least recently used one. mu is held.
func (l *limiters) evict(now time.Time) {
	full := l.every * time.Duration(l.burst)
	var oldest string
	var oldestSeen time.Time
	for k, e := range l.m {
		if now.Sub(e.seen) >= full {
			delete(l.m, k)
			continue
		}
		if oldest == "" || e.seen.Before(oldestSeen) {
			oldest, oldestSeen = k, e.seen
		}
	}
	if len(l.m) >= maxLimiters && oldest != "" {
		delete(l.m, oldest)
	}
}

// rateLimited answers a request over its principal's rate: -32005, 429
// and Retry-After in whole seconds.
func rateLimited(id jsonrpc.ID, wait time.Duration) reply {
	secs := int(math.Ceil(wait.Seconds()))
	data := fmt.Appendf(nil, `{"retry_after_seconds":%d}`, max(secs, 1))
	return reply{msg: jsonrpc.AppendError(nil, &jsonrpc.Error{ID: id, Code: gateway.CodeTooManyRequests,
		Message: "Too many requests: retry after " + strconv.Itoa(max(secs, 1)) + "s", Data: data}),
		status: http.StatusTooManyRequests, retryAfter: max(secs, 1)}
}

// owner is the session owner of the exchange's caller.
func (x *exchange) owner() []byte { return ownerOf(x.p.Issuer, x.p.Subject) }

// principal authenticates a GET or DELETE, answering a failure in plain
// text with the challenge.
func (s *Server) principal(w http.ResponseWriter, r *http.Request) (auth.Principal, bool) {
	if s.authn == nil {
		return Anonymous, true
	}
	p, err := s.authn.Authenticate(r.Context(), r.Header.Values("Authorization"))
	if err == nil {
		return p, true
	}
	ae, _ := err.(*auth.Error)
	presented, reason := false, "unauthenticated"
	if ae != nil {
		presented, reason = ae.Presented, ae.Reason
	}
	s.metrics.AuthFailure()
	rid := requestID()
	s.log.Warn("request refused: not authenticated", slog.String("request_id", rid), slog.String("reason", reason))
	s.g.Audit().Record(audit.Event{RequestID: rid, Method: r.Method, Outcome: audit.Unauthenticated, Reason: reason, Code: gateway.CodeUnauthenticated})
	w.Header().Set("WWW-Authenticate", s.challenge(presented))
	http.Error(w, "Unauthorized: "+reason, http.StatusUnauthorized)
	return auth.Principal{}, false
}
