package front

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/gateway"
	"github.com/mcp-bastion/bastion/internal/gateway/audit"
	"github.com/mcp-bastion/bastion/internal/gateway/auth"
	"github.com/mcp-bastion/bastion/internal/guard"
	"github.com/mcp-bastion/bastion/internal/jsonrpc"
	"github.com/mcp-bastion/bastion/internal/mcp"
	"github.com/mcp-bastion/bastion/internal/problem"
	"github.com/mcp-bastion/bastion/internal/tool"
)

// Header names, as the spec writes them (net/http canonicalizes).
const (
	hdrSessionID       = "Mcp-Session-Id"
	hdrProtocolVersion = "MCP-Protocol-Version"
	hdrMethod          = "Mcp-Method"
	hdrName            = "Mcp-Name"
)

// exchange is what the front knows of one POST while answering it.
type exchange struct {
	s       *Server
	r       *http.Request
	modern  bool
	version string
	sess    session // legacy, once opened
	// sessionID is the id minted by this exchange's initialize.
	sessionID string
	// method is the metrics label of what was posted.
	method string
	// rid correlates the log lines of this request.
	rid string
	// p is the authenticated caller.
	p auth.Principal
	// sse says the answer is an event stream; w is then written as
	// events come.
	acceptJSON, acceptSSE bool
	// push, while a request is answered with an event stream, sends a
	// message on it before the response; nil otherwise.
	push func(msg []byte)
}

// reply is the answer to one message: a JSON-RPC response (or nil for
// none) and the HTTP status it carries when it is the only answer.
type reply struct {
	msg    []byte
	status int
	// retryAfter, when set, is the Retry-After of a 429.
	retryAfter int
}

func (s *Server) mcp(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		start := time.Now()
		rw := &statusWriter{ResponseWriter: w}
		x := s.post(rw, r)
		s.metrics.Request(x.method, strconv.Itoa(rw.code()), time.Since(start))
	case http.MethodGet:
		s.get(w, r)
	case http.MethodDelete:
		s.delete(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
	}
}

// writeError answers with one JSON-RPC error and an HTTP status; a
// refusal of a notification has no body.
func writeError(w http.ResponseWriter, status int, e *jsonrpc.Error, notification bool) {
	if notification {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(jsonrpc.AppendErrorEchoingID(nil, e), '\n'))
}

// post answers one POST and returns its exchange (for the metrics: the
// method label).
func (s *Server) post(w http.ResponseWriter, r *http.Request) *exchange {
	x := &exchange{s: s, r: r, method: "(unread)", rid: requestID()}
	// One Content-Type: a reader of another copy would read the body as
	// something else.
	if len(r.Header.Values("Content-Type")) > 1 {
		writeError(w, http.StatusUnsupportedMediaType, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: "Invalid request: the Content-Type header is given more than once"}, false)
		return x
	}
	if ct, err := mcp.MediaType(r.Header.Get("Content-Type")); err != nil || ct != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: "Invalid request: the body must be application/json"}, false)
		return x
	}
	x.acceptJSON, x.acceptSSE = accepts(r.Header.Values("Accept"))
	if !x.acceptJSON && !x.acceptSSE {
		writeError(w, http.StatusNotAcceptable, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: "Invalid request: Accept must allow application/json or text/event-stream"}, false)
		return x
	}
	limit := int64(s.cfg.Limits.Body)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
				Message: fmt.Sprintf("Invalid request: the body exceeds %d bytes", limit),
				Data:    fmt.Appendf(nil, `{"max_body_bytes":%d}`, limit)}, false)
			return x
		}
		return x // the client went away
	}
	f := jsonrpc.DecodeFrame(body)
	x.method = methodLabel(f)
	if len(f.Items) == 1 && f.Items[0].Err != nil && f.Items[0].Err.Code == jsonrpc.CodeParseError {
		writeError(w, http.StatusBadRequest, f.Items[0].Err, false)
		return x
	}
	// A message that is no valid request is refused before anything
	// else: it is never forwarded, and its refusal (its id echoed as
	// sent) tells an unauthenticated caller nothing.
	if !f.Batch && f.Items[0].Err != nil {
		writeError(w, http.StatusBadRequest, f.Items[0].Err, f.Items[0].Err.NoReply)
		return x
	}
	var firstID jsonrpc.ID
	firstNotification := false
	if !f.Batch && f.Items[0].Msg != nil {
		firstID, firstNotification = f.Items[0].Msg.ID, f.Items[0].Msg.Kind != jsonrpc.KindRequest
	}
	if !x.authenticate(w, firstID, firstNotification) {
		return x
	}
	if st, e, notification := x.era(f); e != nil {
		writeError(w, st, e, notification)
		return x
	}
	if f.Batch {
		x.batch(w, f)
		return x
	}
	it := f.Items[0]
	if it.Err != nil {
		writeError(w, http.StatusBadRequest, it.Err, it.Err.NoReply)
		return x
	}
	m := it.Msg
	if m.Kind != jsonrpc.KindRequest {
		x.notification(m)
		w.WriteHeader(http.StatusAccepted)
		return x
	}
	if x.modern {
		if st, e := x.headersAgree(m); e != nil {
			writeError(w, st, e, false)
			return x
		}
	}
	if x.modern && m.Method == "subscriptions/listen" {
		x.listen(w, m)
		return x
	}
	// A request is answered with an event stream when the client takes
	// only that; a call when it asked for progress; and every request of
	// a session whose client can be asked for sampling, elicitation or
	// roots, as such a client expects messages before a response: only a
	// stream can carry a downstream's requests and log messages.
	if x.acceptSSE && (!x.acceptJSON || x.sess.caps != 0 || (m.Method == "tools/call" && callProgressToken(m.Params) != nil)) {
		x.stream(w, m)
		return x
	}
	rep := x.request(r.Context(), m, nil)
	if rep.msg == nil {
		// Cancelled: the request gets no JSON-RPC response, and the
		// HTTP exchange ends with no body.
		w.WriteHeader(http.StatusNoContent)
		return x
	}
	w.Header().Set("Content-Type", "application/json")
	if m.Method == "initialize" && x.sess.nonce != "" {
		w.Header().Set(hdrSessionID, x.sessionID)
	}
	if rep.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(rep.retryAfter))
	}
	w.WriteHeader(rep.status)
	w.Write(append(rep.msg, '\n'))
	return x
}

// accepts reads the Accept header: which of the two answer forms the
// client takes. No Accept at all takes both. Each form is judged by the
// most specific range that names it (RFC 9110 §12.5.1): the type itself,
// else its type/*, else */*; it is taken unless that range refuses it
// with a weight of zero, so that "*/*, application/json;q=0" takes only
// the event stream. Of two ranges equally specific, one that takes it
// wins.
func accepts(values []string) (jsonOK, sseOK bool) {
	if len(values) == 0 {
		return true, true
	}
	var jsonForm, sseForm preference
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			// A type without parameters, as almost every client writes
			// it, is taken as it is; it is what ParseMediaType would
			// return, without the map of parameters it builds.
			mt, no := strings.TrimSpace(part), false
			if !acceptedAsIs(mt) {
				var params map[string]string
				var err error
				if mt, params, err = mime.ParseMediaType(mt); err != nil {
					continue
				}
				no = refused(params["q"])
			}
			switch mt {
			case "application/json":
				jsonForm.offer(3, no)
			case "application/*":
				jsonForm.offer(2, no)
			case "text/event-stream":
				sseForm.offer(3, no)
			case "text/*":
				sseForm.offer(2, no)
			case "*/*":
				jsonForm.offer(1, no)
				sseForm.offer(1, no)
			}
		}
	}
	return jsonForm.taken(), sseForm.taken()
}

// preference is what an Accept header says of one answer form: how
// specific the most specific range naming it is (0 for none), and whether
// every range that specific refuses it.
type preference struct {
	specificity int
	refused     bool
}

func (p *preference) offer(specificity int, refused bool) {
	switch {
	case specificity > p.specificity:
		p.specificity, p.refused = specificity, refused
	case specificity == p.specificity:
		p.refused = p.refused && refused
	}
}

func (p preference) taken() bool { return p.specificity > 0 && !p.refused }

// acceptedAsIs reports whether an Accept member is one of the types
// accepts knows, written without parameters, in the lower case that
// ParseMediaType returns.
func acceptedAsIs(mt string) bool {
	switch mt {
	case "application/json", "application/*", "text/event-stream", "text/*", "*/*":
		return true
	}
	return false
}

// refused reports whether an Accept qvalue refuses its media type: a
// weight of zero in any of its spellings (0, 0.0, 0.000; RFC 9110
// §12.4.2). A qvalue that is no number is taken as a weight, as if
// absent.
func refused(q string) bool {
	if q == "" {
		return false
	}
	w, err := strconv.ParseFloat(q, 64)
	return err == nil && w == 0
}

// era decides whose request this is: a legacy client's initialize, a
// legacy session (its id), or a stateless 2026-07-28 request. It returns
// the refusal when it is none of them.
func (x *exchange) era(f jsonrpc.Frame) (int, *jsonrpc.Error, bool) {
	r := x.r
	hv := r.Header.Get(hdrProtocolVersion)
	sid := r.Header.Get(hdrSessionID)
	first := f.Items[0].Msg
	notification := !f.Batch && first != nil && first.Kind != jsonrpc.KindRequest
	invalid := func(msg string) (int, *jsonrpc.Error, bool) {
		var id jsonrpc.ID
		if first != nil {
			id = first.ID
		}
		return http.StatusBadRequest, jsonrpc.NewError(id, jsonrpc.CodeInvalidRequest, "Invalid request: "+msg), notification
	}
	// One version per request: an intermediary that reads another copy
	// of the header than the gateway would see another era.
	if len(r.Header.Values(hdrProtocolVersion)) > 1 {
		return invalid("MCP-Protocol-Version is given more than once")
	}
	if len(r.Header.Values(hdrSessionID)) > 1 {
		return invalid("Mcp-Session-Id is given more than once")
	}
	if !f.Batch && first != nil && first.Method == "initialize" && first.Kind == jsonrpc.KindRequest {
		if hv != "" && !mcp.IsLegacy(hv) && !mcp.IsModern(hv) {
			return invalid("unsupported MCP-Protocol-Version header")
		}
		return 0, nil, false // the handshake decides the version
	}
	if sid != "" {
		sess, err := x.s.sessions.open(sid, x.owner())
		if err != nil {
			var id jsonrpc.ID
			if first != nil {
				id = first.ID
			}
			return http.StatusNotFound, jsonrpc.NewError(id, jsonrpc.CodeInvalidRequest,
				"Invalid request: the session does not exist or has ended; initialize again"), notification
		}
		// The header must name a session-era version the gateway
		// speaks; the session's negotiated version governs the answer.
		// (Clients send the header of another supported version on a
		// session, and the official suite expects them served; a
		// 2026-07-28 or unknown version on a session is refused.)
		if hv != "" && !mcp.IsLegacy(hv) {
			return invalid("the MCP-Protocol-Version header is not a session-era protocol version")
		}
		if f.Batch && !mcp.FeaturesOf(sess.version).Batches {
			return invalid("JSON-RPC batches are only accepted in a 2025-03-26 session")
		}
		x.sess, x.version = sess, sess.version
		return 0, nil, false
	}
	if f.Batch {
		return invalid("JSON-RPC batches are only accepted in a 2025-03-26 session")
	}
	metaV, hasMeta := "", false
	if first != nil {
		metaV, hasMeta = metaVersion(first.Params)
	}
	switch {
	case hv != "" && !mcp.IsLegacy(hv) && !mcp.IsModern(hv) && !(hasMeta && metaV == hv):
		// A header naming a version the body does not: a header the
		// gateway does not know. One that agrees with the body is a
		// client of a version the gateway does not speak, told which it
		// does (-32022, below).
		return invalid("unsupported MCP-Protocol-Version header")
	case hasMeta && !mcp.IsModern(metaV):
		var id jsonrpc.ID
		if first != nil {
			id = first.ID
		}
		return http.StatusBadRequest, &jsonrpc.Error{ID: id, Code: mcp.CodeUnsupportedProtocolVersion,
			Message: "Unsupported protocol version", Data: mcp.UnsupportedVersionData(truncate(metaV, 64))}, notification
	case hasMeta || mcp.IsModern(hv):
		x.modern, x.version = true, mcp.V20260728
		return 0, nil, false
	}
	// A legacy request without a session. A 2026-era client probing
	// here gets a body it will not take for a modern answer, and falls
	// back to initialize.
	return invalid("a session id is required: send initialize first, or name protocol version 2026-07-28")
}

// headersAgree checks the 2026-07-28 request headers against the body:
// MCP-Protocol-Version equals _meta's version, Mcp-Method the method, and
// for tools/call Mcp-Name the tool's name (a non-ASCII name in the
// base64 sentinel form).
func (x *exchange) headersAgree(m *jsonrpc.Message) (int, *jsonrpc.Error) {
	mismatch := func(what string) (int, *jsonrpc.Error) {
		return http.StatusBadRequest, jsonrpc.NewError(m.ID, gateway.CodeHeaderMismatch, "HeaderMismatch: "+what)
	}
	h := x.r.Header
	metaV, ok := metaVersion(m.Params)
	switch {
	case !ok:
		return mismatch(`params._meta["io.modelcontextprotocol/protocolVersion"] is required`)
	case len(h.Values(hdrProtocolVersion)) == 0:
		return mismatch("the MCP-Protocol-Version header is missing")
	case h.Get(hdrProtocolVersion) != metaV:
		return mismatch("the MCP-Protocol-Version header does not match params._meta")
	case len(h.Values(hdrMethod)) == 0:
		return mismatch("the Mcp-Method header is missing")
	case len(h.Values(hdrMethod)) != 1 || h.Get(hdrMethod) != m.Method:
		return mismatch("the Mcp-Method header does not match the method")
	}
	if m.Method == "resources/read" {
		var p struct {
			URI *string `json:"uri"`
		}
		// A uri that is no string leaves the header unjudged: the
		// request is refused for its params (-32602), not its headers.
		if json.Unmarshal(m.Params, &p) != nil || p.URI == nil {
			return 0, nil
		}
		if len(h.Values(hdrName)) == 0 {
			return mismatch("the Mcp-Name header is missing")
		}
		got, ok := decodeHeaderValue(h.Get(hdrName))
		if len(h.Values(hdrName)) != 1 || !ok || got != *p.URI {
			return mismatch("the Mcp-Name header does not match params.uri")
		}
		return 0, nil
	}
	if m.Method == "tools/call" || m.Method == "prompts/get" {
		var p struct {
			Name *string `json:"name"`
		}
		if json.Unmarshal(m.Params, &p) != nil || p.Name == nil {
			return 0, nil // the call is refused for its params, not its headers
		}
		if len(h.Values(hdrName)) == 0 {
			return mismatch("the Mcp-Name header is missing")
		}
		got, ok := decodeHeaderValue(h.Get(hdrName))
		if len(h.Values(hdrName)) != 1 || !ok || got != *p.Name {
			return mismatch("the Mcp-Name header does not match params.name")
		}
		if m.Method == "prompts/get" {
			return 0, nil // a prompt mirrors no argument into a header
		}
		// Each argument the tool mirrors must arrive in its
		// Mcp-Param-* header, equal to the body (decision 8): an
		// intermediary that routes by header must see what the tool
		// will act on.
		for _, want := range x.s.g.MirroredParams(*p.Name, m.Params) {
			key := "Mcp-Param-" + want.Name
			vals := h.Values(key)
			switch {
			case want.Absent && len(vals) == 0:
			case want.Absent:
				return mismatch("the " + key + " header is present, and the argument it mirrors is not")
			case len(vals) != 1:
				return mismatch("the " + key + " header is missing or repeated")
			default:
				got, ok := decodeHeaderValue(vals[0])
				if !ok || got != want.Value {
					return mismatch("the " + key + " header does not match the argument it mirrors")
				}
			}
		}
	}
	return 0, nil
}

// decodeHeaderValue reads a mirrored header value: plain visible ASCII, or
// the exact =?base64?…?= sentinel of the UTF-8 bytes.
func decodeHeaderValue(v string) (string, bool) {
	if strings.HasPrefix(v, "=?base64?") && strings.HasSuffix(v, "?=") && len(v) >= len("=?base64??=") {
		b, err := base64.StdEncoding.Strict().DecodeString(v[len("=?base64?") : len(v)-2])
		if err != nil {
			return "", false
		}
		return string(b), true
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return "", false
		}
	}
	return v, true
}

// metaVersion reads params._meta["io.modelcontextprotocol/protocolVersion"].
func metaVersion(params []byte) (string, bool) {
	if params == nil {
		return "", false
	}
	var p struct {
		Meta *struct {
			Version *string `json:"io.modelcontextprotocol/protocolVersion"`
		} `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil || p.Meta == nil || p.Meta.Version == nil {
		return "", false
	}
	return *p.Meta.Version, true
}

// callProgressToken is the progress token of a request's params.
func callProgressToken(params []byte) jsontext.Value {
	// Most calls ask for no progress: without a parse when the params
	// spell progressToken nowhere, in plain letters or escaped.
	if !bytes.Contains(params, []byte("progressToken")) && !bytes.Contains(params, []byte(`\u`)) {
		return nil
	}
	var p struct {
		Meta jsontext.Value `json:"_meta"`
	}
	if params == nil || json.Unmarshal(params, &p) != nil {
		return nil
	}
	return mcp.ProgressToken(p.Meta)
}

// notification handles a notification or a response from the client.
func (x *exchange) notification(m *jsonrpc.Message) {
	if m.Kind == jsonrpc.KindNotification && m.Method == "notifications/cancelled" && x.sess.nonce != "" {
		var p struct {
			RequestID jsontext.Value `json:"requestId"`
		}
		if json.Unmarshal(m.Params, &p) == nil {
			if id, ok := jsonrpc.ParseID(p.RequestID); ok {
				x.s.calls.cancel(callKey{session: x.sess.nonce, id: id})
			}
		}
	}
	if m.Kind == jsonrpc.KindResponse && x.sess.nonce != "" {
		x.s.asks.Deliver(x.sess.nonce, m)
	}
	// notifications/initialized and unknown notifications need nothing.
	// A 2026-07-28 client cancels by closing the stream.
}

// request answers one request. progress, when set, receives the call's
// progress notifications as they come (an SSE answer).
func (x *exchange) request(ctx context.Context, m *jsonrpc.Message, progress func(jsontext.Value)) reply {
	s := x.s
	ok := func(result []byte) reply {
		return reply{msg: jsonrpc.AppendResult(nil, m.ID, result), status: http.StatusOK}
	}
	fail := func(status, code int, msg string) reply {
		return reply{msg: jsonrpc.AppendError(nil, jsonrpc.NewError(m.ID, code, msg)), status: status}
	}
	if ok, wait := s.limiters.allow(x.p); !ok {
		s.metrics.RateLimited()
		s.g.Audit().Record(audit.Event{RequestID: x.rid, Subject: x.p.Subject, Issuer: x.p.Issuer, Roles: x.p.Roles,
			Method: label(m.Method), Outcome: audit.RateLimited, Code: gateway.CodeTooManyRequests})
		return rateLimited(m.ID, wait)
	}
	switch m.Method {
	case "initialize":
		if x.modern || x.sess.nonce != "" {
			return fail(http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "Invalid request: initialize is only the first request of a session")
		}
		return x.initialize(m)
	case "ping":
		if x.modern {
			return fail(http.StatusOK, jsonrpc.CodeMethodNotFound, "Method not found: \"ping\"")
		}
		return ok(s.enc.Empty(x.version))
	case "server/discover":
		if !x.modern {
			return fail(http.StatusOK, jsonrpc.CodeMethodNotFound, "Method not found: \"server/discover\"")
		}
		return ok(s.enc.Discover())
	case "tools/call":
		return x.call(ctx, m, progress)
	case "tools/list", "prompts/list", "prompts/get", "resources/list", "resources/templates/list", "resources/read",
		"completion/complete", "logging/setLevel":
		res, err := s.methods.Serve(ctx, gateway.MethodRequest{Method: m.Method, Version: x.version, Params: m.Params, RequestID: x.rid, Principal: x.p})
		return x.answer(ctx, m, err, func() []byte { return res })
	case "resources/subscribe", "resources/unsubscribe":
		r := gateway.MethodRequest{Method: m.Method, Version: x.version, Params: m.Params, RequestID: x.rid, Principal: x.p}
		if x.sess.nonce != "" {
			// Updates reach the session's GET stream.
			r.Subscriber, r.Expires = x.sess.nonce, x.sess.issued.Add(s.sessions.ttl)
		}
		res, err := s.methods.Serve(ctx, r)
		return x.answer(ctx, m, err, func() []byte { return res })
	}
	return fail(http.StatusOK, jsonrpc.CodeMethodNotFound, "Method not found: "+problem.Quote(m.Method))
}

// answer maps what a gateway method returned to the reply: the result
// render makes when err is nil, the gateway's own error, no answer when
// the caller went away, else -32603 with the error in the log only.
func (x *exchange) answer(ctx context.Context, m *jsonrpc.Message, err error, render func() []byte) reply {
	var gwErr *gateway.Error
	switch {
	case err == nil:
		return reply{msg: jsonrpc.AppendResult(nil, m.ID, render()), status: http.StatusOK}
	case errors.As(err, &gwErr):
		return reply{msg: jsonrpc.AppendError(nil, gwErr.RPC(m.ID)), status: gwErr.Status}
	case ctx.Err() != nil:
		return reply{} // the client cancelled or went away: no answer
	}
	x.s.log.Error(m.Method+" failed", slog.String("request_id", x.rid), slog.String("error", err.Error()))
	return reply{msg: jsonrpc.AppendError(nil, jsonrpc.NewError(m.ID, jsonrpc.CodeInternalError, "Internal error")), status: http.StatusInternalServerError}
}

// initialize starts a legacy session: the version is negotiated, the
// session id minted and sent with the answer.
func (x *exchange) initialize(m *jsonrpc.Message) reply {
	var p struct {
		ProtocolVersion *string        `json:"protocolVersion"`
		Capabilities    jsontext.Value `json:"capabilities"`
		ClientInfo      *struct {
			Name    *string `json:"name"`
			Version *string `json:"version"`
		} `json:"clientInfo"`
		Meta jsontext.Value `json:"_meta"`
	}
	why := ""
	switch err := json.Unmarshal(m.Params, &p); {
	case m.Params == nil || err != nil:
		why = "params do not match initialize"
	case p.ProtocolVersion == nil:
		why = "protocolVersion is required"
	case len(p.Capabilities) == 0 || p.Capabilities.Kind() != '{':
		why = "capabilities must be an object"
	case p.ClientInfo == nil || p.ClientInfo.Name == nil || p.ClientInfo.Version == nil:
		why = "clientInfo with name and version is required"
	}
	if why != "" {
		return reply{msg: jsonrpc.AppendError(nil, jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidParams, "Invalid params: "+why)), status: http.StatusOK}
	}
	v := mcp.Negotiate(*p.ProtocolVersion)
	id, sess := x.s.sessions.mint(v, x.owner(), capsOf(p.Capabilities))
	x.sess, x.version, x.sessionID = sess, v, id
	x.s.log.Info("session initialized", slog.String("request_id", x.rid), slog.String("protocol_version", v))
	return reply{msg: jsonrpc.AppendResult(nil, m.ID, x.s.enc.Initialize(v)), status: http.StatusOK}
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

// call answers a tools/call: its own validity first (params, name,
// sanitizer), then the gateway's invoke path.
func (x *exchange) call(ctx context.Context, m *jsonrpc.Message, progress func(jsontext.Value)) reply {
	s := x.s
	invalid := func(msg string) reply {
		return reply{msg: jsonrpc.AppendError(nil, jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidParams, "Invalid params: "+msg)), status: http.StatusOK}
	}
	var p callParams
	if m.Params == nil || json.Unmarshal(m.Params, &p, json.RejectUnknownMembers(true)) != nil {
		return invalid("params do not match tools/call")
	}
	if p.Name == nil {
		return invalid("name is required")
	}
	if p.Arguments != nil && p.Arguments.Kind() != '{' {
		return invalid("arguments must be an object")
	}
	if p.Task != nil {
		return reply{msg: jsonrpc.AppendError(nil, jsonrpc.NewError(m.ID, jsonrpc.CodeMethodNotFound,
			"Method not found: task-augmented tools/call is not supported")), status: http.StatusOK}
	}
	switch {
	case !x.modern && (p.InputResponses != nil || p.RequestState != nil):
		return invalid("inputResponses and requestState belong to 2026-07-28 calls")
	case p.InputResponses != nil && p.RequestState == nil:
		return invalid("inputResponses need the requestState of the round they answer")
	}
	args := p.Arguments
	if args == nil {
		args = jsontext.Value("{}")
	}
	if err := guard.Sanitize(args, s.limits); err != nil {
		var pr *problem.Problem
		if errors.As(err, &pr) {
			return x.argumentError(m.ID, pr)
		}
		return invalid("arguments could not be read")
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if x.sess.nonce != "" {
		k := callKey{session: x.sess.nonce, id: m.ID}
		if !s.calls.add(k, cancel) {
			return reply{msg: jsonrpc.AppendError(nil, jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidRequest,
				"Invalid request: a request with this id is already in flight")), status: http.StatusBadRequest}
		}
		defer s.calls.remove(k)
	}
	c := gateway.Call{Name: *p.Name, Arguments: args, RequestID: x.rid, Principal: x.p}
	x.relayTo(&c)
	if x.modern {
		// No request reaches a 2026-07-28 caller: a round of input is
		// handed to it, for what this request declares it can answer.
		c.TakesRounds = true
		c.ClientCapabilities = gateway.CapabilitiesIn(mcp.ClientCapabilities(p.Meta))
		if p.RequestState != nil {
			c.Answers = &gateway.Answers{Responses: p.InputResponses, State: *p.RequestState}
		}
	}
	if tok := mcp.ProgressToken(p.Meta); tok != nil && progress != nil {
		c.ProgressToken, c.Progress = tok, progress
	}
	start := time.Now()
	res, err := s.g.Invoke(ctx, c)
	outcome := "ok"
	defer func() {
		// Built only when it is written: Info would allocate its
		// attributes (the id's text among them) before seeing that the
		// level is off, as a busy gateway's is.
		if s.log.Enabled(ctx, slog.LevelInfo) {
			s.log.Info("tools/call", slog.String("request_id", x.rid), slog.String("tool", gateway.LogName(*p.Name)), slog.String("id", problem.Cap(m.ID.String())),
				slog.String("outcome", outcome), slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000))
		}
	}()
	var (
		gwErr  *gateway.Error
		argErr *tool.ArgumentError
	)
	switch {
	case err == nil && res.Input != nil:
		outcome = "input_required"
		return reply{msg: jsonrpc.AppendResult(nil, m.ID, s.enc.AppendInputRequired(nil, res.Input.Requests, res.Input.State)), status: http.StatusOK}
	case err == nil:
		if res.IsError {
			outcome = "is_error"
		}
		return reply{msg: jsonrpc.AppendResult(nil, m.ID, s.enc.AppendRelayedResult(nil, x.version, res.Content, res.Structured, res.IsError)), status: http.StatusOK}
	case errors.As(err, &gwErr):
		outcome = "error_" + strconv.Itoa(gwErr.Code)
		return reply{msg: jsonrpc.AppendError(nil, gwErr.RPC(m.ID)), status: gwErr.Status}
	case errors.As(err, &argErr):
		outcome = string(argErr.Problem.Code)
		return x.argumentError(m.ID, argErr.Problem)
	case ctx.Err() != nil:
		outcome = "cancelled"
		return reply{} // the client cancelled or went away: no answer
	}
	outcome = "internal_error"
	s.log.Error("tools/call failed", slog.String("request_id", x.rid), slog.String("error", err.Error()))
	return reply{msg: jsonrpc.AppendError(nil, jsonrpc.NewError(m.ID, jsonrpc.CodeInternalError, "Internal error")), status: http.StatusInternalServerError}
}

// argumentError answers arguments the sanitizer or the schema refused, in
// the configured mode.
func (x *exchange) argumentError(id jsonrpc.ID, pr *problem.Problem) reply {
	if x.s.cfg.ArgumentErrors == "protocol" {
		return reply{msg: jsonrpc.AppendError(nil, &jsonrpc.Error{ID: id, Code: jsonrpc.CodeInvalidParams,
			Message: "Invalid params: " + pr.Detail, Data: mcp.ProblemData(pr)}), status: http.StatusOK}
	}
	return reply{msg: jsonrpc.AppendResult(nil, id, x.s.enc.AppendCallProblem(nil, x.version, pr)), status: http.StatusOK}
}

// stream answers one request as an SSE stream: its progress notifications
// as they come, then the response.
func (x *exchange) stream(w http.ResponseWriter, m *jsonrpc.Message) {
	var (
		mu   sync.Mutex
		ev   *events
		done bool // the response is written: nothing may follow it
	)
	send := func(msg []byte) { // mu is held
		if ev == nil {
			if m.Method == "initialize" && x.sessionID != "" {
				w.Header().Set(hdrSessionID, x.sessionID)
			}
			e := startEvents(w)
			ev = &e
		}
		ev.send(msg)
	}
	x.push = func(msg []byte) {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			send(msg)
		}
	}
	progress := func(params jsontext.Value) {
		x.push(append(append([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":`), params...), '}'))
	}
	rep := x.request(x.r.Context(), m, progress)
	mu.Lock()
	defer mu.Unlock()
	done = true
	switch {
	case rep.msg == nil && ev == nil:
		// Cancelled before anything was streamed: no answer, as on the
		// JSON path.
		w.WriteHeader(http.StatusNoContent)
	case rep.msg == nil:
		// Cancelled: no answer; the stream ends.
	case ev == nil && rep.status != http.StatusOK:
		// Nothing was streamed yet: a refusal keeps its HTTP status, and
		// a rate limit its Retry-After.
		w.Header().Set("Content-Type", "application/json")
		if rep.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(rep.retryAfter))
		}
		w.WriteHeader(rep.status)
		w.Write(append(rep.msg, '\n'))
	default:
		send(rep.msg)
	}
}

// batch answers a 2025-03-26 batch: each member decided on its own, the
// calls run side by side, the answers in the client's order.
func (x *exchange) batch(w http.ResponseWriter, f jsonrpc.Frame) {
	if len(f.Items) > x.s.cfg.Limits.Batch {
		writeError(w, http.StatusBadRequest, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: fmt.Sprintf("Invalid request: batch exceeds %d messages", x.s.cfg.Limits.Batch)}, false)
		return
	}
	answers := make([][]byte, len(f.Items))
	var wg sync.WaitGroup
	for i, it := range f.Items {
		switch {
		case it.Err != nil:
			if !it.Err.NoReply {
				answers[i] = jsonrpc.AppendErrorEchoingID(nil, it.Err)
			}
		case it.Msg.Kind != jsonrpc.KindRequest:
			x.notification(it.Msg)
		case it.Msg.Method == "initialize":
			answers[i] = jsonrpc.AppendError(nil, jsonrpc.NewError(it.Msg.ID, jsonrpc.CodeInvalidRequest,
				"Invalid request: initialize must not be part of a batch"))
		default:
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[i] = x.request(x.r.Context(), it.Msg, nil).msg
			}()
		}
	}
	wg.Wait()
	var out []byte
	for _, a := range answers {
		if a == nil {
			continue
		}
		if out == nil {
			out = []byte{'['}
		} else {
			out = append(out, ',')
		}
		out = append(out, a...)
	}
	if out == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(append(out, ']'), '\n'))
}

// get opens a legacy session's notification stream: the gateway says
// there when its tool list changed, until the session or the credential
// that opened the stream expires.
func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	if _, sse := accepts(r.Header.Values("Accept")); !sse || len(r.Header.Values("Accept")) == 0 {
		http.Error(w, "Not Acceptable: GET opens an event stream (Accept: text/event-stream)", http.StatusNotAcceptable)
		return
	}
	p, ok := s.principal(w, r)
	if !ok {
		return
	}
	if !sessionVersionHeader(w, r) {
		return
	}
	sess, err := s.sessions.open(r.Header.Get(hdrSessionID), ownerOf(p.Issuer, p.Subject))
	switch {
	case errors.Is(err, errNoSession):
		w.Header().Set("Allow", "POST, DELETE")
		http.Error(w, "Method Not Allowed: a stream belongs to a session; 2026-07-28 clients have none", http.StatusMethodNotAllowed)
		return
	case err != nil:
		http.Error(w, "Not Found: the session does not exist or has ended", http.StatusNotFound)
		return
	}
	if s.pastRate(w, p) {
		return
	}
	ch := s.sessions.stream(sess.nonce, principalKey(p))
	if ch == nil {
		http.Error(w, "Too Many Requests: too many open streams", http.StatusTooManyRequests)
		return
	}
	defer s.sessions.unstream(sess.nonce, ch)
	// The stream ends with its session, or with the credential that
	// opened it if that expires first: past either it would hold a slot
	// and hear of changes for a caller no longer served.
	end := sess.issued.Add(s.sessions.ttl)
	if !p.Expires.IsZero() && p.Expires.Before(end) {
		end = p.Expires
	}
	expired := time.NewTimer(time.Until(end))
	defer expired.Stop()
	seen := s.newSeen(p)
	ev := startEvents(w)
	for {
		select {
		case <-expired.C:
			return
		case _, ok := <-ch.wake:
			if !ok {
				return
			}
			what := seen.visible(ch.take())
			if what&changedTools != 0 {
				ev.send([]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`))
			}
			if what&changedPrompts != 0 {
				ev.send([]byte(`{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}`))
			}
			if what&changedResources != 0 {
				ev.send([]byte(`{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}`))
			}
			for _, uri := range ch.takeUpdated() {
				msg, _ := jsontext.AppendQuote([]byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":`), uri)
				ev.send(append(msg, "}}"...))
			}
		case <-r.Context().Done():
			return
		}
	}
}

// seenLists is what one notification stream's caller last saw of each
// list, so that the stream says a list changed only when it changed for
// that caller: a change it cannot see sends nothing (decision 26).
type seenLists struct {
	g    *gateway.Gateway
	view gateway.View
	last [3][32]byte
}

func (s *Server) newSeen(p auth.Principal) *seenLists {
	sl := &seenLists{g: s.g, view: s.g.ViewOf(p)}
	for i := range sl.last {
		sl.last[i] = sl.g.ViewDigest(i, sl.view)
	}
	return sl
}

// visible keeps of the changed lists in what those that changed as the
// caller sees them.
func (sl *seenLists) visible(what uint32) uint32 {
	for i, bit := range [3]uint32{changedTools, changedPrompts, changedResources} {
		if what&bit == 0 {
			continue
		}
		d := sl.g.ViewDigest(i, sl.view)
		if d == sl.last[i] {
			what &^= bit
		}
		sl.last[i] = d
	}
	return what
}

// listen answers a 2026-07-28 subscriptions/listen: an event stream that
// acknowledges the filter, then says when a list it asked about changed
// as its caller sees it, and when a resource it follows was updated,
// until the client closes it, or the gateway shuts down or the caller's
// credential expires (either ends it with the request's result). Each resource it names is subscribed as a
// resources/subscribe of a legacy session would be, and for as long as
// the stream is open; one the gateway cannot follow for this caller is
// left out of the acknowledgement (decision 26).
func (x *exchange) listen(w http.ResponseWriter, m *jsonrpc.Message) {
	// A subscription is a request like any other for the rate, and a
	// stream like any other for the bounds, whatever it asks to hear;
	// the rate comes first, before its params cost anything. Each
	// resource it names costs the rate as a resources/subscribe would
	// (all together up to a full burst): it is one to the downstream.
	pastRate := func(ok bool, wait time.Duration) bool {
		if ok {
			return false
		}
		x.s.metrics.RateLimited()
		rep := rateLimited(m.ID, wait)
		w.Header().Set("Retry-After", strconv.Itoa(rep.retryAfter))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.status)
		w.Write(append(rep.msg, '\n'))
		return true
	}
	if pastRate(x.s.limiters.allow(x.p)) {
		return
	}
	want, uris, err := mcp.ListenParams(m.Params)
	if err != nil {
		writeError(w, http.StatusOK, jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidParams, "Invalid params: "+err.Error()), false)
		return
	}
	if len(uris) > 0 && pastRate(x.s.limiters.allowMore(x.p, len(uris))) {
		return
	}
	if !x.acceptSSE {
		writeError(w, http.StatusNotAcceptable, jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidRequest,
			"Invalid request: subscriptions/listen answers with an event stream (Accept: text/event-stream)"), false)
		return
	}
	// The stream is its own subscriber: updates of what it follows reach
	// it, and no other stream or session.
	key := listenPrefix + hex.EncodeToString(newNonce())
	if len(uris) > 0 {
		// The downstreams are told when the stream ends, whatever ended
		// it: after the stream is given back (deferred calls run last
		// first), for the unsubscribes may each wait for a slot.
		defer x.s.g.Unsubscribed(context.WithoutCancel(x.r.Context()), key)
	}
	ch := x.s.sessions.stream(key, principalKey(x.p))
	if ch == nil {
		writeError(w, http.StatusTooManyRequests, jsonrpc.NewError(m.ID, gateway.CodeTooManyRequests,
			"Too many requests: too many open streams"), false)
		return
	}
	defer x.s.sessions.unstream(key, ch)
	// The stream ends, as at shutdown, when the credential that opened it
	// expires: every request with it is refused from then on, and so is
	// hearing more of what it was allowed to follow. A credential that
	// does not expire leaves expired nil, which never fires.
	var expired <-chan time.Time
	if !x.p.Expires.IsZero() {
		t := time.NewTimer(time.Until(x.p.Expires))
		defer t.Stop()
		expired = t.C
	}
	seen := x.s.newSeen(x.p)
	var followed []string
	if len(uris) > 0 {
		followed = x.s.g.SubscribeAll(x.r.Context(), gateway.SubscribeRequest{Subscriber: key, RequestID: x.rid,
			Principal: x.p, Method: "subscriptions/listen"}, uris)
	}
	ev := startEvents(w)
	ev.send(mcp.SubscriptionAcknowledged(m.ID, want, followed))
	for {
		select {
		case _, ok := <-ch.wake:
			if !ok {
				ev.send(mcp.SubscriptionComplete(m.ID))
				return
			}
			what := seen.visible(ch.take())
			if want.Tools && what&changedTools != 0 {
				ev.send(mcp.SubscriptionListChanged(m.ID, "notifications/tools/list_changed"))
			}
			if want.Prompts && what&changedPrompts != 0 {
				ev.send(mcp.SubscriptionListChanged(m.ID, "notifications/prompts/list_changed"))
			}
			if want.Resources && what&changedResources != 0 {
				ev.send(mcp.SubscriptionListChanged(m.ID, "notifications/resources/list_changed"))
			}
			for _, uri := range ch.takeUpdated() {
				ev.send(mcp.SubscriptionResourceUpdated(m.ID, uri))
			}
		case <-x.s.stopping:
			ev.send(mcp.SubscriptionComplete(m.ID))
			return
		case <-expired:
			ev.send(mcp.SubscriptionComplete(m.ID))
			return
		case <-x.r.Context().Done():
			return
		}
	}
}

// listenPrefix begins the subscriber name of a subscriptions/listen
// stream, which no session nonce does.
const listenPrefix = "listen-"

// events writes an SSE answer.
type events struct {
	w  http.ResponseWriter
	fl http.Flusher
}

func startEvents(w http.ResponseWriter) events {
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if fl != nil {
		fl.Flush()
	}
	return events{w: w, fl: fl}
}

// send writes msg as one event. An SSE data line ends at a CR or an LF
// (WHATWG), and either is whitespace in JSON, so msg is sent compact: a
// message with a raw CR or LF is compacted, and one that is not valid
// JSON is not sent at all (every source builds valid JSON; a cut message
// would reach the client as a different one).
func (e events) send(msg []byte) {
	if bytes.ContainsAny(msg, "\r\n") {
		v := jsontext.Value(bytes.Clone(msg))
		if v.Compact() != nil {
			return
		}
		msg = v
	}
	fmt.Fprintf(e.w, "event: message\ndata: %s\n\n", msg)
	if e.fl != nil {
		e.fl.Flush()
	}
}

// sessionVersionHeader checks a GET's or a DELETE's MCP-Protocol-Version
// as a session's POST is checked: at most once, and a session-era
// version when present; and its Mcp-Session-Id at most once. It answers
// 400 and reports false otherwise.
func sessionVersionHeader(w http.ResponseWriter, r *http.Request) bool {
	vs := r.Header.Values(hdrProtocolVersion)
	if len(vs) > 1 || (len(vs) == 1 && !mcp.IsLegacy(vs[0])) {
		http.Error(w, "Bad Request: MCP-Protocol-Version must name one session-era protocol version", http.StatusBadRequest)
		return false
	}
	if len(r.Header.Values(hdrSessionID)) > 1 {
		http.Error(w, "Bad Request: Mcp-Session-Id is given more than once", http.StatusBadRequest)
		return false
	}
	return true
}

// delete ends a legacy session.
func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	p, ok := s.principal(w, r)
	if !ok {
		return
	}
	if s.pastRate(w, p) {
		return
	}
	if !sessionVersionHeader(w, r) {
		return
	}
	sess, err := s.sessions.open(r.Header.Get(hdrSessionID), ownerOf(p.Issuer, p.Subject))
	switch {
	case errors.Is(err, errNoSession):
		http.Error(w, "Bad Request: Mcp-Session-Id is required", http.StatusBadRequest)
		return
	case err != nil:
		http.Error(w, "Not Found: the session does not exist or has ended", http.StatusNotFound)
		return
	}
	if !s.sessions.revoke(r.Context(), sess, ownerOf(p.Issuer, p.Subject)) {
		s.log.Warn("a session could not be ended: too many sessions were ended within their lifetime, or the ledger could not record it")
		http.Error(w, "Service Unavailable: the session cannot be ended now; it ends when it expires", http.StatusServiceUnavailable)
		return
	}
	s.g.Unsubscribed(r.Context(), sess.nonce)
	w.WriteHeader(http.StatusNoContent)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// knownMethods are the method labels of the metrics and the audit: the
// methods the front answers. Any other method is "(other)", so that
// callers can neither grow the label set nor write their own text into
// the decision log.
var knownMethods = map[string]bool{
	"initialize": true, "ping": true, "server/discover": true, "tools/list": true, "tools/call": true,
	"prompts/list": true, "prompts/get": true, "resources/list": true, "resources/templates/list": true,
	"resources/read": true, "resources/subscribe": true, "resources/unsubscribe": true,
	"completion/complete": true, "logging/setLevel": true,
	"subscriptions/listen": true, "notifications/initialized": true, "notifications/cancelled": true,
}

// label is method as the metrics and the audit name it.
func label(method string) string {
	if knownMethods[method] {
		return method
	}
	return "(other)"
}

func methodLabel(f jsonrpc.Frame) string {
	switch {
	case f.Batch:
		return "(batch)"
	case len(f.Items) != 1 || f.Items[0].Msg == nil:
		return "(invalid)"
	case f.Items[0].Msg.Kind == jsonrpc.KindResponse:
		return "(response)"
	}
	return label(f.Items[0].Msg.Method)
}

// statusWriter remembers the status an answer was given.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets an SSE answer through the wrapper.
func (w *statusWriter) Flush() {
	if fl, ok := w.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

// Unwrap is for http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// requestID returns a fresh correlation id for one request's log lines.
func requestID() string { return gateway.NewRequestID() }
