package front

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net"
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
	p, refusal := s.authenticateRequest(x.r, x.rid, x.method)
	if refusal == nil {
		x.p = p
		return true
	}
	refusal.header(w)
	writeError(w, refusal.status, jsonrpc.NewError(id, refusal.code, refusal.message), notification)
	return false
}

// authRefusal is how a request that failed authentication is answered.
type authRefusal struct {
	status, code int
	message      string
	challenge    string // WWW-Authenticate, for a 401
	retryAfter   int    // Retry-After, for a 429
}

func (a *authRefusal) header(w http.ResponseWriter) {
	if a.challenge != "" {
		w.Header().Set("WWW-Authenticate", a.challenge)
	}
	if a.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(a.retryAfter))
	}
}

// authenticateRequest establishes the caller of r: Anonymous under auth
// mode none, else the bearer token's principal. A client address whose
// recent failures used up its bucket is refused (429) before its token
// is even read, so that guessing tokens costs time (GATEWAY.md decision
// 14). Every refusal is logged, counted and audited, without the token.
func (s *Server) authenticateRequest(r *http.Request, rid, method string) (auth.Principal, *authRefusal) {
	if s.authn == nil {
		return Anonymous, nil
	}
	// The failure is reserved before the token is read and given back
	// when it was good: concurrent guesses from one address cannot all
	// be read while the bucket still looks full.
	addr := clientAddress(r)
	settle, blocked, wait := s.failures.reserve(addr)
	if blocked {
		secs := max(1, int(math.Ceil(wait.Seconds())))
		s.metrics.RateLimited()
		s.log.Warn("request refused: too many failed authentications from its address", slog.String("request_id", rid))
		s.g.Audit().Record(audit.Event{RequestID: rid, Method: method, Outcome: audit.RateLimited, Reason: "authentication_failures",
			Code: gateway.CodeTooManyRequests})
		return auth.Principal{}, &authRefusal{status: http.StatusTooManyRequests, code: gateway.CodeTooManyRequests,
			message: "Too many requests: too many failed authentications; retry after " + strconv.Itoa(secs) + "s", retryAfter: secs}
	}
	p, err := s.authn.Authenticate(r.Context(), r.Header.Values("Authorization"))
	settle(err != nil)
	if err == nil {
		return p, nil
	}
	ae, _ := err.(*auth.Error)
	reason := "unauthenticated"
	presented := false
	if ae != nil {
		reason, presented = ae.Reason, ae.Presented
	}
	s.metrics.AuthFailure()
	s.log.Warn("request refused: not authenticated", slog.String("request_id", rid), slog.String("reason", reason))
	s.g.Audit().Record(audit.Event{RequestID: rid, Method: method, Outcome: audit.Unauthenticated,
		Reason: reason, Code: gateway.CodeUnauthenticated})
	return auth.Principal{}, &authRefusal{status: http.StatusUnauthorized, code: gateway.CodeUnauthenticated,
		message: "Unauthenticated: " + reason, challenge: s.challenge(presented)}
}

// clientAddress is the peer's IP address, as the connection says: a
// forwarded-for header is the client's to write, so it is not read.
func clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
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
	held int // tokens reserve holds for outcomes not known yet, under limiters.mu
}

func newLimiters(every time.Duration, burst int) *limiters {
	return &limiters{every: every, burst: burst, m: map[string]*limiter{}}
}

// principalKey names a principal in the per-principal maps: subjects are
// unique per issuer only.
func principalKey(p auth.Principal) string { return p.Issuer + "\x00" + p.Subject }

// allow takes one token of p's bucket, or reports how long until one is
// there.
func (l *limiters) allow(p auth.Principal) (bool, time.Duration) {
	return l.take(principalKey(p))
}

// allowMore takes n more tokens of p's bucket for a request that took one
// already (allow), so many that the two together are at most a full
// burst: a bucket never holds more, and a request within the bounds must
// be possible with a full one. It reports how long until they are there.
func (l *limiters) allowMore(p auth.Principal, n int) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	if n = min(n, l.burst-1); n <= 0 {
		return true, 0
	}
	return l.takeN(principalKey(p), n)
}

// take takes one token of key's bucket, or reports how long until one is
// there.
func (l *limiters) take(key string) (bool, time.Duration) { return l.takeN(key, 1) }

// takeN takes n tokens of key's bucket (at most its burst), or reports
// how long until they are there.
func (l *limiters) takeN(key string, n int) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	now := time.Now()
	e := l.get(key, now)
	r := e.lim.ReserveN(now, n)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// reserve holds one token of key's bucket for an outcome not known yet:
// settle(true) spends it, settle(false) gives it back. While it is held
// no other reservation can count it, so concurrent requests of one
// address cannot all be read while the bucket still looks full. blocked,
// with how long until a token is free, when none is.
//
// The hold is counted here rather than with a rate.Reservation: a
// reservation can only be cancelled before its time to act, which for a
// token taken at once is the moment it was taken, so a good token's
// reservation could never be given back and every success would have
// counted as a failure.
func (l *limiters) reserve(key string) (settle func(failed bool), blocked bool, wait time.Duration) {
	if l == nil {
		return func(bool) {}, false, 0
	}
	now := time.Now()
	e := l.get(key, now)
	l.mu.Lock()
	defer l.mu.Unlock()
	if free := e.lim.TokensAt(now) - float64(e.held); free < 1 {
		wait = time.Duration((1 - free) / float64(e.lim.Limit()) * float64(time.Second))
		return nil, true, max(wait, time.Millisecond)
	}
	e.held++
	return func(failed bool) {
		l.mu.Lock()
		e.held--
		l.mu.Unlock()
		if failed {
			// Spent even when the bucket emptied meanwhile: a failure
			// always counts.
			e.lim.ReserveN(time.Now(), 1)
		}
	}, false, 0
}

func (l *limiters) get(key string, now time.Time) *limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.m[key]
	if e == nil {
		if len(l.m) >= maxLimiters {
			l.evict(now)
		}
		e = &limiter{lim: rate.NewLimiter(rate.Every(l.every), l.burst)}
		l.m[key] = e
	}
	e.seen = now
	return e
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
// text.
func (s *Server) principal(w http.ResponseWriter, r *http.Request) (auth.Principal, bool) {
	p, refusal := s.authenticateRequest(r, requestID(), r.Method)
	if refusal == nil {
		return p, true
	}
	refusal.header(w)
	http.Error(w, refusal.message, refusal.status)
	return auth.Principal{}, false
}

// pastRate answers a GET or DELETE of a principal past its rate (429,
// Retry-After) and reports whether it did.
func (s *Server) pastRate(w http.ResponseWriter, p auth.Principal) bool {
	ok, wait := s.limiters.allow(p)
	if ok {
		return false
	}
	s.metrics.RateLimited()
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
	http.Error(w, "Too Many Requests: the caller is past its rate", http.StatusTooManyRequests)
	return true
}
