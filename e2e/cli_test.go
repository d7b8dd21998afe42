package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// runBastion runs the binary to completion and returns its outputs and exit
// status.
func runBastion(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin("bastion"), args...)
	cmd.Env = env
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.Stdin = strings.NewReader("")
	code = exitCode(cmd.Run())
	return o.String(), e.String(), code
}

func TestServeHelpListsEveryVariable(t *testing.T) {
	t.Parallel()
	out, _, code := runBastion(t, baseEnv(), "serve", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, v := range []string{
		"MCP_SAFE_DATA_DIR", "MCP_SQL_DSN", "MCP_METRICS_ENABLED", "MCP_METRICS_DISK_PATH",
		"MCP_MAX_CONCURRENCY", "MCP_QUEUE_TIMEOUT_MS", "MCP_CALL_TIMEOUT_MS", "MCP_DRAIN_GRACE_MS",
		"MCP_MAX_FRAME_BYTES", "MCP_SQL_MAX_ROWS", "MCP_SQL_STATEMENT_TIMEOUT_MS", "MCP_SQL_POOL_MAX_SIZE",
		"MCP_SQL_MAX_RESULT_BYTES", "MCP_FS_MAX_BYTES", "MCP_LOG_LEVEL", "MCP_LOG_FORMAT",
	} {
		mustContain(t, out, v)
	}
	mustContain(t, out, "1..1024") // ranges are shown
}

func TestBadConfigurationExits2(t *testing.T) {
	t.Parallel()
	cases := []struct{ env, want string }{
		{"MCP_MAX_CONCURRENCY=0", "MCP_MAX_CONCURRENCY"},
		{"MCP_MAX_CONCURRENCY=ten", "MCP_MAX_CONCURRENCY"},
		{"MCP_MAX_CONCURRENCY=+16", "MCP_MAX_CONCURRENCY"},
		{"MCP_MAX_CONCURRENCY=016", "MCP_MAX_CONCURRENCY"},
		{"MCP_QUEUE_TIMEOUT_MS=-1", "MCP_QUEUE_TIMEOUT_MS"},
		{"MCP_METRICS_ENABLED=yes", "MCP_METRICS_ENABLED"},
		{"MCP_LOG_LEVEL=verbose", "MCP_LOG_LEVEL"},
		{"MCP_MAX_FRAME_BYTES=", "MCP_MAX_FRAME_BYTES"},
		{"MCP_METRICS_DISK_PATH=relative/path", "MCP_METRICS_DISK_PATH"},
		{"MCP_SQL_MAX_ROW=5", "MCP_SQL_MAX_ROW"}, // a typo is not silently ignored
	}
	for _, c := range cases {
		out, errOut, code := runBastion(t, baseEnv(c.env), "serve")
		if code != 2 {
			t.Errorf("%s: exit %d, want 2", c.env, code)
		}
		if out != "" {
			t.Errorf("%s: stdout %q", c.env, out)
		}
		mustContain(t, errOut, c.want)
	}
}

func TestSecretNeverPrinted(t *testing.T) {
	t.Parallel()
	// A DSN with a password, and another variable wrong: the error report
	// and the logs must never contain the DSN.
	const dsn = "postgres://reader:hunter2-secret@db.internal:5432/app"
	_, errOut, code := runBastion(t, baseEnv("MCP_SQL_DSN="+dsn, "MCP_LOG_LEVEL=loud"), "serve")
	if code != 2 {
		t.Fatalf("exit %d", code)
	}
	if strings.Contains(errOut, "hunter2") || strings.Contains(errOut, "db.internal") {
		t.Fatalf("DSN leaked: %s", errOut)
	}
}

func TestCheckAndVersion(t *testing.T) {
	t.Parallel()
	_, errOut, code := runBastion(t, baseEnv(), "serve", "--check")
	if code != 0 {
		t.Fatalf("--check exit %d: %s", code, errOut)
	}
	out, _, code := runBastion(t, baseEnv(), "version")
	if code != 0 || !strings.HasPrefix(out, "bastion ") {
		t.Fatalf("version: %d %q", code, out)
	}
	_, _, code = runBastion(t, baseEnv(), "frobnicate")
	if code != 2 {
		t.Fatalf("unknown command exit %d", code)
	}
	// A mistake in the flags gets the error and where the help is, not
	// the whole help under which the error would be lost.
	for _, cmd := range []string{"serve", "gateway", "admit", "version"} {
		_, errOut, code := runBastion(t, baseEnv(), cmd, "--nope")
		if code != 2 || !strings.Contains(errOut, "-nope") || !strings.Contains(errOut, "bastion "+cmd+" --help") || strings.Count(errOut, "\n") > 2 {
			t.Errorf("bastion %s --nope: exit %d, %q", cmd, code, errOut)
		}
	}
	for _, args := range [][]string{{"version", "--bogus"}, {"version", "extra"}, {"version", "--", "--help"}, {"serve", "--", "--help"}} {
		if _, _, code := runBastion(t, baseEnv(), args...); code != 2 {
			t.Errorf("bastion %s: exit %d, want 2", strings.Join(args, " "), code)
		}
	}
	if out, _, code := runBastion(t, baseEnv(), "version", "--help"); code != 0 || !strings.HasPrefix(out, "Usage: bastion version") {
		t.Errorf("version --help: exit %d, %q", code, out)
	}
}

// TestStdinLeftBlocking: non-blocking mode belongs to the open file
// description, which bastion shares with whoever started it. After any
// command, including a whole serve session, the caller's end must be as
// it was, or the next reader of the same pipe (a shell) fails with
// EAGAIN.
func TestStdinLeftBlocking(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"serve", "--check"}, {"serve"}} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin("bastion"), args...)
		cmd.Env = baseEnv()
		cmd.Stdin = r
		w.Close() // EOF at once: serve drains and exits 0
		if err := cmd.Run(); err != nil {
			t.Errorf("bastion %s: %v", strings.Join(args, " "), err)
		}
		flags, err := unix.FcntlInt(r.Fd(), unix.F_GETFL, 0)
		if err != nil {
			t.Fatal(err)
		}
		if flags&unix.O_NONBLOCK != 0 {
			t.Errorf("bastion %s left its stdin non-blocking", strings.Join(args, " "))
		}
		r.Close()
	}
}

// TestSignalInterruptsStartup: with a database that accepts connections
// but never answers, start-up waits up to 5 s for it. A SIGINT then stops
// at once, and --check does not report success.
func TestSignalInterruptsStartup(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // hold it open, say nothing
			accepted <- struct{}{}
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	dsn := fmt.Sprintf("MCP_SQL_DSN=host=127.0.0.1 port=%d user=x dbname=x sslmode=disable connect_timeout=30", port)
	for _, args := range [][]string{{"serve", "--check"}, {"serve"}} {
		cmd := exec.Command(bin("bastion"), args...)
		cmd.Env = baseEnv(dsn)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		cmd.Stdin = strings.NewReader("")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The server is starting once it connects to the database (a
		// fixed sleep was not enough for a -race binary on a busy machine:
		// the signal came before main, and killed it).
		select {
		case <-accepted:
		case <-time.After(waitLimit):
			t.Fatalf("bastion %s never connected to the database", strings.Join(args, " "))
		}
		sent := time.Now()
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		code := exitCode(cmd.Wait())
		// Not a speed assertion: anything near the 5 s ping timeout means
		// the signal waited for it.
		if took := time.Since(sent); code != 1 || took > 3*time.Second || !strings.Contains(stderr.String(), "interrupted while starting") {
			t.Errorf("bastion %s, SIGINT during start-up: exit %d after %v, stderr %q; want exit 1 at once, \"interrupted while starting\"",
				strings.Join(args, " "), code, took.Round(time.Millisecond), stderr.String())
		}
	}
}

// TestOneSocketForStdinAndStdout: inetd and systemd hand a server one
// socket as both stdin and stdout, so the non-blocking mode of stdin
// applies to stdout too. A client that sends many requests before reading
// any answer must still get every one, not a session that dies on EAGAIN.
func TestOneSocketForStdinAndStdout(t *testing.T) {
	t.Parallel()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "client"), os.NewFile(uintptr(fds[1]), "server")
	defer ours.Close()
	cmd := exec.Command(bin("bastion"), "serve")
	cmd.Env = baseEnv()
	cmd.Stdin, cmd.Stdout = theirs, theirs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	theirs.Close()

	const n = 400
	go func() {
		var b strings.Builder
		b.WriteString(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n")
		b.WriteString(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`+"\n", i)
		}
		ours.Write([]byte(b.String()))
	}()
	// Let the answers pile up in the socket before reading any.
	time.Sleep(time.Second)
	sc := bufio.NewScanner(ours)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	got := 0
	for got < n+1 && sc.Scan() {
		got++
	}
	if got != n+1 {
		t.Fatalf("read %d answers, want %d (scanner: %v)", got, n+1, sc.Err())
	}
	if err := unix.Shutdown(fds[0], unix.SHUT_WR); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(cmd.Wait()); code != 0 {
		t.Errorf("exit %d after EOF, want 0", code)
	}
}

// TestUnrelatedMCPVariables: the MCP_ prefix is shared. Variables MCP
// clients set for themselves (and their children inherit) must not stop
// the server: it starts, serves a session and warns once per variable,
// naming it and never its value. A likely misspelling of one of ours
// still stops start-up, naming the variable it resembles.
func TestUnrelatedMCPVariables(t *testing.T) {
	t.Parallel()
	const value = "client-value-x9"
	p := serve(t, "MCP_TIMEOUT=60000", "MCP_TOOL_TIMEOUT="+value, "MCP_BEARER_TOKEN="+value)
	if m := p.initialize("2025-11-25"); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	p.call(1, "system_metrics", map[string]any{})
	if m := p.recv(); m["result"] == nil {
		t.Fatalf("tools/call: %v", m)
	}
	p.closeStdin()
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d: %s", code, p.stderr.String())
	}
	logs := p.stderr.String()
	for _, name := range []string{"MCP_BEARER_TOKEN", "MCP_TIMEOUT", "MCP_TOOL_TIMEOUT"} {
		if n := strings.Count(logs, `"variable":"`+name+`"`); n != 1 {
			t.Errorf("%d warnings name %s, want 1:\n%s", n, name, logs)
		}
	}
	if strings.Contains(logs, value) {
		t.Errorf("the log quotes a variable's value:\n%s", logs)
	}

	for _, tc := range []struct{ env, near string }{
		{"MCP_SQL_DNS=host=/nonexistent", "MCP_SQL_DSN"},
		{"MCP_SAFE_DATA_DIRS=/tmp", "MCP_SAFE_DATA_DIR"},
		{"mcp_log_level=debug", "MCP_LOG_LEVEL"},
		{"MCP_CALL_TIMEOUT=5", "MCP_CALL_TIMEOUT_MS"},
	} {
		name, _, _ := strings.Cut(tc.env, "=")
		_, errOut, code := runBastion(t, baseEnv(tc.env), "serve")
		if code != 2 || !strings.Contains(errOut, name+": ") || !strings.Contains(errOut, "did you mean "+tc.near+"?") {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 naming %s", tc.env, code, errOut, tc.near)
		}
	}
}

// TestCallLogLine: every tools/call leaves one info line, refusals too —
// tool, id, outcome or problem code, duration in milliseconds — and none
// holds an argument value.
func TestCallLogLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "note.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	const marker = "arg-marker-q7"
	p := serve(t, "MCP_SAFE_DATA_DIR="+dir)
	p.initialize("2025-11-25")
	calls := []struct {
		id      int
		name    string
		args    any
		outcome string
	}{
		{1, "sandbox_fs_read", map[string]any{"relative_path": "note.txt"}, "ok"},
		{2, "sandbox_fs_read", map[string]any{"relative_path": "../" + marker}, "MCP_ACCESS_DENIED"},
		{3, "sandbox_fs_read", map[string]any{"relative_path": "note.txt", "bogus": marker}, "MCP_VALIDATION_ERROR"},
		{4, "no_such_tool_" + marker[:3], map[string]any{"x": marker}, "unknown_tool"},
		{5, "system_metrics", map[string]any{}, "ok"},
	}
	for _, c := range calls {
		p.call(c.id, c.name, c.args)
		p.recv()
	}
	p.closeStdin()
	p.wait()
	lines := map[float64]map[string]any{}
	for _, line := range strings.Split(p.stderr.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != "tools/call" {
			continue
		}
		if strings.Contains(line, marker) {
			t.Errorf("a call's log line holds an argument value: %s", line)
		}
		if rec["level"] != "INFO" {
			t.Errorf("level %v, want INFO: %s", rec["level"], line)
		}
		if _, ok := rec["duration_ms"].(float64); !ok {
			t.Errorf("no duration_ms number: %s", line)
		}
		if _, ok := rec["duration"]; ok {
			t.Errorf("a duration in nanoseconds: %s", line)
		}
		id, _ := strconv.ParseFloat(fmt.Sprint(rec["id"]), 64)
		if lines[id] != nil {
			t.Errorf("two lines for call %v", id)
		}
		lines[id] = rec
	}
	for _, c := range calls {
		rec := lines[float64(c.id)]
		if rec == nil {
			t.Errorf("call %d (%s): no log line:\n%s", c.id, c.name, p.stderr.String())
			continue
		}
		if rec["tool"] != c.name || rec["outcome"] != c.outcome {
			t.Errorf("call %d: tool %v outcome %v, want %s %s", c.id, rec["tool"], rec["outcome"], c.name, c.outcome)
		}
	}
}

// TestCheckListsTools: --check prints the tools a session would be
// offered, and warns when there would be none.
func TestCheckListsTools(t *testing.T) {
	t.Parallel()
	out, errOut, code := runBastion(t, baseEnv("MCP_SAFE_DATA_DIR="+t.TempDir()), "serve", "--check")
	if code != 0 || !strings.Contains(out, "tools that would be offered: 2") ||
		!strings.Contains(out, "  sandbox_fs_read(relative_path, ") || !strings.Contains(out, "  system_metrics()") {
		t.Errorf("--check: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, errOut, code = runBastion(t, baseEnv("MCP_METRICS_ENABLED=false"), "serve", "--check")
	if code != 0 || !strings.Contains(out, "tools that would be offered: 0") || !strings.Contains(errOut, "warning: no tool would be offered") {
		t.Errorf("--check with no tools: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestRootServingSystemRootWarns: root serving / (or a tree holding
// etc/) gets a start-up warning; an ordinary directory does not.
func TestRootServingSystemRootWarns(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("the warning is for a server running as root; this test is not")
	}
	chroot := t.TempDir()
	if err := os.Mkdir(filepath.Join(chroot, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	const warning = "serves a system root or system directory"
	for _, tc := range []struct {
		dir  string
		warn bool
	}{{"/", true}, {chroot, true}, {"/etc", true}, {"/proc/self/root", true}, {t.TempDir(), false}} {
		_, errOut, code := runBastion(t, baseEnv("MCP_SAFE_DATA_DIR="+tc.dir), "serve", "--check")
		if code != 0 || strings.Contains(errOut, warning) != tc.warn {
			t.Errorf("MCP_SAFE_DATA_DIR=%s: exit %d, warned %v, want %v: %s", tc.dir, code, !tc.warn, tc.warn, errOut)
		}
		if tc.dir == chroot && strings.Contains(errOut, tc.dir) {
			t.Errorf("the warning names the directory: %s", errOut)
		}
	}
}

// TestStartupMessageShape: every start-up refusal has one shape,
// "VARIABLE: what is wrong: what is accepted", and exits 2.
func TestStartupMessageShape(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ env, variable string }{
		{"MCP_MAX_CONCURRENCY=0", "MCP_MAX_CONCURRENCY"},
		{"MCP_LOG_FORMAT=yaml", "MCP_LOG_FORMAT"},
		{"MCP_SQL_DNS=x", "MCP_SQL_DNS"},
		{"MCP_SAFE_DATA_DIR=" + file, "MCP_SAFE_DATA_DIR"},
		{"MCP_METRICS_DISK_PATH=" + file, "MCP_METRICS_DISK_PATH"},
		{"MCP_SQL_DSN=postgres://u@h:port/db", "MCP_SQL_DSN"},
		{"MCP_SQL_DSN=nonsense", "MCP_SQL_DSN"},
	} {
		_, errOut, code := runBastion(t, baseEnv(tc.env), "serve")
		var line string
		for _, l := range strings.Split(errOut, "\n") {
			if l = strings.TrimPrefix(strings.TrimSpace(l), "bastion serve: "); strings.HasPrefix(l, tc.variable+": ") {
				line = l
			}
		}
		parts := strings.Split(strings.TrimPrefix(line, tc.variable+": "), ": ")
		if code != 2 || line == "" || len(parts) < 2 || parts[0] == "" || parts[len(parts)-1] == "" {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 and %s: what is wrong: what is accepted", tc.env, code, errOut, tc.variable)
		}
	}
}
