package e2e

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testserver starts the test-only server on the same core.
func testserver(t testing.TB, env ...string) *proc {
	t.Helper()
	return start(t, "testserver", nil, baseEnv(env...))
}

func TestConcurrentCallsAnsweredOutOfOrder(t *testing.T) {
	t.Parallel()
	p := testserver(t)
	p.initialize("2025-11-25")
	// The slow call is sent first; the fast ones overtake it. The slow
	// call only ends when it is cancelled by the drain below, so the
	// order is not a matter of timing.
	p.call(1, "sleep", map[string]any{"ms": 600000})
	for i := 2; i <= 10; i++ {
		p.call(i, "sleep", map[string]any{"ms": 0})
	}
	got := p.recvN(9)
	for i := 2; i <= 10; i++ {
		if result(t, got[strconv.Itoa(i)])["isError"] != false {
			t.Fatalf("call %d: %v", i, got[strconv.Itoa(i)])
		}
	}
	// Inline requests are answered while the call is still running.
	p.send(`{"jsonrpc":"2.0","id":"ping","method":"ping"}`)
	if m := p.recv(); m["id"] != "ping" {
		t.Fatalf("got %v", m)
	}
	p.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	p.closeStdin()
	p.expectEOF()
	if c := p.wait(); c != 0 {
		t.Fatalf("exit %d", c)
	}
}

func TestDuplicateInFlightID(t *testing.T) {
	t.Parallel()
	p := testserver(t)
	p.initialize("2025-11-25")
	p.call(5, "sleep", map[string]any{"ms": 600000})
	p.call(5, "sleep", map[string]any{"ms": 0})
	m := p.recv()
	if m["id"] != float64(5) || errCode(t, m) != -32600 {
		t.Fatalf("duplicate id: %v", m)
	}
	p.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}`)
	p.closeStdin()
	p.expectEOF()
}

func TestCancellationSendsNoResponse(t *testing.T) {
	t.Parallel()
	p := testserver(t)
	p.initialize("2025-11-25")
	p.call(7, "sleep", map[string]any{"ms": 600000})
	p.call("7", "sleep", map[string]any{"ms": 600000})
	// A cancellation names the id with its JSON type: 7 is not "7".
	p.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}}`)
	// Invalid and unknown cancellations are ignored.
	p.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":12345}}`)
	p.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}`)
	p.send(`{"jsonrpc":"2.0","method":"notifications/cancelled"}`)
	p.call(8, "sleep", map[string]any{"ms": 0})
	if m := p.recv(); m["id"] != float64(8) {
		t.Fatalf("got %v, want the response to 8", m)
	}
	p.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"7"}}`)
	p.closeStdin()
	// Neither 7 nor "7" is ever answered.
	p.expectEOF()
	if c := p.wait(); c != 0 {
		t.Fatalf("exit %d", c)
	}
}

func TestEOFDrainCompletesInFlightCall(t *testing.T) {
	t.Parallel()
	p := testserver(t)
	p.initialize("2025-11-25")
	p.call(1, "sleep", map[string]any{"ms": 300})
	p.closeStdin()
	p.expectCompletedThenClean(1)
}

func TestSignalDrain(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			p := testserver(t)
			p.initialize("2025-11-25")
			p.call(1, "sleep", map[string]any{"ms": 300})
			p.syncPing() // the call is in flight now
			p.signal(sig)
			p.expectCompletedThenClean(1)
			mustContain(t, p.stderr.String(), "draining") // stderr is complete once the process has exited
		})
	}
}

func TestSignalDrainRealBinary(t *testing.T) {
	t.Parallel()
	p := serve(t)
	p.initialize("2025-11-25")
	p.call(1, "system_metrics", map[string]any{}) // samples CPU for 500 ms
	p.syncPing()                                  // the call is in flight: its answer takes 500 ms
	p.signal(syscall.SIGTERM)
	p.expectCompletedThenClean(1)
}

func TestDrainGraceExpiryCancels(t *testing.T) {
	t.Parallel()
	p := testserver(t, "MCP_DRAIN_GRACE_MS=100")
	p.initialize("2025-11-25")
	p.call(1, "sleep", map[string]any{"ms": 600000})
	p.syncPing()
	p.closeStdin()
	m := p.recv()
	if m["id"] != float64(1) || errCode(t, m) != -32603 {
		t.Fatalf("got %v", m)
	}
	mustContain(t, m["error"].(map[string]any)["message"].(string), "shutting down")
	p.expectEOF()
	if c := p.wait(); c != 0 {
		t.Fatalf("exit %d", c)
	}
}

func TestSecondSignalForcesStop(t *testing.T) {
	t.Parallel()
	p := testserver(t, "MCP_DRAIN_GRACE_MS=600000")
	p.initialize("2025-11-25")
	p.call(1, "sleep", map[string]any{"ms": 600000})
	p.syncPing()
	p.signal(syscall.SIGTERM)
	// Wait until the drain has begun before the second signal.
	waitFor(t, func() bool { return strings.Contains(p.stderr.String(), "draining") })
	p.signal(syscall.SIGTERM)
	if c := p.wait(); c != 1 {
		t.Fatalf("exit %d, want 1", c)
	}
	mustContain(t, p.stderr.String(), "second signal")
}

// syncPing sends a ping and waits for its answer. Requests are read in
// order and pings are answered inline, so every call sent before it has
// been read and is in flight (or done) when syncPing returns.
func (p *proc) syncPing() {
	p.t.Helper()
	p.send(`{"jsonrpc":"2.0","id":"sync","method":"ping"}`)
	if m := p.recv(); m["id"] != "sync" {
		p.t.Fatalf("got %v, want the answer to the sync ping", m)
	}
}

// expectCompletedThenClean checks that call id was answered with a
// successful result, then that stdout closes and the process exits 0.
func (p *proc) expectCompletedThenClean(id int) {
	p.t.Helper()
	m := p.recv()
	if m["id"] != float64(id) || result(p.t, m)["isError"] != false {
		p.t.Fatalf("in-flight call not completed: %v", m)
	}
	p.expectEOF()
	if c := p.wait(); c != 0 {
		p.t.Fatalf("exit %d", c)
	}
}

// waitFor polls cond until it holds, failing after waitLimit.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCallDeadline(t *testing.T) {
	t.Parallel()
	p := testserver(t, "MCP_CALL_TIMEOUT_MS=50")
	p.initialize("2025-11-25")
	p.call(1, "sleep", map[string]any{"ms": 600000})
	m := p.recv()
	text := toolText(t, m, true)
	mustContain(t, text, "MCP_EXECUTION_TIMEOUT")
	mustContain(t, text, `"status":504`)
}

func TestConcurrencyLimit(t *testing.T) {
	t.Parallel()
	p := testserver(t, "MCP_MAX_CONCURRENCY=2", "MCP_QUEUE_TIMEOUT_MS=100")
	p.initialize("2025-11-25")
	p.call(1, "sleep", map[string]any{"ms": 600000})
	p.call(2, "sleep", map[string]any{"ms": 600000})
	// Tasks start in no particular order, so a probe may still get a slot
	// before both sleepers hold theirs; once they do, every probe must be
	// refused after the queue timeout.
	n := 100
	var text string
	waitFor(t, func() bool {
		n++
		p.call(n, "sleep", map[string]any{"ms": 0})
		m := p.recv()
		if m["id"] != float64(n) {
			t.Fatalf("got %v", m)
		}
		if result(t, m)["isError"] != true {
			return false
		}
		text = toolText(t, m, true)
		return true
	})
	mustContain(t, text, "MCP_CONCURRENCY_LIMIT")
	mustContain(t, text, `"status":429`)
	p.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	p.call(4, "sleep", map[string]any{"ms": 0}) // a slot is free again
	if m := p.recv(); m["id"] != float64(4) || result(t, m)["isError"] != false {
		t.Fatalf("got %v", m)
	}
}

// toolText returns the text block of a tools/call result and checks its
// isError flag.
func toolText(t testing.TB, m msg, isError bool) string {
	t.Helper()
	r := result(t, m)
	if r["isError"] != isError {
		t.Fatalf("isError = %v, want %v: %v", r["isError"], isError, r)
	}
	c := r["content"].([]any)
	if len(c) != 1 {
		t.Fatalf("content = %v", c)
	}
	if isError {
		if _, ok := r["structuredContent"]; ok {
			t.Fatalf("a problem carries structuredContent: %v", r)
		}
	}
	return c[0].(map[string]any)["text"].(string)
}

func TestToolPanicIsInternalError(t *testing.T) {
	t.Parallel()
	p := testserver(t)
	p.initialize("2025-11-25")
	p.call(1, "panic", map[string]any{})
	m := p.recv()
	if errCode(t, m) != -32603 {
		t.Fatalf("got %v", m)
	}
	e := m["error"].(map[string]any)
	if e["message"] != "Internal error" {
		t.Fatalf("message = %v", e["message"])
	}
	raw := fmt.Sprint(m)
	if strings.Contains(raw, "secret detail") || strings.Contains(raw, "goroutine") {
		t.Fatalf("panic detail leaked to the client: %v", m)
	}
	ref := e["data"].(map[string]any)["metadata"].(map[string]any)["ref"].(string)
	// The log holds the detail under the same ref (stderr is copied
	// asynchronously, so wait for it).
	waitFor(t, func() bool { return strings.Contains(p.stderr.String(), ref) })
	mustContain(t, p.stderr.String(), "secret detail")
	p.call(2, "sleep", map[string]any{"ms": 0}) // the session goes on
	if m := p.recv(); m["id"] != float64(2) {
		t.Fatalf("got %v", m)
	}
}

func TestOversizedFrameThenContinue(t *testing.T) {
	t.Parallel()
	p := serve(t, "MCP_MAX_FRAME_BYTES=1024")
	p.initialize("2025-11-25")
	p.send(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"pad":"` + strings.Repeat("x", 2000) + `"}}}`)
	m := p.recv()
	if errCode(t, m) != -32600 || m["id"] != nil {
		t.Fatalf("got %v", m)
	}
	if d := m["error"].(map[string]any)["data"].(map[string]any); d["max_frame_bytes"] != float64(1024) {
		t.Fatalf("data = %v", d)
	}
	// Exactly at the cap is accepted.
	pad := 1024 - len(`{"jsonrpc":"2.0","id":2,"method":"ping","params":{"_meta":{"pad":""}}}`)
	p.send(`{"jsonrpc":"2.0","id":2,"method":"ping","params":{"_meta":{"pad":"` + strings.Repeat("y", pad) + `"}}}`)
	if m := p.recv(); m["id"] != float64(2) {
		t.Fatalf("frame at the cap: %v", m)
	}
}

// TestHugeLineMemoryBounded streams a 50 MiB line and checks that the
// server's peak resident memory does not grow with it.
func TestHugeLineMemoryBounded(t *testing.T) {
	t.Parallel()
	p := serve(t)
	p.initialize("2025-11-25")
	before := peakRSS(t, p.cmd.Process.Pid)
	chunk := []byte(strings.Repeat("A", 1<<20))
	if _, err := io.WriteString(p.stdin, `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"pad":"`); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if _, err := p.stdin.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	p.send(`"}}}`)
	m := p.recv()
	if errCode(t, m) != -32600 {
		t.Fatalf("got %v", m)
	}
	p.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if m := p.recv(); m["id"] != float64(2) {
		t.Fatalf("session did not continue: %v", m)
	}
	after := peakRSS(t, p.cmd.Process.Pid)
	// Buffering the line would add at least 50 MiB; the reader holds at
	// most one frame cap (1 MiB) plus its chunk.
	if grew := after - before; grew > 16<<20 {
		t.Fatalf("peak RSS grew by %d MiB while a 50 MiB line streamed in", grew>>20)
	}
	t.Logf("peak RSS %d MiB before, %d MiB after", before>>20, after>>20)
}

// peakRSS returns VmHWM of a process, in bytes.
func peakRSS(t testing.TB, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

func TestStdoutWriteFailureShutsDown(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin("testserver"))
	cmd.Env = baseEnv()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = w, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r.Close() // nobody reads the server's stdout any more
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":600000}}}`)
	select {
	case err := <-done:
		if code := exitCode(err); code != 1 {
			t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(waitLimit):
		t.Fatal("server did not stop after its stdout broke")
	}
	stdin.Close()
	mustContain(t, stderr.String(), "output failed")
}

// TestNoLeaks runs many calls of every outcome and checks the process ends
// with the descriptors and goroutines it started with.
func TestNoLeaks(t *testing.T) {
	t.Parallel()
	p := testserver(t, "MCP_CALL_TIMEOUT_MS=200")
	p.initialize("2025-11-25")
	pid := p.cmd.Process.Pid
	p.call(0, "goroutines", map[string]any{})
	base := goroutines(t, p.recv())
	fdsBefore := fdCount(t, pid)
	n := 0
	for round := range 20 {
		for i := range 10 {
			n++
			switch i % 5 {
			case 0:
				p.call(n, "sleep", map[string]any{"ms": 0})
			case 1:
				p.call(n, "sleep", map[string]any{"ms": "bad"})
			case 2:
				p.call(n, "panic", map[string]any{})
			case 3:
				p.call(n, "sleep", map[string]any{"ms": 600000}) // deadline
			case 4:
				p.call(n, "sleep", map[string]any{"ms": 600000})
				p.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}`, n))
			}
		}
		_ = round
		p.recvN(8) // every call but the cancelled ones is answered
	}
	// Calls run on session-owned workers that exit after 2 s idle, and a
	// task sends its response a moment before it returns, so poll less
	// often than workers expire: the count must come back to what it was
	// with a single worker; a leak never does.
	var got int
	deadline := time.Now().Add(waitLimit)
	for {
		n++
		p.call(n, "goroutines", map[string]any{})
		if got = goroutines(t, p.recv()); got == base {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines: %d at the start, still %d after the load", base, got)
		}
		time.Sleep(2500 * time.Millisecond)
	}
	if got := fdCount(t, pid); got != fdsBefore {
		t.Fatalf("file descriptors: %d before, %d after", fdsBefore, got)
	}
}

func goroutines(t testing.TB, m msg) int {
	t.Helper()
	return int(result(t, m)["structuredContent"].(map[string]any)["goroutines"].(float64))
}

func fdCount(t testing.TB, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
