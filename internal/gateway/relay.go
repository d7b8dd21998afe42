package gateway

import (
	"context"
	"sync"

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
	// The modes of elicitation it declared (an elicitation object with
	// neither is form alone, as the spec reads it), and the sampling
	// features beyond a plain request.
	ElicitationForm, ElicitationURL bool
	SamplingTools, SamplingContext  bool
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
	out := ClientCapabilities{Sampling: c.Sampling.Kind() == '{', Elicitation: c.Elicitation.Kind() == '{', Roots: c.Roots.Kind() == '{'}
	var sub struct {
		Form    jsontext.Value `json:"form"`
		URL     jsontext.Value `json:"url"`
		Tools   jsontext.Value `json:"tools"`
		Context jsontext.Value `json:"context"`
	}
	if out.Elicitation && json.Unmarshal(c.Elicitation, &sub) == nil {
		out.ElicitationForm, out.ElicitationURL = sub.Form.Kind() == '{', sub.URL.Kind() == '{'
	}
	if out.Elicitation && !out.ElicitationForm && !out.ElicitationURL {
		out.ElicitationForm = true
	}
	sub.Tools, sub.Context = nil, nil
	if out.Sampling && json.Unmarshal(c.Sampling, &sub) == nil {
		out.SamplingTools, out.SamplingContext = sub.Tools.Kind() == '{', sub.Context.Kind() == '{'
	}
	return out
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
	return jsontext.Value(appendMembers(nil,
		member{caps.Elicitation, "elicitation", appendMembers(nil, member{caps.ElicitationForm, "form", nil}, member{caps.ElicitationURL, "url", nil})},
		member{caps.Roots, "roots", nil},
		member{caps.Sampling, "sampling", appendMembers(nil, member{caps.SamplingContext, "context", nil}, member{caps.SamplingTools, "tools", nil})}))
}

// member is one member of a capabilities object: its value an object,
// {} when value is nil.
type member struct {
	on    bool
	name  string
	value []byte
}

// appendMembers appends the object of the members that are on.
func appendMembers(b []byte, ms ...member) []byte {
	b = append(b, '{')
	n := 0
	for _, m := range ms {
		if !m.on {
			continue
		}
		if n++; n > 1 {
			b = append(b, ',')
		}
		b = append(b, `"`+m.name+`":`...)
		if m.value == nil {
			b = append(b, `{}`...)
		} else {
			b = append(b, m.value...)
		}
	}
	return append(b, '}')
}

// declares reports whether caps covers a relayed request — its method,
// and the mode of an elicitation or the tools of a sampling request —
// and names the capability.
func (caps ClientCapabilities) declares(method string, params jsontext.Value) (bool, string) {
	var p struct {
		Mode           *string        `json:"mode"`
		Tools          jsontext.Value `json:"tools"`
		ToolChoice     jsontext.Value `json:"toolChoice"`
		IncludeContext *string        `json:"includeContext"`
	}
	if len(params) > 0 && json.Unmarshal(params, &p) != nil {
		return false, method // what the request asks for cannot be told
	}
	switch method {
	case "sampling/createMessage":
		if p.Tools != nil || p.ToolChoice != nil {
			return caps.SamplingTools, "sampling.tools"
		}
		if p.IncludeContext != nil && *p.IncludeContext != "none" {
			return caps.SamplingContext, "sampling.context"
		}
		return caps.Sampling, "sampling"
	case "elicitation/create":
		switch {
		case p.Mode == nil || *p.Mode == "form":
			return caps.ElicitationForm, "elicitation.form"
		case *p.Mode == "url":
			return caps.ElicitationURL, "elicitation.url"
		}
		return false, "elicitation"
	case "roots/list":
		return caps.Roots, "roots"
	}
	return false, method
}

// relayRequests answers the server-to-client requests a downstream sends
// while it serves c (decision 24): relayed to the calling client only,
// and only when that client declared the capability; refused to the
// downstream (-32601) otherwise. Each is audited by method and tool,
// never by its content; a refusal the call already had for the same
// method and reason is not audited again, so that a server repeating a
// refused request cannot flood the decision log (each relayed one is
// audited: its caller answers it).
func (g *Gateway) relayRequests(c Call, t *catalog.Tool) func(context.Context, string, jsontext.Value) (jsontext.Value, *jsonrpc.Error) {
	var (
		mu sync.Mutex
		// Made at the first refusal: most calls have none.
		refused map[[2]string]bool
	)
	refuse := func(ev audit.Event) {
		key := [2]string{ev.Method, ev.Reason}
		mu.Lock()
		if refused == nil {
			refused = map[[2]string]bool{}
		}
		again := refused[key]
		refused[key] = true
		mu.Unlock()
		if !again {
			g.audit.Record(ev)
		}
	}
	return func(ctx context.Context, method string, params jsontext.Value) (jsontext.Value, *jsonrpc.Error) {
		ev := audit.Event{RequestID: c.RequestID, Subject: c.Principal.Subject, Issuer: c.Principal.Issuer, Roles: c.Principal.Roles,
			Method: method, Tool: t.Qualified, Server: t.Server}
		declared, capability := c.ClientCapabilities.declares(method, params)
		if c.ClientRequests == nil || !declared {
			ev.Outcome, ev.Reason, ev.Code = audit.Deny, "capability_not_declared", jsonrpc.CodeMethodNotFound
			refuse(ev)
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
				Message: "Method not found: the calling client did not declare " + capability + ", or cannot be asked"}
		}
		if len(params) > 0 && params.Kind() != '{' {
			ev.Outcome, ev.Reason, ev.Code = audit.Invalid, "params", jsonrpc.CodeInvalidParams
			refuse(ev)
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Invalid params: params must be an object"}
		}
		if g.foreignEmbedded(t.Server, params) {
			ev.Outcome, ev.Reason, ev.Code = audit.Invalid, "embedded_resource", jsonrpc.CodeInvalidParams
			refuse(ev)
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Invalid params: the request embeds a resource the server does not serve"}
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
		case answerFault(res) != "":
			// The downstream is not told what was wrong: that would
			// describe the caller's answer.
			ev.Outcome, ev.Reason, ev.Code = audit.Invalid, "answer", jsonrpc.CodeInternalError
			rerr = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Internal error: the client's answer was refused by the gateway's checks"}
			res = nil
		}
		g.audit.Record(ev)
		return res, rerr
	}
}

// foreignEmbedded reports whether a server's request to the caller (a
// sampling request's messages, say) embeds a resource labelled as
// another server's (checkEmbedded), at any depth, or holds member names
// that differ only in case: what reaches the caller's model from a server
// is held to the rule of its results.
func (g *Gateway) foreignEmbedded(server string, params jsontext.Value) bool {
	if len(params) == 0 {
		return false
	}
	if _, dup := foldedDuplicate(params); dup {
		return true
	}
	var v any
	if json.Unmarshal(params, &v) != nil {
		return true
	}
	var uris []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if v["type"] == "resource" {
				r, _ := v["resource"].(map[string]any)
				uri, _ := r["uri"].(string) // none: "", refused as not in normal form
				uris = append(uris, uri)
			}
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(v)
	return g.checkEmbedded(server, uris) != nil
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
