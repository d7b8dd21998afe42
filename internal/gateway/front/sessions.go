package front

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-bastion/bastion/internal/gateway"
	"github.com/mcp-bastion/bastion/internal/gateway/ledger"
	"github.com/mcp-bastion/bastion/internal/mcp"
)

// Legacy sessions are stateless on the server: the session id is a sealed
// token of {version, issued_at, nonce}, so that any replica that holds the
// key can serve it, and an id that was not issued with the key, has
// expired or was ended with DELETE is refused with 404. What the front
// does keep per session is only what must be: the revocations, until the
// ids they revoke expire, and open notification streams.

var (
	errNoSession   = errors.New("front: no session")
	errSessionGone = errors.New("front: the session does not exist or has ended")
)

// session is an open legacy session.
type session struct {
	version string
	nonce   string // hex, the session's identity
	issued  time.Time
	caps    clientCaps // what the client declared it can answer
}

// clientCaps are the client capabilities of a session that the gateway
// can relay requests to (decision 24), sealed into the session id with
// the rest: a stateless session keeps them without any state.
type clientCaps byte

// Client capabilities.
const (
	capSampling clientCaps = 1 << iota
	capElicitation
	capRoots
	capElicitationForm
	capElicitationURL
	capSamplingTools
	capSamplingContext
)

// capBits pairs each bit with its field of gateway.ClientCapabilities.
func capBits(c *gateway.ClientCapabilities) []struct {
	on  *bool
	bit clientCaps
} {
	return []struct {
		on  *bool
		bit clientCaps
	}{{&c.Sampling, capSampling}, {&c.Elicitation, capElicitation}, {&c.Roots, capRoots},
		{&c.ElicitationForm, capElicitationForm}, {&c.ElicitationURL, capElicitationURL},
		{&c.SamplingTools, capSamplingTools}, {&c.SamplingContext, capSamplingContext}}
}

// capsOf reads the capabilities object of an initialize.
func capsOf(caps []byte) clientCaps {
	c := gateway.CapabilitiesIn(caps)
	var out clientCaps
	for _, f := range capBits(&c) {
		if *f.on {
			out |= f.bit
		}
	}
	return out
}

// relayable is c as the gateway's relay reads it.
func (c clientCaps) relayable() gateway.ClientCapabilities {
	var out gateway.ClientCapabilities
	for _, f := range capBits(&out) {
		*f.on = c&f.bit != 0
	}
	if out.Elicitation && !out.ElicitationForm && !out.ElicitationURL {
		// A session sealed before modes were: elicitation was form.
		out.ElicitationForm = true
	}
	return out
}

// Limits of what sessions hold.
const (
	maxRevoked = 1_000_000
	// maxRevokedPerPrincipal is one principal's share of maxRevoked, so
	// that one caller minting and ending sessions cannot leave every
	// other one unable to end its own.
	maxRevokedPerPrincipal = maxRevoked / 10
	maxStreams             = 1024
	maxStreamsPerClient    = 4
	// maxStreamsPerPrincipal bounds one caller's share of maxStreams, so
	// that one principal cannot take every stream from the others.
	maxStreamsPerPrincipal = 16
)

type sessions struct {
	// macs are HMAC-SHA256 states of the key, reused: the key's two
	// padded blocks are hashed once per state rather than for every
	// request that presents a session id.
	macs sync.Pool
	ttl  time.Duration
	// store keeps the revocations beside the ledger, nil for none.
	store ledger.Revocations

	mu      sync.Mutex
	revoked map[string]revocation // nonce → the revocation
	// revokedBy counts the revocations each principal (ownerOf, hex)
	// made that are still held, for its share of the table; swept is
	// when expired ones were last dropped.
	revokedBy map[string]int
	swept     time.Time
	streams   map[string]map[*notifier]string // key → stream → its principal
	owned     map[string]int                  // principal → streams open
	nstream   int
}

func newSessions(key []byte, ttl time.Duration, store ledger.Revocations) *sessions {
	s := &sessions{ttl: ttl, store: store, revoked: map[string]revocation{}, revokedBy: map[string]int{},
		streams: map[string]map[*notifier]string{}, owned: map[string]int{}}
	s.macs.New = func() any { return hmac.New(sha256.New, key) }
	return s
}

// seal is the HMAC-SHA256 of msg under the sessions' key.
func (s *sessions) seal(msg []byte) []byte {
	m := s.macs.Get().(hash.Hash)
	defer s.macs.Put(m)
	m.Reset()
	m.Write(msg)
	return m.Sum(nil)
}

// revocation is a session a DELETE ended: until when its id would be
// valid anyway, and who ended it ("" for one recorded without its owner).
type revocation struct {
	until time.Time
	owner string
}

// revokeTimeout bounds recording a revocation in the store.
const revokeTimeout = 5 * time.Second

// load takes in the revocations the store recorded since since, and
// returns the time to read from next. It takes every one, whatever the
// bound of the table: a session another replica (or this one, before a
// restart) ended stays ended here; the bound is kept by refusing new
// DELETEs (revoke), each replica counting every principal's share from
// the store.
func (s *sessions) load(ctx context.Context, since time.Time) (time.Time, error) {
	if s.store == nil {
		return since, nil
	}
	rs, next, err := s.store.Revoked(ctx, since)
	if err != nil {
		return since, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rs {
		if _, known := s.revoked[r.Nonce]; !known {
			s.revoked[r.Nonce] = revocation{until: r.Until, owner: r.Owner}
			if r.Owner != "" {
				s.revokedBy[r.Owner]++
			}
			// Ended on another replica: its streams here end too.
			s.endStreams(r.Nonce)
		}
	}
	return next, nil
}

// sweepEvery bounds how often the table of ended sessions is swept of
// expired ones: a sweep reads the whole table with s.mu held, so a
// principal whose DELETEs are refused cannot make it run on each.
const sweepEvery = time.Minute

// dropExpired forgets the revocations of ids that expired anyway, at most
// once a sweepEvery; s.mu is held.
func (s *sessions) dropExpired(now time.Time) {
	if now.Sub(s.swept) < sweepEvery {
		return
	}
	s.swept = now
	for n, r := range s.revoked {
		if now.After(r.until) {
			delete(s.revoked, n)
			if r.owner != "" {
				if s.revokedBy[r.owner]--; s.revokedBy[r.owner] <= 0 {
					delete(s.revokedBy, r.owner)
				}
			}
		}
	}
}

// ownerOf is what a session id binds its principal by: a digest of the
// issuer and the subject, so that an id presented with another
// principal's token is refused (decision 10) and no subject is readable
// from an id.
func ownerOf(issuer, subject string) []byte {
	s := sha256.Sum256([]byte("mcp-bastion session owner\x00" + issuer + "\x00" + subject))
	return s[:16]
}

// mint issues a session id for version, owned by owner (ownerOf), for a
// client that declared caps.
func (s *sessions) mint(version string, owner []byte, caps clientCaps) (string, session) {
	nonce := newNonce()
	now := time.Now()
	b := make([]byte, 0, 1+len(version)+8+16+16+1+16)
	b = append(b, byte(len(version)))
	b = append(b, version...)
	b = binary.BigEndian.AppendUint64(b, uint64(now.Unix()))
	b = append(b, nonce...)
	b = append(b, owner...)
	b = append(b, byte(caps))
	b = append(b, s.seal(b)[:16]...)
	return base64.RawURLEncoding.EncodeToString(b), session{version: version, nonce: hex.EncodeToString(nonce), issued: now, caps: caps}
}

// open checks a session id: sealed with the key, owned by owner, a
// version the gateway speaks, not expired, not revoked.
func (s *sessions) open(id string, owner []byte) (session, error) {
	if id == "" {
		return session{}, errNoSession
	}
	b, err := gateway.DecodeSealed(id)
	const fixed = 1 + 8 + 16 + 16 + 1 + 16
	if err != nil || len(b) < fixed || len(b) != int(b[0])+fixed {
		return session{}, errSessionGone
	}
	body, mac := b[:len(b)-16], b[len(b)-16:]
	if !hmac.Equal(s.seal(body)[:16], mac) {
		return session{}, errSessionGone
	}
	n := int(b[0])
	version := string(b[1 : 1+n])
	issued := time.Unix(int64(binary.BigEndian.Uint64(b[1+n:])), 0)
	nonce := hex.EncodeToString(b[1+n+8 : 1+n+8+16])
	if !hmac.Equal(b[1+n+8+16:1+n+8+16+16], owner) {
		return session{}, errSessionGone
	}
	caps := clientCaps(b[1+n+8+16+16])
	if !mcp.IsLegacy(version) || time.Since(issued) > s.ttl || time.Until(issued) > time.Minute {
		return session{}, errSessionGone
	}
	s.mu.Lock()
	_, gone := s.revoked[nonce]
	s.mu.Unlock()
	if gone {
		return session{}, errSessionGone
	}
	return session{version: version, nonce: nonce, issued: issued, caps: caps}, nil
}

// revoke ends a session of owner (ownerOf): its id is refused from now
// on, here and — once the store has it — after a restart and on every
// replica, and its streams close. It reports false, and ends nothing,
// when the revocations still running fill their bound, or the owner's
// share of it, or the store cannot record it: a DELETE is then refused
// rather than answered as done while the id stays valid.
func (s *sessions) revoke(ctx context.Context, ss session, owner []byte) bool {
	who := hex.EncodeToString(owner)
	s.mu.Lock()
	if len(s.revoked) >= maxRevoked || s.revokedBy[who] >= maxRevokedPerPrincipal {
		s.dropExpired(time.Now())
	}
	full := len(s.revoked) >= maxRevoked || s.revokedBy[who] >= maxRevokedPerPrincipal
	s.mu.Unlock()
	if full {
		return false
	}
	if s.store != nil {
		ctx, cancel := context.WithTimeout(ctx, revokeTimeout)
		defer cancel()
		if err := s.store.Revoke(ctx, ledger.Revocation{Nonce: ss.nonce, Until: ss.issued.Add(s.ttl), Owner: who}); err != nil {
			return false
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, known := s.revoked[ss.nonce]; !known {
		s.revoked[ss.nonce] = revocation{until: ss.issued.Add(s.ttl), owner: who}
		s.revokedBy[who]++
	}
	s.endStreams(ss.nonce)
	return true
}

// endStreams closes the notification streams of the session nonce, which
// ended; s.mu is held.
func (s *sessions) endStreams(nonce string) {
	for ch, principal := range s.streams[nonce] {
		close(ch.wake)
		s.drop(principal)
	}
	delete(s.streams, nonce)
}

// A notifier is one open notification stream. wake is a signal: it holds
// at most one pending value, and pending says which lists changed since
// the stream last looked, so a client that does not keep up hears of
// several changes once, and never holds the gateway.
type notifier struct {
	wake    chan struct{}
	pending atomic.Uint32

	mu      sync.Mutex
	updated []string // URIs updated since the stream last looked, at most maxUpdated
}

// maxUpdated bounds the updates one stream holds for a client that does
// not keep up; past it the oldest are dropped (the client reads the
// resource again on the next update anyway).
const maxUpdated = 64

// takeUpdated returns the URIs updated since the last take.
func (n *notifier) takeUpdated() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	u := n.updated
	n.updated = nil
	return u
}

// What changed, in a notifier's pending set.
const (
	changedTools uint32 = 1 << iota
	changedPrompts
	changedResources
)

// take returns what changed since the last take.
func (n *notifier) take() uint32 { return n.pending.Swap(0) }

// stream registers a notification stream of principal under key (a
// session's nonce, or a 2026-07-28 subscription's name of its own, for it
// has no session); nil when there are too many, in all, of that session
// or of that principal.
func (s *sessions) stream(key, principal string) *notifier {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nstream >= maxStreams || (key != "" && len(s.streams[key]) >= maxStreamsPerClient) ||
		s.owned[principal] >= maxStreamsPerPrincipal {
		return nil
	}
	ch := &notifier{wake: make(chan struct{}, 1)}
	if s.streams[key] == nil {
		s.streams[key] = map[*notifier]string{}
	}
	s.streams[key][ch] = principal
	s.owned[principal]++
	s.nstream++
	return ch
}

// unstream removes a stream that ended on the client's side.
func (s *sessions) unstream(key string, ch *notifier) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if principal, ok := s.streams[key][ch]; ok {
		delete(s.streams[key], ch)
		close(ch.wake)
		s.drop(principal)
		if len(s.streams[key]) == 0 {
			delete(s.streams, key)
		}
	}
}

// drop forgets one stream of principal; mu is held.
func (s *sessions) drop(principal string) {
	s.nstream--
	if s.owned[principal]--; s.owned[principal] <= 0 {
		delete(s.owned, principal)
	}
}

// broadcast signals every session, and every listen stream, that the
// lists in what changed: on one of a session's open streams, for a
// message goes on one stream only, never on each of them (the spec's
// Streamable HTTP transport).
func (s *sessions) broadcast(what uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, set := range s.streams {
		if len(set) == 0 {
			continue
		}
		ch := oneOf(set)
		ch.pending.Or(what)
		select {
		case ch.wake <- struct{}{}:
		default: // a signal is already pending
		}
	}
}

// oneOf is one of a session's open streams; set is not empty.
func oneOf(set map[*notifier]string) *notifier {
	for ch := range set {
		return ch
	}
	return nil
}

// resourceUpdated tells the streams of the sessions keyed by nonces that
// uri was updated.
func (s *sessions) resourceUpdated(nonces []string, uri string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range nonces {
		set := s.streams[n]
		if len(set) == 0 {
			continue
		}
		ch := oneOf(set) // one stream of the session, as broadcast
		ch.mu.Lock()
		if !slices.Contains(ch.updated, uri) {
			ch.updated = append(ch.updated, uri)
			if len(ch.updated) > maxUpdated {
				ch.updated = ch.updated[1:]
			}
		}
		ch.mu.Unlock()
		select {
		case ch.wake <- struct{}{}:
		default:
		}
	}
}

// closeStreams ends every stream, for shutdown.
func (s *sessions) closeStreams() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for n, set := range s.streams {
		for ch := range set {
			close(ch.wake)
		}
		delete(s.streams, n)
	}
	s.nstream = 0
	clear(s.owned)
}

func hmacSum(key, msg []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return m.Sum(nil)
}
