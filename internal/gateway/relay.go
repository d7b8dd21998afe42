package gateway

import (
	"context"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/gateway/audit"
	"github.com/mcp-bastion/bastion/internal/gateway/catalog"
	"github.com/mcp-bastion/bastion/internal/jsonrpc"
)

// ClientCapabilities are the capabilities a caller declared that the
// gateway can relay a downstream's requests to (decision 24).
type ClientCapabilities struct {
	Sampling, Elicitation, Roots bool
}

// CapabilitiesIn reads a client capabilities object (of initialize, or of
// a 2026-07-28 request's _meta) for what the relay can use: each member
// counts when it is an object; anything else declares nothing.
func CapabilitiesIn(caps jsontext.Value) ClientCapabilities {
	var c struct {
		Sampling    jsontext.Value `json:"sampling"`
		Elicitation jsontext.Value `json:"elicitation"`
		Roots       jsontext.Value `json:"roots"`
	}
	if caps == nil || json.Unmarshal(caps, &c) != nil {
		return ClientCapabilities{}
	}
	return ClientCapabilities{Sampling: c.Sampling.Kind() == '{', Elicitation: c.Elicitation.Kind() == '{', Roots: c.Roots.Kind() == '{'}
}

// ClientRequester sends a request to the caller and waits for its answer:
// the result object, or the caller's JSON-RPC error.
type ClientRequester func(ctx context.Context, method string, params jsontext.Value) (jsontext.Value, *jsonrpc.Error)

// capabilitiesOf is the client capabilities object that a 2026-07-28
// call on c's behalf declares: those of its caller the gateway can ask it
// for or hand a round to, none when it can do neither (decision 24).
func capabilitiesOf(c Call) jsontext.Value {
	caps := c.ClientCapabilities
	if c.ClientRequests == nil && !c.TakesRounds {
		return jsontext.Value(`{}`)
	}
	b := []byte{'{'}
	for _, f := range []struct {
		on   bool
		name string
	}{{caps.Elicitation, "elicitation"}, {caps.Roots, "roots"}, {caps.Sampling, "sampling"}} {
		if !f.on {
			continue
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, `"`+f.name+`":{}`...)
	}
	return append(b, '}')
}

// declares reports whether caps covers a relayed request's method, and
// names the capability.
func (caps ClientCapabilities) declares(method string) (bool, string) {
	switch method {
	case "sampling/createMessage":
		return caps.Sampling, "sampling"
	case "elicitation/create":
		return caps.Elicitation, "elicitation"
	case "roots/list":
		return caps.Roots, "roots"
	}
	return false, method
}

// relayRequests answers the server-to-client requests a downstream sends
// while it serves c (decision 24): relayed to the calling client only,
// and only when that client declared the capability; refused to the
// downstream (-32601) otherwise. Each is audited by method and tool,
// never by its content.
func (g *Gateway) relayRequests(c Call, t *catalog.Tool) func(context.Context, string, jsontext.Value) (jsontext.Value, *jsonrpc.Error) {
	return func(ctx context.Context, method string, params jsontext.Value) (jsontext.Value, *jsonrpc.Error) {
		ev := audit.Event{RequestID: c.RequestID, Subject: c.Principal.Subject, Issuer: c.Principal.Issuer, Roles: c.Principal.Roles,
			Method: method, Tool: t.Qualified, Server: t.Server}
		declared, capability := c.ClientCapabilities.declares(method)
		if c.ClientRequests == nil || !declared {
			ev.Outcome, ev.Reason, ev.Code = audit.Deny, "capability_not_declared", jsonrpc.CodeMethodNotFound
			g.audit.Record(ev)
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
				Message: "Method not found: the calling client did not declare " + capability + ", or cannot be asked"}
		}
		if len(params) > 0 && params.Kind() != '{' {
			ev.Outcome, ev.Reason, ev.Code = audit.Invalid, "params", jsonrpc.CodeInvalidParams
			g.audit.Record(ev)
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Invalid params: params must be an object"}
		}
		res, rerr := c.ClientRequests(ctx, method, params)
		ev.Outcome = audit.Allow
		switch {
		case rerr != nil:
			ev.Code = rerr.Code
		case len(res) == 0 || res.Kind() != '{':
			ev.Code = jsonrpc.CodeInternalError
			rerr = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Internal error: the client's answer is not an object"}
			res = nil
		}
		g.audit.Record(ev)
		return res, rerr
	}
}

// tagMessages relays a downstream's notifications/message params to fn
// with the logger prefixed by the server's name (decision 23), so that a
// downstream cannot pass for the gateway; params that are not a log
// message are dropped.
func tagMessages(server string, fn func(jsontext.Value)) func(jsontext.Value) {
	return func(params jsontext.Value) {
		var p struct {
			Level  *string        `json:"level"`
			Logger *string        `json:"logger"`
			Data   jsontext.Value `json:"data"`
		}
		if json.Unmarshal(params, &p) != nil || p.Level == nil || !ValidLogLevel(*p.Level) || p.Data == nil {
			return
		}
		logger := server
		if p.Logger != nil && *p.Logger != "" {
			logger += "/" + *p.Logger
		}
		out := map[string]any{"level": *p.Level, "logger": logger, "data": p.Data}
		b, err := json.Marshal(out, json.Deterministic(true))
		if err == nil {
			fn(b)
		}
	}
}
