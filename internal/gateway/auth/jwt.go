package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/mcp-bastion/bastion/internal/gateway/policy"
)

// JWTOptions configure JWT verification.
type JWTOptions struct {
	// Issuer is the required iss; Audience the required aud (the
	// gateway's public URL).
	Issuer, Audience string
	// JWKSURL is the only place keys are fetched from.
	JWKSURL string
	// RolesClaim names the claim that holds the roles: a list of
	// strings, or one string of space-separated roles.
	RolesClaim string
	// Algorithms are the accepted signature algorithms; none and every
	// HMAC are refused whatever this says.
	Algorithms []string
	// Leeway is the clock skew allowed on exp, nbf and iat.
	Leeway time.Duration
	// Refresh is how often the key set is fetched again; MinRefresh the
	// least time between two fetches, which also bounds the fetch that
	// a token signed with an unknown key causes.
	Refresh, MinRefresh time.Duration
	// Client fetches the key set; it must not follow redirects.
	Client *http.Client
	Logger *slog.Logger
}

// DefaultAlgorithms are the asymmetric algorithms accepted by default.
var DefaultAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// JWTVerifier verifies JWTs against a cached JWKS.
//
// The key set is fetched with jwk.Fetch rather than kept in jwk.Cache:
// the cache runs its own workers on its own schedule, while the gateway
// needs a refresh it can bound (a flood of tokens with unknown key ids
// must not become a flood of fetches) and a lifetime tied to its own.
type JWTVerifier struct {
	opts JWTOptions
	log  *slog.Logger

	mu      sync.Mutex
	set     jwk.Set // nil until the first fetch succeeded
	fetched time.Time

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// NewJWTVerifier starts a verifier: the key set is fetched now (a failure
// is logged, and tokens fail until a later fetch succeeds) and again every
// Refresh until Close.
func NewJWTVerifier(ctx context.Context, opts JWTOptions) *JWTVerifier {
	if len(opts.Algorithms) == 0 {
		opts.Algorithms = DefaultAlgorithms
	}
	if opts.Refresh <= 0 {
		opts.Refresh = 5 * time.Minute
	}
	if opts.MinRefresh <= 0 {
		opts.MinRefresh = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	v := &JWTVerifier{opts: opts, log: opts.Logger, stop: make(chan struct{}), done: make(chan struct{})}
	v.fetch(ctx, true)
	go v.refresh()
	return v
}

// Close stops the refresh.
func (v *JWTVerifier) Close() {
	v.once.Do(func() { close(v.stop) })
	<-v.done
}

func (v *JWTVerifier) refresh() {
	defer close(v.done)
	t := time.NewTicker(v.opts.Refresh)
	defer t.Stop()
	for {
		select {
		case <-v.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			v.fetch(ctx, true)
			cancel()
		}
	}
}

// fetch gets the key set, unless one was fetched within MinRefresh and
// force is false. It reports whether a new set was stored.
func (v *JWTVerifier) fetch(ctx context.Context, force bool) bool {
	v.mu.Lock()
	if !force && time.Since(v.fetched) < v.opts.MinRefresh {
		v.mu.Unlock()
		return false
	}
	v.fetched = time.Now()
	v.mu.Unlock()
	opts := []jwk.FetchOption{jwk.WithMaxFetchBodySize(1 << 20)}
	if v.opts.Client != nil {
		opts = append(opts, jwk.WithHTTPClient(v.opts.Client))
	}
	set, err := jwk.Fetch(ctx, v.opts.JWKSURL, opts...)
	if err != nil {
		v.log.Warn("JWKS fetch failed", slog.String("error", redact(err.Error(), v.opts.JWKSURL)))
		return false
	}
	v.mu.Lock()
	v.set = set
	v.mu.Unlock()
	v.log.Info("JWKS fetched", slog.Int("keys", set.Len()))
	return true
}

func redact(msg, url string) string { return strings.ReplaceAll(msg, url, "<jwks url>") }

// key finds the verification key for kid ("" when the token names none:
// then the set must hold exactly one key). An unknown kid fetches the set
// again, at most once per MinRefresh: keys rotate.
func (v *JWTVerifier) key(ctx context.Context, kid string) (jwk.Key, bool) {
	find := func() (jwk.Key, bool) {
		v.mu.Lock()
		defer v.mu.Unlock()
		if v.set == nil {
			return nil, false
		}
		if kid == "" {
			if v.set.Len() != 1 {
				return nil, false
			}
			return v.set.Key(0)
		}
		return v.set.LookupKeyID(kid)
	}
	if k, ok := find(); ok {
		return k, true
	}
	if v.fetch(ctx, false) {
		return find()
	}
	return nil, false
}

// Verify checks a compact JWS: an accepted algorithm named in its
// protected header, a signature by the key of the configured set that its
// kid names (never a key the token carries or points at), then iss, aud,
// exp (required), nbf and iat within the leeway, a sub, and the roles.
func (v *JWTVerifier) Verify(ctx context.Context, tok string) (Principal, error) {
	msg, err := jws.Parse([]byte(tok))
	if err != nil || len(msg.Signatures()) != 1 {
		return Principal{}, invalid("the token is not a signed JWT")
	}
	hdr := msg.Signatures()[0].ProtectedHeaders()
	alg, ok := hdr.Algorithm()
	if !ok || !slices.Contains(v.opts.Algorithms, alg.String()) || strings.HasPrefix(alg.String(), "HS") || alg.String() == "none" {
		return Principal{}, invalid("the token's algorithm is not accepted")
	}
	kid, _ := hdr.KeyID()
	key, ok := v.key(ctx, kid)
	if !ok {
		return Principal{}, invalid("the token's key is not in the key set")
	}
	if key.KeyType() == jwa.OctetSeq() {
		return Principal{}, invalid("the key set's key is symmetric")
	}
	if ka, ok := key.Algorithm(); ok && ka.String() != alg.String() {
		return Principal{}, invalid("the token's algorithm is not its key's")
	}
	t, err := jwt.Parse([]byte(tok),
		jwt.WithKey(alg, key),
		jwt.WithValidate(true),
		jwt.WithIssuer(v.opts.Issuer),
		jwt.WithAudience(v.opts.Audience),
		jwt.WithRequiredClaim("exp"),
		jwt.WithRequiredClaim("sub"),
		jwt.WithAcceptableSkew(v.opts.Leeway),
	)
	if err != nil {
		return Principal{}, invalid(jwtReason(err))
	}
	sub, _ := t.Subject()
	if sub == "" {
		// Sessions, cursors and rate buckets are per subject: an empty
		// one would be every such token's.
		return Principal{}, invalid("the token's subject is empty")
	}
	claims := map[string]any{}
	if err := json.Unmarshal(msg.Payload(), &claims); err != nil {
		return Principal{}, invalid("the token's claims are not a JSON object")
	}
	roles, err := rolesOf(claims[v.opts.RolesClaim])
	if err != nil {
		return Principal{}, invalid(err.Error())
	}
	// exp is required and was checked: parsed, it is set.
	exp, _ := t.Expiration()
	return Principal{Subject: sub, Roles: roles, Issuer: v.opts.Issuer, Claims: claims, Expires: exp.Add(v.opts.Leeway)}, nil
}

// jwtReason names the failed check without the library's message, which
// may quote claim values.
func jwtReason(err error) string {
	switch {
	case errors.Is(err, jwt.TokenExpiredError()):
		return "the token has expired"
	case errors.Is(err, jwt.TokenNotYetValidError()):
		return "the token is not valid yet"
	case errors.Is(err, jwt.InvalidIssuerError()):
		return "the token's issuer is not accepted"
	case errors.Is(err, jwt.InvalidAudienceError()):
		return "the token's audience is not this gateway"
	case errors.Is(err, jwt.InvalidIssuedAtError()):
		return "the token's issue time is in the future"
	case errors.Is(err, jwt.MissingRequiredClaimError()):
		return "the token lacks a required claim (exp, sub)"
	}
	return "the token's signature or claims are invalid"
}

// rolesOf reads the roles claim: a list of strings, or a string of roles
// separated by single spaces (U+0020), as RFC 6749 §3.3 writes OAuth's
// scope. Only that space separates: strings.Fields would also split at
// U+00A0 or U+2028, so that "viewer\u00a0admin", one role the syntax
// refuses, would become the two roles viewer and admin. An empty role
// (two spaces, or one at an end) fails the syntax as any other bad role.
func rolesOf(v any) ([]string, error) {
	var roles []string
	switch x := v.(type) {
	case nil:
		return nil, errors.New("the token has no roles")
	case string:
		roles = strings.Split(x, " ")
	case []any:
		for _, r := range x {
			s, ok := r.(string)
			if !ok {
				return nil, errors.New("the token's roles are not strings")
			}
			roles = append(roles, s)
		}
	default:
		return nil, errors.New("the token's roles are not a list of strings")
	}
	if len(roles) == 0 || len(roles) > 32 {
		return nil, fmt.Errorf("the token must carry 1 to 32 roles")
	}
	for _, r := range roles {
		if !policy.ValidRole(r) {
			return nil, errors.New("a role of the token is not 1-64 characters of [A-Za-z0-9_.:-]")
		}
	}
	return roles, nil
}
