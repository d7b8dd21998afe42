package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/mcp"
)

// HTTPOptions configure a Streamable HTTP downstream.
type HTTPOptions struct {
	// Legacy skips server/discover: the session era only.
	Legacy bool
	Name   string
	// URL is the MCP endpoint.
	URL string
	// Headers are added to every request: the gateway's own credentials
	// for the server.
	Headers map[string]string
	// MaxMessage caps a response body or one SSE event.
	MaxMessage int64
	Logger     *slog.Logger
	OnNotify   func(Notification)
	OnState    func(State, *Client)
	// OnConnect is handed each new connection's client after its
	// handshake and before any call can use it (calls fail as the server
	// being unavailable until it returns).
	OnConnect func(*Client)
	// Client, when set, replaces the HTTP client (tests); it must not
	// follow redirects. Calls go to its Transport directly, so its
	// Timeout, Jar and CheckRedirect do not apply to them (the gateway
	// sets none of these, and a configured URL carries no credentials).
	Client *http.Client
}

// ErrRefused: the server answered with a redirect, 401 or 403: the
// gateway follows no redirect and does no OAuth discovery, so a
// downstream cannot point it elsewhere.
var ErrRefused = errors.New("upstream: the downstream refused the request (redirect, 401 or 403)")

// errSessionGone is a 404 to a request carrying a session id: the server
// forgot the session, and the gateway initializes again.
var errSessionGone = errors.New("upstream: the downstream's session expired")

// HTTPServer is a Streamable HTTP downstream. It handshakes in the
// background until it succeeds, and again when the server forgets the
// session (404). Its goroutines are waited for by Close.
type HTTPServer struct {
	opts HTTPOptions
	log  *slog.Logger
	http *http.Client
	// rt is http's transport, which a call's POST goes to directly: a
	// redirect is refused, not followed, and no cookie is kept, so the
	// client's redirect machinery would only copy every call's headers.
	rt http.RoundTripper
	// fixed are the configured headers, their names canonical, as every
	// request carries them.
	fixed http.Header
	conn

	sessionID string // under mu

	expired chan struct{} // a session was found gone
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// NewHTTP starts a Streamable HTTP downstream.
func NewHTTP(opts HTTPOptions) *HTTPServer {
	if opts.MaxMessage <= 0 {
		opts.MaxMessage = 16 << 20
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hc := opts.Client
	if hc == nil {
		hc = &http.Client{
			Transport: &http.Transport{
				Proxy:                 nil, // a downstream is reached directly, never through the environment's proxy
				DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
				TLSHandshakeTimeout:   10 * time.Second,
				MaxIdleConnsPerHost:   64,
				IdleConnTimeout:       90 * time.Second,
				ExpectContinueTimeout: time.Second,
				ForceAttemptHTTP2:     true,
			},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	fixed := make(http.Header, len(opts.Headers))
	for k, v := range opts.Headers {
		fixed.Set(k, v)
	}
	s := &HTTPServer{opts: opts, log: log.With(slog.String("server", opts.Name)), http: hc, rt: rt, fixed: fixed,
		conn:    conn{onState: opts.OnState, onConnect: opts.OnConnect},
		expired: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go s.supervise()
	return s
}

// Close ends the session on the server (DELETE, legacy era) and waits for
// the server's goroutines.
func (s *HTTPServer) Close(ctx context.Context) error {
	s.once.Do(func() { close(s.stop) })
	select {
	case <-s.done:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	s.mu.Lock()
	id := s.sessionID
	s.mu.Unlock()
	if id != "" {
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, s.opts.URL, nil)
		if err == nil {
			req.Header = s.headers(outgoing{}).h
			if resp, err := s.http.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	}
	s.http.CloseIdleConnections()
	return nil
}

func (s *HTTPServer) supervise() {
	defer close(s.done)
	defer s.setState(Closed, nil)
	backoff := minBackoff
	for first := true; ; first = false {
		if !first {
			s.mu.Lock()
			s.restarts++
			s.mu.Unlock()
		}
		s.mu.Lock()
		s.sessionID = ""
		s.mu.Unlock()
		c := newClient(s.opts.Name, nil, s.log, &s.stats, s.opts.OnNotify)
		if s.opts.Legacy {
			c.Legacy()
		}
		c.t = &httpTransport{s: s, c: c}
		ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
		done := make(chan error, 1)
		go func() { done <- c.handshake(ctx) }()
		var err error
		select {
		case err = <-done:
		case <-s.stop:
			cancel()
			<-done
			c.Fail(ErrClosed)
			return
		}
		cancel()
		if err != nil {
			c.Fail(ErrConnectionLost)
			s.log.Error("downstream handshake failed", slog.String("error", err.Error()))
			s.setState(Failed, nil)
			select {
			case <-s.stop:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		connected := time.Now()
		info, _ := c.Info()
		name, version := info.Name()
		s.log.Info("downstream connected", slog.String("protocol_version", info.Version),
			slog.String("server_name", truncate(name, 64)), slog.String("server_version", truncate(version, 64)))
		end := startListening(c, s.log, func(ctx context.Context) error {
			if info.Modern {
				return c.subscribe(ctx)
			}
			return s.getStream(ctx, c)
		}, s.stop)
		s.setState(Connected, c)
		select {
		case <-s.expired:
			s.log.Info("downstream session expired; initializing again")
			s.setState(Connecting, nil)
			c.Fail(ErrConnectionLost)
			end()
			if time.Since(connected) >= stableSession {
				backoff = minBackoff
				continue
			}
			// A server that forgets each session as soon as it is made
			// (a 404 to its first GET or call) is not asked for the next
			// at once: that would be a loop of handshakes as fast as the
			// network allows, and a log line for each.
			select {
			case <-s.stop:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, maxBackoff)
		case <-s.stop:
			c.Fail(ErrClosed)
			end()
			return
		}
	}
}

// stableSession is how long a downstream's session must have lived for
// its expiry to be met with a new handshake at once; one that expires
// sooner waits the backoff, which doubles each time.
const stableSession = 10 * time.Second

// getStream holds the legacy session's GET event stream open until it
// ends, delivering what the server sends on it: the only way a legacy
// server can say, between calls, that its tool list changed.
func (s *HTTPServer) getStream(ctx context.Context, c *Client) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.opts.URL, nil)
	if err != nil {
		return fmt.Errorf("upstream: %w", err)
	}
	req.Header = s.headers(outgoing{}).h
	req.Header.Set("Accept", "text/event-stream")
	if info, ok := c.Info(); ok {
		req.Header.Set("MCP-Protocol-Version", info.Version)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return fmt.Errorf("upstream: %s", redactURL(err.Error(), s.opts.URL))
	}
	defer resp.Body.Close()
	ct, _ := mcp.MediaType(resp.Header.Get("Content-Type"))
	switch {
	case resp.StatusCode == http.StatusMethodNotAllowed:
		return errNoStream
	case resp.StatusCode == http.StatusNotFound && req.Header.Get(hdrSessionID) != "":
		select {
		case s.expired <- struct{}{}:
		default:
		}
		return errSessionGone
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		// Servers that offer no stream answer 400 or 403 as often as the
		// 405 the spec asks for; asking again would not change that.
		s.log.Debug("downstream refused its GET stream", slog.Int("status", resp.StatusCode))
		return errNoStream
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("upstream: the downstream answered its GET stream with HTTP %d", resp.StatusCode)
	case ct != "text/event-stream":
		return fmt.Errorf("upstream: the downstream answered its GET stream with content type %q", truncate(ct, 64))
	}
	c.streamOpen()
	return (&httpTransport{s: s, c: c}).readEvents(resp.Body, 0)
}

// headers sets what every request carries: the configured headers, then
// the transport's own, which win.
func (s *HTTPServer) headers(out outgoing) *requestHeader {
	h := newRequestHeader(s.fixed)
	s.mu.Lock()
	id := s.sessionID
	s.mu.Unlock()
	if id != "" {
		h.set(hdrSessionID, id)
	}
	// The identity headers override whatever the configuration set; a
	// client's own headers never reach this request (it is built from
	// scratch), so a caller cannot forge them.
	if who := out.identity; who != nil {
		h.set(hdrSubject, HeaderValue(who.Subject))
		h.set(hdrIssuer, HeaderValue(who.Issuer))
		h.set(hdrRole, strings.Join(who.Roles, ","))
		if who.RequestID != "" {
			h.set(hdrRequestID, who.RequestID)
		}
	}
	return h
}

// requestHeader is the header of one downstream request, built in a map
// sized for it with the gateway's values in one array. Every call builds
// one; grown entry by entry, each value a slice of its own, it took a
// tenth of the gateway's allocations per call.
type requestHeader struct {
	h    http.Header
	vals []string
}

// gatewayHeaders is how many headers of its own (the hdr names below)
// the gateway sets on one request at most.
const gatewayHeaders = 10

// newRequestHeader starts a header with the configured ones. Their values
// are shared, never changed: a transport does not modify a request's
// headers.
func newRequestHeader(fixed http.Header) *requestHeader {
	h := &requestHeader{h: make(http.Header, len(fixed)+gatewayHeaders), vals: make([]string, 0, gatewayHeaders)}
	maps.Copy(h.h, fixed)
	return h
}

// set is Header.Set for a name already canonical: it replaces a
// configured header of that name rather than adding a second, and does
// not canonicalize (and copy) the name on every call.
func (h *requestHeader) set(canonical, value string) {
	if len(h.vals) == cap(h.vals) {
		h.h[canonical] = []string{value}
		return
	}
	h.vals = append(h.vals, value)
	n := len(h.vals)
	// Capped at one element: an append to this value cannot write into
	// the next one's.
	h.h[canonical] = h.vals[n-1 : n : n]
}

// The headers the gateway sets on every call, their names in canonical
// form (TestHeaderNamesCanonical), so that set replaces a
// configured header of the same name rather than adding a second.
const (
	hdrSessionID   = "Mcp-Session-Id"
	hdrVersion     = "Mcp-Protocol-Version"
	hdrMethod      = "Mcp-Method"
	hdrName        = "Mcp-Name"
	hdrContentType = "Content-Type"
	hdrAccept      = "Accept"
	hdrSubject     = "X-Mcp-Gateway-Subject"
	hdrIssuer      = "X-Mcp-Gateway-Issuer"
	hdrRole        = "X-Mcp-Gateway-Role"
	hdrRequestID   = "X-Mcp-Gateway-Request-Id"
)

// HeaderValue is how a string travels in a header (GATEWAY.md decision
// 8): plain when it is visible ASCII without surrounding space and does
// not look like the sentinel, else =?base64?<UTF-8 base64>?=. The
// sentinel is lower case, but a value that looks like it in any case is
// encoded too: a downstream that reads the prefix without regard to case
// would otherwise decode a subject "=?BASE64?YWRtaW4=?=" as "admin".
func HeaderValue(s string) string {
	const sentinel = "=?base64?"
	plain := s != "" && s[0] != ' ' && s[len(s)-1] != ' ' &&
		!(len(s) >= len(sentinel) && strings.EqualFold(s[:len(sentinel)], sentinel) && strings.HasSuffix(s, "?="))
	for i := 0; plain && i < len(s); i++ {
		plain = s[i] >= 0x20 && s[i] <= 0x7e
	}
	if plain {
		return s
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?="
}

// httpTransport carries one client's messages as POSTs.
type httpTransport struct {
	s *HTTPServer
	c *Client
}

func (*httpTransport) answersInSend() {}

func (t *httpTransport) send(ctx context.Context, out outgoing) error {
	s := t.s
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.opts.URL, bytes.NewReader(out.msg))
	if err != nil {
		return fmt.Errorf("upstream: %w", err)
	}
	h := s.headers(out)
	h.set(hdrContentType, "application/json")
	h.set(hdrAccept, "application/json, text/event-stream")
	if info, ok := t.c.Info(); ok {
		h.set(hdrVersion, info.Version)
		if info.Modern && out.method != "" {
			h.set(hdrMethod, out.method)
			if out.name != "" {
				h.set(hdrName, HeaderValue(out.name))
			}
			for _, p := range out.params {
				h.h.Set("Mcp-Param-"+p.Name, p.Value)
			}
		}
	} else if out.method == "server/discover" {
		h.set(hdrVersion, mcp.V20260728)
		h.set(hdrMethod, out.method)
	}
	req.Header = h.h
	resp, err := s.rt.RoundTrip(req)
	if err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		s.log.Warn("downstream request failed", slog.String("error", redactURL(err.Error(), s.opts.URL)))
		return ErrConnectionLost
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusAccepted && out.id != 0:
		// A request is answered in the response to its POST, as JSON or
		// an event stream; accepting it without an answer leaves nothing
		// to wait for.
		return ErrMalformed
	case resp.StatusCode == http.StatusAccepted:
		return nil
	case resp.StatusCode == http.StatusOK && out.id == 0:
		// A notification or an answer to the downstream's request is
		// accepted with 202 and no body. Whatever a body holds is not
		// read: were it delivered, a downstream could answer each answer
		// with a new request (a ping, say), and the gateway would answer
		// that from inside this send, each round a frame deeper, until
		// its stack overflowed.
		s.stats.Unexpected.Add(1)
		s.stats.noise.warn(s.log, "downstream answered a notification or a response with a body; not read")
		return nil
	case resp.StatusCode == http.StatusNotFound && req.Header.Get(hdrSessionID) != "":
		select {
		case s.expired <- struct{}{}:
		default:
		}
		return errSessionGone
	case resp.StatusCode >= 300 && resp.StatusCode < 400, resp.StatusCode == http.StatusUnauthorized, resp.StatusCode == http.StatusForbidden:
		s.log.Warn("downstream refused the request", slog.Int("status", resp.StatusCode))
		return ErrRefused
	case resp.StatusCode != http.StatusOK && out.id == 0:
		return fmt.Errorf("upstream: the downstream answered HTTP %d", resp.StatusCode)
	}
	if id := resp.Header.Get(hdrSessionID); id != "" && out.method == "initialize" {
		if !visibleASCII(id) {
			return fmt.Errorf("upstream: the downstream's session id is not visible ASCII")
		}
		s.mu.Lock()
		s.sessionID = id
		s.mu.Unlock()
	}
	ct, _ := mcp.MediaType(resp.Header.Get("Content-Type"))
	switch ct {
	case "text/event-stream":
		return t.readEvents(resp.Body, out.id)
	case "application/json":
		body, err := io.ReadAll(io.LimitReader(resp.Body, s.opts.MaxMessage+1))
		if err != nil {
			return ErrConnectionLost
		}
		if int64(len(body)) > s.opts.MaxMessage {
			s.stats.Oversized.Add(1)
			s.stats.noise.warn(s.log, "downstream response over the size cap; dropped", slog.Int64("max_message_bytes", s.opts.MaxMessage))
			return fmt.Errorf("upstream: the downstream's response is larger than %d bytes", s.opts.MaxMessage)
		}
		if out.id != 0 && resp.StatusCode != http.StatusOK {
			// A server that refuses a request before it reads its id
			// (the TypeScript SDK's answer to a protocol version it does
			// not know) answers with an error whose id is null, as
			// JSON-RPC says it must. Over HTTP the answer to a POST is the
			// request's own, so it is taken as this request's error: a
			// server/discover refused so falls back to initialize.
			if e := nullIDError(body); e != nil {
				t.c.fail(out.id, e)
				return nil
			}
		}
		t.c.deliverOn(body, out.id)
		// The answer to a POST is its request's own: a body that did not
		// answer it (not JSON-RPC, not strict JSON, nested too deep, an
		// answer to another id) fails the call now rather than at its
		// deadline. A call the body answered is no longer pending, and
		// fail leaves it alone.
		t.c.fail(out.id, ErrMalformed)
		return nil
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("upstream: the downstream answered HTTP %d", resp.StatusCode)
	}
	s.stats.Garbage.Add(1)
	return fmt.Errorf("upstream: the downstream answered with content type %q", truncate(ct, 64))
}

// nullIDError reads body as a JSON-RPC error response whose id is null,
// nil when it is anything else.
func nullIDError(body []byte) *RPCError {
	var r struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      jsontext.Value `json:"id"`
		Result  jsontext.Value `json:"result"`
		Error   *struct {
			Code    *int    `json:"code"`
			Message *string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &r) != nil || r.JSONRPC != "2.0" || string(r.ID) != "null" || r.Result != nil ||
		r.Error == nil || r.Error.Code == nil || r.Error.Message == nil {
		return nil
	}
	return &RPCError{Code: *r.Error.Code, Message: *r.Error.Message}
}

// readEvents delivers the messages of an SSE response until the stream
// ends or, for a request, until its response has come. id is the request
// whose response stream it is, 0 for the GET stream: what the server
// sends on it is attributed to that call, or to none.
func (t *httpTransport) readEvents(body io.Reader, id int64) error {
	s := t.s
	lines := newSSELines(body)
	ev := event{max: s.opts.MaxMessage}
	for {
		line, err := lines.next(s.opts.MaxMessage)
		if errors.Is(err, errLineTooLong) {
			ev.tooBig = true
			continue
		}
		if err != nil {
			if id != 0 && t.c.pendingID(id) {
				return ErrConnectionLost // the stream ended without the answer
			}
			return nil
		}
		switch {
		case len(line) == 0: // the end of an event
			msg, oversized := ev.end()
			if oversized {
				s.stats.Oversized.Add(1)
				s.stats.noise.warn(s.log, "downstream event over the size cap; dropped", slog.Int64("max_message_bytes", s.opts.MaxMessage))
			} else if msg != nil {
				t.c.deliverOn(msg, id)
			}
			if id != 0 && !t.c.pendingID(id) {
				return nil // answered; the rest of the stream is not waited for
			}
		case bytes.HasPrefix(line, []byte("data:")):
			ev.data(bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" ")))
		}
		// event:, id:, retry: and comments carry nothing the client uses.
	}
}

// event gathers the data lines of one SSE event within max bytes. The
// cap holds while the event grows, not only when it ends: an event of
// many data lines that never ends would otherwise grow without bound.
// Past the cap, the rest of the event is read and dropped.
type event struct {
	buf    bytes.Buffer
	max    int64
	tooBig bool
}

// data adds one data line's payload.
func (e *event) data(payload []byte) {
	if e.tooBig || int64(e.buf.Len()+1+len(payload)) > e.max {
		e.tooBig = true
		e.buf.Reset()
		return
	}
	if e.buf.Len() > 0 {
		e.buf.WriteByte('\n')
	}
	e.buf.Write(payload)
}

// end ends the event: its message (nil for an event without data), or
// oversized when it went past the cap.
func (e *event) end() (msg []byte, oversized bool) {
	defer func() {
		e.buf.Reset()
		e.tooBig = false
	}()
	if e.tooBig {
		return nil, true
	}
	if e.buf.Len() == 0 {
		return nil, false
	}
	return bytes.Clone(e.buf.Bytes()), false
}

var errLineTooLong = errors.New("upstream: SSE line too long")

// sseLines reads the lines of an event stream, which end at CRLF, LF or
// a lone CR (the event stream format of the HTML standard; bufio's
// ReadLine knows only the first two, and a stream using CR would be one
// endless line).
type sseLines struct {
	br     *bufio.Reader
	skipLF bool // the last line ended at a CR: an LF right after it belongs to it
}

// newSSELines reads body, from which a leading byte order mark, which the
// format allows and ignores, is dropped.
func newSSELines(body io.Reader) *sseLines {
	br := bufio.NewReaderSize(body, 64<<10)
	if b, err := br.Peek(3); err == nil && string(b) == "\uFEFF" {
		_, _ = br.Discard(3)
	}
	return &sseLines{br: br}
}

// next reads one line (without its terminator) of at most max bytes; a
// longer one is consumed and reported as errLineTooLong. A last line
// without a terminator is not returned: the stream ended inside it, and
// an event it would end was never completed.
func (l *sseLines) next(max int64) ([]byte, error) {
	var out []byte
	long := false
	for {
		if _, err := l.br.Peek(1); err != nil {
			return nil, err
		}
		buf, _ := l.br.Peek(l.br.Buffered())
		if l.skipLF {
			l.skipLF = false
			if buf[0] == '\n' {
				_, _ = l.br.Discard(1)
				continue
			}
		}
		i := bytes.IndexAny(buf, "\r\n")
		n := len(buf)
		if i >= 0 {
			n = i
		}
		if !long && int64(len(out)+n) > max {
			long, out = true, nil
		}
		if !long {
			out = append(out, buf[:n]...)
		}
		if i < 0 {
			_, _ = l.br.Discard(n)
			continue
		}
		l.skipLF = buf[i] == '\r'
		_, _ = l.br.Discard(i + 1)
		if long {
			return nil, errLineTooLong
		}
		if out == nil {
			out = []byte{}
		}
		return out, nil
	}
}

// pendingID reports whether request id still waits for its answer.
func (c *Client) pendingID(id int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.pending[id]
	return ok
}

func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return s != ""
}

// redactURL keeps the configured URL, whose query may hold a credential,
// out of an error message.
func redactURL(msg, url string) string {
	return strings.ReplaceAll(msg, url, "<downstream url>")
}
