package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/gateway/audit"
	"github.com/mcp-bastion/bastion/internal/gateway/auth"
	"github.com/mcp-bastion/bastion/internal/gateway/upstream"
	"github.com/mcp-bastion/bastion/internal/jsonrpc"
)

// Bounds of the subscription table: a caller cannot make the gateway hold
// more than these, however many subscribe requests it sends. A principal
// mints sessions at will, so the bound per principal is what keeps one
// caller from taking the whole table from the others.
const (
	maxSubscriptionsPerSubscriber = 64
	maxSubscriptionsPerPrincipal  = 1024
	maxSubscriptions              = 16384
)

// subscriptions is who follows which resource (decision 21): for each
// server and URI the subscribers (front sessions), and the URIs each
// subscriber follows. A downstream is subscribed once per URI, by the
// first subscriber, and unsubscribed after the last.
type subscriptions struct {
	mu    sync.Mutex
	byURI map[subKey]map[string]bool // (server, uri) → subscribers
	bySub map[string]*subscriber     // subscriber → what it follows
	// byPrincipal counts the subscriptions of each principal, by
	// principalKey.
	byPrincipal map[string]int
	total       int
	// active holds the URIs the downstream was subscribed to; forwarding
	// those whose first subscribe is on its way, closed when it ends.
	active     map[subKey]bool
	forwarding map[subKey]chan struct{}
	notify     func(subscribers []string, uri string) // set by the front; nil sends nothing
	// listens end the subscriptions/listen requests that follow a URI at
	// a 2026-07-28 downstream, which has no resources/subscribe.
	listens map[subKey]context.CancelFunc
}

// subscriber is one front session's subscriptions.
type subscriber struct {
	follows   map[subKey]bool
	principal string    // principalKey of the session's caller
	expires   time.Time // when the session expires (zero: never)
}

type subKey struct{ server, uri string }

func newSubscriptions() *subscriptions {
	return &subscriptions{byURI: map[subKey]map[string]bool{}, bySub: map[string]*subscriber{}, byPrincipal: map[string]int{},
		active: map[subKey]bool{}, forwarding: map[subKey]chan struct{}{}, listens: map[subKey]context.CancelFunc{}}
}

// principalKey names a principal in the subscription table.
func principalKey(p auth.Principal) string { return p.Issuer + "\x00" + p.Subject }

// OnResourceUpdated makes the gateway call fn with the subscribers of a
// URI whenever its owner says it was updated; call it before Start.
func (g *Gateway) OnResourceUpdated(fn func(subscribers []string, uri string)) {
	g.subs.mu.Lock()
	g.subs.notify = fn
	g.subs.mu.Unlock()
}

// SubscribeRequest is one resources/subscribe or resources/unsubscribe.
type SubscribeRequest struct {
	// Subscriber names the front session that subscribes; Expires is
	// when that session expires (zero: never), after which its
	// subscriptions are dropped as soon as the table needs the room.
	Subscriber string
	Expires    time.Time
	URI        string
	RequestID  string
	Principal  auth.Principal
	// Method is the client's method, as the audit names it:
	// resources/subscribe when empty.
	Method string
}

// errNoSubscribe answers a subscription to a resource whose server does
// not declare resources.subscribe.
func errNoSubscribe(server string) *Error {
	data, _ := json.Marshal(map[string]string{"server": server})
	return &Error{Code: jsonrpc.CodeMethodNotFound, Status: http.StatusOK,
		Message: "Method not found: the server that owns this resource offers no subscriptions", Data: data}
}

// Subscribe runs a resources/subscribe: the URI is routed and authorized
// as a read is; its owner must declare resources.subscribe; the owner is
// subscribed with the URI's first subscriber. Updates then reach this
// subscriber, and no one who did not subscribe.
func (g *Gateway) Subscribe(ctx context.Context, c SubscribeRequest) error {
	method := c.Method
	if method == "" {
		method = "resources/subscribe"
	}
	server, err := g.subscribable(c, method)
	if err != nil {
		return err
	}
	k := subKey{server, c.URI}
	s := g.subs
	pk := principalKey(c.Principal)
	s.mu.Lock()
	if sub := s.bySub[c.Subscriber]; sub != nil && sub.follows[k] {
		s.mu.Unlock()
		return nil // already subscribed: nothing changes
	}
	if s.full(c.Subscriber, pk) {
		// Sessions that expired without a DELETE still hold their
		// subscriptions: drop them before refusing anyone.
		s.mu.Unlock()
		g.dropExpired(ctx)
		s.mu.Lock()
	}
	if s.full(c.Subscriber, pk) {
		s.mu.Unlock()
		return &Error{Code: CodeTooManyRequests, Status: http.StatusTooManyRequests, Message: "Too many requests: too many resource subscriptions"}
	}
	if s.byURI[k] == nil {
		s.byURI[k] = map[string]bool{}
	}
	sub := s.bySub[c.Subscriber]
	if sub == nil {
		sub = &subscriber{follows: map[subKey]bool{}, principal: pk, expires: c.Expires}
		s.bySub[c.Subscriber] = sub
	}
	s.byURI[k][c.Subscriber], sub.follows[k] = true, true
	s.byPrincipal[pk]++
	s.total++
	// The downstream is subscribed once per URI. While another
	// subscriber's subscribe is on its way, wait for it: if it failed,
	// this subscriber tries in its turn, so that no one is told it is
	// subscribed when the downstream is not.
	for !s.active[k] {
		if wait, ok := s.forwarding[k]; ok {
			s.mu.Unlock()
			select {
			case <-wait:
			case <-ctx.Done():
				g.dropSubscription(c.Subscriber, k)
				return context.Cause(ctx)
			}
			s.mu.Lock()
			if !s.bySub[c.Subscriber].has(k) {
				s.mu.Unlock()
				return nil // unsubscribed meanwhile
			}
			continue
		}
		done := make(chan struct{})
		s.forwarding[k] = done
		s.mu.Unlock()
		err := g.forwardSubscription(ctx, c, server, "resources/subscribe")
		s.mu.Lock()
		delete(s.forwarding, k)
		close(done)
		if err != nil {
			s.mu.Unlock()
			g.dropSubscription(c.Subscriber, k)
			return err
		}
		s.active[k] = true
		if len(s.byURI[k]) == 0 {
			// Everyone unsubscribed while it was on its way.
			delete(s.active, k)
			s.mu.Unlock()
			return g.forwardSubscription(ctx, c, server, "resources/unsubscribe")
		}
	}
	s.mu.Unlock()
	return nil
}

// SubscribeAll subscribes c.Subscriber to each of uris at once, each as
// Subscribe does one (routed, authorized and audited on its own), for a
// 2026-07-28 subscriptions/listen, and returns those it now follows, in
// the order of uris. One that fails is left out, for the stream's
// acknowledgement names only what it will carry (decision 26). The
// params' reader bounds uris (mcp.ListenParams, MaxListenResources).
func (g *Gateway) SubscribeAll(ctx context.Context, c SubscribeRequest, uris []string) []string {
	ok := make([]bool, len(uris))
	var wg sync.WaitGroup
	for i, uri := range uris {
		wg.Go(func() {
			one := c
			one.URI = uri
			err := g.Subscribe(ctx, one)
			ok[i] = err == nil
			var refused *Error
			if errors.As(err, &refused) {
				// The code only: a downstream's message is its own words.
				g.log.Debug("a resource subscription of a listen was not honoured", slog.String("request_id", c.RequestID), slog.Int("code", refused.Code))
			}
		})
	}
	wg.Wait()
	var followed []string
	for i, uri := range uris {
		if ok[i] {
			followed = append(followed, uri)
		}
	}
	return followed
}

// has reports whether sub follows k; a nil sub follows nothing.
func (sub *subscriber) has(k subKey) bool { return sub != nil && sub.follows[k] }

// full reports whether a new subscription of subscriber, a session of
// principal pk, would exceed a bound; s.mu is held.
func (s *subscriptions) full(subscriber, pk string) bool {
	n := 0
	if sub := s.bySub[subscriber]; sub != nil {
		n = len(sub.follows)
	}
	return n >= maxSubscriptionsPerSubscriber || s.byPrincipal[pk] >= maxSubscriptionsPerPrincipal || s.total >= maxSubscriptions
}

// dropExpired forgets the subscriptions of every session that has
// expired, as Unsubscribed does for a session that was ended.
func (g *Gateway) dropExpired(ctx context.Context) {
	now := g.now()
	s := g.subs
	s.mu.Lock()
	var gone []string
	for name, sub := range s.bySub {
		if !sub.expires.IsZero() && now.After(sub.expires) {
			gone = append(gone, name)
		}
	}
	s.mu.Unlock()
	for _, name := range gone {
		g.Unsubscribed(ctx, name)
	}
}

// Unsubscribe runs a resources/unsubscribe of the caller's own
// subscription; the owner is unsubscribed after the URI's last
// subscriber. Unsubscribing what is not subscribed succeeds.
func (g *Gateway) Unsubscribe(ctx context.Context, c SubscribeRequest) error {
	s := g.subs
	s.mu.Lock()
	var k subKey
	found := false
	var follows map[subKey]bool
	if sub := s.bySub[c.Subscriber]; sub != nil {
		follows = sub.follows
	}
	for sk := range follows {
		if sk.uri == c.URI {
			k, found = sk, true
		}
	}
	s.mu.Unlock()
	if !found {
		return nil
	}
	if g.dropSubscription(c.Subscriber, k) {
		return g.forwardSubscription(ctx, c, k.server, "resources/unsubscribe")
	}
	return nil
}

// Unsubscribed forgets every subscription of a subscriber whose session
// ended, unsubscribing the owners of URIs no one follows any more.
func (g *Gateway) Unsubscribed(ctx context.Context, subscriber string) {
	s := g.subs
	s.mu.Lock()
	var keys []subKey
	if sub := s.bySub[subscriber]; sub != nil {
		for k := range sub.follows {
			keys = append(keys, k)
		}
	}
	s.mu.Unlock()
	for _, k := range keys {
		if g.dropSubscription(subscriber, k) {
			_ = g.forwardSubscription(ctx, SubscribeRequest{Subscriber: subscriber, URI: k.uri, RequestID: NewRequestID()}, k.server, "resources/unsubscribe")
		}
	}
}

// dropSubscription removes one subscription and reports whether it was
// the URI's last.
func (g *Gateway) dropSubscription(subscriber string, k subKey) bool {
	s := g.subs
	s.mu.Lock()
	defer s.mu.Unlock()
	sub := s.bySub[subscriber]
	if !sub.has(k) {
		return false
	}
	delete(sub.follows, k)
	if len(sub.follows) == 0 {
		delete(s.bySub, subscriber)
	}
	if s.byPrincipal[sub.principal]--; s.byPrincipal[sub.principal] <= 0 {
		delete(s.byPrincipal, sub.principal)
	}
	delete(s.byURI[k], subscriber)
	s.total--
	if len(s.byURI[k]) == 0 {
		delete(s.byURI, k)
		// Only a subscription the downstream holds is to be ended there.
		last := s.active[k]
		delete(s.active, k)
		return last
	}
	return false
}

// subscribable routes and authorizes a subscription as a read, audits
// the decision, and returns the owning server.
func (g *Gateway) subscribable(c SubscribeRequest, method string) (string, error) {
	ev := audit.Event{RequestID: c.RequestID, Subject: c.Principal.Subject, Issuer: c.Principal.Issuer,
		Roles: c.Principal.Roles, Method: method}
	server, err := g.routeRead(c.Principal, c.URI, &ev)
	if err != nil {
		return "", err
	}
	ds := g.servers[server]
	ds.mu.Lock()
	offers := subscribeCapability(ds.info.Capabilities)
	ds.mu.Unlock()
	if !offers {
		ev.Outcome, ev.Reason, ev.Code = audit.Invalid, "no_subscriptions", jsonrpc.CodeMethodNotFound
		g.audit.Record(ev)
		return "", errNoSubscribe(server)
	}
	ev.Outcome = audit.Allow
	g.audit.Record(ev)
	return server, nil
}

// subscribeCapability reports whether capabilities declare
// resources.subscribe.
func subscribeCapability(caps jsontext.Value) bool {
	var c struct {
		Resources *struct {
			Subscribe bool `json:"subscribe"`
		} `json:"resources"`
	}
	return len(caps) > 0 && json.Unmarshal(caps, &c) == nil && c.Resources != nil && c.Resources.Subscribe
}

func (g *Gateway) forwardSubscription(ctx context.Context, c SubscribeRequest, server, method string) error {
	d := g.servers[server]
	d.mu.Lock()
	modern := d.info.Modern
	d.mu.Unlock()
	if modern {
		// A 2026-07-28 server tells of updates only on a listen request
		// held open for them: one per URI, for as long as it is followed.
		k := subKey{server, c.URI}
		g.subs.mu.Lock()
		defer g.subs.mu.Unlock()
		if method == "resources/unsubscribe" {
			if cancel, ok := g.subs.listens[k]; ok {
				cancel()
				delete(g.subs.listens, k)
			}
			return nil
		}
		if old, ok := g.subs.listens[k]; ok {
			old() // one that ended with the connection it was on
		}
		lctx, cancel := context.WithCancel(g.ctx)
		g.subs.listens[k] = cancel
		params, _ := jsontext.AppendQuote([]byte(`{"notifications":{"resourceSubscriptions":[`), c.URI)
		params = append(params, "]}}"...)
		g.wg.Go(func() {
			_, err := d.conn.Call(lctx, "subscriptions/listen", params, upstream.CallOptions{})
			if err != nil && lctx.Err() == nil {
				g.log.Warn("a downstream resource subscription ended", slog.String("server", server), slog.String("error", err.Error()))
			}
		})
		return nil
	}
	log := callLog{g.log, slog.String("request_id", c.RequestID)}
	params, _ := jsontext.AppendQuote([]byte(`{"uri":`), c.URI)
	params = append(params, '}')
	dctx, cancel := context.WithTimeoutCause(ctx, d.cfg.Timeout.D(), errCallTimeout)
	defer cancel()
	// A subscription is a call to the server like any other: it takes a
	// slot of the server's in-flight bound, so that a listen naming many
	// resources cannot send the server more at once than calls may.
	release, err := d.slots.acquire(dctx, c.Principal)
	if err != nil {
		return g.callError(ctx, dctx, log, server, method, context.Cause(dctx))
	}
	defer release()
	_, err = d.conn.Call(dctx, method, params, upstream.CallOptions{Name: c.URI,
		Identity: identityOf(c.Principal, c.RequestID)})
	if err != nil {
		return g.callError(ctx, dctx, log, server, method, err)
	}
	return nil
}

// resubscribe subscribes a server that (re)connected to every URI of it
// that subscribers follow: its new process or session holds none of them.
// One that fails is logged; its subscribers hear nothing more until they
// subscribe again.
func (g *Gateway) resubscribe(server string) {
	s := g.subs
	s.mu.Lock()
	var keys []subKey
	for k := range s.active {
		if k.server == server {
			keys = append(keys, k)
		}
	}
	s.mu.Unlock()
	for _, k := range keys {
		// Only what the server still serves: one that came back as
		// another is quarantined, and hears no caller's subscription.
		if r, t := g.catalog.Snapshot().Route(k.uri); !(r != nil && r.Server == server || r == nil && t != nil && t.Server == server) {
			continue
		}
		c := SubscribeRequest{URI: k.uri, RequestID: NewRequestID()}
		if err := g.forwardSubscription(g.ctx, c, server, "resources/subscribe"); err != nil {
			g.log.Warn("a downstream could not be subscribed again after it reconnected", slog.String("server", server), slog.String("error", err.Error()))
		}
	}
}

// resourceUpdated passes a downstream's notifications/resources/updated
// to the subscribers of that URI at that server, and to no one else.
func (g *Gateway) resourceUpdated(server string, params jsontext.Value) {
	var p struct {
		URI *string `json:"uri"`
	}
	if json.Unmarshal(params, &p) != nil || p.URI == nil {
		return
	}
	s := g.subs
	s.mu.Lock()
	var subscribers []string
	for sub := range s.byURI[subKey{server, *p.URI}] {
		subscribers = append(subscribers, sub)
	}
	notify := s.notify
	s.mu.Unlock()
	if len(subscribers) == 0 || notify == nil {
		return
	}
	notify(subscribers, *p.URI)
}
