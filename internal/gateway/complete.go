package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/gateway/audit"
	"github.com/mcp-bastion/bastion/internal/gateway/auth"
	"github.com/mcp-bastion/bastion/internal/gateway/catalog"
	"github.com/mcp-bastion/bastion/internal/gateway/policy"
	"github.com/mcp-bastion/bastion/internal/gateway/upstream"
	"github.com/mcp-bastion/bastion/internal/jsonrpc"
	"github.com/mcp-bastion/bastion/internal/mcp"
)

// CompletionRequest is one completion/complete as a front received it.
type CompletionRequest struct {
	// Params are the request's params, as received.
	Params    jsontext.Value
	RequestID string
	Principal auth.Principal
}

// ErrCompletionParams: the params do not match completion/complete.
var ErrCompletionParams = errors.New("params do not match completion/complete")

type completionParams struct {
	Ref *struct {
		Type *string `json:"type"`
		Name *string `json:"name"`
		URI  *string `json:"uri"`
	} `json:"ref"`
	Argument *struct {
		Name  *string `json:"name"`
		Value *string `json:"value"`
	} `json:"argument"`
	Context *struct {
		Arguments map[string]string `json:"arguments"`
	} `json:"context"`
	Meta jsontext.Value `json:"_meta"`
}

// Complete runs a completion/complete (docs/gateway-surface.md decision
// 22): a ref/prompt is routed by the prompt's public name, a ref/resource
// by the admitted template's string, each to the server that owns it,
// with the downstream's own prompt name. The request is decided as what
// it completes would be: a prompt's rule on the arguments given
// (context.arguments) with the value typed; a template as a read of the
// URI those make of it. Each value the server offers is decided the same
// way, and only those the caller could use are relayed, so completion
// never names what a get or a read would refuse. A reference that is
// unknown, that the caller may not use, or whose server declares no
// completions is answered with an empty completion, not an error, so
// that typing cannot probe what exists. The audit has the reference and
// the argument's name when the reference declares it (a prompt's
// argument, a template's variable), never a value or a name of the
// caller's own. Malformed params are ErrCompletionParams.
func (g *Gateway) Complete(ctx context.Context, c CompletionRequest) ([]mcp.Completion, error) {
	var p completionParams
	if c.Params == nil || json.Unmarshal(c.Params, &p, json.RejectUnknownMembers(true)) != nil ||
		p.Ref == nil || p.Ref.Type == nil || p.Argument == nil || p.Argument.Name == nil || p.Argument.Value == nil {
		return nil, ErrCompletionParams
	}
	ev := audit.Event{RequestID: c.RequestID, Subject: c.Principal.Subject, Issuer: c.Principal.Issuer,
		Roles: c.Principal.Roles, Method: "completion/complete"}
	snap := g.catalog.Snapshot()
	var given map[string]string
	if p.Context != nil {
		given = p.Context.Arguments
	}
	name := *p.Argument.Name
	var server string
	ref := map[string]string{"type": *p.Ref.Type}
	// allowed decides the caller's use of what the reference makes with
	// value as the argument completed; current reports whether the
	// reference still holds the pin it was decided under.
	var allowed func(value string) policy.Decision
	var current func(*catalog.Snapshot) bool
	switch {
	case *p.Ref.Type == "ref/prompt" && p.Ref.Name != nil && p.Ref.URI == nil:
		pr, ok := snap.LookupPrompt(*p.Ref.Name)
		if !ok {
			break
		}
		ev.Prompt, server, ref["name"] = pr.Qualified, pr.Server, pr.Name
		if _, ok := pr.Argument(name); ok {
			ev.Arguments = []string{name}
		}
		allowed = func(value string) policy.Decision {
			return g.decidePromptCompletion(c.Principal, pr, given, name, value)
		}
		current = func(snap *catalog.Snapshot) bool {
			cur, ok := snap.LookupPrompt(pr.Public)
			return ok && cur.Server == pr.Server && cur.Digest == pr.Digest
		}
	case *p.Ref.Type == "ref/resource" && p.Ref.URI != nil && p.Ref.Name == nil:
		i := slices.IndexFunc(snap.Templates, func(t *catalog.Template) bool { return t.URITemplate == *p.Ref.URI })
		if i < 0 {
			break
		}
		t := snap.Templates[i]
		ev.Resource, server, ref["uri"] = t.URITemplate, t.Server, t.URITemplate
		if slices.Contains(t.Varnames(), name) {
			ev.Arguments = []string{name}
		}
		allowed = func(value string) policy.Decision {
			return g.decideTemplateCompletion(c.Principal, t, given, name, value)
		}
		current = func(snap *catalog.Snapshot) bool {
			return slices.ContainsFunc(snap.Templates, func(cur *catalog.Template) bool {
				return cur.URITemplate == t.URITemplate && cur.Server == t.Server && cur.Digest == t.Digest
			})
		}
	default:
		return nil, ErrCompletionParams
	}
	empty := func(reason string) ([]mcp.Completion, error) {
		ev.Outcome, ev.Reason = audit.Invalid, reason
		g.audit.Record(ev)
		return nil, nil
	}
	if server == "" {
		return empty("unknown_reference")
	}
	ev.Server = server
	d := allowed(*p.Argument.Value)
	switch d.Reason {
	case reasonNotNormal, reasonNoVariable, reasonElsewhere:
		return empty(d.Reason)
	}
	ev.Rule = d.Rule
	if !d.Allow {
		ev.Outcome, ev.Reason = audit.Deny, d.Reason
		g.audit.Record(ev)
		return nil, nil
	}
	ds := g.servers[server]
	ds.mu.Lock()
	offers := offersCapability(ds.info.Capabilities, "completions")
	ds.mu.Unlock()
	if !offers {
		return empty("no_completions")
	}
	body := map[string]any{"ref": ref, "argument": map[string]string{"name": name, "value": *p.Argument.Value}}
	if given != nil {
		body["context"] = map[string]any{"arguments": given}
	}
	params, err := json.Marshal(body, json.Deterministic(true))
	if err != nil {
		return nil, fmt.Errorf("gateway: completion params: %w", err)
	}
	log := callLog{g.log, slog.String("request_id", c.RequestID)}
	dctx, cancel := context.WithTimeoutCause(ctx, ds.cfg.Timeout.D(), errCallTimeout)
	defer cancel()
	// From here the request is allowed; how it ended is audited with it.
	ev.Outcome = audit.Allow
	failed := func(err error) ([]mcp.Completion, error) {
		err = g.callError(ctx, dctx, log, server, "completion/complete", err)
		var gwErr *Error
		if errors.As(err, &gwErr) {
			ev.Code = gwErr.Code
		}
		g.audit.Record(ev)
		return nil, err
	}
	// A completion is a request to the server like a call: it takes a
	// slot of the server's in-flight bound, and of the caller's share.
	release, err := ds.slots.acquire(dctx, c.Principal)
	if err != nil {
		return failed(err)
	}
	defer release()
	raw, err := ds.conn.Call(dctx, "completion/complete", params, upstream.CallOptions{
		Identity: identityOf(c.Principal, c.RequestID),
		// Sent only while the pin it was decided under holds (see
		// Invoke): the wait for a slot may have outlasted it.
		Current: func() error {
			if current(g.catalog.Snapshot()) {
				return nil
			}
			return errNotCurrent
		},
	})
	if errors.Is(err, errNotCurrent) {
		return empty("unknown_reference")
	}
	if err != nil {
		return failed(err)
	}
	out, perr := parseCompletion(raw)
	if perr != nil {
		log.Warn("downstream answered completion/complete with a malformed result", slog.String("server", server), slog.String("error", perr.Error()))
		err := badGateway(server, "the server answered with a malformed result", false)
		ev.Code = err.Code
		g.audit.Record(ev)
		return nil, err
	}
	g.audit.Record(ev)
	return keepAllowed(out, allowed), nil
}

// keepAllowed is a server's completion with only the values allowed
// grants; when it drops any, the server's total no longer counts what is
// relayed, and is dropped too.
func keepAllowed(out []mcp.Completion, allowed func(string) policy.Decision) []mcp.Completion {
	for i, c := range out {
		kept := make([]string, 0, len(c.Values))
		for _, v := range c.Values {
			if allowed(v).Allow {
				kept = append(kept, v)
			}
		}
		if len(kept) != len(c.Values) {
			c.Total = nil
		}
		c.Values = kept
		out[i] = c
	}
	return out
}

// decidePromptCompletion decides p's completion of prompt pr's argument
// name with value: by the prompt's rule, and when that rule has a
// condition, on the arguments given with the value (which wins over a
// given value of the same name), as a prompts/get of them would be. A
// condition never reads a name the prompt does not declare: one given,
// or completed, refuses.
func (g *Gateway) decidePromptCompletion(p auth.Principal, pr *catalog.Prompt, given map[string]string, name, value string) policy.Decision {
	call := policy.Call{Kind: policy.KindPrompt, Qualified: pr.Qualified, Server: pr.Server, Name: pr.Name}
	d := g.policy.Decide(p.Policy(), call)
	if !d.NeedsArgs {
		return d
	}
	refuse := policy.Decision{Rule: d.Rule, Required: d.Required, Reason: policy.ReasonCondition}
	call.Args = make(map[string]any, len(given)+1)
	for k, v := range given {
		if _, ok := pr.Argument(k); !ok {
			return refuse
		}
		call.Args[k] = v
	}
	if _, ok := pr.Argument(name); !ok {
		return refuse
	}
	call.Args[name] = value
	return g.policy.Decide(p.Policy(), call)
}

// decideTemplateCompletion decides p's completion of template t's
// variable name with value as a read of the URI the template makes of
// the arguments given and the value, each variable neither given nor
// completed standing for any value (anyValue): in normal form and within
// the bound of a URI, owned by no server but t's (a URI a read would send
// to another server is not t's to complete), and allowed by the rule that
// would decide that read (decideRead). The whole URI is decided, the
// literal text after the variable with it: vault://{account}/private-key
// completes an account only for a caller who may read that account's
// key. A read has no arguments for a condition but its URI, so none of
// the caller's reach a condition here either; a name that is no variable
// of t completes nothing.
func (g *Gateway) decideTemplateCompletion(p auth.Principal, t *catalog.Template, given map[string]string, name, value string) policy.Decision {
	names := t.Varnames()
	if !slices.Contains(names, name) {
		return policy.Decision{Reason: reasonNoVariable}
	}
	vars := make(map[string]string, len(names)+len(given))
	for _, v := range names {
		vars[v] = anyValue
	}
	maps.Copy(vars, given)
	vars[name] = value
	uri, err := t.Expand(vars)
	switch {
	case err != nil:
		return policy.Decision{Reason: reasonNoVariable}
	case len(uri) > catalog.MaxURI || catalog.NotNormal(uri) != "":
		return policy.Decision{Reason: reasonNotNormal}
	}
	snap := g.catalog.Snapshot()
	if o := snap.Owner(uri); o != "" && o != t.Server {
		return policy.Decision{Reason: reasonElsewhere}
	}
	_, exact := snap.LookupResource(uri)
	return g.decideRead(p, t.Server, uri, !exact)
}

// anyValue stands, in a completion's URI, for a variable whose value is
// not known yet. A rule's pattern has no other wildcard than '*' and no
// way to spell a literal '*' (expanded, it is '*' or "%2A"), so only a
// pattern with a '*' where the variable stands matches it: the read is
// allowed only by a rule that allows it whatever the variable will be,
// and refused by one that refuses any value there. It is itself a value
// the template can take, so an allowed completion names a value of which
// some read is allowed; where only reads with a particular later value
// are, the completion is refused (it fails closed).
const anyValue = "*"

// errNotCurrent: the reference of a completion lost the pin it was
// decided under while the completion waited; it is answered as an
// unknown one.
var errNotCurrent = errors.New("the reference no longer holds its pin")

// Reasons a completion is refused that no rule decided: the URI it would
// make is not in normal form (or too long), names no variable of the
// template, or is another server's to serve.
const (
	reasonNotNormal  = "uri_not_normal"
	reasonNoVariable = "unknown_argument"
	reasonElsewhere  = "routed_elsewhere"
)

// maxCompletionValues is the spec's bound on one completion's values.
const maxCompletionValues = 100

// parseCompletion reads a CompleteResult: completion.values an array of
// at most 100 strings, total an integer and hasMore a boolean when set.
func parseCompletion(raw jsontext.Value) ([]mcp.Completion, error) {
	var r struct {
		Completion *struct {
			Values  []string `json:"values"`
			Total   *int64   `json:"total"`
			HasMore *bool    `json:"hasMore"`
		} `json:"completion"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, err
	}
	if r.Completion == nil || r.Completion.Values == nil {
		return nil, errors.New("completion.values is missing")
	}
	if len(r.Completion.Values) > maxCompletionValues {
		return nil, fmt.Errorf("completion.values holds more than %d values", maxCompletionValues)
	}
	c := mcp.Completion{Values: r.Completion.Values, Total: r.Completion.Total}
	if r.Completion.HasMore != nil {
		c.HasMore = *r.Completion.HasMore
	}
	return []mcp.Completion{c}, nil
}

// logLevels are the syslog severities of logging/setLevel, most verbose
// first.
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// ValidLogLevel reports whether level is one of the spec's.
func ValidLogLevel(level string) bool { return slices.Contains(logLevels, level) }

// logLevelState is the most verbose level any caller asked for.
type logLevelState struct {
	mu    sync.Mutex
	level string // "" before any request
}

// LogLevelRequest is one logging/setLevel as a front received it, its
// level already one of the spec's.
type LogLevelRequest struct {
	Level     string
	RequestID string
	Principal auth.Principal
}

// SetLogLevel applies a caller's logging/setLevel (decision 23): every
// downstream that declares logging is set to the most verbose level any
// caller has asked for, so that one caller cannot silence another's
// logs. Sessions are stateless, so the level never becomes less verbose
// while the gateway runs. A downstream that fails is logged, not
// reported: the caller's request was applied by the gateway. Every
// request is audited, with its level (one of eight words, not the
// caller's text). It reports false, and changes nothing, when no
// connected server declares logging: the gateway then offers no logging
// either (Offered), and the front answers -32601.
func (g *Gateway) SetLogLevel(ctx context.Context, c LogLevelRequest) bool {
	ev := audit.Event{RequestID: c.RequestID, Subject: c.Principal.Subject, Issuer: c.Principal.Issuer,
		Roles: c.Principal.Roles, Method: "logging/setLevel", Level: c.Level}
	if !g.Offered().Logging {
		ev.Outcome, ev.Reason, ev.Code = audit.Invalid, "no_logging", jsonrpc.CodeMethodNotFound
		g.audit.Record(ev)
		return false
	}
	ev.Outcome = audit.Allow
	g.audit.Record(ev)
	level := c.Level
	g.logLevel.mu.Lock()
	if g.logLevel.level == "" || slices.Index(logLevels, level) < slices.Index(logLevels, g.logLevel.level) {
		g.logLevel.level = level
	}
	level = g.logLevel.level
	g.logLevel.mu.Unlock()
	params, _ := jsontext.AppendQuote([]byte(`{"level":`), level)
	params = append(params, '}')
	var wg sync.WaitGroup
	for _, name := range g.order {
		d := g.servers[name]
		d.mu.Lock()
		offers := offersCapability(d.info.Capabilities, "logging")
		d.mu.Unlock()
		if !offers || d.conn == nil || !d.conn.Connected() {
			continue
		}
		wg.Go(func() {
			dctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout.D())
			defer cancel()
			release, err := d.slots.acquire(dctx, c.Principal) // a request like a call
			if err != nil {
				// The level is kept: the next request sends it again.
				g.log.Warn("logging/setLevel not sent to a downstream", slog.String("server", d.name), slog.String("error", err.Error()))
				return
			}
			defer release()
			if _, err := d.conn.Call(dctx, "logging/setLevel", params, upstream.CallOptions{}); err != nil {
				g.log.Warn("a downstream refused logging/setLevel", slog.String("server", d.name), slog.String("error", err.Error()))
			}
		})
	}
	wg.Wait()
	return true
}

// Offered is what the HTTP front declares besides tools (decision 25):
// each feature the gateway relays that some connected server declared
// at its last handshake.
func (g *Gateway) Offered() mcp.Offered {
	var o mcp.Offered
	for _, name := range g.order {
		d := g.servers[name]
		if d.conn == nil || !d.conn.Connected() {
			continue
		}
		d.mu.Lock()
		caps := d.info.Capabilities
		d.mu.Unlock()
		o.Prompts = o.Prompts || offersCapability(caps, "prompts")
		o.Resources = o.Resources || offersCapability(caps, "resources")
		o.Subscribe = o.Subscribe || subscribeCapability(caps)
		o.Completions = o.Completions || offersCapability(caps, "completions")
		o.Logging = o.Logging || offersCapability(caps, "logging")
	}
	return o
}
