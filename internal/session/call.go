package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
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

// startCall registers a tools/call and starts its task. It runs on the read
// loop and does no blocking work: decoding, guardrails and the tool all run
// in the task.
func (ss *Session) startCall(m *jsonrpc.Message, version string) {
	ss.mu.Lock()
	if ss.draining {
		// Read just before the drain began: answered, never started.
		ss.mu.Unlock()
		ss.sendError(jsonrpc.NewError(m.ID, jsonrpc.CodeInternalError,
			"Internal error: the server is shutting down"))
		return
	}
	if len(ss.inflight) >= ss.srv.opts.MaxPending {
		ss.mu.Unlock()
		pr := problem.New(problem.ConcurrencyLimit, fmt.Sprintf(
			"%d tool calls are already running or waiting for one of the %d slots; retry later",
			ss.srv.opts.MaxPending, ss.srv.opts.MaxConcurrency))
		ss.send(jsonrpc.AppendResult(nil, m.ID, ss.srv.enc.AppendCallProblem(nil, version, pr)))
		return
	}
	if _, dup := ss.inflight[m.ID]; dup {
		ss.mu.Unlock()
		ss.sendError(jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidRequest,
			"Invalid request: a request with this id is already in flight"))
		return
	}
	ctx, cancel := context.WithCancelCause(ss.taskCtx)
	c := &call{cancel: cancel}
	ss.inflight[m.ID] = c
	ss.tasks.Add(1)
	ss.mu.Unlock()
	ss.workers.run(func() { ss.runCall(ctx, c, m, version) })
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
	id, ok := requestID(p.RequestID)
	if !ok {
		ss.log.Debug("ignoring cancellation with an invalid request id")
		return
	}
	ss.mu.Lock()
	c, found := ss.inflight[id]
	if found {
		c.peerCancelled = true
		c.cancel(ErrPeerCancelled)
	}
	ss.mu.Unlock()
	ss.log.Debug("cancellation", slog.String("id", id.String()), slog.Bool("in_flight", found))
}

func requestID(v jsontext.Value) (jsonrpc.ID, bool) {
	switch v.Kind() {
	case '"':
		var s string
		if json.Unmarshal(v, &s) != nil {
			return jsonrpc.ID{}, false
		}
		return jsonrpc.StringID(s), true
	case '0':
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return jsonrpc.ID{}, false
		}
		return jsonrpc.Int64ID(n), true
	}
	return jsonrpc.ID{}, false
}

// runCall is the task of one tools/call.
func (ss *Session) runCall(ctx context.Context, c *call, m *jsonrpc.Message, version string) {
	defer ss.tasks.Done()
	defer c.cancel(nil)
	var out []byte
	func() {
		defer func() {
			if r := recover(); r != nil {
				ref := newRef()
				ss.log.Error("panic in tools/call", slog.String("ref", ref),
					slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
				out = jsonrpc.AppendError(nil, internalError(m.ID, ref))
			}
		}()
		out = ss.call(ctx, m, version)
	}()

	ss.mu.Lock()
	delete(ss.inflight, m.ID)
	cancelled := c.peerCancelled
	ss.mu.Unlock()
	if cancelled {
		// A cancelled request gets no response, whatever the tool did.
		return
	}
	if out != nil {
		ss.send(out)
	}
}

type callParams struct {
	Name      *string        `json:"name"`
	Arguments jsontext.Value `json:"arguments"`
	Meta      jsontext.Value `json:"_meta"`
	Task      jsontext.Value `json:"task"`
}

// call runs one tools/call and returns the response to send, or nil for
// none.
func (ss *Session) call(ctx context.Context, m *jsonrpc.Message, version string) []byte {
	start := time.Now()
	var p callParams
	if err := unmarshalParams(m.Params, &p, true); err != nil {
		return jsonrpc.AppendError(nil, jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidParams, "Invalid params: "+err.Error()))
	}
	if m.Params == nil || p.Name == nil {
		return jsonrpc.AppendError(nil, jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidParams, "Invalid params: name is required"))
	}
	if p.Arguments != nil && p.Arguments.Kind() != '{' {
		return jsonrpc.AppendError(nil, jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidParams, "Invalid params: arguments must be an object"))
	}
	if p.Task != nil {
		// No tool here supports task augmentation (execution.taskSupport
		// is absent, i.e. forbidden); the spec asks for -32601.
		return jsonrpc.AppendError(nil, jsonrpc.NewError(m.ID, jsonrpc.CodeMethodNotFound,
			"Method not found: task-augmented tools/call is not supported"))
	}
	name := *p.Name
	t, ok := ss.srv.opts.Tools.Lookup(name)
	if !ok {
		pr := problem.New(problem.Validation, "Unknown tool: "+quote(name), "name")
		return jsonrpc.AppendError(nil, &jsonrpc.Error{
			ID: m.ID, Code: jsonrpc.CodeInvalidParams,
			Message: "Unknown tool: " + quote(name), Data: mcp.ProblemData(pr),
		})
	}
	args := p.Arguments
	if args == nil {
		args = jsontext.Value("{}")
	}
	res, err := ss.guarded(ctx, t, args)
	outcome := "ok"
	defer func() {
		if ss.log.Enabled(ctx, slog.LevelDebug) {
			ss.log.LogAttrs(ctx, slog.LevelDebug, "tools/call", slog.String("tool", name), slog.String("id", m.ID.String()),
				slog.String("outcome", outcome), slog.Duration("duration", time.Since(start)))
		}
	}()
	if err == nil {
		return ss.result(m.ID, ss.srv.enc.AppendCallResult(nil, version, res.Structured))
	}

	var (
		argErr *tool.ArgumentError
		pr     *problem.Problem
	)
	switch {
	case errors.As(err, &argErr):
		outcome = string(argErr.Problem.Code)
		if ss.srv.opts.ArgumentErrors == ArgumentErrorsProtocol {
			return jsonrpc.AppendError(nil, &jsonrpc.Error{
				ID: m.ID, Code: jsonrpc.CodeInvalidParams,
				Message: "Invalid params: " + argErr.Problem.Detail, Data: mcp.ProblemData(argErr.Problem),
			})
		}
		return ss.result(m.ID, ss.srv.enc.AppendCallProblem(nil, version, argErr.Problem))
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

// guarded passes a call through the guardrails, in order: structural
// sanitizer, FIFO slot, execution deadline, then the tool, which decodes its
// arguments strictly. Guardrail refusals are problems or argument errors.
func (ss *Session) guarded(ctx context.Context, t tool.Tool, args jsontext.Value) (tool.Result, error) {
	if err := guard.Sanitize(args, ss.srv.opts.Limits); err != nil {
		var pr *problem.Problem
		if errors.As(err, &pr) {
			return tool.Result{}, &tool.ArgumentError{Problem: pr}
		}
		return tool.Result{}, err
	}
	release, err := ss.srv.limiter.Acquire(ctx)
	if err != nil {
		return tool.Result{}, err
	}
	defer release()
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
