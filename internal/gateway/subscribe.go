package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"sync"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/gateway/audit"
	"github.com/mcp-bastion/bastion/internal/gateway/auth"
	"github.com/mcp-bastion/bastion/internal/gateway/upstream"
	"github.com/mcp-bastion/bastion/internal/jsonrpc"
)

// Bounds of the subscription table: a caller cannot make the gateway hold
// more than these, however many subscribe requests it sends.
const (
	maxSubscriptionsPerSubscriber = 64
	maxSubscriptions              = 16384
)

// subscriptions is who follows which resource (decision 21): for each
// server and URI the subscribers (front sessions), and the URIs each
// subscriber follows. A downstream is subscribed once per URI, with the
// first subscriber, and unsubscribed after the last.
type subscriptions struct {
	mu     sync.Mutex
	byURI  map[subKey]map[string]bool // (server, uri) → subscribers
	bySub  map[string]map[subKey]bool // subscriber → what it follows
	total  int
	notify func(subscribers []string, uri string) // set by the front; nil sends nothing
	// listens end the subscriptions/listen requests that follow a URI at
	// a 2026-07-28 downstream, which has no resources/subscribe.
	listens map[subKey]context.CancelFunc
}

type subKey struct{ server, uri string }

func newSubscriptions() *subscriptions {
	return &subscriptions{byURI: map[subKey]map[string]bool{}, bySub: map[string]map[subKey]bool{}, listens: map[subKey]context.CancelFunc{}}
}

// OnResourceUpdated makes the gateway call fn with the subscribers of a
// URI whenever its owner says it was updated; call it before Start.
func (g *Gateway) OnResourceUpdated(fn func(subscribers []string, uri string)) {
	g.subs.mu.Lock()
	g.subs.notify = fn
	g.subs.mu.Unlock()
}

// SubscribeRequest is one resources/subscribe or resources/unsubscribe.
type SubscribeRequest struct {
	// Subscriber names the front session that subscribes.
	Subscriber string
	URI        string
	RequestID  string
	Principal  auth.Principal
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
	server, err := g.subscribable(c, "resources/subscribe")
	if err != nil {
		return err
	}
	k := subKey{server, c.URI}
	s := g.subs
	s.mu.Lock()
	if s.bySub[c.Subscriber][k] {
		s.mu.Unlock()
		return nil // already subscribed: nothing changes
	}
	if len(s.bySub[c.Subscriber]) >= maxSubscriptionsPerSubscriber || s.total >= maxSubscriptions {
		s.mu.Unlock()
		return &Error{Code: CodeTooManyRequests, Status: http.StatusTooManyRequests, Message: "Too many requests: too many resource subscriptions"}
	}
	first := len(s.byURI[k]) == 0
	if s.byURI[k] == nil {
		s.byURI[k] = map[string]bool{}
	}
	if s.bySub[c.Subscriber] == nil {
		s.bySub[c.Subscriber] = map[subKey]bool{}
	}
	s.byURI[k][c.Subscriber], s.bySub[c.Subscriber][k] = true, true
	s.total++
	s.mu.Unlock()
	if !first {
		return nil
	}
	if err := g.forwardSubscription(ctx, c, server, "resources/subscribe"); err != nil {
		g.dropSubscription(c.Subscriber, k)
		return err
	}
	return nil
}

// Unsubscribe runs a resources/unsubscribe of the caller's own
// subscription; the owner is unsubscribed after the URI's last
// subscriber. Unsubscribing what is not subscribed succeeds.
func (g *Gateway) Unsubscribe(ctx context.Context, c SubscribeRequest) error {
	s := g.subs
	s.mu.Lock()
	var k subKey
	found := false
	for sk := range s.bySub[c.Subscriber] {
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
	keys := make([]subKey, 0, len(s.bySub[subscriber]))
	for k := range s.bySub[subscriber] {
		keys = append(keys, k)
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
	if !s.bySub[subscriber][k] {
		return false
	}
	delete(s.bySub[subscriber], k)
	if len(s.bySub[subscriber]) == 0 {
		delete(s.bySub, subscriber)
	}
	delete(s.byURI[k], subscriber)
	s.total--
	if len(s.byURI[k]) == 0 {
		delete(s.byURI, k)
		return true
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
	_, err := d.conn.Call(dctx, method, params, upstream.CallOptions{Name: c.URI,
		Identity: &upstream.Identity{Subject: c.Principal.Subject, Roles: c.Principal.Roles, RequestID: c.RequestID}})
	if err != nil {
		return g.callError(ctx, dctx, log, server, method, err)
	}
	return nil
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
