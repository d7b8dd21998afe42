package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/gateway/admit"
	"github.com/mcp-bastion/bastion/internal/gateway/audit"
	"github.com/mcp-bastion/bastion/internal/gateway/auth"
	"github.com/mcp-bastion/bastion/internal/gateway/catalog"
	"github.com/mcp-bastion/bastion/internal/gateway/metrics"
	"github.com/mcp-bastion/bastion/internal/gateway/policy"
	"github.com/mcp-bastion/bastion/internal/gateway/upstream"
	"github.com/mcp-bastion/bastion/internal/jsondec"
	"github.com/mcp-bastion/bastion/internal/jsonrpc"
	"github.com/mcp-bastion/bastion/internal/mcp"
	"github.com/mcp-bastion/bastion/internal/problem"
	"github.com/mcp-bastion/bastion/internal/tool"
)

// JSON-RPC codes the gateway answers with (GATEWAY.md, "Errors the gateway
// itself answers").
const (
	CodeUnauthenticated  = -32000
	CodeUnauthorized     = -32001
	CodeBadGateway       = -32003
	CodeInvalidResult    = -32004
	CodeTooManyRequests  = -32005
	CodeHeaderMismatch   = -32020
	CodeUnsupportedProto = mcp.CodeUnsupportedProtocolVersion
)

// Error is an answer the gateway gives itself: a JSON-RPC error and the
// HTTP status of the error table.
type Error struct {
	Code    int
	Status  int
	Message string
	// Data is error.data, or nil.
	Data jsontext.Value
	// unknown marks the refusal of a name the catalog does not hold (or
	// no longer holds as the call was decided), for the metrics: its
	// code is a downstream's -32602 too.
	unknown bool
}

func (e *Error) Error() string { return fmt.Sprintf("gateway: %d: %s", e.Code, e.Message) }

// RPC returns e as the JSON-RPC error answering id.
func (e *Error) RPC(id jsonrpc.ID) *jsonrpc.Error {
	return &jsonrpc.Error{ID: id, Code: e.Code, Message: e.Message, Data: e.Data}
}

// badGateway is a downstream that could not give an answer.
func badGateway(server, why string, timeout bool) *Error {
	status := http.StatusBadGateway
	if timeout {
		status = http.StatusGatewayTimeout
	}
	data, _ := json.Marshal(map[string]string{"server": server, "reason": why})
	return &Error{Code: CodeBadGateway, Status: status, Message: "Bad gateway: " + why, Data: data}
}

// unknownTool refuses a name that is not in the catalog.
func unknownTool(name string) *Error {
	pr := problem.New(problem.Validation, "Unknown tool: "+problem.Quote(name), "name")
	return &Error{Code: jsonrpc.CodeInvalidParams, Status: http.StatusOK,
		Message: "Unknown tool: " + problem.Quote(name), Data: mcp.ProblemData(pr), unknown: true}
}

// Call is one tools/call as a front received it.
type Call struct {
	// Name is the qualified name.
	Name string
	// Arguments is the arguments object, already through the sanitizer.
	Arguments jsontext.Value
	// ProgressToken is the caller's progress token, nil for none;
	// Progress then receives each progress notification's params, with
	// that token.
	ProgressToken jsontext.Value
	Progress      func(params jsontext.Value)
	// RequestID correlates the gateway's log lines of this call with the
	// front's, the audit event and what an HTTP downstream receives; ""
	// for none.
	RequestID string
	// Principal is the caller, as the front authenticated it.
	Principal auth.Principal
	// ClientRequests, when set, asks the caller (decision 24);
	// ClientCapabilities says what it declared it can answer.
	ClientRequests     ClientRequester
	ClientCapabilities ClientCapabilities
	// Messages, when set, receives the downstream's log messages sent
	// while it serves the call, as notifications/message params.
	Messages func(params jsontext.Value)
	// TakesRounds says that the caller answers a 2026-07-28 server's
	// rounds of input itself, as a 2026-07-28 caller does (no request
	// reaches it): a round asking only for what ClientCapabilities
	// declares is handed to it, sealed, as the call's result.
	TakesRounds bool
	// Answers, when set, are the caller's answers to a round handed to
	// it: the call resumes where that round left it.
	Answers *Answers
}

// Answers are what a 2026-07-28 caller's retry carries: its
// inputResponses (an object; nil for none) and the requestState it was
// handed.
type Answers struct {
	Responses jsontext.Value
	State     string
}

// InputRound is a round of input handed to the caller: the inputRequests
// object of an input_required result (nil when the server named none)
// and the sealed requestState the caller is to send back.
type InputRound struct {
	Requests jsontext.Value
	State    string
}

// Result is a downstream's tools/call result, parsed: what a front
// re-encodes for its caller's version (mcp.Encoder.AppendRelayedResult).
type Result struct {
	Content    jsontext.Value // a JSON array of content blocks
	Structured jsontext.Value // structuredContent, nil when absent
	IsError    bool
	// Input, when set, makes the result input_required: a round handed
	// to the caller. The other fields are then unset.
	Input *InputRound
	// embedded are the URIs of the embedded resources in Content.
	embedded []string
}

// contentBlock is what the gateway reads of a content block: its type,
// and an embedded resource's URI.
type contentBlock struct {
	Type     *string        `json:"type"`
	Resource jsontext.Value `json:"resource"`
}

// embedded is the URI of an embedded resource block, nil for a block of
// another type.
func (b contentBlock) embedded() (*string, error) {
	if b.Type == nil || *b.Type != "resource" {
		return nil, nil
	}
	var r struct {
		URI *string `json:"uri"`
	}
	if b.Resource.Kind() != '{' || json.Unmarshal(b.Resource, &r) != nil || r.URI == nil {
		return nil, errors.New("an embedded resource without a uri")
	}
	return r.URI, nil
}

// checkEmbedded judges the URIs a server's tool result or prompt labels
// embedded resources with (decision 19's spoofing rule, as reads apply
// it to their contents): a URI another server serves, exactly or through
// a template, or one that no server serves and is not in normal form
// (another spelling of a URI that one does), is refused. What a server
// embeds under a URI of its own, or of no one, is its own content, which
// the call that returned it was authorized for.
func (g *Gateway) checkEmbedded(server string, uris []string) error {
	if len(uris) == 0 {
		return nil
	}
	snap := g.catalog.Snapshot()
	for i, u := range uris {
		if len(u) > catalog.MaxURI {
			// Bounded as a listed URI is, before any template is matched.
			return fmt.Errorf("embedded resource %d is labelled with a URI longer than %d bytes", i, catalog.MaxURI)
		}
		switch o := snap.Owner(u); {
		case o != "" && o != server:
			// Another server's, whether it serves it now or not.
			return fmt.Errorf("embedded resource %d is labelled with a URI another server serves", i)
		case o == "" && catalog.NotNormal(u) != "":
			return fmt.Errorf("embedded resource %d is labelled with a URI not in normal form: %s", i, catalog.NotNormal(u))
		}
	}
	return nil
}

// Invoke runs a tools/call: the qualified name is resolved in the
// catalog, the arguments are checked against the tool's input schema, and
// the call goes to the downstream under its own name with the per-call
// deadline. Errors are an *Error, a *tool.ArgumentError (arguments that
// fail the schema), or ctx's cause when the caller went away (the
// downstream is then told the call was cancelled, and the caller gets no
// answer).
func (g *Gateway) Invoke(ctx context.Context, c Call) (res *Result, err error) {
	start := time.Now()
	ev := audit.Event{RequestID: c.RequestID, Subject: c.Principal.Subject, Issuer: c.Principal.Issuer,
		Roles: c.Principal.Roles, Method: "tools/call"}
	snap := g.catalog.Snapshot()
	t, ok := snap.Lookup(c.Name)
	if !ok {
		g.metrics.ToolCall("", metrics.Unknown, "unknown_tool", time.Since(start))
		ev.Outcome, ev.Reason, ev.Code = audit.Invalid, "unknown_tool", jsonrpc.CodeInvalidParams
		// The caller is told no more than of a name that does not exist;
		// the operator reading the audit is told the tool is held, and
		// why (pending review, quarantined, rejected).
		if r, held := g.heldTool(snap, c.Name); held {
			ev.Tool, ev.Reason, ev.Status = r.Qualified, "not_admitted", string(r.Status)
		}
		g.audit.Record(ev)
		return nil, unknownTool(c.Name)
	}
	ev.Tool = t.Qualified
	defer func() { g.metrics.ToolCall(t.Server, t.Name, outcome(ctx, res, err), time.Since(start)) }()
	d, err := g.decide(c, t)
	ev.Rule = d.Rule
	if err != nil {
		ev.Outcome, ev.Reason, ev.Code = audit.Invalid, "arguments", jsonrpc.CodeInvalidParams
		g.audit.Record(ev)
		return nil, err
	}
	g.metrics.Decision(d.Rule, d.Allow)
	if !d.Allow {
		g.conditionFault(c.RequestID, d, t.Qualified)
		ev.Outcome, ev.Reason, ev.Code = audit.Deny, d.Reason, CodeUnauthorized
		g.audit.Record(ev)
		return nil, unauthorized(t.Qualified, d, c.Principal.Roles)
	}
	// A retry that answers a round handed to the caller resumes the call
	// where the round left it, once the seal opens for this caller, tool
	// and arguments and the answers are those asked.
	var from *resumption
	if c.Answers != nil {
		if from, err = g.resume(c, t); err != nil {
			ev.Outcome, ev.Reason, ev.Code = audit.Invalid, "input_answers", jsonrpc.CodeInvalidParams
			g.audit.Record(ev)
			return nil, err
		}
	}
	var downstream time.Duration
	res, err = g.invoke(ctx, c, t, from, &downstream, &ev.Headers)
	if err == nil && res.Input != nil {
		ev.Reason = "input_required" // the call is not over: the caller is to answer
	}
	g.recordForwarded(ev, downstream, err)
	return res, err
}

// heldTool is the ledger's record of the tool a caller named, when the
// catalog holds it back rather than offers it.
func (g *Gateway) heldTool(snap *catalog.Snapshot, name string) (admit.Record, bool) {
	for _, r := range snap.Held {
		if r.Kind == admit.KindTool && (r.Qualified == name || (g.cfg.Names == "bare" && r.Name == name)) {
			return r, true
		}
	}
	return admit.Record{}, false
}

// recordForwarded audits a request the policy allowed and the gateway
// forwarded: how long the downstream took (when it was asked at all) and
// the JSON-RPC code the caller is answered with, 0 for a result.
func (g *Gateway) recordForwarded(ev audit.Event, took time.Duration, err error) {
	ev.Outcome = audit.Allow
	if took > 0 {
		ms := float64(took.Microseconds()) / 1000
		ev.DownstreamMS = &ms
	}
	var gwErr *Error
	var argErr *tool.ArgumentError
	switch {
	case errors.As(err, &gwErr):
		ev.Code = gwErr.Code
	case errors.As(err, &argErr):
		ev.Code = jsonrpc.CodeInvalidParams
	}
	g.audit.Record(ev)
}

// decide applies the policy to c: by principal and tool first, then, for
// a call it may allow, checks the arguments against the tool's input
// schema, and when the deciding rule has a condition, applies it to the
// checked arguments (a condition never sees unchecked ones). A schema
// failure, or an argument named as a declared one but for case
// (caseVariant), is the *tool.ArgumentError returned.
func (g *Gateway) decide(c Call, t *catalog.Tool) (policy.Decision, error) {
	pc := policy.Call{Qualified: t.Qualified, Server: t.Server, Name: t.Name}
	d := g.policy.Decide(c.Principal.Policy(), pc)
	if !d.Allow && !d.NeedsArgs {
		return d, nil // refused whatever the arguments
	}
	// Checked here for every call the policy may allow, with or without
	// a condition, so that a refusal is audited as one (invalid, not
	// allow) and a call is checked once.
	if err := tool.ValidateValue(t.Input, c.Arguments); err != nil {
		return d, err
	}
	// A member the schema does not declare, named as one it does but for
	// case ("TO" beside a declared "to"), passed the schema as an unknown
	// member and is absent to a condition, while a downstream that folds
	// case reads it as the declared one. That defeats the schema as much
	// as a condition, so it is refused on every call, on the one path
	// both fronts take.
	if given, declared, ok := caseVariant(t.Input, c.Arguments); ok {
		return d, tool.NewArgumentError(fmt.Sprintf("arguments: %s differs only in case (or in dashes and underscores) from the declared argument %s and is refused", problem.Quote(given), problem.Quote(declared)))
	}
	if !d.NeedsArgs {
		return d, nil
	}
	// A condition must read the arguments as the downstream will. Member
	// names that differ only in case are read as one by decoders that
	// fold case (Go's encoding/json keeps the last), so the condition
	// could judge "amount" while the downstream acts on "AMOUNT": such
	// arguments are refused before any condition sees them.
	if name, ok := foldedDuplicate(c.Arguments); ok {
		return d, tool.NewArgumentError(fmt.Sprintf("arguments: member names that differ only in case (%s) are refused under a rule with a condition", problem.Quote(name)))
	}
	// Conditions read the arguments and annotations as plain JSON values.
	if err := json.Unmarshal(c.Arguments, &pc.Args); err != nil || pc.Args == nil {
		return d, tool.NewArgumentError("arguments must be an object")
	}
	if t.Annotations != nil {
		_ = json.Unmarshal(t.Annotations, &pc.Annotations)
	}
	return g.policy.Decide(c.Principal.Policy(), pc), nil
}

// conditionFault logs a call refused because its rule's condition could
// not be decided (d.Fault): a condition that fails on every call is a
// mistake in the rule, which the operator must be able to see. It names
// the rule and what was called, never what the evaluation said, which may
// hold argument values.
func (g *Gateway) conditionFault(requestID string, d policy.Decision, name string) {
	if d.Fault == "" {
		return
	}
	g.log.Warn("a policy condition could not be decided; the call is refused", slog.String("request_id", requestID),
		slog.String("rule", d.Rule), slog.String("name", name), slog.String("condition", d.Fault))
}

// unauthorized is the -32001 of a call the deciding rule refused.
func unauthorized(name string, d policy.Decision, roles []string) *Error {
	required := d.Required
	if required == nil {
		required = []string{}
	}
	if roles == nil {
		roles = []string{}
	}
	data, _ := json.Marshal(map[string]any{"tool": name, "required_roles": required, "roles": roles, "rule": d.Rule})
	var msg string
	switch d.Reason {
	case policy.ReasonNoRule:
		msg = fmt.Sprintf("Unauthorized Tool Call: no rule allows tool %s", problem.Quote(name))
	case policy.ReasonCondition:
		msg = fmt.Sprintf("Unauthorized Tool Call: rule %s does not allow this call of tool %s: its condition does not hold", problem.Quote(d.Rule), problem.Quote(name))
	default:
		msg = fmt.Sprintf("Unauthorized Tool Call: tool %s requires one of the roles %s; the caller has %s",
			problem.Quote(name), strings.Join(required, ", "), strings.Join(roles, ", "))
	}
	return &Error{Code: CodeUnauthorized, Status: http.StatusForbidden, Message: msg, Data: data}
}

// outcome names what became of a call, for the metrics.
func outcome(ctx context.Context, res *Result, err error) string {
	var (
		gwErr  *Error
		argErr *tool.ArgumentError
	)
	switch {
	case err == nil && res.Input != nil:
		return "input_required"
	case err == nil && res.IsError:
		return "is_error"
	case err == nil:
		return "ok"
	case errors.As(err, &argErr):
		return "invalid_arguments"
	case errors.Is(err, errAnswers):
		return "invalid_answers"
	case errors.As(err, &gwErr) && gwErr.Code == CodeUnauthorized:
		// The policy refused it: no downstream was asked.
		return "denied"
	case errors.As(err, &gwErr) && gwErr.unknown:
		// The tool changed or went while the call waited for a slot.
		return "unknown_tool"
	case ctx.Err() != nil:
		return "cancelled"
	case errors.As(err, &gwErr) && gwErr.Status == http.StatusGatewayTimeout:
		return "timeout"
	case errors.As(err, &gwErr) && gwErr.Code == CodeInvalidResult:
		return "invalid_result"
	case errors.As(err, &gwErr) && (gwErr.Code != CodeBadGateway || bytes.Contains(gwErr.Data, []byte(`"downstream_code"`))):
		return "downstream_error"
	}
	return "bad_gateway"
}

func (g *Gateway) invoke(ctx context.Context, c Call, t *catalog.Tool, from *resumption, took *time.Duration, headers *[]audit.Header) (*Result, error) {
	// The request id goes on the lines that are written, not into a
	// logger built for every call.
	log := callLog{g.log, slog.String("request_id", c.RequestID)}
	d := g.servers[t.Server]
	params, err := callParams(t, c.Arguments)
	if err != nil {
		return nil, err
	}
	// A resumed call carries the answers and the server's own state; the
	// rounds it took count against the bound.
	first := 1
	if from != nil {
		if params, err = withInput(params, from.responses, from.state); err != nil {
			return nil, err
		}
		first = from.round + 1
	}
	var mirrored []upstream.Param
	if d.mirrors() {
		if mirrored, *headers, err = paramHeaders(t.Mirrors, c.Arguments); err != nil {
			return nil, err
		}
	}
	timeout := d.cfg.Timeout.D()
	dctx, cancel := context.WithTimeoutCause(ctx, timeout, errCallTimeout)
	defer cancel()
	release, err := d.slots.acquire(dctx, c.Principal)
	if err != nil {
		return nil, g.callError(ctx, dctx, log, t.Server, t.Qualified, context.Cause(dctx))
	}
	defer release()
	start := time.Now()
	var downstreamTime time.Duration
	opts := upstream.CallOptions{
		Name: t.Name, ProgressToken: c.ProgressToken, Progress: progressOf(c),
		Identity: identityOf(c.Principal, c.RequestID),
		Params:   mirrored,
		Requests: g.relayRequests(c, t),
		Messages: messagesOf(t.Server, c.Messages),
		// A 2026-07-28 server asks only a client that declares it can
		// answer: what the gateway can ask this caller.
		ClientCapabilities: capabilitiesOf(c),
		// The server may have come back as another one (or changed the
		// tool) while the call waited: it is sent only while the pin it
		// was decided under still holds.
		Current: func() error {
			if cur, ok := g.catalog.Snapshot().Lookup(t.Public); ok && cur.Server == t.Server && cur.Digest == t.Digest {
				return nil
			}
			return unknownTool(t.Qualified)
		},
	}
	// took is the downstream's own time, however the call ends: not the
	// caller's, while it answers a round of input.
	defer func() { *took = downstreamTime }()
	res, err := d.conn.Call(dctx, "tools/call", params, opts)
	downstreamTime += time.Since(start)
	// A 2026-07-28 server asks for the caller's input by answering
	// input_required: the gateway asks the caller and calls again with
	// the answers, within the call's deadline and slot.
	for round := first; err == nil; round++ {
		in, perr := parseInputRound(res)
		if errors.Is(perr, errNotInputRequired) {
			break
		}
		if perr == nil && round > maxInputRounds {
			log.Warn("downstream asked for input too many times in one call", slog.String("server", t.Server), slog.String("tool", t.Qualified))
			return nil, badGateway(t.Server, fmt.Sprintf("the server asked for the caller's input more than %d times", maxInputRounds), false)
		}
		if perr != nil {
			log.Warn("downstream answered tools/call with a malformed input_required result", slog.String("server", t.Server),
				slog.String("tool", t.Qualified), slog.String("error", perr.Error()))
			return nil, badGateway(t.Server, "the server answered with a malformed result", false)
		}
		if c.ClientRequests == nil && c.TakesRounds {
			return g.handOver(c, t, in, round)
		}
		retry, ferr := g.fulfil(dctx, c, t, params, in)
		var gwErr *Error
		if errors.As(ferr, &gwErr) {
			return nil, gwErr
		}
		if ferr != nil {
			return nil, g.callError(ctx, dctx, log, t.Server, t.Qualified, ferr)
		}
		callStart := time.Now()
		res, err = d.conn.Call(dctx, "tools/call", retry, opts)
		downstreamTime += time.Since(callStart)
	}
	if err != nil {
		return nil, g.callError(ctx, dctx, log, t.Server, t.Qualified, err)
	}
	out, perr := parseResult(res)
	if perr != nil {
		log.Warn("downstream answered tools/call with a malformed result", slog.String("server", t.Server),
			slog.String("tool", t.Qualified), slog.String("error", perr.Error()))
		return nil, badGateway(t.Server, "the server answered with a malformed result", false)
	}
	if err := g.checkEmbedded(t.Server, out.embedded); err != nil {
		// The error says which resource, never its URI.
		log.Warn("downstream answered tools/call with a resource of another server", slog.String("server", t.Server),
			slog.String("tool", t.Qualified), slog.String("error", err.Error()))
		return nil, badGateway(t.Server, "the server answered with a resource it does not serve", false)
	}
	if reason := checkOutput(t, out); reason != "" {
		// The whole result is withheld — its text copy too — and neither
		// the log nor the answer says what it held.
		log.Warn("downstream result withheld: "+reason, slog.String("server", t.Server), slog.String("tool", t.Qualified))
		return nil, invalidResult(t, reason)
	}
	log.Debug("tools/call relayed", slog.String("tool", t.Qualified), slog.Bool("is_error", out.IsError),
		slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000))
	return out, nil
}

// identityOf is who a downstream request is made for: the caller p and
// the request's id.
func identityOf(p auth.Principal, requestID string) *upstream.Identity {
	return &upstream.Identity{Subject: p.Subject, Issuer: p.Issuer, Roles: p.Roles, RequestID: requestID}
}

// messagesOf is fn with the server's name in each message's logger; nil
// for none.
func messagesOf(server string, fn func(jsontext.Value)) func(jsontext.Value) {
	if fn == nil {
		return nil
	}
	return tagMessages(server, fn)
}

// checkOutput validates a result against the pinned outputSchema
// (decision 9): structuredContent as any JSON value, isError results
// included whenever they carry it; a successful result of a tool with an
// outputSchema must carry it. It returns why the result is invalid, or "".
func checkOutput(t *catalog.Tool, r *Result) string {
	if r.Structured != nil && !admit.FiniteNumbers(r.Structured) {
		// A number beyond a double reads as Infinity or 0 in most
		// clients, and matches no schema the way it will be read.
		return "structuredContent holds a number beyond an IEEE 754 double"
	}
	if t.Output == nil {
		return ""
	}
	if r.Structured == nil {
		if r.IsError {
			return ""
		}
		return "the result carries no structuredContent, and the tool declares an outputSchema"
	}
	if tool.ValidateValue(t.Output, r.Structured) != nil {
		return "structuredContent does not match the pinned outputSchema"
	}
	return ""
}

// invalidResult is the -32004 of a result that failed the pinned
// outputSchema.
func invalidResult(t *catalog.Tool, reason string) *Error {
	data, _ := json.Marshal(map[string]string{"server": t.Server, "tool": t.Qualified, "reason": reason})
	return &Error{Code: CodeInvalidResult, Status: http.StatusBadGateway, Message: "Invalid downstream result: " + reason, Data: data}
}

// mirrors reports whether the server's calls carry Mcp-Param-* headers:
// a Streamable HTTP downstream of the 2026-07-28 era.
func (d *downstream) mirrors() bool {
	if d.cfg.Stdio() {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.info.Modern
}

// maxSafeInteger is 2^53-1: the integers every JSON reader agrees on.
const maxSafeInteger = 1<<53 - 1

// paramHeaders computes the Mcp-Param-* headers of a call from its
// checked arguments (decision 8): a string plain when it is visible ASCII
// without surrounding space and not sentinel-like, else the base64
// sentinel; an integer in decimal within ±(2^53-1); a boolean as
// true/false; an absent or null argument sends no header. Each decision
// is returned for the audit by header name, never with the value.
func paramHeaders(mirrors []admit.Mirror, args jsontext.Value) ([]upstream.Param, []audit.Header, error) {
	if len(mirrors) == 0 {
		return nil, nil, nil
	}
	var root any
	if err := json.Unmarshal(args, &root); err != nil {
		return nil, nil, tool.NewArgumentError("arguments are not valid JSON")
	}
	var (
		params    []upstream.Param
		decisions []audit.Header
	)
	for _, m := range mirrors {
		name := "Mcp-Param-" + m.Header
		v, ok := lookupPath(root, m.Path)
		if !ok || v == nil {
			decisions = append(decisions, audit.Header{Name: name, Encoding: "omitted"})
			continue
		}
		var value, encoding string
		if !mirrorType(m.Type, v) {
			// The schema's draft, or a $ref beside "type", can leave the
			// declared type unenforced: a header says what it declared.
			return nil, nil, tool.NewArgumentError(fmt.Sprintf("arguments: %s is mirrored into a header and must be of type %s", problem.Quote(strings.Join(m.Path, ".")), m.Type))
		}
		switch x := v.(type) {
		case string:
			value = upstream.HeaderValue(x)
			encoding = "plain"
			if value != x {
				encoding = "base64"
			}
		case bool:
			value, encoding = strconv.FormatBool(x), "plain"
		case float64:
			if x != math.Trunc(x) || math.Abs(x) > maxSafeInteger {
				return nil, nil, tool.NewArgumentError(fmt.Sprintf("arguments: %s is mirrored into a header and must be an integer within ±(2^53-1)", problem.Quote(strings.Join(m.Path, "."))))
			}
			value, encoding = integerText(x), "plain"
		default:
			// The schema admitted only string, integer and boolean
			// mirrors, and the arguments passed it.
			return nil, nil, tool.NewArgumentError(fmt.Sprintf("arguments: %s has a type that cannot be mirrored into a header", problem.Quote(strings.Join(m.Path, "."))))
		}
		params = append(params, upstream.Param{Name: m.Header, Value: value})
		decisions = append(decisions, audit.Header{Name: name, Encoding: encoding})
	}
	return params, decisions, nil
}

// Mirrored is one argument a tool mirrors into a header, as a client's
// request must carry it: Value is the decoded header value (the string
// itself, an integer in decimal, true or false); Absent when the argument
// is absent or null, which sends no header.
type Mirrored struct {
	Name   string // after Mcp-Param-
	Value  string
	Absent bool
}

// MirroredParams returns what a 2026-07-28 client's tools/call of the
// qualified name with params must carry in Mcp-Param-* headers; nothing
// for a tool the catalog does not offer or params that do not parse
// (the call is refused for them, not for its headers).
func (g *Gateway) MirroredParams(name string, params jsontext.Value) []Mirrored {
	t, ok := g.catalog.Snapshot().Lookup(name)
	if !ok || len(t.Mirrors) == 0 {
		return nil
	}
	var p struct {
		Arguments map[string]any `json:"arguments"`
	}
	if json.Unmarshal(params, &p) != nil {
		return nil
	}
	out := make([]Mirrored, 0, len(t.Mirrors))
	for _, m := range t.Mirrors {
		v, ok := lookupPath(p.Arguments, m.Path)
		r := Mirrored{Name: m.Header, Absent: !ok || v == nil}
		switch x := v.(type) {
		case string:
			r.Value = x
		case bool:
			r.Value = strconv.FormatBool(x)
		case float64:
			r.Value = strconv.FormatFloat(x, 'f', -1, 64)
			if x == math.Trunc(x) && math.Abs(x) <= maxSafeInteger {
				r.Value = integerText(x)
			}
		case nil:
		default:
			continue // not a mirrorable value: the schema refuses the call
		}
		out = append(out, r)
	}
	return out
}

// mirrorType reports whether v is of the mirror's declared type.
func mirrorType(typ string, v any) bool {
	switch x := v.(type) {
	case string:
		return typ == "string"
	case bool:
		return typ == "boolean"
	case float64:
		return typ == "integer" && x == math.Trunc(x)
	}
	return false
}

// integerText is how an integer travels in a header: in decimal, -0 as 0,
// the same on the sending and the checking side.
func integerText(x float64) string { return strconv.FormatInt(int64(x), 10) }

// lookupPath follows a property path through decoded objects.
func lookupPath[T any](root T, path []string) (any, bool) {
	var v any = root
	for _, p := range path {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = obj[p]; !ok {
			return nil, false
		}
	}
	return v, true
}

// errCallTimeout is the cause of the per-call deadline.
var errCallTimeout = errors.New("gateway: call deadline exceeded")

func progressOf(c Call) func(jsontext.Value) {
	if c.ProgressToken == nil || c.Progress == nil {
		return nil
	}
	return c.Progress
}

// callParams builds the downstream's tools/call params from scratch: its
// own name and the checked arguments.
func callParams(t *catalog.Tool, args jsontext.Value) ([]byte, error) {
	b := make([]byte, 0, len(`{"name":"","arguments":}`)+len(t.Name)+len(args))
	b = append(b, `{"name":`...)
	b, _ = jsontext.AppendQuote(b, t.Name)
	b = append(b, `,"arguments":`...)
	// As Value.Compact, but into b rather than into a copy first.
	b, err := jsontext.AppendFormat(b, args, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true), jsontext.PreserveRawStrings(true))
	if err != nil {
		return nil, tool.NewArgumentError("arguments are not valid JSON")
	}
	return append(b, '}'), nil
}

// callError maps what became of a downstream call to the caller's answer.
// server is the downstream, name the qualified name of what was called.
func (g *Gateway) callError(ctx, dctx context.Context, log callLog, server, name string, err error) error {
	var (
		rpcErr *upstream.RPCError
		gwErr  *Error
	)
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx) // the caller went away: no answer
	case errors.As(err, &gwErr):
		return gwErr // the gateway's own answer (CallOptions.Current)
	case context.Cause(dctx) == errCallTimeout:
		log.Warn("downstream call timed out", slog.String("server", server), slog.String("name", name))
		return badGateway(server, "the server did not answer in time", true)
	case errors.As(err, &rpcErr):
		return relayError(server, rpcErr)
	case errors.Is(err, upstream.ErrUnavailable):
		return badGateway(server, "the server is not available", false)
	case errors.Is(err, upstream.ErrConnectionLost):
		return badGateway(server, "the connection to the server was lost", false)
	case errors.Is(err, upstream.ErrRefused):
		return badGateway(server, "the server refused the request", false)
	case errors.Is(err, upstream.ErrMalformed):
		return badGateway(server, "the server's answer could not be read", false)
	}
	log.Warn("downstream call failed", slog.String("server", server), slog.String("name", name), slog.String("error", err.Error()))
	return badGateway(server, "the server could not be reached", false)
}

// relayError passes on a downstream's JSON-RPC error. A standard code
// (-32700 to -32603) is relayed with its message cut to 256 characters and
// its data dropped, so a downstream never speaks with the gateway's voice;
// any other code, the implementation-defined -32000..-32099 included,
// becomes -32003 with the code as data.downstream_code.
func relayError(server string, e *upstream.RPCError) *Error {
	switch e.Code {
	case jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest, jsonrpc.CodeMethodNotFound, jsonrpc.CodeInvalidParams, jsonrpc.CodeInternalError:
		return &Error{Code: e.Code, Status: http.StatusOK, Message: problem.Cap(e.Message)}
	}
	data, _ := json.Marshal(map[string]any{"server": server, "reason": "the server answered with an error", "downstream_code": e.Code})
	return &Error{Code: CodeBadGateway, Status: http.StatusBadGateway, Message: "Bad gateway: the server answered with an error", Data: data}
}

// parseResult reads a CallToolResult: content must be an array of objects
// with a string type; structuredContent any JSON value; isError a boolean.
func parseResult(res jsontext.Value) (*Result, error) {
	// The errors are logged: they say what is wrong, never quoting what
	// the server wrote (a decoder's error may name its members).
	var r struct {
		ResultType *string        `json:"resultType"`
		Content    jsontext.Value `json:"content"`
		Structured jsontext.Value `json:"structuredContent"`
		IsError    *bool          `json:"isError"`
	}
	if json.Unmarshal(res, &r) != nil {
		return nil, errors.New("the result does not match CallToolResult")
	}
	if r.ResultType != nil && *r.ResultType != "complete" {
		// input_required is read before (parseInputRound); another kind
		// is not one the gateway knows how to relay.
		return nil, errors.New("the result's resultType is not complete")
	}
	if r.Content.Kind() != '[' {
		return nil, errors.New("content is not an array")
	}
	// A block with member names that differ only in case ("resource" and
	// "Resource", "uri" and "URI", "ſ" for "s") reads as one thing here
	// and as another to a client whose decoder folds case: it is refused,
	// as such arguments are.
	if _, dup := foldedDuplicate(r.Content); dup {
		return nil, errors.New("content holds member names that differ only in case")
	}
	var blocks []contentBlock
	if json.Unmarshal(r.Content, &blocks) != nil {
		return nil, errors.New("content is not an array of content blocks")
	}
	out := &Result{Content: r.Content, IsError: r.IsError != nil && *r.IsError}
	for i, b := range blocks {
		if b.Type == nil {
			return nil, fmt.Errorf("content[%d] has no type", i)
		}
		uri, err := b.embedded()
		if err != nil {
			return nil, fmt.Errorf("content[%d]: %w", i, err)
		}
		if uri != nil {
			out.embedded = append(out.embedded, *uri)
		}
	}
	if len(r.Structured) > 0 && r.Structured.Kind() != 'n' {
		out.Structured = r.Structured
	}
	return out, nil
}

// callLog is the gateway's logger for one call: every line carries the
// call's request id.
type callLog struct {
	l   *slog.Logger
	rid slog.Attr
}

func (l callLog) Warn(msg string, attrs ...slog.Attr) { l.log(slog.LevelWarn, msg, attrs) }

func (l callLog) Debug(msg string, attrs ...slog.Attr) { l.log(slog.LevelDebug, msg, attrs) }

func (l callLog) log(level slog.Level, msg string, attrs []slog.Attr) {
	if !l.l.Enabled(context.Background(), level) {
		return
	}
	l.l.LogAttrs(context.Background(), level, msg, append(attrs, l.rid)...)
}

// foldedDuplicate finds, at any depth of v, an object with two member
// names equal under Unicode case folding, and returns one of them.
//
// Every relayed result passes here, so it allocates little: the folded
// names of all open objects share one slice, searched linearly while an
// object is small; an object with many members gets a set, so a hostile
// object of a million members still costs linear time.
func foldedDuplicate(v jsontext.Value) (string, bool) {
	// The decoder's own check of exact duplicates is redundant here: an
	// exact duplicate is a folded one too.
	dec := jsondec.Borrow(v, jsontext.AllowDuplicateNames(true))
	defer jsondec.Return(dec)
	type container struct {
		object bool
		start  int                 // where its names begin in names
		set    map[string]struct{} // its names, once it has many
	}
	var (
		open  []container
		names []string
	)
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			return "", false
		}
		switch tok.Kind() {
		case '{', '[':
			open = append(open, container{object: tok.Kind() == '{', start: len(names)})
			continue
		case '}', ']':
			names = names[:open[len(open)-1].start]
			open = open[:len(open)-1]
			continue
		}
		// A string directly inside an object, where a name is due, is a
		// member name: the decoder reports names and values alike as
		// strings, so the position tells them apart.
		if tok.Kind() != '"' || len(open) == 0 || !open[len(open)-1].object {
			continue
		}
		if _, n := dec.StackIndex(dec.StackDepth()); n%2 == 0 {
			continue
		}
		name := tok.String()
		folded, c := foldCase(name), &open[len(open)-1]
		if c.set != nil {
			if _, dup := c.set[folded]; dup {
				return name, true
			}
			c.set[folded] = struct{}{}
			continue
		}
		if slices.Contains(names[c.start:], folded) {
			return name, true
		}
		names = append(names, folded)
		if len(names)-c.start == manyMembers {
			c.set = make(map[string]struct{}, 2*manyMembers)
			for _, f := range names[c.start:] {
				c.set[f] = struct{}{}
			}
			names = names[:c.start]
		}
	}
}

// manyMembers is how many names an object has before foldedDuplicate
// keeps them in a set rather than searching a slice.
const manyMembers = 16

// foldCase is s under Unicode simple case folding as foldedDuplicate
// compares names: upper case, then lower case, so that "ſ" (U+017F) and
// "s", or "K" (U+212A) and "k", fold alike. An ASCII name, the usual
// kind, folds to its lower case without a copy when it has none.
func foldCase(s string) string {
	upper := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= utf8.RuneSelf:
			return strings.ToLower(strings.ToUpper(s))
		case 'A' <= c && c <= 'Z':
			upper = true
		}
	}
	if !upper {
		return s
	}
	return strings.ToLower(s)
}
