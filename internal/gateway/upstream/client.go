// Package upstream connects the gateway to its downstream MCP servers. It is
// an MCP client built on the project's own codec (wire, jsonrpc), not a
// third-party SDK, because the gateway must keep every descriptor's raw
// JSON: the digest, the schema walk and the review diff must see exactly
// what the downstream sent.
//
// A [Client] speaks the protocol on one connection: it negotiates the
// version (server/discover first, initialize if that fails), mints its own
// request ids and multiplexes every caller's calls on them, matches
// responses (dropping duplicate, late and misaddressed ones), translates
// progress tokens, and answers the downstream's own requests. A transport
// carries the bytes: a child process over stdio ([StdioServer]) or a
// Streamable HTTP endpoint ([HTTPServer]); each keeps a Client and replaces
// it when the connection is lost.
package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/jsonrpc"
	"github.com/mcp-bastion/bastion/internal/mcp"
)

// Errors of a call that got no answer from the downstream.
var (
	// ErrUnavailable: the downstream is not connected (starting, failed,
	// restarting, or shut down).
	ErrUnavailable = errors.New("upstream: the downstream server is not available")
	// ErrConnectionLost: the connection ended while the call was in
	// flight (the process died, the stream broke).
	ErrConnectionLost = errors.New("upstream: the connection to the downstream server was lost")
	// ErrClosed: the gateway is shutting the downstream down.
	ErrClosed = errors.New("upstream: closed")
	// ErrMalformed: the downstream's answer to the call could not be
	// read as one (over HTTP, the response to the call's POST: a 202, or
	// a body that is not the call's JSON-RPC response).
	ErrMalformed = errors.New("upstream: the downstream's answer could not be read")
)

// RPCError is a JSON-RPC error the downstream answered with.
type RPCError struct {
	Code    int
	Message string
	Data    jsontext.Value
}

func (e *RPCError) Error() string {
	return "upstream: downstream error " + strconv.Itoa(e.Code) + ": " + e.Message
}

// Info is what the handshake learnt of the downstream.
type Info struct {
	// Version is the negotiated protocol version.
	Version string
	// Modern reports the 2026-07-28 stateless era.
	Modern bool
	// ServerInfo is the raw serverInfo object (name, version, …).
	ServerInfo jsontext.Value
	// Capabilities is the raw capabilities object.
	Capabilities jsontext.Value
	// Instructions, when the server gave them.
	Instructions string
}

// Name and version are the serverInfo name and version, as far as they
// are strings.
func (i Info) Name() (name, version string) {
	var si struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	_ = json.Unmarshal(i.ServerInfo, &si)
	return si.Name, si.Version
}

// Notification is a notification the downstream sent that is not tied to
// a call: notifications/tools/list_changed, notifications/message, ….
type Notification struct {
	Method string
	Params jsontext.Value
}

// Stats count what the client dropped.
type Stats struct {
	Garbage    atomic.Int64 // lines that were not JSON-RPC messages
	Oversized  atomic.Int64 // messages over the size cap
	Unexpected atomic.Int64 // responses to no call in flight: late, duplicate or misaddressed
	Dropped    atomic.Int64 // progress and log messages for a caller whose queue was full
	Refused    atomic.Int64 // requests of the server past the bound of one call's requests in flight

	noise noise // the warnings about what the server sends, bounded
}

// outgoing is one message for a transport to carry.
type outgoing struct {
	msg []byte
	// method and name are what 2026-07-28 HTTP requests repeat in the
	// Mcp-Method and Mcp-Name headers.
	method, name string
	// id is the request id, or 0 for a notification or a response.
	id int64
	// identity is the caller's, for an HTTP downstream's identity
	// headers; nil for the gateway's own requests.
	identity *Identity
	// params are the Mcp-Param-* headers of a 2026-07-28 tools/call.
	params []Param
}

// Param is one Mcp-Param-<Name> header, its value already encoded.
type Param struct {
	Name, Value string
}

// Identity is who a call is made for, as an HTTP downstream is told in
// the X-MCP-Gateway-* headers.
type Identity struct {
	Subject string
	// Issuer is who vouched for Subject: subjects are only unique per
	// issuer, so a downstream that acts on the subject needs both.
	Issuer    string
	Roles     []string
	RequestID string
}

// transport carries one connection's messages.
type transport interface {
	// send delivers one message. For HTTP, the reply (and whatever the
	// server streams with it) is handed to the client's deliver before
	// send returns.
	send(ctx context.Context, out outgoing) error
}

// CallOptions configure one call.
type CallOptions struct {
	// Progress, when set, receives each notifications/progress of this
	// call, with its params' progressToken replaced by ProgressToken.
	Progress func(params jsontext.Value)
	// ProgressToken is the caller's own token (a JSON string or integer).
	ProgressToken jsontext.Value
	// Name is the tools/call name, for the Mcp-Name header.
	Name string
	// Identity, when set, is sent to an HTTP downstream.
	Identity *Identity
	// Params are sent as Mcp-Param-* headers to a 2026-07-28 HTTP
	// downstream.
	Params []Param
	// Requests, when set, answers the server-to-client requests
	// (sampling/createMessage, elicitation/create, roots/list) the
	// downstream sends for this call (docs/gateway-surface.md decision
	// 24): on an HTTP downstream, those on the call's own response
	// stream; on stdio, which ties no message to a call, those sent while
	// this call is the only one in flight on the connection. It runs on
	// its own goroutine, with the call's context.
	Requests func(ctx context.Context, method string, params jsontext.Value) (jsontext.Value, *jsonrpc.Error)
	// Messages, when set, receives the params of each
	// notifications/message the downstream sends for this call, as
	// Requests says (decision 23).
	Messages func(params jsontext.Value)
	// ClientCapabilities, when set, is what a 2026-07-28 request
	// declares in _meta as its client's capabilities: those the gateway
	// can ask its caller for (an input_required round). Unset, it
	// declares none.
	ClientCapabilities jsontext.Value
	// Current, when set, is asked once the connection the request will
	// go to is chosen and before the request is sent; an error fails the
	// request unsent. A connection is chosen only after its owner heard
	// of it (OnConnect), so Current reads what the owner judged of the
	// server the request would reach (that its pin still holds).
	Current func() error
}

// Relayed server-to-client requests.
var relayedRequests = []string{"sampling/createMessage", "elicitation/create", "roots/list"}

// Client speaks MCP to one downstream connection. It is safe for
// concurrent use. A Client is dead once its connection is: [Client.Fail]
// fails every call in flight, and a transport makes a new one.
type Client struct {
	server     string // the configured server name, for logs
	legacyOnly bool   // initialize without trying server/discover
	t          transport
	log        *slog.Logger
	stats      *Stats
	notify     func(Notification)

	info atomic.Pointer[Info]
	// subscribed counts the pending subscriptions/listen requests, which
	// are streams rather than calls in flight.
	subscribed atomic.Int64
	// streaming is closed once the notification stream is open.
	streaming  chan struct{}
	streamOnce sync.Once

	mu      sync.Mutex
	nextID  int64
	pending map[int64]*pendingCall
	dead    error // set once; every later call fails with it
}

type pendingCall struct {
	done     chan reply
	progress func(jsontext.Value)
	token    jsontext.Value // the caller's progress token
	// method is the request's; ctx its context; requests and messages
	// its CallOptions'.
	method   string
	ctx      context.Context
	requests func(ctx context.Context, method string, params jsontext.Value) (jsontext.Value, *jsonrpc.Error)
	messages func(jsontext.Value)
	// relay hands progress and messages to the caller, nil when the call
	// takes neither.
	relay *relay
	// asking counts the server's requests of this call being relayed;
	// flooded is set once the call went past maxAsksPerCall.
	asking  atomic.Int32
	flooded atomic.Bool
}

// maxAsksPerCall bounds the server's requests of one call that are
// relayed at once (each waits on a goroutine for the caller's answer):
// past it a request is refused at once, on the goroutine that reads the
// server, so that a server flooding requests slows only itself.
const maxAsksPerCall = 16

// relayQueueLen and relayQueueBytes bound the progress notifications and
// log messages that wait for one call's caller, by number and by their
// params' bytes: a downstream may send messages up to
// limits.downstream_message each, and a count alone would let one call
// hold hundreds of them. A queue with nothing waiting takes one message
// of any size.
const (
	relayQueueLen   = 256
	relayQueueBytes = 1 << 20
)

// relay hands one call's progress and log messages to its caller on a
// goroutine of its own, through a bounded queue: the goroutine that reads
// the downstream, which every call on the connection shares, never waits
// for a caller (a client that stops reading its event stream would stall
// them all). Past the bound they are dropped.
type relay struct {
	ch   chan queued
	stop chan struct{}
	done chan struct{}
	// bytes is what the queue holds, the message being handed over
	// included.
	bytes atomic.Int64
	// over is set when the call has returned: nothing queued runs after,
	// and what is skipped is counted in dropped.
	over    atomic.Bool
	dropped *atomic.Int64
}

// relayDrain bounds how long a call that was answered waits for its
// caller to take what is queued: a caller that stops reading must not
// hold the call, and its in-flight slot at the downstream, until the
// call's deadline.
const relayDrain = 500 * time.Millisecond

// queued is one message waiting for its caller: what hands it over, and
// its size.
type queued struct {
	f func()
	n int64
}

func startRelay(dropped *atomic.Int64) *relay {
	r := &relay{ch: make(chan queued, relayQueueLen), stop: make(chan struct{}), done: make(chan struct{}), dropped: dropped}
	go r.run()
	return r
}

func (r *relay) run() {
	defer close(r.done)
	for {
		select {
		case q := <-r.ch:
			r.run1(q)
		case <-r.stop:
			for { // what came before the call ended goes first
				select {
				case q := <-r.ch:
					r.run1(q)
				default:
					return
				}
			}
		}
	}
}

// run1 hands q over, unless the call has returned.
func (r *relay) run1(q queued) {
	defer r.bytes.Add(-q.n)
	if r.over.Load() {
		r.dropped.Add(1)
		return
	}
	q.f()
}

// post queues f, which hands over a message of n bytes, without waiting;
// false when the queue is full by number or by bytes.
func (r *relay) post(n int64, f func()) bool {
	if held := r.bytes.Add(n); held != n && held > relayQueueBytes {
		r.bytes.Add(-n)
		return false
	}
	select {
	case r.ch <- queued{f: f, n: n}:
		return true
	default:
		r.bytes.Add(-n)
		return false
	}
}

// finish hands the caller what is queued, so that it precedes the call's
// answer, and ends the goroutine. It waits at most until ctx ends or
// relayDrain has passed; what is still queued then is dropped, and
// nothing reaches the caller after finish returns but a callback already
// running.
func (r *relay) finish(ctx context.Context) {
	close(r.stop)
	t := time.NewTimer(relayDrain)
	defer t.Stop()
	select {
	case <-r.done:
	case <-ctx.Done():
	case <-t.C:
	}
	r.over.Store(true)
}

// toCaller queues f, which hands a message of n bytes to p's caller,
// counting and logging what is dropped.
func (c *Client) toCaller(p *pendingCall, what string, n int, f func()) {
	if !p.relay.post(int64(n), f) {
		c.stats.Dropped.Add(1)
		c.log.Debug("dropped a downstream message for a caller that is not reading", slog.String("what", what))
	}
}

type reply struct {
	result jsontext.Value
	err    error
}

// newClient returns a client for one connection on t.
func newClient(server string, t transport, log *slog.Logger, stats *Stats, notify func(Notification)) *Client {
	return &Client{server: server, t: t, log: log, stats: stats, notify: notify, pending: map[int64]*pendingCall{}, streaming: make(chan struct{})}
}

// Legacy makes the client's handshake skip server/discover and
// initialize at once (servers[].protocol: legacy): a session-era
// downstream can send server-to-client requests and log messages during
// a call, which a 2026-07-28 one cannot.
func (c *Client) Legacy() *Client {
	c.legacyOnly = true
	return c
}

// Info returns what the handshake learnt; ok is false before it completed.
func (c *Client) Info() (Info, bool) {
	i := c.info.Load()
	if i == nil {
		return Info{}, false
	}
	return *i, true
}

// clientInfo is how the gateway introduces itself to downstreams.
var clientInfo = jsontext.Value(`{"name":"mcp-bastion-gateway","version":"0.1.0"}`)

// handshake negotiates the protocol: server/discover (2026-07-28), and
// when the server answers that with an error, initialize with the latest
// legacy version followed by notifications/initialized (at once, for a
// client made Legacy).
func (c *Client) handshake(ctx context.Context) error {
	if !c.legacyOnly {
		if modern, err := c.discover(ctx); modern || err != nil {
			return err
		}
	}
	return c.initialize(ctx)
}

// discover tries the 2026-07-28 handshake: modern when the server speaks
// it; an error only when the exchange failed otherwise than with a
// JSON-RPC error (which means: initialize instead).
func (c *Client) discover(ctx context.Context) (modern bool, _ error) {
	// server/discover carries nothing but _meta.
	res, err := c.roundTrip(ctx, "server/discover", nil, modernMeta(nil), CallOptions{})
	var rpcErr *RPCError
	switch {
	case err == nil:
		var d struct {
			SupportedVersions []string       `json:"supportedVersions"`
			Capabilities      jsontext.Value `json:"capabilities"`
			Instructions      string         `json:"instructions"`
			Meta              struct {
				ServerInfo jsontext.Value `json:"io.modelcontextprotocol/serverInfo"`
			} `json:"_meta"`
		}
		if err := json.Unmarshal(res, &d); err != nil {
			return false, fmt.Errorf("upstream: server/discover result: %w", err)
		}
		supported := false
		for _, v := range d.SupportedVersions {
			supported = supported || v == mcp.V20260728
		}
		if supported {
			c.info.Store(&Info{Version: mcp.V20260728, Modern: true, ServerInfo: d.Meta.ServerInfo,
				Capabilities: d.Capabilities, Instructions: d.Instructions})
			return true, nil
		}
	case !errors.As(err, &rpcErr):
		return false, err
	}
	return false, nil
}

// initialize is the session-era handshake at the latest legacy version.
func (c *Client) initialize(ctx context.Context) error {
	// The gateway can relay sampling (with tools and context),
	// elicitation (forms and URLs) and roots requests to a caller that
	// declared what each uses; for one that did not, the downstream's
	// request is answered with an error (decision 24).
	params := fmt.Appendf(nil, `{"protocolVersion":%q,"capabilities":{"sampling":{"context":{},"tools":{}},"elicitation":{"form":{},"url":{}},"roots":{}},"clientInfo":%s}`, mcp.LatestLegacy, clientInfo)
	res, err := c.roundTrip(ctx, "initialize", params, nil, CallOptions{})
	if err != nil {
		return fmt.Errorf("upstream: initialize: %w", err)
	}
	var init struct {
		ProtocolVersion string         `json:"protocolVersion"`
		Capabilities    jsontext.Value `json:"capabilities"`
		ServerInfo      jsontext.Value `json:"serverInfo"`
		Instructions    string         `json:"instructions"`
	}
	if err := json.Unmarshal(res, &init); err != nil {
		return fmt.Errorf("upstream: initialize result: %w", err)
	}
	if !mcp.IsLegacy(init.ProtocolVersion) {
		return fmt.Errorf("upstream: the server answered initialize with protocol version %s, which the gateway does not speak",
			strconv.Quote(truncate(init.ProtocolVersion, 64)))
	}
	c.info.Store(&Info{Version: init.ProtocolVersion, ServerInfo: init.ServerInfo,
		Capabilities: init.Capabilities, Instructions: init.Instructions})
	return c.Notify(ctx, "notifications/initialized", nil)
}

// modernMeta is what every 2026-07-28 request carries in params._meta:
// the version and the client's capabilities are required on each request,
// since the era keeps no session; clientInfo is recommended. The
// capabilities are caps, or none when caps is nil.
func modernMeta(caps jsontext.Value) map[string]jsontext.Value {
	if caps == nil {
		caps = jsontext.Value(`{}`)
	}
	return map[string]jsontext.Value{
		mcp.MetaProtocolVersion:                      quote(mcp.V20260728),
		"io.modelcontextprotocol/clientInfo":         jsontext.Value(clientInfo),
		"io.modelcontextprotocol/clientCapabilities": caps,
	}
}

// Call sends a request and waits for its response. params is a JSON object
// or nil. In the 2026-07-28 era the request carries the protocol version in
// params._meta. When ctx ends first, the downstream is sent
// notifications/cancelled for the request and Call returns ctx's cause.
// A JSON-RPC error answer is an *RPCError.
func (c *Client) Call(ctx context.Context, method string, params []byte, opts CallOptions) (jsontext.Value, error) {
	info, ok := c.Info()
	if !ok {
		return nil, ErrUnavailable
	}
	var meta map[string]jsontext.Value
	if info.Modern {
		meta = modernMeta(opts.ClientCapabilities)
	}
	return c.roundTrip(ctx, method, params, meta, opts)
}

// roundTrip sends one request with a minted id and waits for its answer.
// meta (nil for none) is set in params._meta, with the gateway's progress
// token when the caller asked for progress.
func (c *Client) roundTrip(ctx context.Context, method string, params []byte, meta map[string]jsontext.Value, opts CallOptions) (jsontext.Value, error) {
	c.mu.Lock()
	if c.dead != nil {
		c.mu.Unlock()
		return nil, c.dead
	}
	c.nextID++
	id := c.nextID
	p := &pendingCall{done: make(chan reply, 1), progress: opts.Progress, token: opts.ProgressToken,
		method: method, ctx: ctx, requests: opts.Requests, messages: opts.Messages}
	if opts.Progress != nil || opts.Messages != nil {
		p.relay = startRelay(&c.stats.Dropped)
		defer p.relay.finish(ctx)
	}
	c.pending[id] = p
	c.mu.Unlock()

	if opts.Progress != nil {
		if meta == nil {
			meta = map[string]jsontext.Value{}
		}
		meta["progressToken"] = quote(progressToken(id))
	}
	if meta != nil {
		var err error
		if params, err = withMeta(params, meta); err != nil {
			c.forget(id)
			return nil, err
		}
	}
	msg := []byte(`{"jsonrpc":"2.0","id":`)
	msg = strconv.AppendInt(msg, id, 10)
	msg = append(msg, `,"method":`...)
	msg, _ = jsontext.AppendQuote(msg, method)
	if params != nil {
		msg = append(msg, `,"params":`...)
		msg = append(msg, params...)
	}
	msg = append(msg, '}')
	out := outgoing{msg: msg, method: method, name: opts.Name, id: id, identity: opts.Identity, params: opts.Params}

	// A transport whose send returns only once the answer is delivered
	// (HTTP: the response carries it) is called on this goroutine, which
	// saves a goroutine and a hand-off per call; its send ends with ctx.
	if _, ok := c.t.(answersInSend); ok {
		if err := c.t.send(ctx, out); err != nil {
			if ctx.Err() != nil {
				return nil, c.abandon(ctx, id)
			}
			c.forget(id)
			return nil, err
		}
		select {
		case r := <-p.done:
			return r.result, r.err
		case <-ctx.Done():
			return nil, c.abandon(ctx, id)
		}
	}
	sendErr := make(chan error, 1)
	go func() { sendErr <- c.t.send(ctx, out) }()
	for {
		select {
		case r := <-p.done:
			return r.result, r.err
		case err := <-sendErr:
			if err != nil {
				c.forget(id)
				if ctx.Err() != nil {
					return nil, context.Cause(ctx)
				}
				return nil, err
			}
			sendErr = nil // sent; keep waiting for the answer
		case <-ctx.Done():
			return nil, c.abandon(ctx, id)
		}
	}
}

// answersInSend marks a transport whose send returns after the answer to
// the request it carried has been delivered, or failed.
type answersInSend interface{ answersInSend() }

// abandon gives up on request id because ctx ended: the downstream is
// told, unless the answer came first. It returns ctx's cause.
func (c *Client) abandon(ctx context.Context, id int64) error {
	if c.forget(id) {
		c.cancel(id)
	}
	return context.Cause(ctx)
}

// cancel tells the downstream that the gateway gave up on request id.
func (c *Client) cancel(id int64) {
	ctx, stop := context.WithTimeout(context.Background(), cancelSendTimeout)
	defer stop()
	params := fmt.Appendf(nil, `{"requestId":%d,"reason":"cancelled by the gateway's caller"}`, id)
	if info, ok := c.Info(); ok && info.Modern {
		params, _ = withMeta(params, modernMeta(nil))
	}
	if err := c.Notify(ctx, "notifications/cancelled", params); err != nil {
		c.log.Debug("cancellation not sent", slog.String("error", err.Error()))
	}
}

// Notify sends a notification.
func (c *Client) Notify(ctx context.Context, method string, params []byte) error {
	c.mu.Lock()
	dead := c.dead
	c.mu.Unlock()
	if dead != nil {
		return dead
	}
	msg := []byte(`{"jsonrpc":"2.0","method":`)
	msg, _ = jsontext.AppendQuote(msg, method)
	if params != nil {
		msg = append(msg, `,"params":`...)
		msg = append(msg, params...)
	}
	msg = append(msg, '}')
	return c.t.send(ctx, outgoing{msg: msg, method: method})
}

// forget removes a pending call and reports whether it was still pending.
func (c *Client) forget(id int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.pending[id]
	delete(c.pending, id)
	return ok
}

// Fail ends the client: every call in flight and every later one fails
// with err.
func (c *Client) Fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead == nil {
		c.dead = err
	}
	for id, p := range c.pending {
		p.done <- reply{err: err}
		delete(c.pending, id)
	}
}

// InFlight returns the number of calls waiting for an answer.
func (c *Client) InFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return max(0, len(c.pending)-int(c.subscribed.Load()))
}

// oneCall is the stream of a connection that does not say which call a
// message belongs to (stdio): a server's request or log message is the
// one call's in flight, when there is exactly one.
const oneCall int64 = -1

// deliver handles one frame read from a connection that does not tie its
// messages to calls (stdio); see deliverOn.
func (c *Client) deliver(frame []byte) { c.deliverOn(frame, oneCall) }

// deliverOn handles one frame read from the downstream on stream: the
// id of the call whose response stream carried it (HTTP), 0 for a stream
// tied to no call (an HTTP GET stream, the answer to a notification), or
// oneCall. Nothing a downstream sends can fail the client: what is not a
// well-formed message is counted, logged and dropped.
func (c *Client) deliverOn(frame []byte, stream int64) {
	// Results are read as raw values: each reader parses its own strictly
	// (see jsonrpc.DecodeFrameResults).
	f := jsonrpc.DecodeFrameResults(frame)
	for _, it := range f.Items {
		if it.Err != nil {
			c.stats.Garbage.Add(1)
			c.stats.noise.warn(c.log, "downstream sent something that is not a JSON-RPC message", slog.String("reason", truncate(it.Err.Message, 120)))
			if id, ok := unreadableResponseID(frame); ok && !f.Batch {
				// Its call will get no other answer: it fails now, not
				// at its deadline (a list, at the list's).
				c.fail(id, ErrMalformed)
			}
			continue
		}
		switch m := it.Msg; m.Kind {
		case jsonrpc.KindResponse:
			c.response(m)
		case jsonrpc.KindNotification:
			c.notification(m, stream)
		case jsonrpc.KindRequest:
			c.request(m, stream)
		}
	}
}

// unreadableResponseID is the id of a frame the strict reader refused
// (invalid UTF-8, a repeated member name, nesting too deep, an envelope
// out of shape) that still says whose answer it is: one JSON object, read
// leniently, with one integer "id" member and no "method".
func unreadableResponseID(frame []byte) (int64, bool) {
	d := jsontext.NewDecoder(bytes.NewReader(frame), jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '{' {
		return 0, false
	}
	var (
		id    int64
		ids   int
		valid bool
	)
	for d.PeekKind() != '}' {
		tok, err := d.ReadToken()
		if err != nil {
			return 0, false
		}
		name := tok.String() // before the next read, which voids tok
		v, err := d.ReadValue()
		if err != nil {
			return 0, false
		}
		switch name {
		case "method":
			return 0, false
		case "id":
			ids++
			parsed, ok := jsonrpc.ParseID(v)
			id, valid = parsed.Int()
			valid = valid && ok
		}
	}
	if _, err := d.ReadToken(); err != nil {
		return 0, false
	}
	return id, ids == 1 && valid
}

func (c *Client) response(m *jsonrpc.Message) {
	id, ok := m.ID.Int()
	var p *pendingCall
	if ok {
		c.mu.Lock()
		p = c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
	}
	if p == nil {
		c.stats.Unexpected.Add(1)
		c.log.Debug("dropped a response to no call in flight", slog.String("id", m.ID.String()))
		return
	}
	if m.Error != nil {
		var e struct {
			Code    *int           `json:"code"`
			Message *string        `json:"message"`
			Data    jsontext.Value `json:"data"`
		}
		if err := json.Unmarshal(m.Error, &e); err != nil || e.Code == nil || e.Message == nil {
			p.done <- reply{err: &RPCError{Code: jsonrpc.CodeInternalError, Message: "malformed error response"}}
			return
		}
		p.done <- reply{err: &RPCError{Code: *e.Code, Message: *e.Message, Data: e.Data}}
		return
	}
	if len(m.Result) == 0 || m.Result[0] != '{' {
		p.done <- reply{err: &RPCError{Code: jsonrpc.CodeInternalError, Message: "the result is not a JSON object"}}
		return
	}
	p.done <- reply{result: m.Result}
}

// fail answers the call id, if it is still waiting, with err, as a
// response with that id would.
func (c *Client) fail(id int64, err error) {
	c.mu.Lock()
	p := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if p != nil {
		p.done <- reply{err: err}
	}
}

func (c *Client) notification(m *jsonrpc.Message, stream int64) {
	if m.Method == "notifications/progress" {
		tok, _ := progressTokenOf(m.Params)
		id, ok := parseProgressToken(tok)
		if !ok {
			return
		}
		c.mu.Lock()
		p := c.pending[id]
		c.mu.Unlock()
		if p == nil || p.progress == nil {
			return // a call that ended, or never asked for progress
		}
		params, err := replaceProgressToken(m.Params, p.token)
		if err == nil {
			c.toCaller(p, "progress", len(params), func() { p.progress(params) })
		}
		return
	}
	if m.Method == "notifications/subscriptions/acknowledged" {
		c.streamOpen()
		return
	}
	if m.Method == "notifications/message" {
		if p := c.caller(stream); p != nil && p.messages != nil {
			params := m.Params
			c.toCaller(p, "log message", len(params), func() { p.messages(params) })
		}
	}
	if c.notify != nil {
		c.notify(Notification{Method: m.Method, Params: m.Params})
	}
}

// caller is the call a server's request or log message that came on
// stream belongs to (decisions 23 and 24): on stdio the one call in
// flight; on HTTP the call whose response stream carried it, and none
// for a stream tied to no call (the GET stream), whatever is in flight.
func (c *Client) caller(stream int64) *pendingCall {
	if stream == oneCall {
		return c.onlyCall()
	}
	if stream <= 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pending[stream]
}

// onlyCall is the one call in flight on the connection, not counting
// the subscriptions/listen requests, which are streams; nil when there
// is none or more than one.
func (c *Client) onlyCall() *pendingCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	var only *pendingCall
	for _, p := range c.pending {
		if p.method == "subscriptions/listen" {
			continue
		}
		if only != nil {
			return nil
		}
		only = p
	}
	return only
}

// request answers the downstream's own requests: ping; a relayed
// request (decision 24) through the call it belongs to (see caller),
// when its caller can answer; an error for everything else.
func (c *Client) request(m *jsonrpc.Message, stream int64) {
	answer := func(out []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), cancelSendTimeout)
		defer cancel()
		if err := c.t.send(ctx, outgoing{msg: out}); err != nil {
			c.log.Debug("answer to a downstream request not sent", slog.String("error", err.Error()))
		}
	}
	if m.Method == "ping" {
		answer(jsonrpc.AppendResult(nil, m.ID, []byte("{}")))
		return
	}
	if !slices.Contains(relayedRequests, m.Method) {
		answer(jsonrpc.AppendError(nil, jsonrpc.NewError(m.ID, jsonrpc.CodeMethodNotFound,
			"Method not found: the gateway relays no such request from servers")))
		return
	}
	p := c.caller(stream)
	if p == nil || p.requests == nil {
		why := "Method not found: the gateway relays a server's request only while exactly one call is in flight to it, for a caller that can answer it"
		if stream != oneCall {
			why = "Method not found: the gateway relays a server's request only on the response stream of the call it serves, for a caller that can answer it"
		}
		answer(jsonrpc.AppendError(nil, jsonrpc.NewError(m.ID, jsonrpc.CodeMethodNotFound, why)))
		return
	}
	id, params := m.ID, m.Params
	if p.asking.Add(1) > maxAsksPerCall {
		p.asking.Add(-1)
		c.stats.Refused.Add(1)
		if p.flooded.CompareAndSwap(false, true) {
			c.log.Warn("downstream sent more requests in one call than the gateway relays at once; refusing the rest",
				slog.Int("max_in_flight", maxAsksPerCall))
		}
		answer(jsonrpc.AppendError(nil, jsonrpc.NewError(id, jsonrpc.CodeInternalError,
			"Internal error: too many requests of one call in flight to its client")))
		return
	}
	go func() {
		defer p.asking.Add(-1)
		res, rerr := p.requests(p.ctx, m.Method, params)
		if rerr != nil {
			e := *rerr
			e.ID = id
			answer(jsonrpc.AppendError(nil, &e))
			return
		}
		// The caller's answer is a peer's bytes: compacted, so that no
		// whitespace of its own reaches the downstream's framing.
		res = bytes.Clone(res)
		if err := (*jsontext.Value)(&res).Compact(); err != nil || res.Kind() != '{' {
			answer(jsonrpc.AppendError(nil, jsonrpc.NewError(id, jsonrpc.CodeInternalError, "Internal error: the client's answer is not a JSON object")))
			return
		}
		answer(jsonrpc.AppendResult(nil, id, res))
	}()
}

// progressToken is the gateway's token for request id.
func progressToken(id int64) string { return "gw-" + strconv.FormatInt(id, 10) }

func parseProgressToken(tok string) (int64, bool) {
	if len(tok) < 4 || tok[:3] != "gw-" {
		return 0, false
	}
	n, err := strconv.ParseInt(tok[3:], 10, 64)
	return n, err == nil
}

func progressTokenOf(params []byte) (string, bool) {
	var p struct {
		Token jsontext.Value `json:"progressToken"`
	}
	if params == nil || json.Unmarshal(params, &p) != nil {
		return "", false
	}
	var s string
	if json.Unmarshal(p.Token, &s) != nil {
		return "", false
	}
	return s, true
}

// replaceProgressToken returns progress params with the caller's token.
func replaceProgressToken(params []byte, token jsontext.Value) (jsontext.Value, error) {
	members, err := objectMembers(params)
	if err != nil {
		return nil, err
	}
	for i := range members {
		if members[i].name == "progressToken" {
			members[i].value = token
		}
	}
	return encodeObject(members), nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
