// Command mcpload measures the whole-process throughput and latency of an
// MCP stdio server: it starts the server command given after "--", performs
// the initialize handshake (protocol 2025-11-25), then keeps exactly
// -inflight tools/call requests outstanding on the server's stdin for
// -warmup plus -duration, and reports calls per second, p50/p99 latency and
// the error count of the measured window.
//
// Usage:
//
//	mcpload [-inflight N] [-duration D] [-warmup D] [-tool NAME] [-args JSON] [-json] -- COMMAND [ARG...]
//
// The loop is closed: each response frees its slot and the next request is
// written at once, with a fresh integer id. One goroutine owns the pipes: it
// reads every response from the server's stdout and writes the follow-up
// requests, so no lock or channel sits between a response and the next
// request. Writes are coalesced only across responses that arrived in the
// same read, which is what a client multiplexing one stdio stream does.
//
// A response counts as an error when its id is not one in flight, when it
// is a JSON-RPC error, or when its result has isError:true. The run is
// bounded: if the server stops answering, a watchdog kills it after the
// measured window plus -grace, and mcpload exits non-zero. It also exits
// non-zero when any error was counted, because such figures are not
// comparable.
//
// The server inherits mcpload's environment and stderr. mcpload uses only
// the standard library so that it can drive any server without pulling a
// client SDK's costs into the measurement.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"sync"
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
}

// report is the outcome of a run; it is also the -json output.
type report struct {
	Command         []string `json:"command"`
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
}

func main() {
	// The driver is one goroutine. A second P would only spin looking for
	// work each time that goroutine blocks, taking CPU from the server
	// under test on a small machine.
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
	rep, err := load(cfg, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "mcpload: %v\n", err)
		return 1
	}
	human := fmt.Sprintf("%s inflight=%d calls=%d duration=%s calls/s=%.0f p50=%.3fms p99=%.3fms max=%.3fms errors=%d server_cpu/call=%.1fus driver_cpu/call=%.1fus",
		rep.Tool, rep.InFlight, rep.Calls, cfg.duration, rep.CallsPerSecond, rep.P50Millis, rep.P99Millis, rep.MaxMillis, rep.Errors,
		rep.ServerCPUMicrosPerCall, rep.DriverCPUMicrosPerCall)
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
		fs.PrintDefaults()
	}
	fs.IntVar(&cfg.inflight, "inflight", 1, "requests kept outstanding (1..4096)")
	fs.DurationVar(&cfg.duration, "duration", 5*time.Second, "measured window")
	fs.DurationVar(&cfg.warmup, "warmup", time.Second, "unmeasured load before the window")
	fs.DurationVar(&cfg.grace, "grace", 10*time.Second, "how long past the window the server may take to answer and exit")
	fs.StringVar(&cfg.tool, "tool", "echo", "tool to call")
	argsJSON := fs.String("args", `{"text":"hello"}`, "arguments object of every call (JSON)")
	fs.BoolVar(&cfg.json, "json", false, "print the report as one JSON line on stdout (the human line goes to stderr)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	cfg.command = fs.Args()
	switch {
	case len(cfg.command) == 0:
		return cfg, errors.New("missing server command after --")
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
