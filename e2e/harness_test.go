// Package e2e drives the real binaries over stdio: the bastion binary built
// from this tree, a real process, real pipes and real signals.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-bastion/bastion/internal/pgcluster/pgtest"
)

// binDir holds the binaries built once for the whole package.
var binDir string

// bin returns the path of a built binary.
func bin(name string) string { return filepath.Join(binDir, name) }

func TestMain(m *testing.M) {
	os.Exit(func() int {
		// E2E_BIN_DIR, when set, is a directory the binaries are kept in
		// between runs (the mutation check runs this package once per
		// mutant): the go command relinks only those whose build changed.
		dir := os.Getenv("E2E_BIN_DIR")
		if dir == "" {
			var err error
			if dir, err = os.MkdirTemp("", "bastion-e2e-"); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			defer os.RemoveAll(dir)
		}
		binDir = dir
		// One go command builds them all, linking side by side; each is
		// named after its package's directory.
		args := []string{"build", "-o", dir + string(filepath.Separator)}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, binaries...)...)
		cmd.Dir = ".."
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: build %v: %v\n", binaries, err)
			return 1
		}
		// SQL tests share one throwaway PostgreSQL cluster, started on
		// first use and stopped here.
		code := pgtest.Runner(m).Run()
		if leaks := suiteLeaks.check(); len(leaks) > 0 {
			for _, l := range leaks {
				fmt.Fprintln(os.Stderr, "e2e: leak:", l)
			}
			return 1
		}
		return code
	}())
}

// binaries are the packages the tests run, relative to the module root;
// bin names each by its directory's last element.
var binaries = []string{"./cmd/bastion", "./e2e/testserver", "./examples/refund", "./internal/cmd/mcpfixture", "./e2e/httpfixture"}

// waitLimit bounds every wait in these tests. It is a failure bound, not a
// timing assertion: a correct server answers in milliseconds.
const waitLimit = 20 * time.Second

// proc is a running server with line-oriented access to its stdio.
type proc struct {
	t      testing.TB
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan []byte
	stderr *syncBuffer
	done   chan struct{}
	exit   int
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// baseEnv is the environment every server starts with: a clean slate of
// MCP_* variables, plus PATH and HOME.
func baseEnv(extra ...string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	return append(env, extra...)
}

// start runs binary name with args and env and returns the process.
func start(t testing.TB, name string, args []string, env []string) *proc {
	t.Helper()
	cmd := exec.Command(bin(name), args...)
	cmd.Env = env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, stdin: stdin, lines: make(chan []byte, 1024), stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer close(p.lines)
		br := bufio.NewReaderSize(stdout, 1<<20)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				p.lines <- line
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		<-readDone
		err := cmd.Wait()
		p.exit = exitCode(err)
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("server stderr:\n%s", p.stderr.String())
		}
	})
	return p
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return -1
}

// serve starts `bastion serve` with the given MCP_* settings.
func serve(t testing.TB, env ...string) *proc {
	t.Helper()
	return start(t, "bastion", []string{"serve"}, baseEnv(env...))
}

// send writes one line (a newline is appended).
func (p *proc) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.t.Fatalf("write to server: %v", err)
	}
}

// sendJSON marshals v and sends it as one line.
func (p *proc) sendJSON(v any) {
	p.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		p.t.Fatal(err)
	}
	p.send(string(b))
}

// recvLine returns the next stdout line, failing the test if none comes.
func (p *proc) recvLine() []byte {
	p.t.Helper()
	select {
	case line, ok := <-p.lines:
		if !ok {
			p.t.Fatalf("server closed stdout; stderr:\n%s", p.stderr.String())
		}
		return line
	case <-time.After(waitLimit):
		p.t.Fatalf("no message from the server within %s", waitLimit)
	}
	return nil
}

// msg is a decoded server message.
type msg map[string]any

// recv returns the next message, checking the line rules on the way: one
// JSON object, ASCII only, newline-terminated.
func (p *proc) recv() msg {
	p.t.Helper()
	line := p.recvLine()
	checkLine(p.t, line)
	var m msg
	if err := json.Unmarshal(line, &m); err != nil {
		p.t.Fatalf("stdout line is not a JSON object: %v: %q", err, line)
	}
	return m
}

func checkLine(t testing.TB, line []byte) {
	t.Helper()
	if !bytes.HasSuffix(line, []byte("\n")) {
		t.Fatalf("stdout line not newline-terminated: %q", line)
	}
	body := line[:len(line)-1]
	for _, c := range body {
		if c >= 0x80 || c == '\r' || c == '\n' {
			t.Fatalf("stdout line is not ASCII-only single-line JSON: %q", line)
		}
	}
}

// recvN returns the next n messages keyed by their id (as JSON text).
func (p *proc) recvN(n int) map[string]msg {
	p.t.Helper()
	out := map[string]msg{}
	for range n {
		m := p.recv()
		out[idKey(m["id"])] = m
	}
	return out
}

func idKey(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// expectSilence asserts that no message arrives before the process's
// stdout closes. Use it only after closing stdin.
func (p *proc) expectEOF() {
	p.t.Helper()
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				return
			}
			p.t.Fatalf("unexpected message before EOF: %q", line)
		case <-time.After(waitLimit):
			p.t.Fatalf("stdout did not close within %s", waitLimit)
		}
	}
}

func (p *proc) closeStdin() {
	p.t.Helper()
	if err := p.stdin.Close(); err != nil {
		p.t.Fatal(err)
	}
}

// wait waits for the process to exit and returns its exit status.
func (p *proc) wait() int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.exit
	case <-time.After(waitLimit):
		p.t.Fatalf("server did not exit within %s; stderr:\n%s", waitLimit, p.stderr.String())
	}
	return -1
}

func (p *proc) signal(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

// initialize performs the legacy handshake at version v.
func (p *proc) initialize(v string) msg {
	p.t.Helper()
	p.sendJSON(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{
		"protocolVersion": v, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "e2e", "version": "1"},
	}})
	m := p.recv()
	p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return m
}

// call sends tools/call id name args.
func (p *proc) call(id any, name string, args any) {
	p.t.Helper()
	params := map[string]any{"name": name}
	if args != nil {
		params["arguments"] = args
	}
	p.sendJSON(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

// ctxT returns a context ended with the test.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	t.Cleanup(cancel)
	return ctx
}

func mustContain(t testing.TB, s, sub string) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Fatalf("%q does not contain %q", s, sub)
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
