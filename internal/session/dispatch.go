package session

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/jsonrpc"
	"github.com/mcp-bastion/bastion/internal/mcp"
)

// MCP methods the server knows.
const (
	methodInitialize  = "initialize"
	methodInitialized = "notifications/initialized"
	methodCancelled   = "notifications/cancelled"
	methodPing        = "ping"
	methodToolsList   = "tools/list"
	methodToolsCall   = "tools/call"
	methodDiscover    = "server/discover"
	methodListen      = "subscriptions/listen"
)

// handleFrame dispatches one input frame on the read loop.
func (ss *Session) handleFrame(frame []byte) {
	f := jsonrpc.DecodeFrame(frame)
	direct := replier{ss: ss}
	if !f.Batch {
		ss.handleItem(direct, f.Items[0])
		return
	}
	if ss.era != eraLegacy || !mcp.FeaturesOf(ss.version).Batches {
		direct.sendError(&jsonrpc.Error{
			Code:    jsonrpc.CodeInvalidRequest,
			Message: "Invalid request: JSON-RPC batches are only accepted in a 2025-03-26 session",
		})
		return
	}
	if len(f.Items) > ss.srv.opts.MaxBatch {
		direct.sendError(&jsonrpc.Error{
			Code:    jsonrpc.CodeInvalidRequest,
			Message: fmt.Sprintf("Invalid request: batch exceeds %d messages", ss.srv.opts.MaxBatch),
		})
		return
	}
	// Members are handled one by one, as if they had arrived on their own
	// lines, under the same guardrails; a tools/call member runs as its
	// own task. Their responses are collected and written as one array
	// once every request of the batch has its answer (JSON-RPC 2.0 §6).
	b := newBatch(ss)
	for _, it := range f.Items {
		if !wantsReply(it) {
			ss.handleItem(direct, it)
			continue
		}
		r := b.member(itemID(it))
		if it.Msg != nil && it.Msg.Method == methodInitialize {
			r.sendError(jsonrpc.NewError(it.Msg.ID, jsonrpc.CodeInvalidRequest,
				"Invalid request: initialize must not be part of a batch"))
			continue
		}
		ss.handleItem(r, it)
	}
	b.dispatched()
}

// itemID is the id of an item of a frame: its request's, or the one its
// error answers.
func itemID(it jsonrpc.Item) jsonrpc.ID {
	if it.Err != nil {
		return it.Err.ID
	}
	return it.Msg.ID
}

// wantsReply reports whether an item of a frame gets a response: a
// request, or an invalid message that is not a notification or a
// response.
func wantsReply(it jsonrpc.Item) bool {
	if it.Err != nil {
		return !it.Err.NoReply
	}
	return it.Msg.Kind == jsonrpc.KindRequest
}

func (ss *Session) handleItem(r replier, it jsonrpc.Item) {
	if it.Err != nil {
		if it.Err.NoReply {
			// An invalid notification or response: never answered.
			ss.log.Debug("ignoring an invalid notification or response", slog.String("reason", it.Err.Message))
			return
		}
		r.sendError(it.Err)
		return
	}
	m := it.Msg
	defer func() {
		// A bug in inline handling must cost one request, not the
		// session. The stack goes to the log only.
		if p := recover(); p != nil {
			ref := newRef()
			ss.log.Error("panic while handling a message", slog.String("method", truncate(m.Method, 64)),
				slog.String("ref", ref), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			if m.Kind == jsonrpc.KindRequest {
				r.sendError(internalError(m.ID, ref))
			}
		}
	}()
	switch m.Kind {
	case jsonrpc.KindResponse:
		// An answer to a request the session sent, or to nothing.
		if !ss.asks.Deliver("", m) {
			ss.log.Debug("ignoring a response to no request of this session")
		}
	case jsonrpc.KindNotification:
		ss.handleNotification(m)
	case jsonrpc.KindRequest:
		ss.handleRequest(r, m)
	}
}

func (ss *Session) handleNotification(m *jsonrpc.Message) {
	switch m.Method {
	case methodInitialized:
		if ss.era == eraLegacy {
			ss.log.Debug("client initialized")
		}
	case methodCancelled:
		ss.cancelCall(m.Params)
	default:
		// Unknown notifications are ignored, as the spec requires.
		ss.log.Debug("ignoring notification", slog.String("method", truncate(m.Method, 64)))
	}
}

// handleRequest applies the lifecycle of the stream's era.
func (ss *Session) handleRequest(r replier, m *jsonrpc.Message) {
	switch ss.era {
	case eraUndecided:
		ss.handleUndecided(r, m)
	case eraLegacy:
		ss.handleLegacy(r, m)
	case eraModern:
		ss.handleModern(r, m)
	}
}

// handleUndecided serves the first requests of a stream: initialize starts
// a legacy session, a modern version in _meta (or server/discover) makes the
// stream stateless, ping is answered, anything else is refused at once.
func (ss *Session) handleUndecided(r replier, m *jsonrpc.Message) {
	switch m.Method {
	case methodInitialize:
		ss.initialize(r, m)
		return
	case methodPing:
		ss.ping(r, m, mcp.LatestLegacy)
		return
	}
	v, present, err := metaVersion(m.Params)
	if err != nil {
		ss.noteRefusedCall(m, "invalid_params")
		r.sendError(jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidParams, "Invalid params: "+err.Error()))
		return
	}
	switch {
	case present && !mcp.IsModern(v):
		ss.unsupportedVersion(r, m, v)
	case present || m.Method == methodDiscover:
		ss.era = eraModern
		ss.log.Debug("stateless session", slog.String("protocol_version", mcp.V20260728))
		ss.dispatchModern(r, m, mcp.V20260728)
	default:
		ss.noteRefusedCall(m, "not_initialized")
		r.sendError(jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidRequest,
			"Invalid request: the session is not initialized; send initialize first, "+
				"or name protocol version 2026-07-28 in params._meta"))
	}
}

func (ss *Session) handleLegacy(r replier, m *jsonrpc.Message) {
	switch m.Method {
	case methodInitialize:
		r.sendError(jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidRequest,
			"Invalid request: the session is already initialized"))
	case methodPing:
		ss.ping(r, m, ss.version)
	case methodToolsList:
		ss.toolsList(r, m, ss.version)
	case methodToolsCall:
		ss.startCall(r, m, ss.version)
	default:
		ss.relayOrNotFound(r, m, ss.version)
	}
}

func (ss *Session) handleModern(r replier, m *jsonrpc.Message) {
	v, present, err := metaVersion(m.Params)
	switch {
	case err != nil:
		ss.noteRefusedCall(m, "invalid_params")
		r.sendError(jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidParams, "Invalid params: "+err.Error()))
	case m.Method == methodInitialize:
		r.sendError(jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidRequest,
			"Invalid request: this stream is stateless (protocol 2026-07-28); initialize is not accepted"))
	case !present:
		ss.noteRefusedCall(m, "no_protocol_version")
		r.sendError(jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidRequest,
			`Invalid request: params._meta["io.modelcontextprotocol/protocolVersion"] is required`))
	case !mcp.IsModern(v):
		ss.unsupportedVersion(r, m, v)
	default:
		ss.dispatchModern(r, m, v)
	}
}

func (ss *Session) dispatchModern(r replier, m *jsonrpc.Message, version string) {
	switch m.Method {
	case methodDiscover:
		if !ss.checkParams(r, m, nil) {
			return
		}
		r.send(jsonrpc.AppendResult(nil, m.ID, ss.srv.enc.Discover()))
	case methodToolsList:
		ss.toolsList(r, m, version)
	case methodToolsCall:
		ss.startCall(r, m, version)
	case methodListen:
		ss.listen(r, m)
	default:
		// ping and the handshake do not exist in the stateless era.
		ss.relayOrNotFound(r, m, version)
	}
}

// relayOrNotFound starts a request the Relay serves and offers, and
// answers any other method -32601.
func (ss *Session) relayOrNotFound(r replier, m *jsonrpc.Message, version string) {
	if relayed, offered := ss.relayed(m.Method); relayed && offered {
		ss.startRelay(r, m, version)
		return
	}
	ss.methodNotFound(r, m)
}

func (ss *Session) methodNotFound(r replier, m *jsonrpc.Message) {
	r.sendError(jsonrpc.NewError(m.ID, jsonrpc.CodeMethodNotFound,
		"Method not found: "+quote(m.Method)))
}

func (ss *Session) unsupportedVersion(r replier, m *jsonrpc.Message, requested string) {
	ss.noteRefusedCall(m, "unsupported_version")
	r.sendError(&jsonrpc.Error{
		ID:      m.ID,
		Code:    mcp.CodeUnsupportedProtocolVersion,
		Message: "Unsupported protocol version",
		Data:    mcp.UnsupportedVersionData(truncate(requested, 64)),
	})
}

type initializeParams struct {
	ProtocolVersion *string        `json:"protocolVersion"`
	Capabilities    jsontext.Value `json:"capabilities"`
	ClientInfo      *struct {
		Name    *string `json:"name"`
		Version *string `json:"version"`
	} `json:"clientInfo"`
	Meta jsontext.Value `json:"_meta"`
}

func (ss *Session) initialize(r replier, m *jsonrpc.Message) {
	var p initializeParams
	var why string
	switch err := unmarshalParams(m.Params, &p, false); {
	case err != nil:
		why = err.Error()
	case p.ProtocolVersion == nil:
		why = "protocolVersion is required"
	case len(p.Capabilities) == 0 || p.Capabilities.Kind() != '{':
		why = "capabilities must be an object"
	case p.ClientInfo == nil || p.ClientInfo.Name == nil || p.ClientInfo.Version == nil:
		why = "clientInfo with name and version is required"
	}
	if why != "" {
		r.sendError(jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidParams, "Invalid params: "+why))
		return
	}
	v := mcp.Negotiate(*p.ProtocolVersion)
	ss.era, ss.version, ss.initialized = eraLegacy, v, true
	ss.clientCaps = p.Capabilities.Clone()
	ss.log.Info("session initialized", slog.String("protocol_version", v),
		slog.Bool("version_offered", v != *p.ProtocolVersion))
	r.send(jsonrpc.AppendResult(nil, m.ID, ss.srv.enc.Initialize(v)))
	ss.listChanged.Store(true) // after the answer: no notification may come first
}

func (ss *Session) ping(r replier, m *jsonrpc.Message, version string) {
	if !ss.checkParams(r, m, nil) {
		return
	}
	r.send(jsonrpc.AppendResult(nil, m.ID, ss.srv.enc.Empty(version)))
}

type listParams struct {
	Cursor *string        `json:"cursor"`
	Meta   jsontext.Value `json:"_meta"`
}

func (ss *Session) toolsList(r replier, m *jsonrpc.Message, version string) {
	var p listParams
	if !ss.checkParams(r, m, &p) {
		return
	}
	if c := ss.srv.opts.Catalog; c != nil {
		res, err := c.List(version, p.Cursor)
		if err != nil {
			e := *err
			e.ID = m.ID
			r.sendError(&e)
			return
		}
		r.send(jsonrpc.AppendResult(nil, m.ID, res))
		return
	}
	if p.Cursor != nil {
		// Every list fits one page, so no cursor was ever issued.
		r.sendError(jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidParams, "Invalid params: unknown cursor"))
		return
	}
	r.send(jsonrpc.AppendResult(nil, m.ID, ss.srv.enc.ToolsList(version)))
}

type emptyParams struct {
	Meta jsontext.Value `json:"_meta"`
}

// checkParams decodes m's params strictly into dst (nil: only _meta is
// allowed) and answers -32602 when they do not fit.
func (ss *Session) checkParams(r replier, m *jsonrpc.Message, dst any) bool {
	if dst == nil {
		dst = &emptyParams{}
	}
	if err := unmarshalParams(m.Params, dst, true); err != nil {
		r.sendError(jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidParams, "Invalid params: "+err.Error()))
		return false
	}
	return true
}

// unmarshalParams decodes params (nil means absent) into dst. strict
// refuses unknown members. Errors name the member, never its value.
func unmarshalParams(params []byte, dst any, strict bool) error {
	if params == nil {
		return nil
	}
	if err := json.Unmarshal(params, dst, json.RejectUnknownMembers(strict)); err != nil {
		return paramsError(err)
	}
	return nil
}

func paramsError(err error) error {
	var se *json.SemanticError
	if errors.As(err, &se) && se.JSONPointer != "" {
		name := quote(strings.TrimPrefix(string(se.JSONPointer), "/"))
		if errors.Is(err, json.ErrUnknownName) {
			return fmt.Errorf("unknown member %s", name)
		}
		return fmt.Errorf("member %s has the wrong type", name)
	}
	return errors.New("params do not match the method")
}

// metaVersion reads params._meta["io.modelcontextprotocol/protocolVersion"].
func metaVersion(params []byte) (v string, present bool, err error) {
	if params == nil {
		return "", false, nil
	}
	var p struct {
		Meta *struct {
			Version *string `json:"io.modelcontextprotocol/protocolVersion"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return "", false, fmt.Errorf("_meta is malformed")
	}
	if p.Meta == nil || p.Meta.Version == nil {
		return "", false, nil
	}
	return *p.Meta.Version, true, nil
}
