package session

import (
	"context"
	"log/slog"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/jsonrpc"
	"github.com/mcp-bastion/bastion/internal/mcp"
)

// relayed reports whether method is served by the Relay, and then whether
// the Relay offers it now.
func (ss *Session) relayed(method string) (relayed, offered bool) {
	feature, ok := RelayedMethods[method]
	if !ok {
		return false, false
	}
	rl := ss.srv.opts.Relay
	return true, rl != nil && feature(rl.Offered())
}

// startRelay starts the task of a request the Relay serves. It runs on
// the read loop; params are the Relay's to judge, so every request of the
// method gets its task (or a capacity refusal), in arrival order.
func (ss *Session) startRelay(r replier, m *jsonrpc.Message, version string) {
	ctx, c, outcome, refusal := ss.admit(m)
	switch {
	case refusal != nil:
		ss.log.Debug("relayed request refused", slog.String("method", m.Method), slog.String("outcome", outcome))
		r.sendError(refusal)
		return
	case c == nil:
		r.sendError(jsonrpc.NewError(m.ID, jsonrpc.CodeInternalError,
			"Internal error: too many requests are in flight; retry later"))
		return
	}
	ss.workers.run(func() { ss.runRelay(ctx, c, r, m, version) })
}

// runRelay is the task of one relayed request.
func (ss *Session) runRelay(ctx context.Context, c *call, r replier, m *jsonrpc.Message, version string) {
	ss.runTask(c, r, m, func() []byte {
		res, e := ss.srv.opts.Relay.Serve(ctx, version, m.Method, m.Params)
		switch {
		case e != nil:
			answer := *e
			answer.ID = m.ID
			return jsonrpc.AppendError(nil, &answer)
		case res != nil:
			if m.Method == "logging/setLevel" {
				ss.setLogLevel(m.Params)
			}
			return ss.result(m.ID, res)
		}
		// ctx ended first. A client's cancellation gets no answer
		// (finish withholds it); a drain or a stop does.
		return jsonrpc.AppendError(nil, jsonrpc.NewError(m.ID, jsonrpc.CodeInternalError,
			"Internal error: the server is shutting down"))
	})
}

// watchRelay sends notifications/prompts/list_changed and
// notifications/resources/list_changed after each change the Relay
// reports, to a client that may hear it, and on the open subscriptions
// that asked for it; and notifications/resources/updated for each
// update of a resource a legacy session subscribed to, or an open
// subscription follows. It returns a func that stops the watcher and
// waits for it.
func (ss *Session) watchRelay(rl Relay) func() {
	changes, stop := rl.Watch()
	return follow(changes, stop, func(ch Change) {
		ss.announce(ch.Lists)
		if ch.Updated == "" {
			return
		}
		if ss.listChanged.Load() && !ss.stopping.Load() {
			msg, _ := jsontext.AppendQuote([]byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":`), ch.Updated)
			ss.send(append(msg, "}}"...))
		}
		ss.resourceUpdated(ch.Updated)
	})
}

// follow runs handle for each value changes delivers, on a goroutine of
// its own. The func it returns stops that goroutine, waits for it, then
// calls stop.
func follow[T any](changes <-chan T, stop func(), handle func(T)) func() {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case v := <-changes:
				handle(v)
			case <-quit:
				return
			}
		}
	}()
	return func() {
		close(quit)
		<-done
		stop()
	}
}

// announce tells the client which lists changed: a legacy session by
// notification, each open subscription that asked for a list on it.
func (ss *Session) announce(ch mcp.Listen) {
	lists := []struct {
		changed func(mcp.Listen) bool
		method  string
	}{
		{func(l mcp.Listen) bool { return l.Tools }, "notifications/tools/list_changed"},
		{func(l mcp.Listen) bool { return l.Prompts }, "notifications/prompts/list_changed"},
		{func(l mcp.Listen) bool { return l.Resources }, "notifications/resources/list_changed"},
	}
	for _, list := range lists {
		if !list.changed(ch) {
			continue
		}
		if ss.listChanged.Load() && !ss.stopping.Load() {
			ss.send([]byte(`{"jsonrpc":"2.0","method":"` + list.method + `"}`))
		}
		ss.subMu.Lock()
		for id, sub := range ss.subs {
			if sub.acked && list.changed(sub.heard) && !ss.stopping.Load() {
				ss.send(mcp.SubscriptionListChanged(id, list.method))
			}
		}
		ss.subMu.Unlock()
	}
}
