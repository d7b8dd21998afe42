package gateway

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/gateway/auth"
)

// A round of input that the gateway cannot fulfil itself is handed to a
// 2026-07-28 caller, which answers it by calling again with inputResponses
// and the requestState it was handed (decision 24). What the gateway needs
// to resume the call travels in that state: the downstream's own state,
// the requests asked and how many rounds the call took. It is sealed with
// AES-256-GCM under a key only the gateway holds, so the caller can
// neither read the downstream's state (which the server wrote for itself)
// nor alter any of it, and it is bound to the caller, the tool, the
// arguments and an expiry, so that no caller can replay another's round,
// or one round in another call.

const (
	// sealPrefix starts every sealed requestState and is its AEAD's
	// additional data: a token of another use or version never opens.
	sealPrefix = "bastion-input-1."
	// inputStateTTL is how long a caller has to answer a round: a human
	// may be asked.
	inputStateTTL = 10 * time.Minute
	// maxSealedState bounds the requestState a caller sends back, and so
	// the downstream state the gateway hands out.
	maxSealedState = 64 << 10
)

// handedRound is what a sealed requestState holds.
type handedRound struct {
	Issuer  string `json:"iss"`
	Subject string `json:"sub"`
	Tool    string `json:"tool"`
	// Args is the SHA-256 of the call's arguments (members in name
	// order, numbers as written): the answers count for these only.
	Args    []byte `json:"args"`
	Expires int64  `json:"exp"`
	// Round is the number of rounds the call has taken so far.
	Round int `json:"round"`
	// Asked maps each request's key to its method: the answers must be
	// exactly these.
	Asked map[string]string `json:"asked"`
	State *string           `json:"state,omitempty"`
}

// inputSealer seals and opens the rounds handed to callers.
type inputSealer struct{ aead cipher.AEAD }

// newInputSealer derives the sealing key from secret.
func newInputSealer(secret []byte) (*inputSealer, error) {
	key, err := hkdf.Key(sha256.New, secret, nil, "mcp-bastion gateway key for requestState", 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	// A random nonce per seal: the key is long-lived and shared by
	// replicas, so no counter could be kept; 96 random bits are safe far
	// beyond the number of rounds one key will seal.
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return nil, err
	}
	return &inputSealer{aead: aead}, nil
}

// randomSealer seals with a key of the process's own: a round handed out
// does not survive a restart, and no other replica opens it.
func randomSealer() *inputSealer {
	secret := make([]byte, 32)
	_, _ = rand.Read(secret) // never fails (crypto/rand)
	s, err := newInputSealer(secret)
	if err != nil {
		panic("gateway: " + err.Error()) // AES-256 with a 32-byte key cannot fail
	}
	return s
}

// argsDigest is the digest a round is bound to: the arguments with object
// members in name order and no whitespace, numbers kept as written, so
// that a client that re-encodes the same arguments matches.
func argsDigest(args jsontext.Value) []byte {
	v := jsontext.Value(bytes.Clone(args))
	if v.Canonicalize(jsontext.CanonicalizeRawInts(false), jsontext.CanonicalizeRawFloats(false)) != nil {
		v = args // refused by the schema before it is ever sealed
	}
	sum := sha256.Sum256(v)
	return sum[:]
}

// seal is r as a requestState, or an error when it is too large to hand
// out.
func (s *inputSealer) seal(r handedRound) (string, error) {
	plain, err := json.Marshal(r, json.Deterministic(true))
	if err != nil {
		return "", err
	}
	out := sealPrefix + base64.RawURLEncoding.EncodeToString(s.aead.Seal(nil, nil, plain, []byte(sealPrefix)))
	if len(out) > maxSealedState {
		return "", errors.New("the round's state is too large to hand to the caller")
	}
	return out, nil
}

// errBadState refuses a requestState that the gateway did not hand this
// caller for this call, or that expired. It says no more: which check
// failed is no business of a caller probing the seal.
var errBadState = errors.New("requestState is not one this gateway handed to this caller for this call, or it expired")

// open returns the round sealed in state, if it was sealed by this key for
// principal p calling tool with args, and has not expired at now.
func (s *inputSealer) open(state string, p auth.Principal, tool string, args jsontext.Value, now time.Time) (handedRound, error) {
	var r handedRound
	body, ok := strings.CutPrefix(state, sealPrefix)
	if !ok || len(state) > maxSealedState {
		return r, errBadState
	}
	sealed, err := DecodeSealed(body)
	if err != nil {
		return r, errBadState
	}
	plain, err := s.aead.Open(nil, nil, sealed, []byte(sealPrefix))
	if err != nil || json.Unmarshal(plain, &r) != nil {
		return handedRound{}, errBadState
	}
	if r.Issuer != p.Issuer || r.Subject != p.Subject || r.Tool != tool ||
		!bytes.Equal(r.Args, argsDigest(args)) || now.Unix() >= r.Expires {
		return handedRound{}, errBadState
	}
	return r, nil
}
