package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// sandboxFixture builds <tmp>/data (the sandbox) beside <tmp>/data-secret
// and <tmp>/outside, each outside file holding a unique marker.
type sandboxFixture struct {
	tmp, root, marker string
}

func newSandboxFixture(t *testing.T) *sandboxFixture {
	t.Helper()
	tmp := t.TempDir()
	b := make([]byte, 16)
	rand.Read(b)
	f := &sandboxFixture{tmp: tmp, root: filepath.Join(tmp, "data"), marker: "SECRET-" + hex.EncodeToString(b)}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"data/sub/deeper", "data-secret", "outside", "data/swap"} {
		must(os.MkdirAll(filepath.Join(tmp, d), 0o755))
	}
	write := func(rel, content string) { must(os.WriteFile(filepath.Join(tmp, rel), []byte(content), 0o644)) }
	write("data/hello.txt", "hello world\n")
	write("data/empty.txt", "")
	write("data/sub/deeper/nested.txt", "nested\n")
	write("data/binary.bin", "\x00\x01\xff\xfe")
	write("data/big.txt", strings.Repeat("x", 5000))
	write("data/swap/inside.txt", "inside\n")
	write("data-secret/secret.txt", f.marker)
	write("outside/secret.txt", f.marker)
	must(os.Symlink("hello.txt", filepath.Join(f.root, "link-inside")))
	must(os.Symlink("../outside/secret.txt", filepath.Join(f.root, "link-outside")))
	must(os.Symlink(filepath.Join(tmp, "outside/secret.txt"), filepath.Join(f.root, "link-absolute")))
	must(os.Symlink("loop-b", filepath.Join(f.root, "loop-a")))
	must(os.Symlink("loop-a", filepath.Join(f.root, "loop-b")))
	must(os.Symlink("missing.txt", filepath.Join(f.root, "dangling")))
	// A magic link: /proc/self/root is this process's root directory.
	must(os.Symlink(filepath.Join("/proc/self", "root", "etc", "hostname"), filepath.Join(f.root, "proc-link")))
	must(os.Symlink("/dev/zero", filepath.Join(f.root, "dev-link")))
	must(os.Symlink("../outside", filepath.Join(f.root, "dir-outside")))
	must(os.Link(filepath.Join(tmp, "outside/secret.txt"), filepath.Join(f.root, "hardlink.txt")))
	must(syscall.Mkfifo(filepath.Join(f.root, "fifo"), 0o644))
	return f
}

// TestSandboxThroughBinary runs the escape classes through the real binary
// and checks the verdict, that the outside marker never appears, and that
// no absolute path of this machine appears on stdout.
func TestSandboxThroughBinary(t *testing.T) {
	t.Parallel()
	f := newSandboxFixture(t)
	p := serve(t, "MCP_SAFE_DATA_DIR="+f.root, "MCP_FS_MAX_BYTES=4096")
	p.initialize("2025-11-25")
	cases := []struct {
		path string
		args map[string]any
		code string // "" for success
	}{
		{path: "hello.txt"},
		{path: "empty.txt"},
		{path: "sub/deeper/nested.txt"},
		{path: "sub/../hello.txt"},
		{path: "link-inside"},
		{path: "binary.bin", code: "MCP_VALIDATION_ERROR"},
		{path: "binary.bin", args: map[string]any{"encoding": "base64"}},
		{path: "big.txt", code: "MCP_PAYLOAD_TOO_LARGE"},
		{path: "hello.txt", args: map[string]any{"max_bytes": 5}, code: "MCP_PAYLOAD_TOO_LARGE"},
		{path: "missing.txt", code: "MCP_NOT_FOUND"},
		{path: "sub/missing/x.txt", code: "MCP_NOT_FOUND"},
		{path: "../outside/secret.txt", code: "MCP_ACCESS_DENIED"},
		{path: "../data-secret/secret.txt", code: "MCP_ACCESS_DENIED"},
		{path: "../outside/does-not-exist", code: "MCP_ACCESS_DENIED"}, // no existence oracle
		{path: "sub/../../outside/secret.txt", code: "MCP_ACCESS_DENIED"},
		{path: "link-outside", code: "MCP_ACCESS_DENIED"},
		{path: "link-absolute", code: "MCP_ACCESS_DENIED"},
		{path: "dir-outside/secret.txt", code: "MCP_ACCESS_DENIED"},
		{path: "loop-a", code: "MCP_ACCESS_DENIED"},
		{path: "dangling", code: "MCP_NOT_FOUND"},
		{path: "proc-link", code: "MCP_ACCESS_DENIED"},
		{path: "dev-link", code: "MCP_ACCESS_DENIED"},
		{path: "hardlink.txt", code: "MCP_ACCESS_DENIED"},
		{path: "fifo", code: "MCP_ACCESS_DENIED"},
		{path: "sub", code: "MCP_ACCESS_DENIED"},
		{path: filepath.Join(f.tmp, "outside/secret.txt"), code: "MCP_ACCESS_DENIED"}, // absolute: refused, not echoed
		{path: "/etc/passwd", code: "MCP_ACCESS_DENIED"},
		{path: "hello.txt\u202e", code: "MCP_VALIDATION_ERROR"},
		{path: strings.Repeat("a", 256), code: "MCP_VALIDATION_ERROR"},
	}
	var all bytes.Buffer
	for i, c := range cases {
		args := map[string]any{"relative_path": c.path}
		for k, v := range c.args {
			args[k] = v
		}
		p.call(i, "sandbox_fs_read", args)
		line := p.recvLine()
		all.Write(line)
		m := p.decode(line)
		r := result(t, m)
		if c.code == "" {
			if r["isError"] != false {
				t.Errorf("%q: %v", c.path, r)
			}
			continue
		}
		text := toolText(t, m, true)
		if !strings.Contains(text, c.code) {
			t.Errorf("%q: want %s, got %s", c.path, c.code, text)
		}
	}
	out := all.String()
	if strings.Contains(out, f.marker) {
		t.Fatal("the outside marker reached stdout")
	}
	if strings.Contains(out, f.tmp) || strings.Contains(out, f.root) {
		t.Fatal("an absolute path of this machine reached stdout")
	}
}

// decode parses a raw stdout line.
func (p *proc) decode(line []byte) msg {
	p.t.Helper()
	checkLine(p.t, line)
	var m msg
	if err := jsonUnmarshal(line, &m); err != nil {
		p.t.Fatalf("%v: %q", err, line)
	}
	return m
}

// TestSandboxSwapRaceThroughBinary swaps a directory inside the sandbox with
// a symlink to the outside, in a tight loop, while concurrent reads run
// through the real binary; no read may ever return outside content.
func TestSandboxSwapRaceThroughBinary(t *testing.T) {
	t.Parallel()
	f := newSandboxFixture(t)
	// swap/inside.txt and, after an exchange, swap -> ../outside with
	// outside/inside.txt holding the marker.
	if err := os.WriteFile(filepath.Join(f.tmp, "outside/inside.txt"), []byte(f.marker), 0o644); err != nil {
		t.Fatal(err)
	}
	alt := filepath.Join(f.root, "swap-alt")
	if err := os.Symlink("../outside", alt); err != nil {
		t.Fatal(err)
	}
	p := serve(t, "MCP_SAFE_DATA_DIR="+f.root)
	p.initialize("2025-11-25")

	stop := make(chan struct{})
	var wg sync.WaitGroup
	swaps := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Atomically exchange the directory and the symlink.
			if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(f.root, "swap"), unix.AT_FDCWD, alt, unix.RENAME_EXCHANGE); err != nil {
				t.Error(err)
				return
			}
			swaps++
		}
	}()
	const rounds, inFlight = 100, 16
	okReads, denied := 0, 0
	for r := range rounds {
		for i := range inFlight {
			p.call(fmt.Sprintf("%d-%d", r, i), "sandbox_fs_read", map[string]any{"relative_path": "swap/inside.txt"})
		}
		for range inFlight {
			line := p.recvLine()
			if bytes.Contains(line, []byte(f.marker)) {
				close(stop)
				wg.Wait()
				t.Fatalf("outside content returned: %s", line)
			}
			if bytes.Contains(line, []byte(`"isError":false`)) {
				okReads++
			} else {
				denied++
			}
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d swaps; %d reads inside, %d refused", swaps, okReads, denied)
	if swaps == 0 {
		t.Fatal("the swapper never ran")
	}
}
