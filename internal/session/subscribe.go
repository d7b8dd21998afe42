package session

import (
	"log/slog"

	"github.com/mcp-bastion/bastion/internal/jsonrpc"
	"github.com/mcp-bastion/bastion/internal/mcp"
)

// maxSubscriptions bounds the subscriptions/listen requests one stream may
// hold open: each costs a message per change of the list.
const maxSubscriptions = 16

// listen serves a 2026-07-28 subscriptions/listen: the stream is
// acknowledged at once, hears notifications/tools/list_changed tagged
// with the request's id after each change of the catalog (and the prompt
// and resource list changes it asked for, when a Relay offers those
// lists), and the request is answered only when the session ends (or
// never, once the client cancels it). A server with a fixed set of tools
// announces no change, and has no such method.
func (ss *Session) listen(r replier, m *jsonrpc.Message) {
	if ss.srv.opts.Catalog == nil {
		ss.methodNotFound(r, m)
		return
	}
	want, _, err := mcp.ListenParams(m.Params)
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
	// The lists this server announces; never resource updates. With a
	// Relay, prompts and resources are heard whether or not a server
	// offers them at this moment: one that connects later, or comes
	// back after a restart, changes the lists (as on the HTTP front).
	heard := mcp.Listen{Tools: want.Tools}
	if ss.srv.opts.Relay != nil {
		heard.Prompts, heard.Resources = want.Prompts, want.Resources
	}
	ss.send(mcp.SubscriptionAcknowledged(m.ID, heard, nil))
	if heard == (mcp.Listen{}) {
		// Nothing will ever be sent on it: it stays pending, and is
		// answered when the session ends.
		ss.log.Debug("subscription with nothing to hear")
	}
	if ss.subs == nil {
		ss.subs = map[jsonrpc.ID]mcp.Listen{}
	}
	ss.subs[m.ID] = heard
	ss.log.Debug("subscription opened", slog.Bool("tools_list_changed", heard.Tools),
		slog.Bool("prompts_list_changed", heard.Prompts), slog.Bool("resources_list_changed", heard.Resources))
}

// unsubscribe forgets subscription id (the client cancelled it) and
// reports whether there was one.
func (ss *Session) unsubscribe(id jsonrpc.ID) bool {
	ss.subMu.Lock()
	defer ss.subMu.Unlock()
	_, ok := ss.subs[id]
	delete(ss.subs, id)
	return ok
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
