package session

import (
	"context"
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
	// early are the updates of uris that came before the
	// acknowledgement, at most maxEarlyUpdates, to follow it.
	early []string
}

// maxEarlyUpdates bounds the updates held for a subscription not yet
// acknowledged; an update says only "read it again", so one that is
// dropped is covered by the next of the same resource.
const maxEarlyUpdates = 64

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
	if ss.beforeListen != nil {
		ss.beforeListen()
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
	if ss.stopping.Load() {
		// Read just as the session began to end, after endSubscriptions
		// answered the open ones (stopping is set before it takes
		// subMu): nothing would answer this one later.
		ss.send(mcp.SubscriptionAcknowledged(m.ID, sub.heard, nil))
		ss.send(mcp.SubscriptionComplete(m.ID))
		return
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
// then acknowledges it with those followed (and the updates of those that
// came meanwhile), or refuses it; a subscription cancelled meanwhile gets
// neither. Whatever no open subscription wants any more is then
// unfollowed.
func (ss *Session) followListen(rl Relay, id jsonrpc.ID, sub *listenSub) {
	// An unfollow of one of these that began before this subscription
	// was open would undo what Follow finds already followed: wait for
	// it. Later ones see this subscription, and leave its resources be.
	for {
		ss.subMu.Lock()
		var busy chan struct{}
		for _, uri := range sub.uris {
			if ch, ok := ss.unfollowing[uri]; ok {
				busy = ch
				break
			}
		}
		ss.subMu.Unlock()
		if busy == nil {
			break
		}
		select {
		case <-busy:
		case <-ss.taskCtx.Done():
			return
		}
	}
	followed, e := rl.Follow(ss.taskCtx, sub.uris)
	if e != nil {
		followed = nil
	}
	ss.subMu.Lock()
	if ss.following == nil {
		ss.following = map[string]bool{}
	}
	for _, uri := range followed {
		ss.following[uri] = true
	}
	if ss.subs[id] == sub {
		if e != nil {
			delete(ss.subs, id)
			answer := *e
			answer.ID = id
			ss.send(jsonrpc.AppendError(nil, &answer))
		} else {
			sub.uris, sub.acked = followed, true
			ss.send(mcp.SubscriptionAcknowledged(id, sub.heard, followed))
			for _, uri := range sub.early {
				if slices.Contains(followed, uri) && !ss.stopping.Load() {
					ss.send(mcp.SubscriptionResourceUpdated(id, uri))
				}
			}
			sub.early = nil
			ss.log.Debug("subscription opened", slog.Int("resources", len(followed)))
		}
	}
	ss.subMu.Unlock()
	ss.unfollowUnwanted(rl)
}

// unfollowUnwanted has rl unfollow what the session follows and no open
// subscription wants. While it does, a subscription that asks for one of
// those waits before it follows (followListen).
func (ss *Session) unfollowUnwanted(rl Relay) {
	ss.subMu.Lock()
	var drop []string
	done := make(chan struct{})
	for uri := range ss.following {
		wanted := false
		for _, sub := range ss.subs {
			wanted = wanted || slices.Contains(sub.uris, uri)
		}
		if !wanted {
			drop = append(drop, uri)
			delete(ss.following, uri)
			if ss.unfollowing == nil {
				ss.unfollowing = map[string]chan struct{}{}
			}
			ss.unfollowing[uri] = done
		}
	}
	ss.subMu.Unlock()
	if len(drop) == 0 {
		return
	}
	rl.Unfollow(ss.taskCtx, drop)
	ss.subMu.Lock()
	for _, uri := range drop {
		if ss.unfollowing[uri] == done {
			delete(ss.unfollowing, uri)
		}
	}
	ss.subMu.Unlock()
	close(done)
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
			ss.unfollowUnwanted(rl)
		})
	}
	return ok
}

// resourceUpdated tells each acknowledged subscription that follows uri
// that it was updated, and keeps the update for one that asked to follow
// it and is not yet acknowledged.
func (ss *Session) resourceUpdated(uri string) {
	ss.subMu.Lock()
	defer ss.subMu.Unlock()
	for id, sub := range ss.subs {
		switch {
		case !slices.Contains(sub.uris, uri):
		case sub.acked:
			if !ss.stopping.Load() {
				ss.send(mcp.SubscriptionResourceUpdated(id, uri))
			}
		case !slices.Contains(sub.early, uri):
			// Followed already, perhaps, but not yet acknowledged: it
			// follows the acknowledgement.
			sub.early = append(sub.early, uri)
			if len(sub.early) > maxEarlyUpdates {
				sub.early = sub.early[1:]
			}
		}
	}
}

// endSubscriptions answers every open subscription: the session ends.
func (ss *Session) endSubscriptions() {
	// The drain is bounded here too: a client that no longer reads
	// leaves these answers one grace to be queued, not until a signal.
	ctx, cancel := context.WithTimeoutCause(ss.writeCtx, ss.srv.opts.DrainGrace, errFlushTimeout)
	defer cancel()
	ss.subMu.Lock()
	defer ss.subMu.Unlock()
	for id := range ss.subs {
		ss.sendQueued(ctx, mcp.SubscriptionComplete(id), nil)
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
