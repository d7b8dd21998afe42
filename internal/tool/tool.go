// Package tool defines what a tool is to the server core: a [Descriptor]
// advertised by tools/list and a [Tool.Call] that receives the raw, already
// sanitised arguments of a tools/call.
//
// [New] adapts a typed Go function into a Tool. It is where arguments are
// decoded strictly: first validated against the tool's own input schema (so
// what is advertised is what is enforced), then decoded into the input type
// with unknown members refused and no coercion ("10" is not 10, true is not
// 1, 1.5 is not an integer). Decoding failures are [*ArgumentError]s, which
// the session reports in-band or as JSON-RPC -32602 depending on its mode.
//
// A tool reports a refusal the caller can act on by returning a
// [*problem.Problem]; any other error is an internal failure that the peer
// only sees as a generic -32603.
package tool

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/jsonrpc"
	"github.com/mcp-bastion/bastion/internal/problem"
)

// Annotations are the behaviour hints advertised with a tool. Every field is
// always sent: a reader should not have to know the spec's defaults.
type Annotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    bool   `json:"readOnlyHint"`
	DestructiveHint bool   `json:"destructiveHint"`
	IdempotentHint  bool   `json:"idempotentHint"`
	OpenWorldHint   bool   `json:"openWorldHint"`
}

// ReadOnly are the annotations of a tool that only observes: read-only,
// not destructive, idempotent, closed world.
var ReadOnly = Annotations{ReadOnlyHint: true, IdempotentHint: true}

// Descriptor is what tools/list advertises about a tool.
type Descriptor struct {
	Name        string
	Title       string
	Description string
	// InputSchema is a JSON Schema (2020-12) object whose root type is
	// "object". It is enforced on every call.
	InputSchema jsontext.Value
	// OutputSchema, if set, describes the structured result.
	OutputSchema jsontext.Value
	Annotations  Annotations
}

// Result is a successful tool result. Structured is the JSON object sent as
// structuredContent and, identically, as the one text block; or, for a
// tool that relays another server's tool, Relayed is that server's result.
type Result struct {
	Structured jsontext.Value
	Relayed    *Relayed
}

// Relayed is a tools/call result another server produced, which the
// session re-encodes for its client's version.
type Relayed struct {
	// Content is the JSON array of content blocks.
	Content jsontext.Value
	// Structured is structuredContent, nil when absent.
	Structured jsontext.Value
	IsError    bool
	// Input, when set, makes the result a 2026-07-28 input_required one
	// (only a RoundTaker's, for a call that carried Rounds); the other
	// fields are then unset.
	Input *InputRequired
}

// InputRequired is a round of input a tool hands to its client: the
// inputRequests object (nil when it names none) and the requestState the
// client is to send back with its answers.
type InputRequired struct {
	Requests jsontext.Value
	State    string
}

// ProtocolError is a tool's answer that is a JSON-RPC error rather than a
// result: a gateway's "bad gateway" (-32003), or a downstream's own error
// relayed. The session sends it as the error response to the call.
type ProtocolError struct {
	Code    int
	Message string
	// Data is error.data, nil for none.
	Data jsontext.Value
	// Outcome names the refusal in the server's log line of the call
	// ("unknown_tool"); "" for error_<code>.
	Outcome string
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("tool: JSON-RPC error %d: %s", e.Code, e.Message)
}

// requestIDKey carries the id the server's log gives a call.
type requestIDKey struct{}

// WithRequestID returns ctx carrying id, the id under which the server
// logs the call, so that what a tool records of it (a gateway's audit
// event, the request it sends on) can be matched with that line.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestIDOf returns the request id of the call ctx belongs to, "" for
// none.
func RequestIDOf(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// progressKey carries a call's progress reporting in its context.
type progressKey struct{}

// Progress is how a tool reports progress on the call it serves: the
// client's token, and a func that sends one notifications/progress with
// the given params (whose progressToken must be Token).
type Progress struct {
	Token jsontext.Value
	Send  func(params jsontext.Value)
}

// WithProgress returns ctx carrying p.
func WithProgress(ctx context.Context, p *Progress) context.Context {
	return context.WithValue(ctx, progressKey{}, p)
}

// ProgressOf returns the progress reporting of the call ctx belongs to, or
// nil when the client asked for none.
func ProgressOf(ctx context.Context) *Progress {
	p, _ := ctx.Value(progressKey{}).(*Progress)
	return p
}

// WithMessages returns ctx carrying send, which writes one
// notifications/message with the given params to the client of the call:
// how a relaying tool passes on the log messages its server sends while
// it serves the call.
func WithMessages(ctx context.Context, send func(params jsontext.Value)) context.Context {
	return context.WithValue(ctx, messagesKey{}, send)
}

// MessagesOf returns what WithMessages put in ctx, or nil when the server
// relays no log messages.
func MessagesOf(ctx context.Context) func(params jsontext.Value) {
	send, _ := ctx.Value(messagesKey{}).(func(jsontext.Value))
	return send
}

type messagesKey struct{}

// Rounds is what a 2026-07-28 client's tools/call says about rounds of
// input (multi round-trip requests): the client capabilities it declared
// for this request (an object, nil for none) and, when it answers a
// round it was handed, its inputResponses and the requestState.
type Rounds struct {
	Capabilities jsontext.Value
	Responses    jsontext.Value
	State        *string
}

// RoundTaker is a Tool that may answer a call with a round of input for
// its client; only such a tool's calls may carry inputResponses and a
// requestState.
type RoundTaker interface {
	Tool
	TakesRounds()
}

type roundsKey struct{}

// Requester lets a relaying tool ask the client of the call it serves: a
// session-era client, which takes requests (sampling, elicitation,
// roots) on the session. Capabilities is the capabilities object it
// declared at initialize; Ask sends one request and waits for its
// result or the client's error, or for ctx to end.
type Requester struct {
	Capabilities jsontext.Value
	Ask          func(ctx context.Context, method string, params jsontext.Value) (jsontext.Value, *jsonrpc.Error)
}

type requesterKey struct{}

// WithRequester returns ctx carrying r.
func WithRequester(ctx context.Context, r *Requester) context.Context {
	return context.WithValue(ctx, requesterKey{}, r)
}

// RequesterOf returns what WithRequester put in ctx, or nil when the
// client cannot be asked.
func RequesterOf(ctx context.Context) *Requester {
	r, _ := ctx.Value(requesterKey{}).(*Requester)
	return r
}

// WithRounds returns ctx carrying r: the call is a 2026-07-28 client's,
// which a round of input can be handed to.
func WithRounds(ctx context.Context, r *Rounds) context.Context {
	return context.WithValue(ctx, roundsKey{}, r)
}

// RoundsOf returns what WithRounds put in ctx, or nil when the client
// cannot be handed a round (a session-era client).
func RoundsOf(ctx context.Context) *Rounds {
	r, _ := ctx.Value(roundsKey{}).(*Rounds)
	return r
}

// Tool is a callable tool. Implementations must be safe for concurrent use:
// the session runs calls in parallel.
type Tool interface {
	// Descriptor returns the tool's advertised description. It must return
	// the same value every time.
	Descriptor() Descriptor
	// Call runs the tool. args is the arguments object of the call, already
	// passed through the structural sanitizer ("{}" when absent). ctx
	// carries the call's deadline and is cancelled when the peer cancels
	// the call or the session shuts down; a Call must return promptly then.
	Call(ctx context.Context, args jsontext.Value) (Result, error)
}

// ArgumentError reports arguments that do not satisfy the tool's input
// schema or input type. Problem is always an MCP_VALIDATION_ERROR.
type ArgumentError struct {
	Problem *problem.Problem
}

func (e *ArgumentError) Error() string { return "invalid arguments: " + e.Problem.Detail }

// Unwrap returns the problem, so errors.As finds it too.
func (e *ArgumentError) Unwrap() error { return e.Problem }

// NewArgumentError returns an ArgumentError with a validation problem.
func NewArgumentError(detail string, invalidParams ...string) *ArgumentError {
	return &ArgumentError{Problem: problem.New(problem.Validation, detail, invalidParams...)}
}

// namePattern is the 2025-11-25 tool-name guidance (SEP-986): 1–128
// characters of A-Z a-z 0-9 _ - . only.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// Registry is an immutable-after-start set of tools, listed in name order.
// Add must not be called concurrently with other methods.
type Registry struct {
	byName map[string]Tool
	sorted []Tool
}

// NewRegistry returns a registry holding tools. It fails on an invalid or
// duplicate name or an input schema whose root is not an object.
func NewRegistry(tools ...Tool) (*Registry, error) {
	r := &Registry{byName: make(map[string]Tool, len(tools))}
	for _, t := range tools {
		if err := r.add(t); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *Registry) add(t Tool) error {
	d := t.Descriptor()
	if !namePattern.MatchString(d.Name) {
		return fmt.Errorf("tool: invalid tool name %q", d.Name)
	}
	if _, dup := r.byName[d.Name]; dup {
		return fmt.Errorf("tool: duplicate tool name %q", d.Name)
	}
	if len(d.InputSchema) == 0 {
		return fmt.Errorf("tool: %s: missing input schema", d.Name)
	}
	r.byName[d.Name] = t
	r.sorted = append(r.sorted, t)
	sort.Slice(r.sorted, func(i, j int) bool {
		return r.sorted[i].Descriptor().Name < r.sorted[j].Descriptor().Name
	})
	return nil
}

// Lookup returns the tool called name.
func (r *Registry) Lookup(name string) (Tool, bool) {
	t, ok := r.byName[name]
	return t, ok
}

// Tools returns the tools in name order. The caller must not modify the
// slice.
func (r *Registry) Tools() []Tool { return r.sorted }

// Len reports how many tools are registered.
func (r *Registry) Len() int { return len(r.sorted) }

// errNotObject is returned when structured output is not a JSON object.
var errNotObject = errors.New("tool: structured result is not a JSON object")
