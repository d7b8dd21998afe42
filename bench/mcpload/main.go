// Command mcpload measures the whole-process throughput and latency of an
// MCP server, over stdio or over Streamable HTTP.
//
// Over stdio it starts the server command given after "--", performs the
// initialize handshake (protocol 2025-11-25), then keeps exactly -inflight
// tools/call requests outstanding on the server's stdin for -warmup plus
// -duration, and reports calls per second, p50/p99 latency and the error
// count of the measured window.
//
// With -url it drives a Streamable HTTP endpoint that is already running
// instead, as a legacy-session client: it POSTs initialize (2025-11-25),
// keeps the Mcp-Session-Id the server answers with (a server without
// sessions sends none, and then none is sent back) and
// notifications/initialized, then keeps -inflight tools/call POSTs
// outstanding, each with the Mcp-Session-Id and MCP-Protocol-Version
// headers, and reports the same figures. At the end it DELETEs the session.
//
// Usage:
//
//	mcpload [-inflight N] [-duration D] [-warmup D] [-tool NAME] [-args JSON] [-json] -- COMMAND [ARG...]
//	mcpload -url URL [-cpu-pid NAME=PID ...] [-inflight N] [-duration D] [-warmup D] [-tool NAME] [-args JSON] [-json]
//
// The loop is closed: each response frees its slot and the next request is
// written at once, with a fresh integer id. Over stdio one goroutine owns
// the pipes: it reads every response from the server's stdout and writes
// the follow-up requests, so no lock or channel sits between a response and
// the next request. Writes are coalesced only across responses that arrived
// in the same read, which is what a client multiplexing one stdio stream
// does. Over HTTP each slot is one goroutine that POSTs, reads the whole
// answer and POSTs again, on a keep-alive http.Client whose transport keeps
// an idle connection per slot, so after the warm-up every call reuses one
// of -inflight open connections (HTTP/1.1, no compression, no proxy).
//
// A response counts as an error when its id is not the one in flight (over
// stdio: not one in flight), when it is a JSON-RPC error, when its result
// has isError:true, or, over HTTP, when its status is not 200 or its body
// neither JSON nor an event stream that carries the answer. The run is
// bounded: if the server stops answering, a watchdog kills it (over HTTP:
// abandons its requests) after the measured window plus -grace, and mcpload
// exits non-zero. It also exits non-zero when any error was counted,
// because such figures are not comparable.
//
// Over stdio the server inherits mcpload's environment and stderr, and its
// CPU time per call comes from its exit status. Over HTTP the server is not
// mcpload's child: each -cpu-pid NAME=PID names a process whose user+system
// time (from /proc/PID/stat) is read before the handshake and after the
// last answer; their sum per completed call is server_cpu_us_per_call, and
// each one's share is in server_cpu_us_per_call_by. mcpload uses only the
// standard library so that it can drive any server without pulling a
// client SDK's costs into the measurement.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// protocolVersion is the version asked for in initialize.
const protocolVersion = "2025-11-25"

// config is what the flags set.
type config struct {
	inflight int
	duration time.Duration
	warmup   time.Duration
	grace    time.Duration
	tool     string
	args     json.RawMessage
	json     bool
	command  []string
	// url, when set, is the Streamable HTTP endpoint driven instead of a
	// command; cpuPIDs are the processes whose CPU time is the server's.
	url     string
	cpuPIDs []namedPID
}

// namedPID is one -cpu-pid NAME=PID.
type namedPID struct {
	name string
	pid  int
}

// report is the outcome of a run; it is also the -json output.
type report struct {
	Command         []string `json:"command,omitempty"`
	URL             string   `json:"url,omitempty"`
	Tool            string   `json:"tool"`
	InFlight        int      `json:"inflight"`
	DurationSeconds float64  `json:"duration_seconds"`
	ProtocolVersion string   `json:"protocol_version"`
	Calls           int      `json:"calls"`
	CallsPerSecond  float64  `json:"calls_per_second"`
	P50Millis       float64  `json:"p50_ms"`
	P99Millis       float64  `json:"p99_ms"`
	MaxMillis       float64  `json:"max_ms"`
	Errors          int      `json:"errors"`
	FirstError      string   `json:"first_error,omitempty"`
	// CPU cost per completed call over the whole run (warm-up and drain
	// included): the server's user+system time, and mcpload's own. The
	// server figure does not depend on how fast the driver is.
	ServerCPUMicrosPerCall float64 `json:"server_cpu_us_per_call"`
	DriverCPUMicrosPerCall float64 `json:"driver_cpu_us_per_call"`
	// ServerCPUMicrosPerCallBy is, over HTTP, each -cpu-pid's share of
	// ServerCPUMicrosPerCall, by name.
	ServerCPUMicrosPerCallBy map[string]float64 `json:"server_cpu_us_per_call_by,omitempty"`
}

func main() {
	// Over stdio the driver is one goroutine. A second P would only spin
	// looking for work each time that goroutine blocks, taking CPU from
	// the server under test on a small machine. Over HTTP the slots'
	// goroutines share the one P too, so the driver never takes more than
	// one CPU from the servers, whatever -inflight is.
	runtime.GOMAXPROCS(1)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "mcpload: %v\n", err)
		return 2
	}
	var rep report
	if cfg.url != "" {
		rep, err = loadHTTP(cfg, stderr)
	} else {
		rep, err = load(cfg, stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "mcpload: %v\n", err)
		return 1
	}
	serverCPU := fmt.Sprintf("%.1fus", rep.ServerCPUMicrosPerCall)
	switch {
	case len(rep.ServerCPUMicrosPerCallBy) > 0:
		var by []string
		for _, p := range cfg.cpuPIDs {
			by = append(by, fmt.Sprintf("%s=%.1fus", p.name, rep.ServerCPUMicrosPerCallBy[p.name]))
		}
		serverCPU += " (" + strings.Join(by, " ") + ")"
	case cfg.url != "":
		serverCPU = "n/a" // no -cpu-pid
	}
	human := fmt.Sprintf("%s inflight=%d calls=%d duration=%s calls/s=%.0f p50=%.3fms p99=%.3fms max=%.3fms errors=%d server_cpu/call=%s driver_cpu/call=%.1fus",
		rep.Tool, rep.InFlight, rep.Calls, cfg.duration, rep.CallsPerSecond, rep.P50Millis, rep.P99Millis, rep.MaxMillis, rep.Errors,
		serverCPU, rep.DriverCPUMicrosPerCall)
	if cfg.json {
		// stdout stays machine-readable; the human line goes to stderr.
		fmt.Fprintln(stderr, human)
		b, err := json.Marshal(rep)
		if err != nil {
			fmt.Fprintf(stderr, "mcpload: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		fmt.Fprintln(stdout, human)
	}
	if rep.Errors > 0 {
		fmt.Fprintf(stderr, "mcpload: %d errors; first: %s\n", rep.Errors, rep.FirstError)
		return 1
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("mcpload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: mcpload [flags] -- COMMAND [ARG...]")
		fmt.Fprintln(stderr, "       mcpload -url URL [-cpu-pid NAME=PID ...] [flags]")
		fs.PrintDefaults()
	}
	fs.IntVar(&cfg.inflight, "inflight", 1, "requests kept outstanding (1..4096)")
	fs.DurationVar(&cfg.duration, "duration", 5*time.Second, "measured window")
	fs.DurationVar(&cfg.warmup, "warmup", time.Second, "unmeasured load before the window")
	fs.DurationVar(&cfg.grace, "grace", 10*time.Second, "how long past the window the server may take to answer and exit")
	fs.StringVar(&cfg.tool, "tool", "echo", "tool to call")
	argsJSON := fs.String("args", `{"text":"hello"}`, "arguments object of every call (JSON)")
	fs.BoolVar(&cfg.json, "json", false, "print the report as one JSON line on stdout (the human line goes to stderr)")
	fs.StringVar(&cfg.url, "url", "", "drive this Streamable HTTP MCP endpoint (legacy session) instead of a command")
	fs.Func("cpu-pid", "with -url: NAME=PID of a server process whose CPU time to count (repeatable)", func(v string) error {
		name, p, ok := strings.Cut(v, "=")
		pid, err := strconv.Atoi(p)
		if !ok || name == "" || err != nil || pid <= 0 {
			return errors.New("want NAME=PID")
		}
		if slices.ContainsFunc(cfg.cpuPIDs, func(n namedPID) bool { return n.name == name }) {
			return fmt.Errorf("name %q given twice", name)
		}
		cfg.cpuPIDs = append(cfg.cpuPIDs, namedPID{name: name, pid: pid})
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	cfg.command = fs.Args()
	switch {
	case cfg.url != "" && len(cfg.command) > 0:
		return cfg, errors.New("-url and a server command exclude each other")
	case cfg.url != "":
		if u, err := url.Parse(cfg.url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return cfg, fmt.Errorf("-url %q is not an http or https URL", cfg.url)
		}
	case len(cfg.cpuPIDs) > 0:
		return cfg, errors.New("-cpu-pid is for -url; over stdio the server's CPU time is measured anyway")
	case len(cfg.command) == 0:
		return cfg, errors.New("missing server command after -- (or -url)")
	}
	switch {
	case cfg.inflight < 1 || cfg.inflight > 4096:
		return cfg, fmt.Errorf("-inflight %d is out of range [1, 4096]", cfg.inflight)
	case cfg.duration <= 0 || cfg.warmup < 0 || cfg.grace <= 0:
		return cfg, errors.New("-duration and -grace must be positive, -warmup not negative")
	case cfg.tool == "":
		return cfg, errors.New("-tool is empty")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(*argsJSON), &obj); err != nil || obj == nil {
		return cfg, fmt.Errorf("-args must be a JSON object: %q", *argsJSON)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(*argsJSON)); err != nil {
		return cfg, fmt.Errorf("-args: %w", err)
	}
	cfg.args = compact.Bytes()
	return cfg, nil
}

// server is the running server process.
type server struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	w    *bufio.Writer
	r    *bufio.Reader
	line []byte // scratch for lines longer than r's buffer

	completed int // tools/call responses received, in every phase

	killOnce sync.Once
	killed   chan struct{} // closed when the watchdog killed the server
}

// load runs one measurement.
func load(cfg config, serverStderr io.Writer) (report, error) {
	rep := report{Command: cfg.command, Tool: cfg.tool, InFlight: cfg.inflight, DurationSeconds: cfg.duration.Seconds()}
	srv, err := startServer(cfg.command, serverStderr)
	if err != nil {
		return rep, err
	}
	// The watchdog bounds the whole run: handshake, warm-up, window,
	// drain and exit. Killing the server closes its stdout, which ends
	// any blocked read with EOF.
	watchdog := time.AfterFunc(cfg.warmup+cfg.duration+cfg.grace, srv.kill)
	defer watchdog.Stop()

	if rep.ProtocolVersion, err = srv.initialize(); err != nil {
		srv.stop()
		return rep, srv.explain(err)
	}
	if err := srv.measure(cfg, &rep); err != nil {
		srv.stop()
		return rep, srv.explain(err)
	}
	if err := srv.stop(); err != nil {
		return rep, srv.explain(fmt.Errorf("server exit: %w", err))
	}
	if srv.completed > 0 {
		st := srv.cmd.ProcessState
		rep.ServerCPUMicrosPerCall = micros(st.UserTime()+st.SystemTime()) / float64(srv.completed)
		rep.DriverCPUMicrosPerCall = micros(selfCPU()) / float64(srv.completed)
	}
	return rep, nil
}

func startServer(command []string, stderr io.Writer) (*server, error) {
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start server: %w", err)
	}
	return &server{
		cmd:    cmd,
		in:     in,
		w:      bufio.NewWriterSize(in, 64<<10),
		r:      bufio.NewReaderSize(out, 64<<10),
		killed: make(chan struct{}),
	}, nil
}

func (s *server) kill() {
	s.killOnce.Do(func() {
		close(s.killed)
		_ = s.cmd.Process.Kill()
	})
}

// explain turns an error caused by the watchdog into one that says so.
func (s *server) explain(err error) error {
	select {
	case <-s.killed:
		return fmt.Errorf("server did not finish in time and was killed: %w", err)
	default:
		return err
	}
}

// stop closes the server's stdin, which asks it to drain and exit, and
// waits for it. The watchdog bounds the wait.
func (s *server) stop() error {
	_ = s.in.Close()
	// Wait closes the stdout pipe; whatever the server still writes is
	// of no interest once every response has been read.
	return s.cmd.Wait()
}

// readLine returns the next line of the server's stdout without its
// terminator. The slice is valid until the next call.
func (s *server) readLine() ([]byte, error) {
	line, err := s.r.ReadSlice('\n')
	if err == nil {
		return line[:len(line)-1], nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("read server stdout: %w", err)
	}
	s.line = append(s.line[:0], line...)
	for {
		more, err := s.r.ReadSlice('\n')
		s.line = append(s.line, more...)
		switch {
		case err == nil:
			return s.line[:len(s.line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("read server stdout: %w", err)
		}
	}
}

// lineBuffered reports whether a whole response line is already buffered,
// so the next readLine will not block.
func (s *server) lineBuffered() bool {
	b, _ := s.r.Peek(s.r.Buffered())
	return bytes.IndexByte(b, '\n') >= 0
}

// initialize performs the handshake and returns the negotiated version.
func (s *server) initialize() (string, error) {
	fmt.Fprintf(s.w, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"mcpload","version":"1"}}}`+"\n", protocolVersion)
	if err := s.w.Flush(); err != nil {
		return "", fmt.Errorf("write initialize: %w", err)
	}
	line, err := s.readLine()
	if err != nil {
		return "", fmt.Errorf("initialize: %w", err)
	}
	var resp struct {
		ID     json.RawMessage `json:"id"`
		Result *struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(line, &resp); err != nil {
		return "", fmt.Errorf("initialize: response is not JSON: %w", err)
	}
	if string(resp.ID) != "0" || resp.Result == nil || resp.Result.ProtocolVersion == "" {
		return "", fmt.Errorf("initialize failed: %s", line)
	}
	s.w.WriteString(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
	if err := s.w.Flush(); err != nil {
		return "", fmt.Errorf("write initialized: %w", err)
	}
	return resp.Result.ProtocolVersion, nil
}

// callResponse is the part of a tools/call response that is checked.
type callResponse struct {
	ID     json.RawMessage `json:"id"`
	Result *struct {
		IsError *bool `json:"isError"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// measure runs the closed loop: warm-up, then the window, then it waits for
// the requests still in flight.
func (s *server) measure(cfg config, rep *report) error {
	prefix := []byte(`{"jsonrpc":"2.0","id":`)
	suffix := fmt.Appendf(nil, `,"method":"tools/call","params":{"name":%s,"arguments":%s}}`+"\n", mustJSON(cfg.tool), cfg.args)
	var (
		nextID    int64 = 1
		sent            = make(map[int64]time.Time, cfg.inflight)
		latencies       = make([]time.Duration, 0, 1<<16)
		errs      int
		firstErr  string
		buf       []byte
	)
	send := func(now time.Time) {
		buf = append(buf[:0], prefix...)
		buf = strconv.AppendInt(buf, nextID, 10)
		buf = append(buf, suffix...)
		s.w.Write(buf)
		sent[nextID] = now
		nextID++
	}
	countErr := func(why string) {
		errs++
		if firstErr == "" {
			firstErr = why
		}
	}

	start := time.Now()
	windowStart := start.Add(cfg.warmup)
	windowEnd := windowStart.Add(cfg.duration)
	for range cfg.inflight {
		send(start)
	}
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("write request: %w", err)
	}
	for len(sent) > 0 {
		line, err := s.readLine()
		if err != nil {
			return err
		}
		now := time.Now()
		inWindow := !now.Before(windowStart) && now.Before(windowEnd)

		var resp callResponse
		if err := json.Unmarshal(line, &resp); err != nil {
			countErr(fmt.Sprintf("response is not JSON: %.200s", line))
			// The slot cannot be identified; the watchdog ends a run
			// that loses all of them.
			continue
		}
		id, err := strconv.ParseInt(string(resp.ID), 10, 64)
		t0, ok := sent[id]
		if err != nil || !ok {
			countErr(fmt.Sprintf("response with an id not in flight: %.200s", line))
			continue
		}
		delete(sent, id)
		s.completed++
		latency := now.Sub(t0)
		switch {
		case resp.Error != nil:
			countErr(fmt.Sprintf("JSON-RPC error %d: %s", resp.Error.Code, resp.Error.Message))
		case resp.Result == nil:
			countErr(fmt.Sprintf("response without result: %.200s", line))
		case resp.Result.IsError != nil && *resp.Result.IsError:
			// An absent isError means false (the spec's default; mcp-go
			// omits it).
			countErr(fmt.Sprintf("result has isError:true: %.200s", line))
		case inWindow:
			latencies = append(latencies, latency)
		}
		if now.Before(windowEnd) {
			send(now)
		}
		// Flush once the responses already read are answered: one
		// write(2) per burst of responses, never a request held back
		// while the loop waits for more input.
		if !s.lineBuffered() {
			if err := s.w.Flush(); err != nil {
				return fmt.Errorf("write request: %w", err)
			}
		}
	}
	rep.Calls = len(latencies)
	rep.CallsPerSecond = float64(len(latencies)) / cfg.duration.Seconds()
	rep.Errors, rep.FirstError = errs, firstErr
	if len(latencies) > 0 {
		slices.Sort(latencies)
		rep.P50Millis = millis(percentile(latencies, 50))
		rep.P99Millis = millis(percentile(latencies, 99))
		rep.MaxMillis = millis(latencies[len(latencies)-1])
	}
	return nil
}

// percentile returns the nearest-rank p-th percentile of sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// selfCPU returns the user+system CPU time this process has used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// Streamable HTTP.

// maxHTTPBody caps one answer read over HTTP.
const maxHTTPBody = 16 << 20

// clockTicks is USER_HZ, the unit of the times in /proc/PID/stat: 100 on
// every architecture Go runs Linux on.
const clockTicks = 100

// errTimedOut is the watchdog's cause over HTTP.
var errTimedOut = errors.New("the server did not finish in time; its requests were abandoned")

// httpClient is a legacy-session Streamable HTTP client of one endpoint.
type httpClient struct {
	url string
	hc  *http.Client
	// header is what every POST carries: Content-Type and Accept, and
	// after initialize the session id and the negotiated version. It is
	// never written once the calls begin; each request gets a clone.
	header http.Header
}

func newHTTPClient(endpoint string, inflight int) *httpClient {
	tr := &http.Transport{
		Proxy:       nil, // loopback benchmarks go direct
		DialContext: (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		// One idle connection per slot, so that every call after the
		// warm-up reuses one: a slot's connection is idle for the
		// moment between reading an answer and sending the next call.
		MaxIdleConns:        0, // no overall limit
		MaxIdleConnsPerHost: max(inflight, 2),
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	return &httpClient{
		url: endpoint,
		hc: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
		header: h,
	}
}

// post sends one message and reads the whole answer into into (so that the
// connection can be reused). An error means no HTTP answer was read.
func (c *httpClient) post(ctx context.Context, msg []byte, into *bytes.Buffer) (int, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(msg))
	if err != nil {
		return 0, nil, err
	}
	req.Header = c.header.Clone()
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	into.Reset()
	if _, err := into.ReadFrom(io.LimitReader(resp.Body, maxHTTPBody+1)); err != nil {
		return 0, nil, fmt.Errorf("read answer: %w", err)
	}
	if into.Len() > maxHTTPBody {
		return 0, nil, fmt.Errorf("answer larger than %d bytes", maxHTTPBody)
	}
	return resp.StatusCode, resp.Header, nil
}

// answerOf returns the JSON-RPC response in an answer's body: the body
// itself when it is JSON, or the data of the first event of an event
// stream that is a response (server notifications and requests before it
// are skipped).
func answerOf(header http.Header, body []byte) ([]byte, error) {
	ct, _, _ := mime.ParseMediaType(header.Get("Content-Type"))
	switch ct {
	case "application/json":
		return body, nil
	case "text/event-stream":
	default:
		return nil, fmt.Errorf("answer of content type %q", ct)
	}
	var data []byte
	for len(body) > 0 {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		switch {
		case len(line) == 0: // the end of an event
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method *string         `json:"method"`
			}
			if len(data) > 0 && json.Unmarshal(data, &m) == nil && m.ID != nil && m.Method == nil {
				return data, nil
			}
			data = data[:0]
		case bytes.HasPrefix(line, []byte("data:")):
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))...)
		}
	}
	return nil, errors.New("the event stream ended without a response")
}

// initialize performs the handshake and returns the negotiated version;
// the session id and the version go into every later request's headers.
func (c *httpClient) initialize(ctx context.Context) (string, error) {
	var buf bytes.Buffer
	msg := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"mcpload","version":"1"}}}`, protocolVersion)
	status, h, err := c.post(ctx, msg, &buf)
	if err != nil {
		return "", fmt.Errorf("initialize: %w", err)
	}
	if status != http.StatusOK {
		return "", fmt.Errorf("initialize: HTTP %d: %.200s", status, buf.Bytes())
	}
	line, err := answerOf(h, buf.Bytes())
	if err != nil {
		return "", fmt.Errorf("initialize: %w", err)
	}
	var resp struct {
		ID     json.RawMessage `json:"id"`
		Result *struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if err := json.Unmarshal(line, &resp); err != nil {
		return "", fmt.Errorf("initialize: response is not JSON: %w", err)
	}
	if string(resp.ID) != "0" || resp.Result == nil || resp.Result.ProtocolVersion == "" {
		return "", fmt.Errorf("initialize failed: %.200s", line)
	}
	if id := h.Get("Mcp-Session-Id"); id != "" {
		c.header.Set("Mcp-Session-Id", id)
	}
	c.header.Set("MCP-Protocol-Version", resp.Result.ProtocolVersion)
	status, _, err = c.post(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), &buf)
	if err != nil {
		return "", fmt.Errorf("notifications/initialized: %w", err)
	}
	if status/100 != 2 {
		return "", fmt.Errorf("notifications/initialized: HTTP %d: %.200s", status, buf.Bytes())
	}
	return resp.Result.ProtocolVersion, nil
}

// end DELETEs the session, if there is one.
func (c *httpClient) end(ctx context.Context) error {
	if c.header.Get("Mcp-Session-Id") == "" {
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.url, nil)
	if err != nil {
		return err
	}
	req.Header = c.header.Clone()
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

// slot is what one in-flight slot saw.
type slot struct {
	latencies  []time.Duration
	completed  int // tools/call answers received, in every phase
	errs       int
	firstErr   string
	firstErrAt time.Time
}

func (s *slot) countErr(now time.Time, why string) {
	s.errs++
	if s.firstErr == "" {
		s.firstErr, s.firstErrAt = why, now
	}
}

// loadHTTP runs one measurement against cfg.url.
func loadHTTP(cfg config, stderr io.Writer) (report, error) {
	rep := report{URL: cfg.url, Tool: cfg.tool, InFlight: cfg.inflight, DurationSeconds: cfg.duration.Seconds()}
	c := newHTTPClient(cfg.url, cfg.inflight)
	defer c.hc.CloseIdleConnections()
	// The watchdog bounds handshake, warm-up, window and drain; a call
	// that fails without an HTTP answer ends the run too, through abort.
	base, abort := context.WithCancelCause(context.Background())
	defer abort(nil)
	ctx, stop := context.WithTimeoutCause(base, cfg.warmup+cfg.duration+cfg.grace, errTimedOut)
	defer stop()

	cpu0, err := serverCPU(cfg.cpuPIDs)
	if err != nil {
		return rep, err
	}
	if rep.ProtocolVersion, err = c.initialize(ctx); err != nil {
		return rep, explainHTTP(ctx, err)
	}

	prefix := []byte(`{"jsonrpc":"2.0","id":`)
	suffix := fmt.Appendf(nil, `,"method":"tools/call","params":{"name":%s,"arguments":%s}}`, mustJSON(cfg.tool), cfg.args)
	var nextID atomic.Int64
	start := time.Now()
	windowStart := start.Add(cfg.warmup)
	windowEnd := windowStart.Add(cfg.duration)
	slots := make([]slot, cfg.inflight)
	var wg sync.WaitGroup
	for i := range slots {
		s := &slots[i]
		s.latencies = make([]time.Duration, 0, 1<<12)
		wg.Go(func() {
			var (
				msg  []byte
				body bytes.Buffer
				resp callResponse
			)
			for {
				id := nextID.Add(1)
				msg = append(msg[:0], prefix...)
				msg = strconv.AppendInt(msg, id, 10)
				msg = append(msg, suffix...)
				t0 := time.Now()
				status, h, err := c.post(ctx, msg, &body)
				now := time.Now()
				if err != nil {
					if ctx.Err() == nil {
						abort(fmt.Errorf("tools/call: %w", err))
					}
					return
				}
				s.completed++
				inWindow := !now.Before(windowStart) && now.Before(windowEnd)
				resp = callResponse{}
				line, aerr := answerOf(h, body.Bytes())
				switch {
				case status != http.StatusOK:
					s.countErr(now, fmt.Sprintf("HTTP %d: %.200s", status, body.Bytes()))
				case aerr != nil:
					s.countErr(now, aerr.Error())
				case json.Unmarshal(line, &resp) != nil:
					s.countErr(now, fmt.Sprintf("response is not JSON: %.200s", line))
				case string(resp.ID) != strconv.FormatInt(id, 10):
					s.countErr(now, fmt.Sprintf("response with an id not in flight: %.200s", line))
				case resp.Error != nil:
					s.countErr(now, fmt.Sprintf("JSON-RPC error %d: %s", resp.Error.Code, resp.Error.Message))
				case resp.Result == nil:
					s.countErr(now, fmt.Sprintf("response without result: %.200s", line))
				case resp.Result.IsError != nil && *resp.Result.IsError:
					s.countErr(now, fmt.Sprintf("result has isError:true: %.200s", line))
				case inWindow:
					s.latencies = append(s.latencies, now.Sub(t0))
				}
				if !now.Before(windowEnd) {
					return
				}
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return rep, context.Cause(ctx)
	}
	cpu1, err := serverCPU(cfg.cpuPIDs)
	if err != nil {
		return rep, err
	}
	if err := c.end(ctx); err != nil {
		fmt.Fprintf(stderr, "mcpload: warning: DELETE of the session: %v\n", err)
	}

	var (
		latencies []time.Duration
		completed int
		firstAt   time.Time
	)
	for i := range slots {
		s := &slots[i]
		latencies = append(latencies, s.latencies...)
		completed += s.completed
		rep.Errors += s.errs
		if s.firstErr != "" && (rep.FirstError == "" || s.firstErrAt.Before(firstAt)) {
			rep.FirstError, firstAt = s.firstErr, s.firstErrAt
		}
	}
	rep.Calls = len(latencies)
	rep.CallsPerSecond = float64(len(latencies)) / cfg.duration.Seconds()
	if len(latencies) > 0 {
		slices.Sort(latencies)
		rep.P50Millis = millis(percentile(latencies, 50))
		rep.P99Millis = millis(percentile(latencies, 99))
		rep.MaxMillis = millis(latencies[len(latencies)-1])
	}
	if completed > 0 {
		rep.DriverCPUMicrosPerCall = micros(selfCPU()) / float64(completed)
		if len(cfg.cpuPIDs) > 0 {
			rep.ServerCPUMicrosPerCallBy = map[string]float64{}
			for i, p := range cfg.cpuPIDs {
				us := micros(cpu1[i]-cpu0[i]) / float64(completed)
				rep.ServerCPUMicrosPerCallBy[p.name] = us
				rep.ServerCPUMicrosPerCall += us
			}
		}
	}
	return rep, nil
}

// explainHTTP says when an error came from the watchdog.
func explainHTTP(ctx context.Context, err error) error {
	if context.Cause(ctx) == errTimedOut && !errors.Is(err, errTimedOut) {
		return fmt.Errorf("%w: %w", errTimedOut, err)
	}
	return err
}

// serverCPU returns the CPU time so far of each process.
func serverCPU(pids []namedPID) ([]time.Duration, error) {
	out := make([]time.Duration, len(pids))
	for i, p := range pids {
		d, err := procCPU(p.pid)
		if err != nil {
			return nil, fmt.Errorf("-cpu-pid %s=%d: %w", p.name, p.pid, err)
		}
		out[i] = d
	}
	return out, nil
}

// procCPU returns the user+system CPU time of all threads of process pid
// so far, from /proc/PID/stat (children are not included).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold
	// anything; the fields after it are plain.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("unexpected /proc stat format")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("unexpected /proc stat format")
	}
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("unexpected /proc stat format")
	}
	return time.Duration(ut+st) * (time.Second / clockTicks), nil
}
