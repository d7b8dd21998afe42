package front

import (
	"context"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/gateway"
	"github.com/mcp-bastion/bastion/internal/jsonrpc"
)

// maxAsksPerSession bounds the requests the gateway has out to one
// client at a time.
const maxAsksPerSession = 16

// newAsks is the table of the requests the gateway sends to its clients
// on their calls' event streams (a downstream's sampling, elicitation or
// roots request, decision 24), waiting for the client to POST the
// response; the owner of each is the session it was asked on.
func newAsks() *jsonrpc.Pending { return jsonrpc.NewPending("gw-ask-", maxAsksPerSession) }

// ask sends a request to the client on the call's event stream and waits
// for the response the client POSTs on its session, or for ctx (the
// call) to end, when the client is told the request was cancelled.
func (x *exchange) ask(ctx context.Context, method string, params jsontext.Value) (jsontext.Value, *jsonrpc.Error) {
	return x.s.asks.Ask(ctx, x.sess.nonce, method, params, x.push)
}

// relayTo sets what lets a downstream ask the client during c: a client
// on an event stream of a legacy session, with the capabilities it
// declared, and its log messages relayed on the same stream.
func (x *exchange) relayTo(c *gateway.Call) {
	if x.push == nil || x.sess.nonce == "" {
		return
	}
	c.ClientCapabilities = x.sess.caps.relayable()
	c.ClientRequests = x.ask
	c.Messages = func(params jsontext.Value) {
		x.push(append(append([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":`), params...), '}'))
	}
}
