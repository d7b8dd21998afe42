package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"
)

func TestParseBearer(t *testing.T) {
	for _, tc := range []struct {
		h, tok    string
		presented bool
	}{
		{"Bearer abc", "abc", true},
		{"bEaReR abc", "abc", true},
		{"Bearer   a.b-c_d~e+f/g==", "a.b-c_d~e+f/g==", true},
		{"", "", false},
		{"Basic abc", "", true},
		{"Bearer", "", true},
		{"Bearer ", "", true},
		{"Bearerabc", "", true},
		{"Bearer a b", "", true},
		{"Bearer a=b", "", true},
		{"Bearer \x00", "", true},
	} {
		tok, err := ParseBearer(tc.h)
		if tc.tok != "" {
			if err != nil || tok != tc.tok {
				t.Errorf("ParseBearer(%q) = %q, %v", tc.h, tok, err)
			}
			continue
		}
		var e *Error
		if err == nil || !errorsAs(err, &e) || e.Presented != tc.presented {
			t.Errorf("ParseBearer(%q) = %q, %v; want a failure with presented=%v", tc.h, tok, err, tc.presented)
		}
	}
}

// TestParseBearerReasons: the reason a refused header is given names
// what is wrong with it.
func TestParseBearerReasons(t *testing.T) {
	for h, want := range map[string]string{
		"Bearer": "the bearer token is empty", "bearer   ": "the bearer token is empty",
		"Basic abc": "the Authorization scheme is not Bearer", "Bearerabc": "the Authorization scheme is not Bearer",
		"Bearer a b": "the bearer token is malformed",
	} {
		var ae *Error
		if _, err := ParseBearer(h); !errors.As(err, &ae) || ae.Reason != want || !ae.Presented {
			t.Errorf("ParseBearer(%q): %v, want %q", h, err, want)
		}
	}
}

func errorsAs(err error, e **Error) bool {
	x, ok := err.(*Error)
	*e = x
	return ok
}

func TestStaticTokens(t *testing.T) {
	toks, err := ParseTokensEnv(`{"tok-viewer-0123456789":"viewer","tok-admin-0123456789":{"sub":"alice@example.com","role":"admin"},"tok-multi-0123456789":{"sub":"m","roles":["a","b"]}}`)
	if err != nil {
		t.Fatal(err)
	}
	a := New(toks, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		h       []string
		subject string
		roles   string
	}{
		{[]string{"Bearer tok-admin-0123456789"}, "alice@example.com", "admin"},
		{[]string{"bearer tok-multi-0123456789"}, "m", "a,b"},
		{[]string{"Bearer tok-viewer-0123456789"}, "token-" + hexPrefix("tok-viewer-0123456789"), "viewer"},
	} {
		p, err := a.Authenticate(ctx, tc.h)
		if err != nil || p.Subject != tc.subject || strings.Join(p.Roles, ",") != tc.roles || p.Issuer != IssuerStatic || !p.Expires.IsZero() {
			t.Errorf("Authenticate(%v) = %+v, %v", tc.h, p, err)
		}
		// The rules see the issuer with the subject: subjects are only
		// unique per issuer.
		if pp := p.Policy(); pp.Subject != p.Subject || pp.Issuer != IssuerStatic || strings.Join(pp.Roles, ",") != tc.roles {
			t.Errorf("Policy() = %+v", pp)
		}
	}
	for _, h := range [][]string{nil, {"Bearer TOK-ADMIN-0123456789"}, {"Bearer tok-admin-0123456789 "}, {"Bearer tok-admin-012345678"}, {"Bearer tok-admin-0123456789", "Bearer tok-admin-0123456789"}} {
		if p, err := a.Authenticate(ctx, h); err == nil {
			t.Errorf("Authenticate(%q) = %+v", h, p)
		} else if strings.Contains(err.Error(), "tok-") {
			t.Errorf("the error quotes the token: %v", err)
		}
	}
}

func hexPrefix(tok string) string {
	s := sha256.Sum256([]byte(tok))
	const hexd = "0123456789abcdef"
	var b []byte
	for _, c := range s[:4] {
		b = append(b, hexd[c>>4], hexd[c&15])
	}
	return string(b)
}

func TestParseTokensEnvErrors(t *testing.T) {
	const tok = "secret-token-0123456789"
	for _, v := range []string{``, `[]`, `{}`, `{"t":""}`, `{"t":{"sub":"x"}}`, `{"t":{"role":"a,b"}}`, `{"t":{"role":"a","extra":1}}`, `{"a b":"r"}`,
		// A token or a member named twice, or a member in another case:
		// one entry would quietly take another's place.
		`{"t":"admin","t":"viewer"}`, `{"t":{"role":"viewer","role":"admin"}}`, `{"t":{"sub":"x","role":"viewer","ROLE":"admin"}}`,
		`{"t":{"Role":"admin"}}`, `{"t":"a"} {}`, `{"t":"a"`, `{"t":7}`, `{"t":["a"]}`,
		// A token that could be guessed.
		`{"short-token-012":"admin"}`} {
		v = strings.ReplaceAll(v, `"t"`, `"`+tok+`"`)
		_, err := ParseTokensEnv(v)
		if err == nil {
			t.Errorf("ParseTokensEnv(%q) accepted", v)
		} else if strings.Contains(err.Error(), tok) || strings.Contains(err.Error(), "short-token") {
			t.Errorf("the error quotes a token: %v", err)
		}
	}
	if _, err := ParseTokensEnv(`{"short-token-0123":"admin"}`); err != nil {
		t.Errorf("a token of %d characters: %v", MinTokenLength, err)
	}
}

// idp is a JWKS server whose keys the test generates and rotates.
type idp struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	keys    []jwk.Key // private
	fetches atomic.Int64
}

func newIDP(t *testing.T) *idp {
	d := &idp{t: t}
	d.rotate("k1")
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.fetches.Add(1)
		d.mu.Lock()
		defer d.mu.Unlock()
		set := jwk.NewSet()
		for _, k := range d.keys {
			pub, err := k.PublicKey()
			if err != nil {
				t.Error(err)
			}
			set.AddKey(pub)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(d.srv.Close)
	return d
}

// rotate replaces the keys with a new RSA key named kid.
func (d *idp) rotate(kid string) jwk.Key {
	raw, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		d.t.Fatal(err)
	}
	k, err := jwk.Import(raw)
	if err != nil {
		d.t.Fatal(err)
	}
	k.Set(jwk.KeyIDKey, kid)
	k.Set(jwk.AlgorithmKey, jwa.RS256())
	d.mu.Lock()
	d.keys = []jwk.Key{k}
	d.mu.Unlock()
	return k
}

func (d *idp) key() jwk.Key {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.keys[0]
}

const (
	issuer   = "https://idp.test"
	audience = "http://127.0.0.1:8080/mcp"
)

func claims(mod func(jwt.Token)) jwt.Token {
	tok := jwt.New()
	tok.Set(jwt.IssuerKey, issuer)
	tok.Set(jwt.AudienceKey, audience)
	tok.Set(jwt.SubjectKey, "carol")
	tok.Set(jwt.ExpirationKey, time.Now().Add(time.Hour))
	tok.Set("roles", []string{"finance", "viewer"})
	if mod != nil {
		mod(tok)
	}
	return tok
}

func sign(t *testing.T, tok jwt.Token, key jwk.Key) string {
	t.Helper()
	b, err := jwt.Sign(tok, jwt.WithKey(jwa.RS256(), key))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func newVerifier(t *testing.T, d *idp) *JWTVerifier {
	v := NewJWTVerifier(context.Background(), JWTOptions{Issuer: issuer, Audience: audience, JWKSURL: d.srv.URL,
		RolesClaim: "roles", Leeway: 30 * time.Second, MinRefresh: time.Millisecond})
	t.Cleanup(v.Close)
	return v
}

func TestJWT(t *testing.T) {
	d := newIDP(t)
	a := New(nil, newVerifier(t, d))
	ctx := context.Background()
	good := sign(t, claims(nil), d.key())
	p, err := a.Authenticate(ctx, []string{"Bearer " + good})
	if err != nil || p.Subject != "carol" || strings.Join(p.Roles, ",") != "finance,viewer" || p.Issuer != issuer || p.Claims["sub"] != "carol" {
		t.Fatalf("a good token: %+v, %v", p, err)
	}

	// The credential is accepted until exp plus the leeway, and so long
	// lives what it opened.
	if exp := time.Now().Add(time.Hour + 30*time.Second); p.Expires.Before(exp.Add(-5*time.Second)) || p.Expires.After(exp) {
		t.Errorf("a good token expires at %v, want its exp plus the leeway, about %v", p.Expires, exp)
	}
	scoped := sign(t, claims(func(c jwt.Token) { c.Set("roles", "finance viewer") }), d.key())
	if p, err := a.Authenticate(ctx, []string{"Bearer " + scoped}); err != nil || !slices.Equal(p.Roles, []string{"finance", "viewer"}) {
		t.Errorf("roles as a space-separated string: %+v, %v", p, err)
	}

	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	otherKey, _ := jwk.Import(other)
	otherKey.Set(jwk.KeyIDKey, "k1") // the right kid, the wrong key
	ecRaw, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)

	for _, tc := range []struct {
		name, tok, reason string
	}{
		{"expired", sign(t, claims(func(c jwt.Token) { c.Set(jwt.ExpirationKey, time.Now().Add(-time.Hour)) }), d.key()), "expired"},
		{"not yet valid", sign(t, claims(func(c jwt.Token) { c.Set(jwt.NotBeforeKey, time.Now().Add(time.Hour)) }), d.key()), "not valid yet"},
		{"wrong audience", sign(t, claims(func(c jwt.Token) { c.Set(jwt.AudienceKey, "http://elsewhere/mcp") }), d.key()), "audience"},
		{"wrong issuer", sign(t, claims(func(c jwt.Token) { c.Set(jwt.IssuerKey, "https://evil.test") }), d.key()), "issuer"},
		{"no exp", sign(t, claims(func(c jwt.Token) { c.Remove(jwt.ExpirationKey) }), d.key()), "required claim"},
		{"no roles", sign(t, claims(func(c jwt.Token) { c.Remove("roles") }), d.key()), "no roles"},
		{"an empty subject", sign(t, claims(func(c jwt.Token) { c.Set(jwt.SubjectKey, "") }), d.key()), "subject is empty"},
		{"a bad role", sign(t, claims(func(c jwt.Token) { c.Set("roles", []string{"admin,root"}) }), d.key()), "role"},
		// A string of roles is split at U+0020 only (RFC 6749 §3.3):
		// another space is part of a role, which the syntax refuses.
		{"roles joined by a no-break space", sign(t, claims(func(c jwt.Token) { c.Set("roles", "viewer\u00a0admin") }), d.key()), "role"},
		{"roles joined by an ideographic space", sign(t, claims(func(c jwt.Token) { c.Set("roles", "viewer\u3000admin") }), d.key()), "role"},
		{"roles joined by a tab", sign(t, claims(func(c jwt.Token) { c.Set("roles", "viewer\tadmin") }), d.key()), "role"},
		{"roles joined by two spaces", sign(t, claims(func(c jwt.Token) { c.Set("roles", "viewer  admin") }), d.key()), "role"},
		{"a role string ending in a space", sign(t, claims(func(c jwt.Token) { c.Set("roles", "viewer ") }), d.key()), "role"},
		{"an empty role string", sign(t, claims(func(c jwt.Token) { c.Set("roles", "") }), d.key()), "role"},
		{"signed by another key", sign(t, claims(nil), otherKey), "signature"},
		{"unsigned (alg none)", unsigned(claims(nil)), "algorithm"},
		{"HMAC with the public key as secret", hmacConfused(t, claims(nil), d.key()), "algorithm"},
		{"unknown key id", signKid(t, claims(nil), "k-unknown"), "key set"},
		{"ES256 with a key the set lacks", signEC(t, claims(nil), ecRaw), "key set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := a.Authenticate(ctx, []string{"Bearer " + tc.tok})
			var e *Error
			if err == nil || !errorsAs(err, &e) || !e.Presented || !strings.Contains(e.Reason, tc.reason) {
				t.Errorf("got %v, want a failure saying %q", err, tc.reason)
			}
		})
	}
}

func unsigned(c jwt.Token) string {
	payload, _ := json.Marshal(c)
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"none","kid":"k1"}`)) + "." + enc.EncodeToString(payload) + "."
}

// hmacConfused signs with HS256 using the RSA public key's bytes as the
// secret: the classic algorithm confusion.
func hmacConfused(t *testing.T, c jwt.Token, priv jwk.Key) string {
	pub, _ := priv.PublicKey()
	var raw rsa.PublicKey
	if err := jwk.Export(pub, &raw); err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&raw)
	hdr := jws.NewHeaders()
	hdr.Set(jws.KeyIDKey, "k1")
	b, err := jwt.Sign(c, jwt.WithKey(jwa.HS256(), der, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func signKid(t *testing.T, c jwt.Token, kid string) string {
	raw, _ := rsa.GenerateKey(rand.Reader, 2048)
	k, _ := jwk.Import(raw)
	k.Set(jwk.KeyIDKey, kid)
	return sign(t, c, k)
}

func signEC(t *testing.T, c jwt.Token, raw *ecdsa.PrivateKey) string {
	k, _ := jwk.Import(raw)
	k.Set(jwk.KeyIDKey, "ec-1")
	b, err := jwt.Sign(c, jwt.WithKey(jwa.ES256(), k))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestJWKSRotation: a token signed with a key the IdP has rotated in is
// accepted without a restart: its unknown kid fetches the set again; a
// flood of unknown kids fetches at most once per MinRefresh.
func TestJWKSRotation(t *testing.T) {
	d := newIDP(t)
	v := newVerifier(t, d)
	a := New(nil, v)
	ctx := context.Background()
	if _, err := a.Authenticate(ctx, []string{"Bearer " + sign(t, claims(nil), d.key())}); err != nil {
		t.Fatal(err)
	}
	k2 := d.rotate("k2")
	time.Sleep(5 * time.Millisecond) // past MinRefresh
	if _, err := a.Authenticate(ctx, []string{"Bearer " + sign(t, claims(nil), k2)}); err != nil {
		t.Fatalf("after rotation: %v", err)
	}

	slow := NewJWTVerifier(ctx, JWTOptions{Issuer: issuer, Audience: audience, JWKSURL: d.srv.URL, RolesClaim: "roles", MinRefresh: time.Hour})
	defer slow.Close()
	before := d.fetches.Load()
	for range 50 {
		_, _ = New(nil, slow).Authenticate(ctx, []string{"Bearer " + signKid(t, claims(nil), "nope")})
	}
	if n := d.fetches.Load() - before; n != 0 {
		t.Errorf("50 unknown kids within MinRefresh fetched the set %d times", n)
	}
}
