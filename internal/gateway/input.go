package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/gateway/audit"
	"github.com/mcp-bastion/bastion/internal/gateway/catalog"
	"github.com/mcp-bastion/bastion/internal/guard"
	"github.com/mcp-bastion/bastion/internal/jsonrpc"
	"github.com/mcp-bastion/bastion/internal/problem"
)

// A 2026-07-28 server does not send requests to its client: a call that
// needs the client's input (sampling, elicitation, roots) is answered
// with an input_required result naming the requests, and the client is
// to retry the call with their results (multi round-trip requests). The
// gateway fulfils such a round itself for a caller it can ask, through
// the same relay as a session-era server's requests (decision 24), and
// the downstream's requestState never leaves the gateway. A 2026-07-28
// caller, which no request reaches, is handed the round instead, with the
// downstream's state sealed (inputseal.go): so no caller can read it,
// tamper with it or replay another's.

// Bounds of the rounds of one call: past them the call fails, as the
// official SDKs' clients do.
const (
	maxInputRounds   = 10
	maxInputRequests = 16
)

// reasonNoInputRounds is the reason given for an input_required answer to a
// request other than tools/call.
const reasonNoInputRounds = "the server asked for input, which the gateway carries only for tools/call"

// inputRequest is one request of an input_required result.
type inputRequest struct {
	Method string         `json:"method"`
	Params jsontext.Value `json:"params"`
}

// inputRound is an input_required result: the requests to fulfil, by the
// server's keys, and the state to send back with their results.
type inputRound struct {
	Requests map[string]inputRequest
	State    *string
}

// errNotInputRequired: the result is not an input_required one.
var errNotInputRequired = errors.New("not input_required")

// parseInputRound reads res as an input_required result. It returns
// errNotInputRequired for any other result (parseResult judges those),
// and an error saying what is wrong with one that is malformed; the
// error is logged, so it never quotes what the server wrote.
func parseInputRound(res jsontext.Value) (*inputRound, error) {
	// The common case without a parse: a result that names
	// input_required nowhere and escapes nothing (an escape could spell
	// it, or resultType).
	if !bytes.Contains(res, []byte("input_required")) && !bytes.Contains(res, []byte(`\u`)) {
		return nil, errNotInputRequired
	}
	var kind struct {
		ResultType *string `json:"resultType"`
	}
	if json.Unmarshal(res, &kind) != nil || kind.ResultType == nil || *kind.ResultType != "input_required" {
		return nil, errNotInputRequired
	}
	var r struct {
		Requests map[string]inputRequest `json:"inputRequests"`
		State    *string                 `json:"requestState"`
	}
	if json.Unmarshal(res, &r) != nil {
		return nil, errors.New("an input_required result does not match InputRequiredResult")
	}
	switch {
	case r.Requests == nil && r.State == nil:
		return nil, errors.New("an input_required result names neither inputRequests nor requestState")
	case len(r.Requests) > maxInputRequests:
		return nil, fmt.Errorf("an input_required result names more than %d requests", maxInputRequests)
	}
	// The keys are the server's words: the errors, which are logged, do
	// not repeat them.
	for _, q := range r.Requests {
		if !isInputMethod(q.Method) {
			return nil, errors.New("an inputRequests entry is not sampling/createMessage, elicitation/create or roots/list")
		}
		if len(q.Params) > 0 && q.Params.Kind() != '{' && q.Params.Kind() != 'n' {
			return nil, errors.New("an inputRequests entry's params are not an object")
		}
	}
	return &inputRound{Requests: r.Requests, State: r.State}, nil
}

// askedForInput reports whether res is an input_required result, well
// formed or not: the answer of a request whose rounds the gateway does
// not carry (prompts/get, resources/read), which it must call by its name
// rather than a malformed result.
func askedForInput(res jsontext.Value) bool {
	_, err := parseInputRound(res)
	return !errors.Is(err, errNotInputRequired)
}

// isInputMethod reports whether method may be asked in an input_required
// result.
func isInputMethod(method string) bool {
	switch method {
	case "sampling/createMessage", "elicitation/create", "roots/list":
		return true
	}
	return false
}

// fulfil asks the caller each request of round, through the relay of
// decision 24 (the capability it declared, the audit), and returns the
// params of the retry: params with the results as inputResponses and the
// round's requestState. A request the caller cannot be asked, or answers
// with an error, fails the call: an input_required round has no place
// for an error.
func (g *Gateway) fulfil(ctx context.Context, c Call, t *catalog.Tool, params []byte, round *inputRound) ([]byte, error) {
	ask := g.relayRequests(c, t)
	responses := map[string]jsontext.Value{}
	for key, q := range round.Requests {
		p := q.Params
		if len(p) == 0 || p.Kind() == 'n' {
			p = jsontext.Value(`{}`)
		}
		res, rerr := ask(ctx, q.Method, p)
		if rerr != nil {
			if context.Cause(ctx) == errCallTimeout {
				// The server answered; the caller took the deadline.
				data, _ := json.Marshal(map[string]string{"server": t.Server, "tool": t.Qualified, "method": q.Method})
				return nil, &Error{Code: CodeBadGateway, Status: http.StatusGatewayTimeout,
					Message: "Bad gateway: the caller did not answer the server's " + q.Method + " in time", Data: data}
			}
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			if rerr.Code == jsonrpc.CodeMethodNotFound {
				return nil, cannotAsk(t, q.Method)
			}
			data, _ := json.Marshal(map[string]string{"server": t.Server, "tool": t.Qualified, "method": q.Method})
			return nil, &Error{Code: CodeBadGateway, Status: http.StatusBadGateway, Message: "Bad gateway: the caller could not answer its " + q.Method, Data: data}
		}
		v := jsontext.Value(bytes.Clone(res))
		if v.Compact() != nil {
			return nil, badGateway(t.Server, "the caller's answer to "+q.Method+" is not valid JSON", false)
		}
		responses[key] = v
	}
	return withInput(params, responses, round.State)
}

// withInput is the params object params with inputResponses and
// requestState added; the caller's own params never carry either (the
// front refuses them), so neither is there already.
func withInput(params []byte, responses map[string]jsontext.Value, state *string) ([]byte, error) {
	if len(params) < 2 || params[len(params)-1] != '}' {
		return nil, errors.New("gateway: call params are not an object")
	}
	b := bytes.Clone(params[:len(params)-1])
	enc, err := json.Marshal(responses, json.Deterministic(true))
	if err != nil {
		return nil, err
	}
	b = append(b, `,"inputResponses":`...)
	b = append(b, enc...)
	if state != nil {
		b = append(b, `,"requestState":`...)
		b, _ = jsontext.AppendQuote(b, *state)
	}
	return append(b, '}'), nil
}

// answerFault says what the sanitizer refuses in a caller's answer to a
// server's request, "" for nothing: what it typed into a form reaches the
// server, and is held to the checks of a call's arguments (controls,
// bidirectional overrides, numbers beyond a double, depth and size), its
// member names excepted, which the server chose.
func answerFault(v jsontext.Value) string {
	err := guard.SanitizeData(v, guard.DefaultLimits())
	var pr *problem.Problem
	switch {
	case err == nil:
		return ""
	case errors.As(err, &pr):
		return pr.Detail
	}
	return "the answer could not be read"
}

// cannotAsk ends a call whose server needs what its caller cannot give.
func cannotAsk(t *catalog.Tool, method string) *Error {
	data, _ := json.Marshal(map[string]string{"server": t.Server, "tool": t.Qualified, "method": method})
	return &Error{Code: CodeBadGateway, Status: http.StatusBadGateway,
		Message: "Bad gateway: the server needs " + method + " from the caller, which it did not declare or cannot be asked", Data: data}
}

// handOver ends this leg of the call with round handed to the caller, a
// 2026-07-28 one: every request must be one it declared it can answer
// (else the call fails, as fulfil's would), each is audited by method and
// tool, and the state it is to send back is sealed to it, this call and
// the round's number n.
func (g *Gateway) handOver(c Call, t *catalog.Tool, round *inputRound, n int) (*Result, error) {
	asked := make(map[string]string, len(round.Requests))
	requests := make(map[string]inputRequest, len(round.Requests))
	for key, q := range round.Requests {
		if ok, _ := c.ClientCapabilities.declares(q.Method, q.Params); !ok {
			g.audit.Record(audit.Event{RequestID: c.RequestID, Subject: c.Principal.Subject, Issuer: c.Principal.Issuer, Roles: c.Principal.Roles,
				Method: q.Method, Tool: t.Qualified, Server: t.Server, Outcome: audit.Deny, Reason: "capability_not_declared", Code: jsonrpc.CodeMethodNotFound})
			return nil, cannotAsk(t, q.Method)
		}
		if g.foreignEmbedded(t.Server, q.Params) {
			return nil, badGateway(t.Server, "the server asked the caller with a resource it does not serve", false)
		}
		// What crosses is re-encoded compact, as the relay's requests
		// are: the server's params are data, not a message to pass on.
		p := jsontext.Value(bytes.Clone(q.Params))
		if len(p) == 0 || p.Kind() == 'n' {
			p = jsontext.Value(`{}`)
		}
		if p.Compact() != nil {
			return nil, badGateway(t.Server, "the server answered with a malformed result", false)
		}
		asked[key] = q.Method
		requests[key] = inputRequest{Method: q.Method, Params: p}
	}
	state, err := g.rounds.seal(handedRound{Issuer: c.Principal.Issuer, Subject: c.Principal.Subject, Tool: t.Qualified,
		Args: argsDigest(c.Arguments), Expires: g.now().Add(inputStateTTL).Unix(), Round: n, Asked: asked, State: round.State})
	if err != nil {
		return nil, badGateway(t.Server, err.Error(), false)
	}
	in := &InputRound{State: state}
	if round.Requests != nil {
		if in.Requests, err = json.Marshal(requests, json.Deterministic(true)); err != nil {
			return nil, err
		}
	}
	for _, method := range slices.Sorted(maps.Values(asked)) {
		g.audit.Record(audit.Event{RequestID: c.RequestID, Subject: c.Principal.Subject, Issuer: c.Principal.Issuer, Roles: c.Principal.Roles,
			Method: method, Tool: t.Qualified, Server: t.Server, Outcome: audit.Allow, Reason: "handed_to_caller"})
	}
	return &Result{Input: in}, nil
}

// resumption is where a call answering a round handed to its caller
// resumes: the answers, the server's state and the rounds taken.
type resumption struct {
	responses map[string]jsontext.Value
	state     *string
	round     int
}

// errAnswers marks the refusal of a retry's requestState or
// inputResponses, for the metrics.
var errAnswers = errors.New("the answers to a round of input are refused")

// answersError is the -32602 of a retry whose requestState or
// inputResponses are refused.
type answersError struct{ err *Error }

func (e answersError) Error() string   { return e.err.Error() }
func (e answersError) Unwrap() []error { return []error{e.err, errAnswers} }

// resume opens the round c answers: sealed to its caller, for t and its
// arguments, not expired, and answered exactly.
func (g *Gateway) resume(c Call, t *catalog.Tool) (*resumption, error) {
	h, err := g.rounds.open(c.Answers.State, c.Principal, t.Qualified, c.Arguments, g.now())
	if err != nil {
		return nil, answersError{invalidParams(err.Error())}
	}
	responses, err := answersTo(h.Asked, c.Answers.Responses)
	if err != nil {
		return nil, answersError{invalidParams(err.Error())}
	}
	return &resumption{responses: responses, state: h.State, round: h.Round}, nil
}

// answersTo reads a retry's inputResponses as the answers to the requests
// asked (key to method): exactly one object for each, nothing else. The
// errors quote no key: the caller knows what it sent.
func answersTo(asked map[string]string, responses jsontext.Value) (map[string]jsontext.Value, error) {
	got := map[string]jsontext.Value{}
	if responses != nil && (responses.Kind() != '{' || json.Unmarshal(responses, &got) != nil) {
		return nil, errors.New("inputResponses must be an object")
	}
	for key, v := range got {
		if _, ok := asked[key]; !ok {
			return nil, errors.New("inputResponses answers a request the round did not ask")
		}
		v = jsontext.Value(bytes.Clone(v))
		if v.Kind() != '{' || v.Compact() != nil {
			return nil, errors.New("each of inputResponses must be a result object")
		}
		if why := answerFault(v); why != "" {
			return nil, errors.New("inputResponses: " + why)
		}
		got[key] = v
	}
	if len(got) != len(asked) {
		return nil, errors.New("inputResponses must answer every request of the round")
	}
	return got, nil
}
