// Package auth turns a request's `Authorization: Bearer <token>` into a
// [Principal]: a static token of the configuration (kept only as its
// SHA-256), or a JWT signed by a key of the configured JWKS. Nothing here
// logs or returns a token: a failure says which check failed, never what
// was presented.
package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/gateway/policy"
)

// Principal is an authenticated caller.
type Principal struct {
	// Subject names the caller.
	Subject string
	// Roles are the caller's roles, each of policy.ValidRole's syntax.
	Roles []string
	// Issuer is who vouched for the subject: "static" for a configured
	// token, else the JWT issuer. Subjects are only unique per issuer.
	Issuer string
	// Claims are a JWT's claims (nil for a static token).
	Claims map[string]any
	// Expires is when the credential stops being accepted: a JWT's exp
	// plus the verifier's leeway. Zero for one that does not expire (a
	// configured token). What the credential opened that outlives a
	// request — a notification stream — ends then, or it would go on
	// serving a caller whose every new request is refused.
	Expires time.Time
}

// Policy returns p as the policy package reads a principal.
func (p Principal) Policy() policy.Principal {
	return policy.Principal{Subject: p.Subject, Issuer: p.Issuer, Roles: p.Roles, Claims: p.Claims}
}

// IssuerStatic is the issuer of configured tokens.
const IssuerStatic = "static"

// Error is a failed authentication. Presented says a token was given
// (the challenge then carries error="invalid_token"); Reason is a short,
// fixed description for the caller and the log, never the token.
type Error struct {
	Presented bool
	Reason    string
}

func (e *Error) Error() string { return "auth: " + e.Reason }

func missing(reason string) *Error { return &Error{Reason: reason} }
func invalid(reason string) *Error { return &Error{Presented: true, Reason: reason} }

// ParseBearer reads an Authorization header value (RFC 6750 §2.1): the
// scheme without regard to case, one or more spaces, and a token68 — the
// token itself compared exactly, later.
func ParseBearer(h string) (string, error) {
	if h == "" {
		return "", missing("no bearer token")
	}
	scheme, rest, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", invalid("the Authorization scheme is not Bearer")
	}
	tok := strings.TrimLeft(rest, " ")
	if tok == "" {
		return "", invalid("the bearer token is empty")
	}
	if !token68(tok) {
		return "", invalid("the bearer token is malformed")
	}
	return tok, nil
}

// token68 is RFC 7235's syntax: 1*( ALPHA / DIGIT / "-" / "." / "_" /
// "~" / "+" / "/" ) *"=".
func token68(s string) bool {
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/') {
			break
		}
	}
	if i == 0 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] != '=' {
			return false
		}
	}
	return true
}

// StaticToken is a configured token: its SHA-256, and whom it names.
type StaticToken struct {
	SHA256  [32]byte
	Subject string
	Roles   []string
}

// MinTokenLength is the shortest bearer token MCP_GATEWAY_TOKENS may
// hold: 16 characters (the failure limit per address slows guessing; it
// does not make a short token safe).
const MinTokenLength = 16

// ParseTokensEnv reads MCP_GATEWAY_TOKENS in seed 002's form: a JSON
// object of token → role, or token → {"sub": ..., "role": ...} ("roles",
// a list, is accepted too). A token given without a subject is named by
// the first bytes of its digest. The JSON is read as strictly as the
// configuration file: a token or a member named twice, a member in
// another case ("ROLE") or an unknown one stops start-up, so that no
// entry can quietly take another's place. Errors number the entries in
// their order and never quote a token.
func ParseTokensEnv(v string) ([]StaticToken, error) {
	dec := jsontext.NewDecoder(strings.NewReader(v)) // duplicate names are refused by default
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, errors.New("auth: tokens: not a JSON object")
	}
	var out []StaticToken
	for n := 1; dec.PeekKind() != '}'; n++ {
		name, err := dec.ReadToken()
		if err != nil {
			return nil, tokensSyntax(n, err)
		}
		tok := name.String() // before the next read voids name
		spec, err := dec.ReadValue()
		if err != nil {
			return nil, tokensSyntax(n, err)
		}
		st, err := staticEntry(tok, spec)
		if err != nil {
			return nil, fmt.Errorf("auth: tokens: entry %d: %w", n, err)
		}
		out = append(out, st)
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, errors.New("auth: tokens: not a JSON object")
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, errors.New("auth: tokens: text after the JSON object")
	}
	if len(out) == 0 {
		return nil, errors.New("auth: tokens: no token")
	}
	return out, nil
}

// tokensSyntax is the error of entry n's JSON; the decoder's own message
// could quote the token, so only the kind of fault is said.
func tokensSyntax(n int, err error) error {
	var se *jsontext.SyntacticError
	if errors.As(err, &se) && errors.Is(se.Err, jsontext.ErrDuplicateName) {
		return fmt.Errorf("auth: tokens: entry %d: the token is given twice", n)
	}
	return fmt.Errorf("auth: tokens: entry %d: not valid JSON", n)
}

// staticEntry is one entry of MCP_GATEWAY_TOKENS: the token and what it
// names.
func staticEntry(tok string, spec jsontext.Value) (StaticToken, error) {
	if !token68(tok) {
		return StaticToken{}, errors.New("the token is not a valid bearer token")
	}
	if len(tok) < MinTokenLength {
		return StaticToken{}, fmt.Errorf("the token is shorter than %d characters, and could be guessed (make one with: openssl rand -hex 24)", MinTokenLength)
	}
	st := StaticToken{SHA256: sha256.Sum256([]byte(tok))}
	switch spec.Kind() {
	case '"':
		var role string
		if err := json.Unmarshal(spec, &role); err != nil {
			return StaticToken{}, errors.New(`must be a role or {"sub", "role"}`)
		}
		st.Roles = []string{role}
	case '{':
		var o struct {
			Sub   string   `json:"sub"`
			Role  string   `json:"role"`
			Roles []string `json:"roles"`
		}
		// Member names match exactly (the library's default); an unknown
		// one is refused.
		if err := json.Unmarshal(spec, &o, json.RejectUnknownMembers(true)); err != nil {
			return StaticToken{}, errors.New(`must be a role or {"sub", "role"}, each member once, in lower case`)
		}
		st.Subject, st.Roles = o.Sub, o.Roles
		if o.Role != "" {
			st.Roles = append(st.Roles, o.Role)
		}
	default:
		return StaticToken{}, errors.New(`must be a role or {"sub", "role"}`)
	}
	if st.Subject == "" {
		st.Subject = "token-" + hex.EncodeToString(st.SHA256[:4])
	}
	if len(st.Roles) == 0 {
		return StaticToken{}, errors.New("no role")
	}
	for _, r := range st.Roles {
		if !policy.ValidRole(r) {
			return StaticToken{}, errors.New("a role is not 1-64 characters of [A-Za-z0-9_.:-]")
		}
	}
	return st, nil
}

// Authenticator authenticates requests. It is safe for concurrent use.
type Authenticator struct {
	static []StaticToken
	jwt    *JWTVerifier // nil without JWTs
}

// New returns an authenticator over static tokens and, when jwt is not
// nil, JWTs.
func New(static []StaticToken, jwt *JWTVerifier) *Authenticator {
	return &Authenticator{static: static, jwt: jwt}
}

// Authenticate reads the Authorization header values of a request. More
// than one is refused: which one a downstream or a proxy would read is
// not knowable.
func (a *Authenticator) Authenticate(ctx context.Context, values []string) (Principal, error) {
	if len(values) > 1 {
		return Principal{}, invalid("more than one Authorization header")
	}
	h := ""
	if len(values) == 1 {
		h = values[0]
	}
	tok, err := ParseBearer(h)
	if err != nil {
		return Principal{}, err
	}
	if p, ok := a.lookup(tok); ok {
		return p, nil
	}
	if a.jwt != nil && strings.Count(tok, ".") == 2 {
		return a.jwt.Verify(ctx, tok)
	}
	return Principal{}, invalid("unknown token")
}

// lookup compares the token's digest with every configured digest in
// constant time, with no early exit: the time taken says nothing of which
// token, or which prefix, was right.
func (a *Authenticator) lookup(tok string) (Principal, bool) {
	sum := sha256.Sum256([]byte(tok))
	found := -1
	for i := range a.static {
		if subtle.ConstantTimeCompare(sum[:], a.static[i].SHA256[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Principal{}, false
	}
	st := a.static[found]
	return Principal{Subject: st.Subject, Roles: st.Roles, Issuer: IssuerStatic}, true
}
