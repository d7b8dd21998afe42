package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/guard"
	"github.com/mcp-bastion/bastion/internal/jsonrpc"
	"github.com/mcp-bastion/bastion/internal/mcp"
	"github.com/mcp-bastion/bastion/internal/problem"
	"github.com/mcp-bastion/bastion/internal/tool"
)

// errCallTimeout is the cause of a call's deadline.
var errCallTimeout = errors.New("session: call deadline exceeded")

// startCall judges a tools/call and starts its task. It runs on the read
// loop. A call's own validity is judged first — its params, the tool's
// name, the structural sanitizer on its arguments — so an invalid call
// always gets its own error, never a capacity refusal; only then is it
// admitted (not draining, no duplicate id, under the pending cap) and
// given its place in the limiter's queue, in the order calls arrive. The
// task waits for the slot, then runs the tool with its deadline.
func (ss *Session) startCall(r replier, m *jsonrpc.Message, version string) {
	start := time.Now()
	j, name, outcome, msg := ss.judgeCall(m, version)
	if msg != nil {
		ss.logCall(name, m.ID, outcome, start)
		r.send(msg)
		return
	}
	ctx, c, outcome, refusal := ss.admit(m)
	switch {
	case refusal != nil:
		ss.logCall(name, m.ID, outcome, start)
		r.sendError(refusal)
		return
	case c == nil:
		pr := problem.New(problem.ConcurrencyLimit, fmt.Sprintf(
			"%d tool calls are already running or waiting for one of the %d slots; retry later",
			ss.srv.opts.MaxPending, ss.srv.opts.MaxConcurrency))
		ss.logCall(name, m.ID, string(pr.Code), start)
		r.send(jsonrpc.AppendResult(nil, m.ID, ss.srv.enc.AppendCallProblem(nil, version, pr)))
		return
	}
	if j.token != nil {
		ctx = tool.WithProgress(ctx, &tool.Progress{Token: j.token, Send: ss.sendProgress})
	}
	if j.rounds != nil {
		ctx = tool.WithRounds(ctx, j.rounds)
	}
	if ss.srv.opts.Relay != nil {
		// Only a relaying server declares logging, so only its tools
		// may pass log messages on.
		ctx = tool.WithMessages(ctx, ss.sendMessage)
	}
	asks := &callAsks{}
	if ss.srv.opts.Relay != nil && j.rounds == nil {
		// A session-era client takes requests on the session: a
		// relaying tool may ask it what its server asks.
		ctx = tool.WithRequester(ctx, &tool.Requester{Capabilities: ss.clientCaps, Ask: func(ctx context.Context, method string, params jsontext.Value) (jsontext.Value, *jsonrpc.Error) {
			if !asks.begin() {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Internal error: the call has ended"}
			}
			defer asks.end()
			return ss.ask(ctx, method, params)
		}})
	}
	place := ss.srv.limiter.Reserve()
	ss.workers.run(func() { ss.runCall(ctx, c, r, m, version, j.tool, j.args, place, asks) })
}

// admit registers request m as a task of the session, with its context
// and its entry in inflight. It is refused, with the error to answer and
// the outcome to log, while the session drains or when m's id is taken by
// a request in flight or an open subscription; over MaxPending it returns
// no task and no refusal, and the caller answers as its method does.
func (ss *Session) admit(m *jsonrpc.Message) (ctx context.Context, c *call, outcome string, refusal *jsonrpc.Error) {
	duplicate := func() (context.Context, *call, string, *jsonrpc.Error) {
		return nil, nil, "duplicate_id", jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidRequest,
			"Invalid request: a request with this id is already in flight")
	}
	if ss.subscribed(m.ID) {
		return duplicate()
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.draining {
		// Read just before the drain began: answered, never started.
		return nil, nil, "shutdown", jsonrpc.NewError(m.ID, jsonrpc.CodeInternalError,
			"Internal error: the server is shutting down")
	}
	if _, dup := ss.inflight[m.ID]; dup {
		return duplicate()
	}
	if len(ss.inflight) >= ss.srv.opts.MaxPending {
		return nil, nil, "", nil
	}
	ctx, cancel := context.WithCancelCause(ss.taskCtx)
	c = &call{cancel: cancel}
	ss.inflight[m.ID] = c
	ss.tasks.Add(1)
	return ctx, c, "", nil
}

// judgedCall is a tools/call that passed judgeCall: the tool, its
// arguments, the progress token (nil for none) and, for a 2026-07-28
// client, what the call says about rounds of input.
type judgedCall struct {
	tool   tool.Tool
	args   jsontext.Value
	token  jsontext.Value
	rounds *tool.Rounds
}

// judgeCall decodes a tools/call and checks what can be checked without
// running it. It returns the call, or the response that refuses it with
// the outcome to log; name is the tool's name as far as it is known, for
// the log.
func (ss *Session) judgeCall(m *jsonrpc.Message, version string) (j judgedCall, name, outcome string, refusal []byte) {
	refuse := func(outcome string, msg []byte) (judgedCall, string, string, []byte) {
		return judgedCall{}, name, outcome, msg
	}
	invalid := func(msg string) (judgedCall, string, string, []byte) {
		return refuse("invalid_params", jsonrpc.AppendError(nil, jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidParams, msg)))
	}
	name = callName(m.Params)
	var p callParams
	if err := unmarshalParams(m.Params, &p, true); err != nil {
		return invalid("Invalid params: " + err.Error())
	}
	if m.Params == nil || p.Name == nil {
		return invalid("Invalid params: name is required")
	}
	if p.Arguments != nil && p.Arguments.Kind() != '{' {
		return invalid("Invalid params: arguments must be an object")
	}
	if p.Task != nil {
		// No tool here supports task augmentation (execution.taskSupport
		// is absent, i.e. forbidden); the spec asks for -32601.
		return refuse("method_not_found", jsonrpc.AppendError(nil, jsonrpc.NewError(m.ID, jsonrpc.CodeMethodNotFound,
			"Method not found: task-augmented tools/call is not supported")))
	}
	answers := p.InputResponses != nil || p.RequestState != nil
	switch {
	case answers && !mcp.IsModern(version):
		return invalid("Invalid params: inputResponses and requestState belong to 2026-07-28 calls")
	case p.InputResponses != nil && p.RequestState == nil:
		return invalid("Invalid params: inputResponses need the requestState of the round they answer")
	}
	t, ok := ss.srv.lookup(*p.Name)
	if !ok {
		pr := problem.New(problem.Validation, "Unknown tool: "+quote(*p.Name), "name")
		return refuse("unknown_tool", jsonrpc.AppendError(nil, &jsonrpc.Error{
			ID: m.ID, Code: jsonrpc.CodeInvalidParams,
			Message: "Unknown tool: " + quote(*p.Name), Data: mcp.ProblemData(pr),
		}))
	}
	if _, takes := t.(tool.RoundTaker); answers && !takes {
		// This server's own tools hand out no rounds: there is nothing
		// the state could answer.
		return invalid("Invalid params: requestState is not one this server handed out")
	}
	args := p.Arguments
	if args == nil {
		args = jsontext.Value("{}")
	}
	if err := guard.Sanitize(args, ss.srv.opts.Limits); err != nil {
		var pr *problem.Problem
		if !errors.As(err, &pr) {
			ref := newRef()
			ss.log.Error("sanitizer failed", slog.String("ref", ref), slog.String("error", err.Error()))
			return refuse("internal_error", jsonrpc.AppendError(nil, internalError(m.ID, ref)))
		}
		return refuse(string(pr.Code), ss.argumentError(m.ID, version, pr))
	}
	j = judgedCall{tool: t, args: args, token: mcp.ProgressToken(p.Meta)}
	if mcp.IsModern(version) {
		j.rounds = &tool.Rounds{Capabilities: mcp.ClientCapabilities(p.Meta), Responses: p.InputResponses, State: p.RequestState}
	}
	return j, name, "", nil
}

// toolNameSyntax is the tool name grammar of the MCP specification.
var toolNameSyntax = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// callName is the tool a tools/call names, for its log line: read leniently
// (params that are refused still name it), and only when it is a name by
// the specification's grammar. Anything else the caller put there (a
// sentence, a secret, control characters) is not logged.
func callName(params jsontext.Value) string {
	var p struct {
		Name string `json:"name"`
	}
	if params == nil {
		return ""
	}
	// The error is ignored: refused params can still name the tool.
	_ = json.Unmarshal(params, &p, json.RejectUnknownMembers(false))
	if p.Name == "" {
		return ""
	}
	if !toolNameSyntax.MatchString(p.Name) {
		return "(not a tool name)"
	}
	return p.Name
}

// noteRefusedCall logs the line of a tools/call the session refused before
// judging it (no session yet, a protocol version it does not serve), so
// that every call leaves one.
func (ss *Session) noteRefusedCall(m *jsonrpc.Message, outcome string) {
	if m.Method == methodToolsCall {
		ss.logCall(callName(m.Params), m.ID, outcome, time.Now())
	}
}

// logCall writes the one info line of a tools/call, whatever became of
// it: the repudiation trail of the threat model. It names the tool, the
// JSON-RPC id, the outcome ("ok", "is_error", a problem code, or why the
// call was refused or ended) and the duration, and for a call that ran,
// the request_id its tool was given (tool.RequestIDOf); never an
// argument, a result or a cause, which can quote the caller's data.
func (ss *Session) logCall(name string, id jsonrpc.ID, outcome string, start time.Time, extra ...slog.Attr) {
	attrs := append([]slog.Attr{slog.String("tool", name), slog.String("id", id.String()),
		slog.String("outcome", outcome), slog.Duration("duration", time.Since(start))}, extra...)
	ss.log.LogAttrs(context.Background(), slog.LevelInfo, "tools/call", attrs...)
}

// sendProgress writes one notifications/progress to the client. Progress
// is sent as it comes, before the call's answer, even in a batch.
func (ss *Session) sendProgress(params jsontext.Value) {
	msg := append([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":`), params...)
	ss.send(append(msg, '}'))
}

// maxAsks bounds the requests out to the client at a time.
const maxAsks = 16

// ask sends a request to the client and waits for its response, or for
// ctx to end, when the client is told the request is cancelled.
func (ss *Session) ask(ctx context.Context, method string, params jsontext.Value) (jsontext.Value, *jsonrpc.Error) {
	return ss.asks.Ask(ctx, "", method, params, ss.send)
}

// sendMessage writes one notifications/message to the client, compact:
// params come from a downstream, and a line break in their whitespace
// must not reach the output.
func (ss *Session) sendMessage(params jsontext.Value) {
	if min := ss.logLevel.Load(); min > 0 && logLevelRank(params) < min {
		return // below what the client asked for
	}
	params = params.Clone()
	if params.Compact() != nil {
		return
	}
	msg := append([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":`), params...)
	ss.send(append(msg, '}'))
}

// logLevels are the syslog severities of logging/setLevel, most verbose
// first.
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// logLevelRank is one plus the index in logLevels of the level in params
// (a logging/setLevel's or a notifications/message's); 0 for none.
func logLevelRank(params jsontext.Value) int32 {
	var p struct {
		Level string `json:"level"`
	}
	if json.Unmarshal(params, &p) != nil {
		return 0
	}
	return int32(slices.Index(logLevels, p.Level) + 1)
}

// setLogLevel records the level of a logging/setLevel the Relay accepted:
// the client then hears that level and more severe (the gateway keeps a
// downstream at the most verbose level any of its callers asked for).
func (ss *Session) setLogLevel(params jsontext.Value) {
	if r := logLevelRank(params); r > 0 {
		ss.logLevel.Store(r)
	}
}

// argumentError answers a call whose arguments were refused, in the
// configured mode.
func (ss *Session) argumentError(id jsonrpc.ID, version string, pr *problem.Problem) []byte {
	if ss.srv.opts.ArgumentErrors == ArgumentErrorsProtocol {
		return jsonrpc.AppendError(nil, &jsonrpc.Error{
			ID: id, Code: jsonrpc.CodeInvalidParams,
			Message: "Invalid params: " + pr.Detail, Data: mcp.ProblemData(pr),
		})
	}
	return ss.result(id, ss.srv.enc.AppendCallProblem(nil, version, pr))
}

// cancelCall handles notifications/cancelled. Unknown, finished or
// malformed cancellations are ignored, as the spec asks.
func (ss *Session) cancelCall(params []byte) {
	var p struct {
		RequestID jsontext.Value `json:"requestId"`
	}
	if params == nil || json.Unmarshal(params, &p) != nil || p.RequestID == nil {
		ss.log.Debug("ignoring malformed cancellation")
		return
	}
	id, ok := jsonrpc.ParseID(p.RequestID)
	if !ok {
		ss.log.Debug("ignoring cancellation with an invalid request id")
		return
	}
	if ss.unsubscribe(id) {
		ss.log.Debug("subscription cancelled")
		return
	}
	ss.mu.Lock()
	c, found := ss.inflight[id]
	if found {
		c.peerCancelled = true
		c.cancel(ErrPeerCancelled)
		if c.withdraw != nil {
			// The call has ended and its answer waits for room in
			// the output queue: it is not written after all.
			c.withdraw(ErrPeerCancelled)
		}
	}
	ss.mu.Unlock()
	ss.log.Debug("cancellation", slog.String("id", id.String()), slog.Bool("in_flight", found))
}

// runCall is the task of one tools/call.
func (ss *Session) runCall(ctx context.Context, c *call, r replier, m *jsonrpc.Message, version string,
	t tool.Tool, args jsontext.Value, place *guard.Reservation, asks *callAsks) {
	ss.runTask(c, r, m, func() []byte {
		defer asks.close() // before the answer: the client hears of its requests' end first
		return ss.call(ctx, c, m, version, t, args, place)
	})
}

// callAsks counts the requests one call has out to the client. Its answer
// is written once each has ended, so that a request the call leaves
// behind is withdrawn (notifications/cancelled) before the answer, never
// after it; once the call has ended it sends no more.
type callAsks struct {
	mu     sync.Mutex
	wg     sync.WaitGroup
	closed bool
}

func (a *callAsks) begin() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false
	}
	a.wg.Add(1)
	return true
}

func (a *callAsks) end() { a.wg.Done() }

// close refuses new requests and waits for those out. They end with the
// context the tool asked under — a relaying tool's call, over once the
// tool has returned — or when the session abandons them as it ends.
func (a *callAsks) close() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.wg.Wait()
}

// runTask runs body, the work of request m's task, and sends the answer
// it returns. A panic in body costs this request, not the session: it is
// answered -32603 with a reference to the log line that holds the stack.
func (ss *Session) runTask(c *call, r replier, m *jsonrpc.Message, body func() []byte) {
	defer ss.tasks.Done()
	defer c.cancel(nil)
	var out []byte
	func() {
		defer func() {
			if p := recover(); p != nil {
				ref := newRef()
				ss.log.Error("panic in "+m.Method, slog.String("ref", ref),
					slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
				out = jsonrpc.AppendError(nil, internalError(m.ID, ref))
			}
		}()
		out = body()
	}()
	ss.finish(c, r, m, out)
}

// finish sends the answer out of the task of request m. The task leaves
// inflight and frees its slot once the answer has its place in the output
// queue, and before the client can read it: until then it counts against
// the pending cap and holds its slot, so a client that stops reading its
// output holds at most one answer per slot and further calls wait for a
// slot (refused once MaxPending are pending), instead of each holding a
// goroutine and its answer while it waits for room; and a client that
// reads an answer and at once sends another call (or reuses the id) is
// never judged against the call it has just been answered. A cancellation
// while the answer waits for room withdraws it.
func (ss *Session) finish(c *call, r replier, m *jsonrpc.Message, out []byte) {
	if r.m != nil {
		ss.mu.Lock()
		if c.peerCancelled {
			// A cancelled request gets no response, whatever the task did.
			out = nil
		}
		ss.mu.Unlock()
		// A batch member's answer waits for its batch. Until the
		// batch is queued the task keeps its place in inflight: it
		// counts against the pending cap (so answers held for a slow
		// member are bounded too), its id stays taken, and a
		// cancellation can still withdraw it. Its slot is freed first:
		// holding it until the whole batch is queued would leave a
		// batch larger than the slots waiting on itself (and the last
		// member queues the array, which the client may read before
		// that member goes on); the bytes of held answers have their
		// own bound.
		if c.slot != nil {
			c.slot()
		}
		r.m.answerCall(m.ID, c, out)
		return
	}
	wctx, withdraw := context.WithCancelCause(ss.writeCtx)
	defer withdraw(nil)
	ss.mu.Lock()
	cancelled := c.peerCancelled
	c.withdraw = withdraw
	ss.mu.Unlock()
	done := false
	leave := func() bool {
		if done {
			return false
		}
		done = true
		ss.mu.Lock()
		cancelled := c.peerCancelled
		delete(ss.inflight, m.ID)
		ss.mu.Unlock()
		if c.slot != nil {
			c.slot()
		}
		return !cancelled
	}
	if !cancelled && out != nil {
		ss.sendQueued(wctx, out, leave)
	}
	leave() // not queued: withdrawn, cancelled, no answer, or the output ended
}

type callParams struct {
	Name      *string        `json:"name"`
	Arguments jsontext.Value `json:"arguments"`
	Meta      jsontext.Value `json:"_meta"`
	Task      jsontext.Value `json:"task"`
	// A 2026-07-28 retry's answers to the round it was handed.
	InputResponses jsontext.Value `json:"inputResponses"`
	RequestState   *string        `json:"requestState"`
}

// call runs one admitted tools/call and returns the response to send, or
// nil for none.
func (ss *Session) call(ctx context.Context, c *call, m *jsonrpc.Message, version string,
	t tool.Tool, args jsontext.Value, place *guard.Reservation) []byte {
	start := time.Now()
	name := t.Descriptor().Name
	// The tool is told the id its line is logged under: a gateway's
	// audit event of the call then carries it too.
	rid := newRef()
	ctx = tool.WithRequestID(ctx, rid)
	// Logged even when the tool panics (runCall recovers and answers).
	outcome := "panic"
	defer func() { ss.logCall(name, m.ID, outcome, start, slog.String("request_id", rid)) }()
	res, err := ss.guarded(ctx, c, m.ID, t, args, place)
	outcome = "ok"
	if err == nil {
		if rel := res.Relayed; rel != nil {
			if rel.Input != nil {
				if tool.RoundsOf(ctx) == nil {
					// A session-era client has no place for a round: the
					// tool broke its contract.
					ref := newRef()
					ss.log.Error("a tool handed a round of input to a session-era client", slog.String("ref", ref))
					outcome = "internal_error"
					return jsonrpc.AppendError(nil, internalError(m.ID, ref))
				}
				outcome = "input_required"
				return ss.result(m.ID, ss.srv.enc.AppendInputRequired(nil, rel.Input.Requests, rel.Input.State))
			}
			if rel.IsError {
				outcome = "is_error"
			}
			return ss.result(m.ID, ss.srv.enc.AppendRelayedResult(nil, version, rel.Content, rel.Structured, rel.IsError))
		}
		return ss.result(m.ID, ss.srv.enc.AppendCallResult(nil, version, res.Structured))
	}

	var (
		argErr   *tool.ArgumentError
		pr       *problem.Problem
		protoErr *tool.ProtocolError
	)
	switch {
	case errors.As(err, &protoErr):
		outcome = protoErr.Outcome
		if outcome == "" {
			outcome = "error_" + strconv.Itoa(protoErr.Code)
		}
		return jsonrpc.AppendError(nil, &jsonrpc.Error{ID: m.ID, Code: protoErr.Code, Message: protoErr.Message, Data: protoErr.Data})
	case errors.As(err, &argErr):
		outcome = string(argErr.Problem.Code)
		return ss.argumentError(m.ID, version, argErr.Problem)
	case errors.As(err, &pr):
		outcome = string(pr.Code)
		// A cause may quote the caller's arguments (a database error
		// repeats the query's literals), so it is logged only when the
		// operator opted in to debug logs.
		if pr.Cause != nil && ss.log.Enabled(ctx, slog.LevelDebug) {
			ss.log.Debug("tool refused the call", slog.String("tool", name), slog.String("id", m.ID.String()),
				slog.String("code", string(pr.Code)), slog.String("cause", pr.Cause.Error()))
		}
		return ss.result(m.ID, ss.srv.enc.AppendCallProblem(nil, version, pr))
	case context.Cause(ctx) == ErrPeerCancelled:
		outcome = "cancelled"
		return nil
	case errors.Is(context.Cause(ctx), ErrShutdown) || errors.Is(context.Cause(ctx), ErrOutputFailed) || ss.taskCtx.Err() != nil:
		outcome = "shutdown"
		return jsonrpc.AppendError(nil, jsonrpc.NewError(m.ID, jsonrpc.CodeInternalError,
			"Internal error: the server is shutting down"))
	default:
		ref := newRef()
		outcome = "internal_error"
		ss.log.Error("tool failed", slog.String("tool", name), slog.String("id", m.ID.String()),
			slog.String("ref", ref), slog.String("error", err.Error()))
		return jsonrpc.AppendError(nil, internalError(m.ID, ref))
	}
}

func (ss *Session) result(id jsonrpc.ID, result []byte) []byte {
	return jsonrpc.AppendResult(nil, id, result)
}

// guarded runs an admitted call through the rest of the guardrails, in
// order: its FIFO slot (place, reserved when the call arrived), the
// execution deadline, then the tool, which decodes its arguments strictly.
// Guardrail refusals are problems or argument errors. The slot is c's
// until finish has queued the answer.
func (ss *Session) guarded(ctx context.Context, c *call, id jsonrpc.ID, t tool.Tool, args jsontext.Value, place *guard.Reservation) (tool.Result, error) {
	release, err := place.Wait(ctx)
	if err != nil {
		return tool.Result{}, err
	}
	c.slot = release
	if ss.log.Enabled(ctx, slog.LevelDebug) {
		// With one slot, the order of these lines is the order in
		// which calls got it.
		ss.log.LogAttrs(ctx, slog.LevelDebug, "tools/call started", slog.String("tool", t.Descriptor().Name), slog.String("id", id.String()))
	}
	dctx, cancel := context.WithTimeoutCause(ctx, ss.srv.opts.CallTimeout, errCallTimeout)
	defer cancel()
	res, err := t.Call(dctx, args)
	if err != nil && context.Cause(dctx) == errCallTimeout && ctx.Err() == nil {
		var pr *problem.Problem
		if !errors.As(err, &pr) {
			return tool.Result{}, problem.New(problem.ExecutionTimeout,
				fmt.Sprintf("the call did not finish within %s", ss.srv.opts.CallTimeout)).WithCause(err)
		}
	}
	return res, err
}

// internalError is the generic -32603 of an unexpected failure. ref ties
// it to the log line that holds the detail.
func internalError(id jsonrpc.ID, ref string) *jsonrpc.Error {
	pr := problem.New(problem.Internal, "internal error; reference "+ref).WithMetadata("ref", ref)
	return &jsonrpc.Error{ID: id, Code: jsonrpc.CodeInternalError, Message: "Internal error", Data: mcp.ProblemData(pr)}
}

func newRef() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func quote(s string) string { return problem.Quote(s) }

// truncate cuts s to at most n bytes without splitting a character.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
