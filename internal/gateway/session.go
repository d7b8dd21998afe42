package gateway

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"regexp"
	"slices"
	"sync"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/gateway/admit"
	"github.com/mcp-bastion/bastion/internal/gateway/auth"
	"github.com/mcp-bastion/bastion/internal/guard"
	"github.com/mcp-bastion/bastion/internal/jsonrpc"
	"github.com/mcp-bastion/bastion/internal/mcp"
	"github.com/mcp-bastion/bastion/internal/session"
	"github.com/mcp-bastion/bastion/internal/tool"
)

// SessionCatalog is the catalog as package session serves it: the stdio
// front (`bastion gateway --stdio`) is a session.Server over it.
// Its one client is p: every call is decided for p, and p's view is listed.
func (g *Gateway) SessionCatalog(enc *mcp.Encoder, cursorKey []byte, p auth.Principal) session.Catalog {
	return &sessionCatalog{g: g, lister: g.NewLister(enc, cursorKey), p: p, view: g.ViewOf(p)}
}

type sessionCatalog struct {
	g      *Gateway
	lister *Lister
	p      auth.Principal
	view   View
}

var _ session.Catalog = (*sessionCatalog)(nil)

func (c *sessionCatalog) List(version string, cursor *string) ([]byte, *jsonrpc.Error) {
	res, err := c.lister.List(version, cursor, c.view)
	if err != nil {
		return nil, err.RPC(jsonrpc.ID{})
	}
	return res, nil
}

// Lookup finds every name: a name the catalog does not offer goes to
// Invoke too, as it does from the HTTP front, which refuses it as an
// unknown tool and audits and counts it there — with, for a tool held
// back (pending review, quarantined, rejected), why. Refused here, the
// session would answer the same error with no audit event.
func (c *sessionCatalog) Lookup(name string) (tool.Tool, bool) {
	// The descriptor's name is what the session logs: a name the
	// catalog does not hold is the caller's text, logged only in the
	// form of a name.
	desc := tool.Descriptor{Name: LogName(name)}
	if t, ok := c.g.catalog.Snapshot().Lookup(name); ok {
		desc = tool.Descriptor{Name: t.Public, InputSchema: t.InputSchema}
	}
	return &relayTool{g: c.g, p: c.p, name: name, desc: desc}, true
}

// logNameSyntax is the MCP tool-name rule (SEP-986); a qualified name is
// held to the same length.
var logNameSyntax = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// LogName is how a tool name a caller sent is written in the log: as
// sent when it has the form of a name, else "(not a tool name)". A
// caller's text — a sentence, a secret, control or bidirectional
// characters, a megabyte — does not reach the operator's log, as the
// session core keeps it from its own lines.
func LogName(name string) string { return logName(name, "(not a tool name)") }

// logName is name when it has the form of a name, else instead.
func logName(name, instead string) string {
	if logNameSyntax.MatchString(name) {
		return name
	}
	return instead
}

// Watch signals a change of the tools the one client can see, and only
// those: a change it cannot see sends nothing (decision 26), as on the
// HTTP front's streams.
func (c *sessionCatalog) Watch() (<-chan struct{}, func()) {
	out := make(chan struct{}, 1)
	stop := c.g.watchView(c.view, func(mcp.Listen) {
		select {
		case out <- struct{}{}:
		default: // a signal is already pending
		}
	}, ViewTools)
	return out, stop
}

// SessionRelay is what the stdio front serves besides tools, as package
// session serves it: the catalog's prompts and resources, resource
// subscriptions, completion and logging/setLevel, for its one client p,
// through the same [Methods] as the HTTP front. It takes the gateway's
// resource updates (OnResourceUpdated), so a gateway has one such relay,
// and no HTTP front beside it.
func (g *Gateway) SessionRelay(enc *mcp.Encoder, cursorKey []byte, p auth.Principal) session.Relay {
	r := &sessionRelay{g: g, methods: g.NewMethods(enc, g.NewLister(enc, cursorKey), ArgumentLimits()), p: p, view: g.ViewOf(p),
		subscriber: "stdio-" + NewRequestID(), wake: make(chan struct{}, 1)}
	g.OnResourceUpdated(func(subscribers []string, uri string) {
		if slices.Contains(subscribers, r.subscriber) {
			r.post(session.Change{Updated: uri})
		}
	})
	return r
}

type sessionRelay struct {
	g       *Gateway
	methods *Methods
	p       auth.Principal
	view    View
	// subscriber names the one client in the subscription table.
	subscriber string

	// mu guards what is pending for the session, which wake signals:
	// list changes merged, updated URIs once each and at most
	// maxPendingUpdates of them (the oldest go first).
	mu      sync.Mutex
	lists   mcp.Listen
	updated []string
	wake    chan struct{}
}

// maxPendingUpdates bounds the updates held for a session that is slow to
// take them; an update says only "read it again", so a dropped one is
// covered by any later one of the same URI.
const maxPendingUpdates = 64

var _ session.Relay = (*sessionRelay)(nil)

func (r *sessionRelay) Offered() mcp.Offered { return r.g.Offered() }

func (r *sessionRelay) Serve(ctx context.Context, version, method string, params jsontext.Value) ([]byte, *jsonrpc.Error) {
	rid := NewRequestID()
	req := MethodRequest{Method: method, Version: version, Params: params, RequestID: rid, Principal: r.p}
	if !mcp.IsModern(version) {
		// A 2026-07-28 client follows resources on its
		// subscriptions/listen (Follow); it has no resources/subscribe.
		req.Subscriber = r.subscriber
	}
	res, err := r.methods.Serve(ctx, req)
	var gwErr *Error
	switch {
	case err == nil:
		return res, nil
	case errors.As(err, &gwErr):
		return nil, gwErr.RPC(jsonrpc.ID{})
	case ctx.Err() != nil:
		return nil, nil
	}
	r.g.log.Error(method+" failed", slog.String("request_id", rid), slog.String("error", err.Error()))
	return nil, jsonrpc.NewError(jsonrpc.ID{}, jsonrpc.CodeInternalError, "Internal error")
}

// Follow subscribes the one client to uris for a 2026-07-28
// subscriptions/listen, as the HTTP front's listen does; updates then
// come through Watch, as those of a legacy subscription do.
func (r *sessionRelay) Follow(ctx context.Context, uris []string) ([]string, *jsonrpc.Error) {
	return r.g.SubscribeAll(ctx, SubscribeRequest{Subscriber: r.subscriber, RequestID: NewRequestID(),
		Principal: r.p, Method: "subscriptions/listen"}, uris), nil
}

// Unfollow ends the one client's subscriptions to uris.
func (r *sessionRelay) Unfollow(ctx context.Context, uris []string) {
	for _, uri := range uris {
		c := SubscribeRequest{Subscriber: r.subscriber, URI: uri, RequestID: NewRequestID(), Principal: r.p}
		if err := r.g.Unsubscribe(ctx, c); err != nil {
			r.g.log.Debug("a resource could not be unfollowed", slog.String("request_id", c.RequestID))
		}
	}
}

// post adds c to what is pending for the session and wakes Watch's pump.
// It never blocks: the catalog and the subscription table call it.
func (r *sessionRelay) post(c session.Change) {
	r.mu.Lock()
	r.lists.Prompts = r.lists.Prompts || c.Lists.Prompts
	r.lists.Resources = r.lists.Resources || c.Lists.Resources
	if c.Updated != "" && !slices.Contains(r.updated, c.Updated) {
		r.updated = append(r.updated, c.Updated)
		if len(r.updated) > maxPendingUpdates {
			r.updated = r.updated[1:]
		}
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default: // the pump is already due
	}
}

// Watch reports the prompt and resource list changes the one client can
// see, as Watch of the catalog does the tools, and the updates of the
// resources it subscribed to.
func (r *sessionRelay) Watch() (<-chan session.Change, func()) {
	out := make(chan session.Change)
	stopLists := r.g.watchView(r.view, func(l mcp.Listen) { r.post(session.Change{Lists: l}) }, ViewPrompts, ViewResources)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-r.wake:
			case <-quit:
				return
			}
			r.mu.Lock()
			lists, updated := r.lists, r.updated
			r.lists, r.updated = mcp.Listen{}, nil
			r.mu.Unlock()
			var changes []session.Change
			if lists != (mcp.Listen{}) {
				changes = append(changes, session.Change{Lists: lists})
			}
			for _, uri := range updated {
				changes = append(changes, session.Change{Updated: uri})
			}
			for _, c := range changes {
				select {
				case out <- c:
				case <-quit:
					return
				}
			}
		}
	}()
	return out, func() {
		stopLists()
		close(quit)
		<-done
	}
}

// watchView calls changed, from a goroutine of its own, after each change
// of the catalog that changes one of lists (ViewTools, ViewPrompts,
// ViewResources) as view sees it, naming the lists that changed. It
// returns a func that stops it and waits for it.
func (g *Gateway) watchView(view View, changed func(mcp.Listen), lists ...int) (stop func()) {
	kinds := map[int]admit.Kind{ViewTools: admit.KindTool, ViewPrompts: admit.KindPrompt, ViewResources: admit.KindResource}
	// The catalog signals each kind on a channel of its own; one feeder
	// per list forwards its signals to one loop, which alone keeps the
	// digests.
	merged := make(chan int, len(lists))
	quit, done := make(chan struct{}), make(chan struct{})
	var feeders sync.WaitGroup
	last := map[int][sha256.Size]byte{}
	for _, list := range lists {
		ch := g.catalog.Changed(kinds[list])
		last[list] = g.ViewDigest(list, view)
		feeders.Go(func() {
			defer g.catalog.Unsubscribe(ch)
			for {
				select {
				case <-ch:
					select {
					case merged <- list:
					case <-quit:
						return
					}
				case <-quit:
					return
				}
			}
		})
	}
	go func() {
		defer close(done)
		for {
			select {
			case list := <-merged:
				if d := g.ViewDigest(list, view); d != last[list] {
					last[list] = d
					changed(mcp.Listen{Tools: list == ViewTools, Prompts: list == ViewPrompts, Resources: list == ViewResources})
				}
			case <-quit:
				return
			}
		}
	}()
	return func() {
		close(quit)
		feeders.Wait()
		<-done
	}
}

// relayTool is one catalog tool as a session calls it.
type relayTool struct {
	g *Gateway
	p auth.Principal
	// name is the name the caller sent, which Invoke resolves; desc's
	// is the one logged (LogName's for a name the catalog does not hold).
	name string
	desc tool.Descriptor
}

func (t *relayTool) Descriptor() tool.Descriptor { return t.desc }

// TakesRounds marks a relayed tool as one whose call may be answered with
// a round of input for a 2026-07-28 client (decision 24).
func (t *relayTool) TakesRounds() {}

func (t *relayTool) Call(ctx context.Context, args jsontext.Value) (tool.Result, error) {
	// The session's log line of the call carries the id it gave the
	// call: the audit event carries the same.
	rid := tool.RequestIDOf(ctx)
	if rid == "" {
		rid = NewRequestID()
	}
	c := Call{Name: t.name, Arguments: args, Principal: t.p, RequestID: rid}
	if p := tool.ProgressOf(ctx); p != nil {
		c.ProgressToken, c.Progress = p.Token, p.Send
	}
	// The downstream's log messages while it serves the call reach the
	// one client (tagged with the server's name, as over HTTP).
	c.Messages = tool.MessagesOf(ctx)
	if q := tool.RequesterOf(ctx); q != nil {
		// A session-era client: its server's requests are relayed to it
		// on the session, for what it declared at initialize.
		c.ClientRequests, c.ClientCapabilities = q.Ask, CapabilitiesIn(q.Capabilities)
	}
	if r := tool.RoundsOf(ctx); r != nil {
		// A 2026-07-28 client: a round of input is handed to it, for
		// what this request declares it can answer.
		c.TakesRounds, c.ClientCapabilities = true, CapabilitiesIn(r.Capabilities)
		if r.State != nil {
			c.Answers = &Answers{Responses: r.Responses, State: *r.State}
		}
	}
	res, err := t.g.Invoke(ctx, c)
	var gwErr *Error
	if errors.As(err, &gwErr) {
		pe := &tool.ProtocolError{Code: gwErr.Code, Message: gwErr.Message, Data: gwErr.Data}
		if gwErr.unknown {
			pe.Outcome = "unknown_tool" // as the HTTP front's log and the session's own say
		}
		return tool.Result{}, pe
	}
	if err != nil {
		return tool.Result{}, err
	}
	if res.Input != nil {
		return tool.Result{Relayed: &tool.Relayed{Input: &tool.InputRequired{Requests: res.Input.Requests, State: res.Input.State}}}, nil
	}
	return tool.Result{Relayed: &tool.Relayed{Content: res.Content, Structured: res.Structured,
		IsError: res.IsError}}, nil
}

// NewRequestID returns a fresh correlation id: the one a request carries
// in the log, the audit and an HTTP downstream's X-MCP-Gateway-Request-Id.
func NewRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ArgumentLimits are the sanitizer's bounds on what a caller sends the
// gateway's tools and prompts, on either front: the core's depth and
// size bounds, and any member name that passes the checks of a string
// value. The names are the downstream's to choose ("user-id",
// "Content-Type") and its pinned schema judges them; held to the core's
// identifier grammar, a tool the gateway admits and lists could never be
// called.
func ArgumentLimits() guard.Limits {
	lim := guard.DefaultLimits()
	lim.AnyNames = true
	return lim
}
