//go:build linux

package sandboxfs

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"golang.org/x/sys/unix"

	"github.com/mcp-bastion/bastion/internal/problem"
	"github.com/mcp-bastion/bastion/internal/tool"
)

// testMaxBytes is the configured maximum of the corpus readers.
const testMaxBytes = 64 << 10

// fixture is a sandbox ("data") with siblings that must stay out of reach:
// "outside" and "data-secret", whose name starts with the sandbox's. Every
// file outside the sandbox holds marker, which no result may ever carry.
type fixture struct {
	base   string // the temp dir: no result may carry it either
	data   string // the sandbox root
	marker string
	// Features the machine could not provide; cases needing them skip.
	noFIFO, noSocket, noDevice string
}

// Contents of the files inside the sandbox.
const (
	helloText      = "hello, sandbox\n"
	deepText       = "deep inside\n"
	ansiText       = "\x1b[31mred\x1b[0m\n"
	whitespaceText = "a\tb\r\nc\n"
)

var binaryBytes = []byte{0x00, 0xff, 0xfe, 0x80, 0x01, 'x'}

func newFixture(tb testing.TB) *fixture {
	tb.Helper()
	base := tb.TempDir()
	f := &fixture{
		base:   base,
		data:   filepath.Join(base, "data"),
		marker: "OUTSIDE-MARKER-" + rand.Text(),
	}
	mkdir := func(rel string) {
		tb.Helper()
		if err := os.MkdirAll(filepath.Join(base, rel), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	write := func(rel, content string) {
		tb.Helper()
		if err := os.WriteFile(filepath.Join(base, rel), []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	symlink := func(target, rel string) {
		tb.Helper()
		if err := os.Symlink(target, filepath.Join(base, rel)); err != nil {
			tb.Fatal(err)
		}
	}
	link := func(oldRel, newRel string) {
		tb.Helper()
		if err := os.Link(filepath.Join(base, oldRel), filepath.Join(base, newRel)); err != nil {
			tb.Fatal(err)
		}
	}

	// Outside the sandbox: the secrets.
	mkdir("outside/sub")
	mkdir("data-secret")
	write("outside/marker.txt", f.marker)
	write("outside/sub/marker.txt", f.marker)
	write("outside/hardlink-target.txt", f.marker)
	write("data-secret/secret.txt", f.marker)

	// Inside: files.
	mkdir("data/a/b/c")
	write("data/hello.txt", helloText)
	write("data/empty.txt", "")
	write("data/binary.bin", string(binaryBytes))
	write("data/bad-utf8.txt", "abc\xc3\x28")
	write("data/surrogate.txt", "\xed\xa0\x80")
	write("data/ansi.txt", ansiText)
	write("data/whitespace.txt", whitespaceText)
	write("data/nul.txt", "a\x00b")
	write("data/del.txt", "ab\x7f")
	write("data/csi.txt", "é\u009b31mX")
	write("data/latin1.txt", "\u00a0é\u00ff") // after C1: text
	write("data/exact.bin", strings.Repeat("x", testMaxBytes))
	write("data/large.bin", strings.Repeat("x", testMaxBytes+1))
	write("data/four.txt", strings.Repeat("0123456789abcdef", 256))
	write("data/a/b/c/deep.txt", deepText)
	write("data/.hidden", "hidden\n")
	write("data/...", "three dots\n")
	write("data/space name.txt", "space\n")
	write("data/caf\u00e9.txt", "nfc\n")   // stored NFC
	write("data/nai\u0308ve.txt", "nfd\n") // stored NFD
	write("data/emoji-\U0001F600.txt", "emoji\n")
	mkdir("data/日本語")
	write("data/日本語/ファイル.txt", "cjk\n")
	write("data/"+strings.Repeat("n", 255), "long name\n")
	write("data/unreadable.txt", "unreadable\n")
	if err := os.Chmod(filepath.Join(base, "data/unreadable.txt"), 0); err != nil {
		tb.Fatal(err)
	}
	mkdir("data/noperm")
	write("data/noperm/inner.txt", "inner\n")
	if err := os.Chmod(filepath.Join(base, "data/noperm"), 0); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.Chmod(filepath.Join(base, "data/noperm"), 0o755) })

	// Inside: symlinks that stay inside.
	symlink("hello.txt", "data/link-inside")
	symlink("link-inside", "data/link-chain")
	symlink("a", "data/link-a")
	symlink("a/b", "data/link-ab")
	symlink("../../hello.txt", "data/a/b/up")
	symlink("nonexistent.txt", "data/dangling")
	symlink("loop2", "data/loop1")
	symlink("loop1", "data/loop2")
	symlink("self-loop", "data/self-loop")
	// A chain of 10 hops: within the kernel's 40, beyond os.Root's 8.
	symlink("hello.txt", "data/chain10")
	for i := 9; i >= 1; i-- {
		symlink(fmt.Sprintf("chain%d", i+1), fmt.Sprintf("data/chain%d", i))
	}

	// Inside: symlinks that leave, relative and absolute, to targets that
	// exist and that do not.
	symlink("../outside/marker.txt", "data/esc-rel")
	symlink("../outside/missing.txt", "data/esc-rel-missing")
	symlink(filepath.Join(base, "outside/marker.txt"), "data/esc-abs")
	symlink(filepath.Join(base, "outside/missing.txt"), "data/esc-abs-missing")
	symlink("../outside", "data/esc-dir-rel")
	symlink(filepath.Join(base, "outside"), "data/esc-dir-abs")
	symlink("../data-secret/secret.txt", "data/esc-sibling")
	symlink("../../../outside/marker.txt", "data/a/b/esc-deep")
	symlink("../../data/hello.txt", "data/a/back")
	symlink(filepath.Join(base, "data/hello.txt"), "data/abs-inside")
	symlink("/dev/null", "data/dev-null")
	symlink("/proc/self/root", "data/proc-root")

	// Hard links: two names inside, and one inside for a file outside.
	write("data/hardlinked.txt", "linked\n")
	link("data/hardlinked.txt", "data/hardlinked-2.txt")
	link("outside/hardlink-target.txt", "data/hardlink-outside")

	// Special files.
	if err := unix.Mkfifo(filepath.Join(f.data, "fifo"), 0o644); err != nil {
		f.noFIFO = err.Error()
	}
	f.noSocket = bindSocket(filepath.Join(f.data, "sock"))
	if err := unix.Mknod(filepath.Join(f.data, "devnode"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		f.noDevice = "mknod: " + err.Error()
	}
	return f
}

// bindSocket leaves a unix socket file at path and reports why it could
// not, if it could not.
func bindSocket(path string) string {
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return err.Error()
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	return ""
}

func (f *fixture) reader(tb testing.TB, b backend, opts ...Option) *Reader {
	tb.Helper()
	c := config{backend: b}
	for _, o := range opts {
		o(&c)
	}
	r, err := newReader(f.data, testMaxBytes, c)
	if errors.Is(err, errNoOpenat2) {
		tb.Skip("this kernel has no openat2")
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Close() })
	return r
}

// outcome is what one call produced, with everything a peer or a log could
// see of it flattened into text for the leak checks.
type outcome struct {
	out     Output
	prob    *problem.Problem
	err     error
	visible string
}

func (o outcome) code() problem.Code {
	if o.prob != nil {
		return o.prob.Code
	}
	if o.err != nil {
		return "internal: " + problem.Code(o.err.Error())
	}
	return ""
}

// callTimeout bounds one call in the tests. A FIFO opened without
// O_NONBLOCK would block forever; this turns that into a failure.
const callTimeout = 10 * time.Second

// call runs one tools/call through the whole tool path in its own goroutine
// and fails the test if it does not return promptly. With dropDAC the call
// runs on a locked OS thread without CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH,
// so that mode bits bind even for root; the thread dies with the goroutine.
func call(t *testing.T, r *Reader, args string, dropDAC bool) outcome {
	t.Helper()
	type res struct {
		result tool.Result
		err    error
		setup  error
	}
	ch := make(chan res, 1)
	go func() {
		if dropDAC {
			runtime.LockOSThread() // never unlocked: the thread exits with us
			if err := dropDACCapabilities(); err != nil {
				ch <- res{setup: err}
				return
			}
		}
		result, err := r.Call(context.Background(), jsontext.Value(args))
		ch <- res{result: result, err: err}
	}()
	var got res
	select {
	case got = <-ch:
	case <-time.After(callTimeout):
		t.Fatalf("call %s did not return within %v", args, callTimeout)
	}
	if got.setup != nil {
		t.Skipf("cannot drop DAC capabilities on this machine: %v", got.setup)
	}
	var o outcome
	if got.err != nil {
		o.err = got.err
		var b strings.Builder
		b.WriteString(got.err.Error())
		if errors.As(got.err, &o.prob) {
			js, err := json.Marshal(o.prob)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(js)
			if o.prob.Cause != nil {
				b.WriteString(o.prob.Cause.Error())
			}
		}
		o.visible = b.String()
		return o
	}
	if err := tool.ValidateOutput(r, got.result.Structured); err != nil {
		t.Fatalf("result does not match the output schema: %v", err)
	}
	if err := json.Unmarshal(got.result.Structured, &o.out, json.RejectUnknownMembers(true)); err != nil {
		t.Fatal(err)
	}
	o.visible = string(got.result.Structured) + o.out.Content
	if o.out.Encoding == EncodingBase64 {
		raw, err := base64.StdEncoding.DecodeString(o.out.Content)
		if err != nil {
			t.Fatalf("content is not base64: %v", err)
		}
		o.visible += string(raw)
	}
	return o
}

// dropDACCapabilities removes the capabilities that let root ignore mode
// bits from the effective set of the calling thread only.
func dropDACCapabilities() error {
	if os.Geteuid() != 0 {
		return nil // mode bits already bind
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	for _, c := range []uint{unix.CAP_DAC_OVERRIDE, unix.CAP_DAC_READ_SEARCH} {
		data[c/32].Effective &^= 1 << (c % 32)
	}
	return unix.Capset(&hdr, &data[0])
}

// argsFor builds the arguments of a call.
func argsFor(tb testing.TB, path string, maxBytes int64, encoding string) string {
	tb.Helper()
	m := map[string]any{"relative_path": path}
	if maxBytes != 0 {
		m["max_bytes"] = maxBytes
	}
	if encoding != "" {
		m["encoding"] = encoding
	}
	b, err := json.Marshal(m, json.Deterministic(true))
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// checkNoLeak fails if visible carries the outside marker or any absolute
// path of this machine's fixture.
func (f *fixture) checkNoLeak(t *testing.T, visible string) {
	t.Helper()
	if strings.Contains(visible, f.marker) {
		t.Errorf("output carries the outside marker: %q", visible)
	}
	if strings.Contains(visible, f.base) {
		t.Errorf("output carries the host path %q: %q", f.base, visible)
	}
}
