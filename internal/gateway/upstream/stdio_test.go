package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/goleak"

	"github.com/mcp-bastion/bastion/internal/mcp"
)

// binDir holds the binaries the tests run as downstreams: the fixture
// server and the refund example, built once.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "upstream-test-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	for name, pkg := range map[string]string{"mcpfixture": "../../cmd/mcpfixture", "refund": "../../../examples/refund"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", name, err, out)
			os.Exit(2)
		}
	}
	minBackoff, healthyAfter = 20*time.Millisecond, time.Hour
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// logBuffer is a slog handler's output, safe to read while written.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// fixture starts the fixture server with env and waits until it is
// connected. It is closed when the test ends.
type fixture struct {
	*StdioServer
	logs   *logBuffer
	states chan State
	notes  chan Notification
	recv   string // the file of lines the fixture received
}

func startFixture(t *testing.T, env map[string]string) *fixture {
	t.Helper()
	return startServer(t, []string{filepath.Join(binDir, "mcpfixture")}, env, true)
}

func startServer(t *testing.T, command []string, env map[string]string, wait bool) *fixture {
	t.Helper()
	f := &fixture{logs: &logBuffer{}, states: make(chan State, 64), notes: make(chan Notification, 64)}
	if env == nil {
		env = map[string]string{}
	}
	f.recv = filepath.Join(t.TempDir(), "received.jsonl")
	env["FIXTURE_LOG"] = f.recv
	f.StdioServer = StartStdio(StdioOptions{
		Name: "fx", Command: command, Env: env, MaxMessage: 1 << 20, StopGrace: 200 * time.Millisecond,
		Logger:   slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnNotify: func(n Notification) { f.notes <- n },
		OnState:  func(s State, _ *Client) { f.states <- s },
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := f.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if wait {
		f.await(t, Connected)
	}
	return f
}

// await waits for the next state change to want.
func (f *fixture) await(t *testing.T, want State) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case s := <-f.states:
			if s == want {
				return
			}
		case <-timeout:
			t.Fatalf("the server did not reach state %s; log:\n%s", want, f.logs.String())
		}
	}
}

// received returns the lines the fixture read.
func (f *fixture) received(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(f.recv)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}

func callTool(t *testing.T, f *fixture, name, args string) (jsontext.Value, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	return f.Call(ctx, "tools/call", []byte(fmt.Sprintf(`{"name":%q,"arguments":%s}`, name, args)), CallOptions{Name: name})
}

func TestHandshakeModern(t *testing.T) {
	f := startFixture(t, map[string]string{"FIXTURE_NAME": "fix-modern"})
	c, err := f.Client()
	if err != nil {
		t.Fatal(err)
	}
	info, _ := c.Info()
	if name, _ := info.Name(); !info.Modern || info.Version != mcp.V20260728 || name != "fix-modern" {
		t.Fatalf("info = %+v", info)
	}
	res, err := callTool(t, f, "echo", `{"x":1}`)
	if err != nil || !strings.Contains(string(res), `"structuredContent":{"x":1}`) {
		t.Fatalf("echo = %s, %v", res, err)
	}
	// Every request of the modern era names its version and the client's
	// capabilities in _meta (both required), and the client.
	if got := f.received(t); !strings.Contains(got, `"tools/call","params":{"name":"echo","arguments":{"x":1},"_meta":{`+
		`"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"mcp-bastion-gateway","version":"0.1.0"},`+
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`) {
		t.Errorf("the fixture received:\n%s", got)
	}
}

// TestHandshakeLegacy: a server that does not know server/discover is
// initialized, and each legacy version it answers with is accepted.
func TestHandshakeLegacy(t *testing.T) {
	for _, v := range mcp.LegacyVersions() {
		t.Run(v, func(t *testing.T) {
			f := startFixture(t, map[string]string{"FIXTURE_ERA": "legacy", "FIXTURE_VERSION": v})
			c, err := f.Client()
			if err != nil {
				t.Fatal(err)
			}
			if info, _ := c.Info(); info.Modern || info.Version != v {
				t.Fatalf("info = %+v", info)
			}
			if _, err := callTool(t, f, "echo", `{}`); err != nil {
				t.Fatal(err)
			}
			got := f.received(t)
			if !strings.Contains(got, `"method":"server/discover"`) || !strings.Contains(got, `"method":"initialize"`) ||
				!strings.Contains(got, `"method":"notifications/initialized"`) {
				t.Errorf("handshake lines:\n%s", got)
			}
		})
	}
}

// TestHandshakeUnknownVersion: a server that answers initialize with a
// version the gateway does not speak never becomes connected.
func TestHandshakeUnknownVersion(t *testing.T) {
	f := startServer(t, []string{filepath.Join(binDir, "mcpfixture")}, map[string]string{"FIXTURE_ERA": "legacy", "FIXTURE_VERSION": "1999-01-01"}, false)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(f.logs.String(), "which the gateway does not speak") {
		if time.Now().After(deadline) {
			t.Fatalf("log:\n%s", f.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := f.Client(); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Client() = %v, want ErrUnavailable", err)
	}
}

// TestRefundExample: the project's own refund server, as a real
// downstream, negotiates 2026-07-28 and answers a call.
func TestRefundExample(t *testing.T) {
	f := startServer(t, []string{filepath.Join(binDir, "refund")}, map[string]string{"MCP_LOG_LEVEL": "warn"}, true)
	c, _ := f.Client()
	if info, _ := c.Info(); !info.Modern {
		t.Fatalf("info = %+v", info)
	}
	res, err := callTool(t, f, "get_customer_record", `{"customer_id":"CUST-00001"}`)
	if err != nil || !strings.Contains(string(res), `"found":true`) {
		t.Fatalf("call = %s, %v", res, err)
	}
}

// TestMisbehavingLines: garbage, an oversized line, a duplicate response
// and a response to an id nobody asked for are counted and dropped; the
// calls still get their answers and the connection lives on.
func TestMisbehavingLines(t *testing.T) {
	f := startFixture(t, map[string]string{"FIXTURE_TOOLS": "garbage,oversize,duplicate,wrong-id"})
	for _, name := range []string{"garbage", "oversize", "duplicate", "wrong-id"} {
		res, err := callTool(t, f, name, `{"n":1}`)
		if err != nil || !strings.Contains(string(res), `"structuredContent":{"n":1}`) {
			t.Fatalf("%s = %s, %v", name, res, err)
		}
	}
	// The duplicate may still be on its way.
	eventually(func() bool { return f.Stats().Unexpected.Load() >= 2 })
	st := f.Stats()
	if st.Garbage.Load() < 2 || st.Oversized.Load() != 1 || st.Unexpected.Load() != 2 {
		t.Errorf("garbage %d oversized %d unexpected %d; want >=2, 1, 2", st.Garbage.Load(), st.Oversized.Load(), st.Unexpected.Load())
	}
	if _, err := callTool(t, f, "echo", `{}`); err != nil {
		t.Fatal(err)
	}
}

// TestCrashFailsOnlyCallsInFlight: a child that dies mid-call fails that
// call with ErrConnectionLost; it is restarted, and calls work again.
func TestCrashFailsOnlyCallsInFlight(t *testing.T) {
	f := startFixture(t, map[string]string{"FIXTURE_TOOLS": "crash,slow"})
	slow := make(chan error, 1)
	go func() {
		_, err := callTool(t, f, "slow", `{"ms":5000}`)
		slow <- err
	}()
	if _, err := callTool(t, f, "crash", `{}`); !errors.Is(err, ErrConnectionLost) {
		t.Fatalf("crash call: %v, want ErrConnectionLost", err)
	}
	if err := <-slow; !errors.Is(err, ErrConnectionLost) {
		t.Fatalf("call in flight during the crash: %v, want ErrConnectionLost", err)
	}
	f.await(t, Connected)
	if f.Restarts() != 1 {
		t.Errorf("restarts = %d, want 1", f.Restarts())
	}
	if _, err := callTool(t, f, "echo", `{}`); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if !strings.Contains(f.logs.String(), `"msg":"downstream exited"`) || !strings.Contains(f.logs.String(), `exit status 3`) {
		t.Errorf("log:\n%s", f.logs.String())
	}
}

// TestCancellationReachesDownstream: a call whose context ends sends
// notifications/cancelled for the gateway's own request id.
func TestCancellationReachesDownstream(t *testing.T) {
	f := startFixture(t, map[string]string{"FIXTURE_TOOLS": "hang"})
	ctx, cancel := context.WithCancelCause(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := f.Call(ctx, "tools/call", []byte(`{"name":"hang","arguments":{}}`), CallOptions{})
		done <- err
	}()
	if !eventually(func() bool { return strings.Contains(f.received(t), `"name":"hang"`) }) {
		t.Fatal("the call never reached the fixture")
	}
	stop := errors.New("the caller went away")
	cancel(stop)
	if err := <-done; !errors.Is(err, stop) {
		t.Fatalf("Call = %v, want the cancel cause", err)
	}
	if !eventually(func() bool { return strings.Contains(f.received(t), `{"fixture":"cancelled"`) }) {
		t.Fatalf("the fixture saw no cancellation:\n%s", f.received(t))
	}
	var id int
	for _, line := range strings.Split(f.received(t), "\n") {
		if strings.Contains(line, `"name":"hang"`) {
			var m struct{ ID int }
			json.Unmarshal([]byte(line), &m)
			id = m.ID
		}
	}
	if want := fmt.Sprintf(`"method":"notifications/cancelled","params":{"requestId":%d,`, id); !strings.Contains(f.received(t), want) {
		t.Errorf("no %s in:\n%s", want, f.received(t))
	}
}

// TestProgressTranslated: the downstream sees the gateway's progress
// token; the caller gets its own back.
func TestProgressTranslated(t *testing.T) {
	f := startFixture(t, map[string]string{"FIXTURE_TOOLS": "progress"})
	var got []string
	_, err := f.Call(t.Context(), "tools/call", []byte(`{"name":"progress","arguments":{}}`), CallOptions{
		ProgressToken: jsontext.Value(`"caller-7"`),
		Progress:      func(p jsontext.Value) { got = append(got, string(p)) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !strings.Contains(got[0], `"progressToken":"caller-7"`) {
		t.Fatalf("progress = %q", got)
	}
	if strings.Contains(f.received(t), "caller-7") {
		t.Errorf("the caller's token reached the downstream:\n%s", f.received(t))
	}
}

// TestExplicitEnvironment: the child gets PATH and the configured
// variables, nothing of the gateway's own environment.
func TestExplicitEnvironment(t *testing.T) {
	t.Setenv("GATEWAY_SECRET_X", "must-not-leak")
	f := startFixture(t, map[string]string{"FIXTURE_TOOLS": "environ", "CHOSEN": "1"})
	res, err := callTool(t, f, "environ", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		StructuredContent struct{ Names []string } `json:"structuredContent"`
	}
	if err := json.Unmarshal(res, &out); err != nil {
		t.Fatal(err)
	}
	names := strings.Join(out.StructuredContent.Names, ",")
	for _, want := range []string{"PATH", "CHOSEN", "FIXTURE_TOOLS"} {
		if !strings.Contains(","+names+",", ","+want+",") {
			t.Errorf("child environment %s lacks %s", names, want)
		}
	}
	if strings.Contains(names, "GATEWAY_SECRET_X") || strings.Contains(names, "HOME") {
		t.Errorf("child environment %s has the gateway's own variables", names)
	}
}

// TestNotificationsRelayed: list_changed outside a call reaches OnNotify.
// A legacy server sends it unasked; a 2026-07-28 one only on the
// subscriptions/listen the connector holds open, acknowledged before the
// server is reported connected.
func TestNotificationsRelayed(t *testing.T) {
	for _, era := range []string{"modern", "legacy"} {
		t.Run(era, func(t *testing.T) {
			f := startFixture(t, map[string]string{"FIXTURE_TOOLS": "listchanged", "FIXTURE_ERA": era})
			await := func(method string) {
				t.Helper()
				timeout := time.After(5 * time.Second)
				for {
					select {
					case n := <-f.notes:
						if n.Method == method {
							return
						}
					case <-timeout:
						t.Fatalf("no %s; log:\n%s", method, f.logs.String())
					}
				}
			}
			if _, err := callTool(t, f, "listchanged", `{}`); err != nil {
				t.Fatal(err)
			}
			await("notifications/tools/list_changed")
		})
	}
}

// TestStderrBounded: the child's stderr reaches the log under the
// server's name, at most a burst of lines per window.
func TestStderrBounded(t *testing.T) {
	f := startFixture(t, map[string]string{"FIXTURE_STDERR": "150"})
	if !eventually(func() bool { return strings.Contains(f.logs.String(), "fixture stderr line 99") }) {
		t.Fatalf("log:\n%s", f.logs.String())
	}
	logs := f.logs.String()
	if strings.Contains(logs, "fixture stderr line 100") {
		t.Errorf("more than the burst was logged")
	}
	if !strings.Contains(logs, `"server":"fx"`) {
		t.Errorf("stderr lines not tagged with the server's name")
	}
}

// TestShutdownKillsProcessThatIgnoresTerm: a child that ignores EOF and
// SIGTERM is killed, with its process group, and Close waits for it.
func TestShutdownKillsProcessThatIgnoresTerm(t *testing.T) {
	f := startFixture(t, map[string]string{"FIXTURE_IGNORE_TERM": "1"})
	pid := f.PID()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("pid %d still exists after Close (kill 0: %v)", pid, err)
	}
	logs := f.logs.String()
	if !strings.Contains(logs, `"signal":"terminated"`) || !strings.Contains(logs, `"signal":"killed"`) {
		t.Errorf("log:\n%s", logs)
	}
}

// TestCallUnavailable: before the handshake, and after Close, calls fail
// at once with ErrUnavailable.
func TestCallUnavailable(t *testing.T) {
	f := startServer(t, []string{filepath.Join(binDir, "no-such-binary")}, nil, false)
	if _, err := f.Call(t.Context(), "tools/list", nil, CallOptions{}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Call = %v, want ErrUnavailable", err)
	}
}

// TestExitBeforeHandshake: a server that exits at once is reported as
// having exited, with its status, as soon as it does (not as its
// handshake's timeout), and is restarted; so is one whose grandchild,
// in a session of its own, keeps its stderr open after it died, for
// longer than the test would wait for the restarts.
func TestExitBeforeHandshake(t *testing.T) {
	for name, script := range map[string]string{
		"exits": "echo going >&2; exit 3",
		// The child exits only once the grandchild has its session (it
		// says so on the pipe read): before, the signal to the dead
		// child's group would still reach it.
		"a grandchild holds its stderr": `{ setsid sh -c 'echo $$ >>"$PIDS"; echo; exec sleep 60 >/dev/null' </dev/null & } | read -r _; echo going >&2; exit 3`,
	} {
		t.Run(name, func(t *testing.T) {
			pidFile, _ := grandchildren(t)
			f := startServer(t, []string{"/bin/sh", "-c", script}, map[string]string{"PIDS": pidFile}, false)
			start := time.Now()
			f.await(t, Failed)
			if took := time.Since(start); took > handshakeTimeout/2 {
				t.Errorf("the exit was seen after %v", took)
			}
			deadline := time.Now().Add(30 * time.Second)
			for f.Restarts() < 2 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if f.Restarts() < 2 {
				t.Errorf("restarts = %d; log:\n%s", f.Restarts(), f.logs.String())
			}
			if logs := f.logs.String(); !strings.Contains(logs, `"msg":"downstream exited before its handshake"`) || !strings.Contains(logs, "exit status 3") {
				t.Errorf("log:\n%s", logs)
			}
		})
	}
}

// TestCrashWhileGrandchildHoldsOutput: a child that dies while a process
// it started still holds its stdout is seen to have died when it does,
// not when its output ends: the call in flight fails with
// ErrConnectionLost (not at its deadline), the child is reaped (no
// zombie), what it left in its process group is killed, and it is
// restarted. A grandchild that left the group, which no signal to the
// group reaches, cannot hold the restart up either.
func TestCrashWhileGrandchildHoldsOutput(t *testing.T) {
	for name, tc := range map[string]struct {
		spawn  string
		killed bool
	}{
		"in its group":   {spawn: "sleep 60", killed: true},
		"left its group": {spawn: "setsid sleep 60"},
	} {
		t.Run(name, func(t *testing.T) {
			pidFile, pids := grandchildren(t)
			// The shell starts the grandchild with its stdout and becomes
			// the fixture, which exits on a call of crash.
			f := startServer(t, []string{"/bin/sh", "-c", tc.spawn + ` & echo $! >>"$PIDS"; exec "$0"`, filepath.Join(binDir, "mcpfixture")},
				map[string]string{"FIXTURE_TOOLS": "crash", "PIDS": pidFile}, true)
			leader := f.PID()
			grandchild := pids()[0]
			// A grandchild that left the group must have left it before
			// the crash, or the signal to the group would still reach it.
			if !tc.killed && !eventually(func() bool {
				_, pgrp, ok := procStat(grandchild)
				return ok && pgrp != leader
			}) {
				t.Fatalf("the grandchild %d never left the group %d", grandchild, leader)
			}

			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			if _, err := f.Call(ctx, "tools/call", []byte(`{"name":"crash","arguments":{}}`), CallOptions{Name: "crash"}); !errors.Is(err, ErrConnectionLost) {
				t.Fatalf("crash call: %v, want ErrConnectionLost; log:\n%s", err, f.logs.String())
			}
			f.await(t, Connected)
			if f.Restarts() != 1 {
				t.Errorf("restarts = %d, want 1", f.Restarts())
			}
			if _, err := callTool(t, f, "echo", `{}`); err != nil {
				t.Fatalf("after the restart: %v", err)
			}
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", leader)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the dead child %d was not reaped (stat: %v)", leader, err)
			}
			if tc.killed && !eventually(func() bool {
				state, _, ok := procStat(grandchild)
				return !ok || state == 'Z' || state == 'X' // exited, whether reaped yet or not
			}) {
				t.Errorf("the grandchild %d in the dead child's group still runs", grandchild)
			}
			if logs := f.logs.String(); !strings.Contains(logs, `"msg":"downstream exited"`) || !strings.Contains(logs, "exit status 3") {
				t.Errorf("log:\n%s", logs)
			}
		})
	}
}

// grandchildren returns a file for the children a test starts to write
// the ids of the processes they start to, one a line, and a function
// that reads them. Those are killed when the test ends: one that left
// its parent's process group is reached by no shutdown.
func grandchildren(t *testing.T) (file string, pids func() []int) {
	t.Helper()
	file = filepath.Join(t.TempDir(), "pids")
	pids = func() []int {
		b, err := os.ReadFile(file)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		var ids []int
		for _, field := range strings.Fields(string(b)) {
			var pid int
			if _, err := fmt.Sscan(field, &pid); err != nil {
				t.Fatalf("%s: %q", file, b)
			}
			ids = append(ids, pid)
		}
		return ids
	}
	t.Cleanup(func() {
		for _, pid := range pids() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return file, pids
}

// procStat returns the state and process group of pid, or false when
// there is no such process.
func procStat(pid int) (state byte, pgrp int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	// The fields follow the command, in parentheses that it may contain:
	// state, ppid, pgrp.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	var ppid int
	if _, err := fmt.Sscanf(string(b[i+1:]), " %c %d %d", &state, &ppid, &pgrp); err != nil {
		return 0, 0, false
	}
	return state, pgrp, true
}
