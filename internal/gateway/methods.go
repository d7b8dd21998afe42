package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/gateway/auth"
	"github.com/mcp-bastion/bastion/internal/guard"
	"github.com/mcp-bastion/bastion/internal/jsonrpc"
	"github.com/mcp-bastion/bastion/internal/mcp"
	"github.com/mcp-bastion/bastion/internal/problem"
)

// MethodRequest is one request a front relays besides tools/call: a
// prompt, resource or completion method (see [Methods.Serve]).
type MethodRequest struct {
	Method string
	// Version is the protocol version the answer is encoded for.
	Version string
	// Params are the request's params as received, nil when absent.
	Params    jsontext.Value
	RequestID string
	Principal auth.Principal
	// Subscriber names the client session a resources/subscribe adds
	// the resource to, and Expires is when that session expires (zero:
	// never). "" for a client with no session, which cannot subscribe:
	// updates are delivered to a session.
	Subscriber string
	Expires    time.Time
}

// Methods answers the prompt, resource and completion requests of both
// fronts: their params strictly, the gateway's path for each, and the
// result encoded for the caller's version. The HTTP front and the stdio
// front (through package session) share it, so that the two cannot come
// to judge a request differently.
type Methods struct {
	g      *Gateway
	enc    *mcp.Encoder
	lister *Lister
	limits guard.Limits
	log    *slog.Logger
}

// NewMethods returns the methods of g, encoding with enc and listing with
// lister; limits bound a prompts/get's arguments as the sanitizer bounds
// a call's.
func (g *Gateway) NewMethods(enc *mcp.Encoder, lister *Lister, limits guard.Limits) *Methods {
	return &Methods{g: g, enc: enc, lister: lister, limits: limits, log: g.log}
}

// Serve answers r, one of tools/list, prompts/list, prompts/get,
// resources/list, resources/templates/list, resources/read,
// resources/subscribe, resources/unsubscribe, completion/complete and
// logging/setLevel. It
// returns the result object; or an *Error to answer with (params that do
// not fit are -32602 with HTTP status 200, as a JSON-RPC error is); or
// ctx's cause when the caller went away first; any other error is the
// gateway's own failure, for the front to answer -32603. It does not
// check that some server offers the method's feature: that is the
// front's, which declared it.
func (ms *Methods) Serve(ctx context.Context, r MethodRequest) ([]byte, error) {
	switch r.Method {
	case "tools/list":
		return ms.list(r, ms.lister.List)
	case "prompts/list":
		return ms.list(r, ms.lister.ListPrompts)
	case "resources/list":
		return ms.list(r, ms.lister.ListResources)
	case "resources/templates/list":
		return ms.list(r, ms.lister.ListTemplates)
	case "prompts/get":
		return ms.getPrompt(ctx, r)
	case "resources/read":
		return ms.readResource(ctx, r)
	case "resources/subscribe", "resources/unsubscribe":
		return ms.subscribe(ctx, r)
	case "logging/setLevel":
		var p struct {
			Level *string        `json:"level"`
			Meta  jsontext.Value `json:"_meta"`
		}
		if r.Params == nil || json.Unmarshal(r.Params, &p, json.RejectUnknownMembers(true)) != nil || p.Level == nil || !ValidLogLevel(*p.Level) {
			return nil, invalidParams("level must be one of debug, info, notice, warning, error, critical, alert, emergency")
		}
		if !ms.g.SetLogLevel(ctx, LogLevelRequest{Level: *p.Level, RequestID: r.RequestID, Principal: r.Principal}) {
			return nil, &Error{Code: jsonrpc.CodeMethodNotFound, Status: http.StatusOK,
				Message: `Method not found: "logging/setLevel": no connected server offers logging`}
		}
		return ms.enc.Empty(r.Version), nil
	case "completion/complete":
		res, err := ms.g.Complete(ctx, CompletionRequest{Params: r.Params, RequestID: r.RequestID, Principal: r.Principal})
		if errors.Is(err, ErrCompletionParams) {
			return nil, invalidParams(err.Error())
		}
		if err != nil {
			return nil, err
		}
		return ms.enc.AppendCompletion(nil, r.Version, res), nil
	}
	return nil, &Error{Code: jsonrpc.CodeMethodNotFound, Status: http.StatusOK, Message: "Method not found: " + problem.Quote(r.Method)}
}

// invalidParams is the -32602 of params that do not fit their method.
func invalidParams(why string) *Error {
	return &Error{Code: jsonrpc.CodeInvalidParams, Status: http.StatusOK, Message: "Invalid params: " + why}
}

// list answers a paginated list method with one of the lister's
// renderings: its params (a cursor, _meta) strictly, then the page of
// the caller's view.
func (ms *Methods) list(r MethodRequest, render func(version string, cursor *string, view View) ([]byte, *Error)) ([]byte, error) {
	var p struct {
		Cursor *string        `json:"cursor"`
		Meta   jsontext.Value `json:"_meta"`
	}
	if r.Params != nil {
		if err := json.Unmarshal(r.Params, &p, json.RejectUnknownMembers(true)); err != nil {
			return nil, invalidParams("params do not match " + r.Method)
		}
	}
	res, err := render(r.Version, p.Cursor, ms.g.ViewOf(r.Principal))
	if err != nil {
		return nil, err
	}
	return res, nil
}

// getPrompt answers a prompts/get: its params strictly, the arguments
// through the sanitizer's bounds, then the gateway's prompt path.
func (ms *Methods) getPrompt(ctx context.Context, r MethodRequest) (_ []byte, err error) {
	var p struct {
		Name      *string        `json:"name"`
		Arguments jsontext.Value `json:"arguments"`
		Meta      jsontext.Value `json:"_meta"`
	}
	if r.Params == nil || json.Unmarshal(r.Params, &p, json.RejectUnknownMembers(true)) != nil {
		return nil, invalidParams("params do not match prompts/get")
	}
	if p.Name == nil {
		return nil, invalidParams("name is required")
	}
	if p.Arguments != nil {
		if p.Arguments.Kind() != '{' {
			return nil, invalidParams("arguments must be an object")
		}
		if err := guard.Sanitize(p.Arguments, ms.limits); err != nil {
			return nil, invalidParams("arguments exceed the gateway's bounds")
		}
	}
	defer ms.logged(ctx, r, time.Now(), &err, slog.String("prompt", logName(*p.Name, "(not a prompt name)")))
	res, err := ms.g.GetPrompt(ctx, PromptGet{Name: *p.Name, Arguments: p.Arguments, RequestID: r.RequestID, Principal: r.Principal})
	if err != nil {
		return nil, err
	}
	return ms.enc.AppendRelayedPrompt(nil, r.Version, res.Description, res.Messages), nil
}

// readResource answers a resources/read: its params strictly, then the
// gateway's routing and authorization.
func (ms *Methods) readResource(ctx context.Context, r MethodRequest) (_ []byte, err error) {
	var p struct {
		URI  *string        `json:"uri"`
		Meta jsontext.Value `json:"_meta"`
	}
	if r.Params == nil || json.Unmarshal(r.Params, &p, json.RejectUnknownMembers(true)) != nil || p.URI == nil {
		return nil, invalidParams("params do not match resources/read")
	}
	// The URI read may carry a caller's values: the log has its outcome,
	// not the URI.
	defer ms.logged(ctx, r, time.Now(), &err)
	contents, err := ms.g.ReadResource(ctx, ResourceRead{URI: *p.URI, RequestID: r.RequestID, Principal: r.Principal})
	if err != nil {
		return nil, err
	}
	return ms.enc.AppendRelayedContents(nil, r.Version, contents), nil
}

// subscribe answers a resources/subscribe or resources/unsubscribe: its
// params strictly, then the gateway's subscription table for r's
// session.
func (ms *Methods) subscribe(ctx context.Context, r MethodRequest) ([]byte, error) {
	var p struct {
		URI  *string        `json:"uri"`
		Meta jsontext.Value `json:"_meta"`
	}
	if r.Params == nil || json.Unmarshal(r.Params, &p, json.RejectUnknownMembers(true)) != nil || p.URI == nil {
		return nil, invalidParams("params do not match " + r.Method)
	}
	if r.Subscriber == "" {
		// A 2026-07-28 client has no session to deliver updates to.
		return nil, &Error{Code: jsonrpc.CodeMethodNotFound, Status: http.StatusOK,
			Message: "Method not found: " + problem.Quote(r.Method) + " needs a session"}
	}
	c := SubscribeRequest{Subscriber: r.Subscriber, Expires: r.Expires, URI: *p.URI, RequestID: r.RequestID, Principal: r.Principal}
	var err error
	if r.Method == "resources/subscribe" {
		err = ms.g.Subscribe(ctx, c)
	} else {
		err = ms.g.Unsubscribe(ctx, c)
	}
	if err != nil {
		return nil, err
	}
	return ms.enc.Empty(r.Version), nil
}

// logged writes the info line of a forwarded request once it is
// answered: its method, request id, outcome and duration, and attrs.
func (ms *Methods) logged(ctx context.Context, r MethodRequest, start time.Time, err *error, attrs ...slog.Attr) {
	if !ms.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	attrs = append(attrs, slog.String("request_id", r.RequestID), slog.String("outcome", outcomeWord(ctx, *err)),
		slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000))
	ms.log.LogAttrs(ctx, slog.LevelInfo, r.Method, attrs...)
}

// outcomeWord is the log's word for how a request ended.
func outcomeWord(ctx context.Context, err error) string {
	var gwErr *Error
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &gwErr):
		return "error_" + strconv.Itoa(gwErr.Code)
	case ctx.Err() != nil:
		return "cancelled"
	}
	return "internal_error"
}
