package session

import (
	"log/slog"
	"slices"

	"github.com/mcp-bastion/bastion/internal/jsonrpc"
	"github.com/mcp-bastion/bastion/internal/mcp"
)

// maxSubscriptions bounds the subscriptions/listen requests one stream may
// hold open: each costs a message per change of the list.
const maxSubscriptions = 16

// listenSub is one open subscriptions/listen.
type listenSub struct {
	heard mcp.Listen // the list changes it hears of
	// uris are the resources whose updates it hears of; until it is
	// acknowledged, those it asked for.
	uris  []string
	acked bool
}

// listen serves a 2026-07-28 subscriptions/listen: the stream is
// acknowledged, hears notifications/tools/list_changed tagged with the
// request's id after each change of the catalog (and the prompt and
// resource list changes it asked for, when a Relay offers those lists,
// and the updates of the resources it names, when the Relay offers
// subscriptions), and the request is answered only when the session ends
// (or never, once the client cancels it). A server with a fixed set of
// tools announces no change, and has no such method.
//
// Resources to follow are the Relay's to judge, which may take a round
// trip to their servers, so such a listen is acknowledged by a task of
// its own, naming only the resources followed; any other at once.
func (ss *Session) listen(r replier, m *jsonrpc.Message) {
	if ss.srv.opts.Catalog == nil {
		ss.methodNotFound(r, m)
		return
	}
	want, uris, err := mcp.ListenParams(m.Params)
	if err != nil {
		r.sendError(jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidParams, "Invalid params: "+err.Error()))
		return
	}
	ss.subMu.Lock()
	defer ss.subMu.Unlock()
	ss.mu.Lock()
	_, busy := ss.inflight[m.ID]
	ss.mu.Unlock()
	if _, open := ss.subs[m.ID]; open || busy {
		r.sendError(jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidRequest, "Invalid request: a request with this id is already in flight"))
		return
	}
	if len(ss.subs) >= maxSubscriptions {
		r.sendError(jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidRequest, "Invalid request: too many open subscriptions"))
		return
	}
	// The lists this server announces. With a Relay, prompts and
	// resources are heard whether or not a server offers them at this
	// moment: one that connects later, or comes back after a restart,
	// changes the lists (as on the HTTP front).
	sub := &listenSub{heard: mcp.Listen{Tools: want.Tools}}
	rl := ss.srv.opts.Relay
	if rl != nil {
		sub.heard.Prompts, sub.heard.Resources = want.Prompts, want.Resources
	}
	if ss.subs == nil {
		ss.subs = map[jsonrpc.ID]*listenSub{}
	}
	if len(uris) > 0 && rl != nil && rl.Offered().Subscribe {
		ss.mu.Lock()
		draining := ss.draining
		if !draining {
			ss.tasks.Add(1)
		}
		ss.mu.Unlock()
		if draining {
			r.sendError(jsonrpc.NewError(m.ID, jsonrpc.CodeInternalError, "Internal error: the server is shutting down"))
			return
		}
		sub.uris = uris
		ss.subs[m.ID] = sub
		ss.workers.run(func() {
			defer ss.tasks.Done()
			ss.followListen(rl, m.ID, sub)
		})
		return
	}
	sub.acked = true
	ss.send(mcp.SubscriptionAcknowledged(m.ID, sub.heard, nil))
	if sub.heard == (mcp.Listen{}) {
		// Nothing will ever be sent on it: it stays pending, and is
		// answered when the session ends.
		ss.log.Debug("subscription with nothing to hear")
	}
	ss.subs[m.ID] = sub
	ss.log.Debug("subscription opened", slog.Bool("tools_list_changed", sub.heard.Tools),
		slog.Bool("prompts_list_changed", sub.heard.Prompts), slog.Bool("resources_list_changed", sub.heard.Resources))
}

// followListen has rl follow the resources subscription id asked for,
// then acknowledges it with those followed, or refuses it; a
// subscription cancelled meanwhile gets neither. Whatever no open
// subscription wants any more is then unfollowed.
func (ss *Session) followListen(rl Relay, id jsonrpc.ID, sub *listenSub) {
	ss.followMu.Lock()
	defer ss.followMu.Unlock()
	followed, e := rl.Follow(ss.taskCtx, sub.uris)
	if e != nil {
		followed = nil
	}
	if ss.following == nil {
		ss.following = map[string]bool{}
	}
	for _, uri := range followed {
		ss.following[uri] = true
	}
	ss.subMu.Lock()
	if ss.subs[id] == sub {
		if e != nil {
			delete(ss.subs, id)
			answer := *e
			answer.ID = id
			ss.send(jsonrpc.AppendError(nil, &answer))
		} else {
			sub.uris, sub.acked = followed, true
			ss.send(mcp.SubscriptionAcknowledged(id, sub.heard, followed))
			ss.log.Debug("subscription opened", slog.Int("resources", len(followed)))
		}
	}
	ss.subMu.Unlock()
	ss.unfollowUnwanted(rl)
}

// unfollowUnwanted has rl unfollow what the session follows and no open
// subscription wants; followMu is held, so nothing is followed meanwhile
// that this would undo.
func (ss *Session) unfollowUnwanted(rl Relay) {
	ss.subMu.Lock()
	var drop []string
	for uri := range ss.following {
		wanted := false
		for _, sub := range ss.subs {
			wanted = wanted || slices.Contains(sub.uris, uri)
		}
		if !wanted {
			drop = append(drop, uri)
			delete(ss.following, uri)
		}
	}
	ss.subMu.Unlock()
	if len(drop) > 0 {
		rl.Unfollow(ss.taskCtx, drop)
	}
}

// unsubscribe forgets subscription id (the client cancelled it) and
// reports whether there was one. What it alone followed is unfollowed,
// by a task: that may take a round trip.
func (ss *Session) unsubscribe(id jsonrpc.ID) bool {
	ss.subMu.Lock()
	sub, ok := ss.subs[id]
	delete(ss.subs, id)
	ss.subMu.Unlock()
	rl := ss.srv.opts.Relay
	if !ok || len(sub.uris) == 0 || rl == nil {
		return ok
	}
	ss.mu.Lock()
	draining := ss.draining
	if !draining {
		ss.tasks.Add(1)
	}
	ss.mu.Unlock()
	if !draining { // a session that ends takes its subscriptions with it
		ss.workers.run(func() {
			defer ss.tasks.Done()
			ss.followMu.Lock()
			defer ss.followMu.Unlock()
			ss.unfollowUnwanted(rl)
		})
	}
	return ok
}

// resourceUpdated tells each acknowledged subscription that follows uri
// that it was updated.
func (ss *Session) resourceUpdated(uri string) {
	ss.subMu.Lock()
	defer ss.subMu.Unlock()
	for id, sub := range ss.subs {
		if sub.acked && slices.Contains(sub.uris, uri) && !ss.stopping.Load() {
			ss.send(mcp.SubscriptionResourceUpdated(id, uri))
		}
	}
}

// endSubscriptions answers every open subscription: the session ends.
func (ss *Session) endSubscriptions() {
	ss.subMu.Lock()
	defer ss.subMu.Unlock()
	for id := range ss.subs {
		ss.send(mcp.SubscriptionComplete(id))
	}
	ss.subs = nil
}

// subscribed reports whether id is an open subscription. Requests are
// read on one goroutine, so the answer holds until the next is read.
func (ss *Session) subscribed(id jsonrpc.ID) bool {
	ss.subMu.Lock()
	defer ss.subMu.Unlock()
	_, ok := ss.subs[id]
	return ok
}
