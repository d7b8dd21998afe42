package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/gateway/audit"
	"github.com/mcp-bastion/bastion/internal/gateway/auth"
	"github.com/mcp-bastion/bastion/internal/gateway/catalog"
	"github.com/mcp-bastion/bastion/internal/gateway/policy"
	"github.com/mcp-bastion/bastion/internal/gateway/upstream"
	"github.com/mcp-bastion/bastion/internal/jsonrpc"
	"github.com/mcp-bastion/bastion/internal/mcp"
	"github.com/mcp-bastion/bastion/internal/problem"
)

// ListPrompts renders the page of the catalog's prompts, as view sees
// it, that cursor (nil for the first) points at, for version; cursors
// are those of [Lister.List], sealed for prompts (a tools/list cursor is
// not one).
func (l *Lister) ListPrompts(version string, cursor *string, view View) ([]byte, *Error) {
	snap := l.g.catalog.Snapshot()
	visible := snap.Prompts
	if view.AllowPrompt != nil {
		visible = slices.DeleteFunc(slices.Clone(snap.Prompts), func(p *catalog.Prompt) bool { return !view.AllowPrompt(p.Qualified) })
	}
	start, end, next, err := l.page(listPrompts, snap.PromptRevision, cursor, view.Owner, len(visible))
	if err != nil {
		return nil, err
	}
	prompts := make([]mcp.RawPrompt, 0, end-start)
	for _, p := range visible[start:end] {
		rp := mcp.RawPrompt{Name: p.Public, Title: p.Title, Description: p.Description, Icons: p.Icons}
		for _, a := range p.Arguments {
			rp.Arguments = append(rp.Arguments, mcp.RawPromptArgument{Name: a.Name, Title: a.Title, Description: a.Description, Required: a.Required})
		}
		prompts = append(prompts, rp)
	}
	return l.enc.RelayedPromptsList(version, prompts, mcp.ListPage{NextCursor: next, CacheScope: "private"}), nil
}

// PromptGet is one prompts/get as a front received it.
type PromptGet struct {
	// Name is the qualified name.
	Name string
	// Arguments is the arguments object as received, nil when absent.
	Arguments jsontext.Value
	// RequestID and Principal are as a Call's.
	RequestID string
	Principal auth.Principal
}

// PromptResult is a downstream's prompts/get result, checked: what a
// front re-encodes for its caller's version (mcp.Encoder.AppendRelayedPrompt).
type PromptResult struct {
	Description string
	Messages    []mcp.PromptMessage
}

// unknownPrompt refuses a name that is not in the catalog: the spec's
// -32602 for an invalid prompt name.
func unknownPrompt(name string) *Error {
	pr := problem.New(problem.Validation, "Unknown prompt: "+problem.Quote(name), "name")
	return &Error{Code: jsonrpc.CodeInvalidParams, Status: http.StatusOK,
		Message: "Unknown prompt: " + problem.Quote(name), Data: mcp.ProblemData(pr)}
}

// invalidPromptArguments refuses arguments the descriptor does not
// declare, or lacks a required one: -32602 naming the argument, never its
// value.
func invalidPromptArguments(detail string) *Error {
	pr := problem.New(problem.Validation, "Invalid prompt arguments: "+detail, "arguments")
	return &Error{Code: jsonrpc.CodeInvalidParams, Status: http.StatusOK,
		Message: "Invalid params: " + detail, Data: mcp.ProblemData(pr)}
}

// GetPrompt runs a prompts/get (docs/gateway-surface.md decision 18): the
// qualified name resolved in the catalog, the caller authorized by the
// rules' prompt patterns, the arguments checked against the pinned
// descriptor, and the request sent to the downstream under its own name
// with the server's deadline; the messages that come back are checked
// before they are relayed. Errors are an *Error, or ctx's cause when the
// caller went away. Every outcome is audited by names: the prompt, the
// argument names, the rule.
func (g *Gateway) GetPrompt(ctx context.Context, c PromptGet) (*PromptResult, error) {
	ev := audit.Event{RequestID: c.RequestID, Subject: c.Principal.Subject, Issuer: c.Principal.Issuer,
		Roles: c.Principal.Roles, Method: "prompts/get"}
	p, ok := g.catalog.Snapshot().LookupPrompt(c.Name)
	if !ok {
		ev.Outcome, ev.Reason, ev.Code = audit.Invalid, "unknown_prompt", jsonrpc.CodeInvalidParams
		g.audit.Record(ev)
		return nil, unknownPrompt(c.Name)
	}
	ev.Prompt = p.Qualified
	args, names, detail := promptArgs(p, c.Arguments)
	ev.Arguments = names
	pc := policy.Call{Kind: policy.KindPrompt, Qualified: p.Qualified, Server: p.Server, Name: p.Name}
	d := g.policy.Decide(c.Principal.Policy(), pc)
	if d.NeedsArgs && detail == "" {
		pc.Args = make(map[string]any, len(args))
		for k, v := range args {
			pc.Args[k] = v
		}
		d = g.policy.Decide(c.Principal.Policy(), pc)
	}
	ev.Rule = d.Rule
	g.metrics.Decision(d.Rule, d.Allow)
	g.conditionFault(c.RequestID, d, p.Qualified)
	switch {
	case !d.Allow && !d.NeedsArgs:
		// Refused before the arguments are judged: a caller refused the
		// prompt learns nothing of what it takes.
		ev.Outcome, ev.Reason, ev.Code = audit.Deny, d.Reason, CodeUnauthorized
		g.audit.Record(ev)
		return nil, unauthorizedPrompt(p.Qualified, d, c.Principal.Roles)
	case detail != "":
		ev.Outcome, ev.Reason, ev.Code = audit.Invalid, "arguments", jsonrpc.CodeInvalidParams
		g.audit.Record(ev)
		return nil, invalidPromptArguments(detail)
	}
	res, took, err := g.getPrompt(ctx, c, p, args)
	g.recordForwarded(ev, took, err)
	return res, err
}

// promptArgs reads a prompts/get's arguments against the descriptor:
// an object of strings, each declared, every required one present. It
// returns them, their names (sorted, for the audit) and why they are
// refused ("" when they are not). Names that are not declared are not
// returned for the audit: they are the caller's text.
func promptArgs(p *catalog.Prompt, raw jsontext.Value) (map[string]string, []string, string) {
	args := map[string]string{}
	if len(raw) > 0 && raw.Kind() != 'n' {
		var m map[string]jsontext.Value
		if raw.Kind() != '{' || json.Unmarshal(raw, &m) != nil {
			return nil, nil, "arguments must be an object of strings"
		}
		for k, v := range m {
			if _, ok := p.Argument(k); !ok {
				return nil, nil, fmt.Sprintf("prompt %s declares no argument %s", problem.Quote(p.Qualified), problem.Quote(k))
			}
			var s string
			if v.Kind() != '"' || json.Unmarshal(v, &s) != nil {
				return nil, nil, fmt.Sprintf("argument %s must be a string", problem.Quote(k))
			}
			args[k] = s
		}
	}
	names := make([]string, 0, len(args))
	for _, a := range p.Arguments {
		if _, ok := args[a.Name]; ok {
			names = append(names, a.Name)
		} else if a.Required {
			return nil, names, fmt.Sprintf("argument %s is required", problem.Quote(a.Name))
		}
	}
	slices.Sort(names)
	return args, names, ""
}

// unauthorizedPrompt is the -32001 of a prompts/get the deciding rule
// refused.
func unauthorizedPrompt(name string, d policy.Decision, roles []string) *Error {
	e := unauthorized(name, d, roles)
	var data map[string]any
	_ = json.Unmarshal(e.Data, &data)
	delete(data, "tool")
	data["prompt"] = name
	e.Data, _ = json.Marshal(data)
	switch d.Reason {
	case policy.ReasonNoRule:
		e.Message = "Unauthorized: no rule allows prompt " + problem.Quote(name)
	case policy.ReasonCondition:
		e.Message = fmt.Sprintf("Unauthorized: rule %s does not allow this get of prompt %s", problem.Quote(d.Rule), problem.Quote(name))
	default:
		e.Message = fmt.Sprintf("Unauthorized: prompt %s requires one of the roles %s; the caller has %s",
			problem.Quote(name), joinOr(d.Required), joinOr(roles))
	}
	return e
}

func joinOr(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	var b bytes.Buffer
	for i, v := range s {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(v)
	}
	return b.String()
}

// getPrompt sends the checked prompts/get to the downstream.
func (g *Gateway) getPrompt(ctx context.Context, c PromptGet, p *catalog.Prompt, args map[string]string) (*PromptResult, time.Duration, error) {
	log := callLog{g.log, slog.String("request_id", c.RequestID)}
	d := g.servers[p.Server]
	params := []byte(`{"name":`)
	params, _ = jsontext.AppendQuote(params, p.Name)
	if len(args) > 0 {
		a, err := json.Marshal(args, json.Deterministic(true))
		if err != nil {
			return nil, 0, invalidPromptArguments("arguments could not be encoded")
		}
		params = append(append(params, `,"arguments":`...), a...)
	}
	params = append(params, '}')
	dctx, cancel := context.WithTimeoutCause(ctx, d.cfg.Timeout.D(), errCallTimeout)
	defer cancel()
	release, err := d.slots.acquire(dctx, c.Principal)
	if err != nil {
		return nil, 0, g.callError(ctx, dctx, log, p.Server, p.Qualified, context.Cause(dctx))
	}
	defer release()
	start := time.Now()
	raw, err := d.conn.Call(dctx, "prompts/get", params, upstream.CallOptions{
		Name:     p.Name,
		Identity: identityOf(c.Principal, c.RequestID),
		// Sent only while the pin it was decided under holds (see Invoke).
		Current: func() error {
			if cur, ok := g.catalog.Snapshot().LookupPrompt(p.Public); ok && cur.Server == p.Server && cur.Digest == p.Digest {
				return nil
			}
			return unknownPrompt(p.Public)
		},
	})
	took := time.Since(start)
	if err != nil {
		return nil, took, g.callError(ctx, dctx, log, p.Server, p.Qualified, err)
	}
	if askedForInput(raw) {
		log.Warn("downstream answered prompts/get with input_required, which the gateway carries only for tools/call",
			slog.String("server", p.Server), slog.String("prompt", p.Qualified))
		return nil, took, badGateway(p.Server, reasonNoInputRounds, false)
	}
	res, embedded, perr := parsePromptResult(raw)
	if perr != nil {
		log.Warn("downstream answered prompts/get with a malformed result", slog.String("server", p.Server),
			slog.String("prompt", p.Qualified), slog.String("error", perr.Error()))
		return nil, took, badGateway(p.Server, "the server answered with a malformed result", false)
	}
	if err := g.checkEmbedded(p.Server, embedded); err != nil {
		log.Warn("downstream answered prompts/get with a resource of another server", slog.String("server", p.Server),
			slog.String("prompt", p.Qualified), slog.String("error", err.Error()))
		return nil, took, badGateway(p.Server, "the server answered with a resource it does not serve", false)
	}
	return res, took, nil
}

// parsePromptResult reads a GetPromptResult: messages an array of
// objects, each a role of user or assistant and one content block object
// with a string type; description absent or a string. It returns the
// URIs of the embedded resources too.
func parsePromptResult(raw jsontext.Value) (*PromptResult, []string, error) {
	var r struct {
		Description jsontext.Value `json:"description"`
		Messages    []struct {
			Role    *string        `json:"role"`
			Content jsontext.Value `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, nil, err
	}
	if r.Messages == nil {
		return nil, nil, errors.New("messages is missing")
	}
	out := &PromptResult{Messages: make([]mcp.PromptMessage, 0, len(r.Messages))}
	if len(r.Description) > 0 && r.Description.Kind() != 'n' {
		if r.Description.Kind() != '"' || json.Unmarshal(r.Description, &out.Description) != nil {
			return nil, nil, errors.New("description is not a string")
		}
	}
	var embedded []string
	for i, m := range r.Messages {
		if m.Role == nil || (*m.Role != "user" && *m.Role != "assistant") {
			return nil, nil, fmt.Errorf("messages[%d].role is neither user nor assistant", i)
		}
		var block contentBlock
		if m.Content.Kind() != '{' || json.Unmarshal(m.Content, &block) != nil || block.Type == nil {
			return nil, nil, fmt.Errorf("messages[%d].content is not a content block", i)
		}
		if _, dup := foldedDuplicate(m.Content); dup { // as in a tool result (parseResult)
			return nil, nil, fmt.Errorf("messages[%d].content holds member names that differ only in case", i)
		}
		uri, err := block.embedded()
		if err != nil {
			return nil, nil, fmt.Errorf("messages[%d].content: %w", i, err)
		}
		if uri != nil {
			embedded = append(embedded, *uri)
		}
		out.Messages = append(out.Messages, mcp.PromptMessage{Role: *m.Role, Content: m.Content})
	}
	return out, embedded, nil
}
