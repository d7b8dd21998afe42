//go:build linux

package sandboxfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"unicode"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"golang.org/x/sys/unix"

	"github.com/mcp-bastion/bastion/internal/problem"
	"github.com/mcp-bastion/bastion/internal/tool"
)

var backends = []struct {
	name string
	b    backend
}{{"openat2", backendOpenat2}, {"os.Root", backendOSRoot}}

func TestNewPicksOpenat2(t *testing.T) {
	r, err := New(t.TempDir(), 1024)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	want := "openat2"
	switch o, err := openOpenat2(t.TempDir()); {
	case errors.Is(err, errNoOpenat2):
		want = "os.Root"
	case err != nil:
		t.Fatal(err)
	default:
		o.close()
	}
	if got := r.Mechanism(); got != want {
		t.Errorf("Mechanism() = %q, want %q", got, want)
	}
}

func TestNewRefusesBadDataDir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	unreadable := filepath.Join(dir, "unreadable")
	if err := os.Mkdir(unreadable, 0); err != nil {
		t.Fatal(err)
	}
	for _, bk := range backends {
		t.Run(bk.name, func(t *testing.T) {
			for _, c := range []struct {
				name    string
				dir     string
				max     int64
				dropDAC bool
				is      error
			}{
				{name: "missing", dir: filepath.Join(dir, "missing"), max: 1, is: fs.ErrNotExist},
				{name: "not a directory", dir: file, max: 1},
				{name: "unreadable", dir: unreadable, max: 1, dropDAC: true, is: fs.ErrPermission},
				{name: "empty name", dir: "", max: 1},
				{name: "max bytes zero", dir: dir, max: 0},
				{name: "max bytes above the ceiling", dir: dir, max: MaxBytesCeiling + 1},
			} {
				t.Run(c.name, func(t *testing.T) {
					r, err := newReaderOn(t, c.dir, c.max, config{backend: bk.b}, c.dropDAC)
					if err == nil {
						r.Close()
						t.Fatal("New succeeded")
					}
					if !strings.HasPrefix(err.Error(), "sandboxfs: ") {
						t.Errorf("error %q does not name the package", err)
					}
					if c.is != nil && !errors.Is(err, c.is) {
						t.Errorf("error %q is not %v", err, c.is)
					}
				})
			}
		})
	}
}

// newReaderOn runs newReader, on a thread without DAC capabilities if asked.
func newReaderOn(t *testing.T, dir string, max int64, c config, dropDAC bool) (*Reader, error) {
	t.Helper()
	if !dropDAC {
		return newReader(dir, max, c)
	}
	type res struct {
		r     *Reader
		err   error
		setup error
	}
	ch := make(chan res, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with us
		if err := dropDACCapabilities(); err != nil {
			ch <- res{setup: err}
			return
		}
		r, err := newReader(dir, max, c)
		ch <- res{r: r, err: err}
	}()
	got := <-ch
	if got.setup != nil {
		t.Skipf("cannot drop DAC capabilities on this machine: %v", got.setup)
	}
	return got.r, got.err
}

// TestMagicLinks uses /proc/self as the sandbox, where magic links are
// reachable without crossing an absolute symlink first.
func TestMagicLinks(t *testing.T) {
	f := newFixture(t)
	marker := strings.TrimPrefix(filepath.Join(f.base, "outside/marker.txt"), "/")
	for _, bk := range backends {
		t.Run(bk.name, func(t *testing.T) {
			r, err := newReader("/proc/self", testMaxBytes, config{backend: bk.b})
			if errors.Is(err, errNoOpenat2) {
				t.Skip("this kernel has no openat2")
			}
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer pr.Close()
			defer pw.Close()
			// os.Root takes a magic link for the text readlink returns:
			// "pipe:[N]" is then a relative name that does not exist, so it
			// answers not found where openat2 refuses the link itself.
			pipeWant := denied
			if bk.b == backendOSRoot {
				pipeWant = notFound
			}
			for _, c := range []struct {
				path string
				max  int64
				want problem.Code
			}{
				{path: fmt.Sprintf("fd/%d", pr.Fd()), want: pipeWant},
				{path: "root/" + marker, want: denied},
				{path: "root", want: denied},
				{path: "cwd/corpus_test.go", want: denied},
				{path: "exe", want: denied},
				{path: "comm", want: ok},
				// status reports size 0 but holds far more than 16 bytes:
				// only the bounded read can refuse it.
				{path: "status", max: 16, want: tooBig},
			} {
				o := call(t, r, argsFor(t, c.path, c.max, ""), false)
				// The caller's own path carries the temp dir here, and is
				// echoed; only the marker must never show.
				if strings.Contains(o.visible, f.marker) {
					t.Errorf("%s: output carries the outside marker", c.path)
				}
				if got := o.code(); got != c.want {
					t.Errorf("%s: verdict = %q, want %q (%v)", c.path, got, c.want, o.err)
				}
			}
		})
	}
	// Without RESOLVE_NO_MAGICLINKS, RESOLVE_BENEATH alone would still
	// refuse, with EXDEV; ELOOP shows the stricter flag is in force.
	o, err := openOpenat2("/proc/self")
	if errors.Is(err, errNoOpenat2) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer o.close()
	if _, err := o.open("root/" + marker); !errors.Is(err, unix.ELOOP) {
		t.Errorf("open through /proc/self/root: %v, want ELOOP", err)
	}
}

func TestHardLinksOption(t *testing.T) {
	f := newFixture(t)
	for _, bk := range backends {
		t.Run(bk.name, func(t *testing.T) {
			r := f.reader(t, bk.b, AllowHardLinks())
			o := call(t, r, argsFor(t, "hardlinked.txt", 0, ""), false)
			if o.err != nil || o.out.Content != "linked\n" {
				t.Fatalf("with AllowHardLinks: %+v", o)
			}
			if d := r.Descriptor().Description; strings.Contains(d, "hard link") {
				t.Errorf("description mentions hard links although they are allowed: %q", d)
			}
			// This is the price of the option, and why it is off by
			// default: the VFS cannot tell this name from any other.
			o = call(t, r, argsFor(t, "hardlink-outside", 0, ""), false)
			if o.out.Content != f.marker {
				t.Errorf("hard link to an outside file: %+v", o)
			}
		})
	}
}

func TestCancelledContext(t *testing.T) {
	f := newFixture(t)
	for _, bk := range backends {
		t.Run(bk.name, func(t *testing.T) {
			r := f.reader(t, bk.b)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err := r.Call(ctx, jsontext.Value(`{"relative_path":"hello.txt"}`))
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			var p *problem.Problem
			if errors.As(err, &p) {
				t.Errorf("cancellation reported as a problem: %v", p)
			}
		})
	}
}

func TestClose(t *testing.T) {
	f := newFixture(t)
	for _, bk := range backends {
		t.Run(bk.name, func(t *testing.T) {
			r, err := newReader(f.data, testMaxBytes, config{backend: bk.b})
			if errors.Is(err, errNoOpenat2) {
				t.Skip("this kernel has no openat2")
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			_, err = r.Call(context.Background(), jsontext.Value(`{"relative_path":"hello.txt"}`))
			var p *problem.Problem
			if err == nil || errors.As(err, &p) {
				t.Fatalf("call after Close: %v, want an internal error", err)
			}
			if strings.Contains(err.Error(), f.base) {
				t.Errorf("internal error carries a host path: %v", err)
			}
			r.Close() // a second Close must not panic
		})
	}
}

// TestRootHeldByDescriptor: the directory is held by descriptor, so moving
// the configured path away does not change what is served.
func TestRootHeldByDescriptor(t *testing.T) {
	f := newFixture(t)
	for _, bk := range backends {
		t.Run(bk.name, func(t *testing.T) {
			r := f.reader(t, bk.b)
			moved := f.data + "-moved-" + bk.name
			if err := os.Rename(f.data, moved); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(f.base, "outside"), f.data); err != nil {
				t.Fatal(err)
			}
			defer func() {
				os.Remove(f.data)
				os.Rename(moved, f.data)
			}()
			o := call(t, r, argsFor(t, "hello.txt", 0, ""), false)
			if o.err != nil || o.out.Content != helloText {
				t.Fatalf("after moving the data dir: %+v", o)
			}
			o = call(t, r, argsFor(t, "marker.txt", 0, ""), false)
			f.checkNoLeak(t, o.visible)
		})
	}
}

func TestDescriptor(t *testing.T) {
	r, err := New(t.TempDir(), 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	d := r.Descriptor()
	if d.Name != "sandbox_fs_read" || d.Title == "" || d.Description == "" {
		t.Errorf("descriptor = %+v", d)
	}
	if d.Annotations != tool.ReadOnly {
		t.Errorf("annotations = %+v, want tool.ReadOnly", d.Annotations)
	}
	if _, err := tool.NewRegistry(r); err != nil {
		t.Fatal(err)
	}
	var in struct {
		AdditionalProperties *bool `json:"additionalProperties"`
		Properties           map[string]struct {
			Maximum *int64 `json:"maximum"`
			Default any    `json:"default"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(d.InputSchema, &in); err != nil {
		t.Fatal(err)
	}
	if in.AdditionalProperties == nil || *in.AdditionalProperties {
		t.Error("input schema allows additional properties")
	}
	if m := in.Properties["max_bytes"].Maximum; m == nil || *m != 4096 {
		t.Errorf("max_bytes maximum = %v, want 4096", m)
	}
	var out struct {
		AdditionalProperties *bool    `json:"additionalProperties"`
		Required             []string `json:"required"`
	}
	if err := json.Unmarshal(d.OutputSchema, &out); err != nil {
		t.Fatal(err)
	}
	if out.AdditionalProperties == nil || *out.AdditionalProperties || len(out.Required) != 4 {
		t.Errorf("output schema = %s", d.OutputSchema)
	}
}

func TestCheckPath(t *testing.T) {
	for _, c := range []struct {
		path string
		want problem.Code
	}{
		{"a", ok},
		{"a/../b", ok},
		{"./a/./b/..", ok},
		{"a/b/../../c", ok},
		{"a/b/../../..", denied},
		{"..", denied},
		{"./..", denied},
		{"a/../../a", denied},
		{"/a", denied},
		{"//a", denied},
		{"", invalid},
		{"a\xffb", invalid}, // not UTF-8: JSON cannot carry it, a caller of read can
		{"a\xed\xa0\x80", invalid},
		{"a\x00", invalid},
		{"a\x1b[31m", invalid},
		{"a\u202a", invalid},
		{"a\u200e", invalid},
		{strings.Repeat("a", 256), invalid},
		{strings.Repeat("a", 255), ok},
		{strings.Repeat("a/", 2047) + "a", ok},
		{strings.Repeat("a/", 2048), invalid},
	} {
		got := ok
		if p := checkPath(c.path); p != nil {
			got = p.Code
			if len(p.InvalidParams) != 1 || p.InvalidParams[0] != "relative_path" {
				t.Errorf("%.40q: invalid_params = %v", c.path, p.InvalidParams)
			}
		}
		if got != c.want {
			t.Errorf("checkPath(%.40q) = %q, want %q", c.path, got, c.want)
		}
	}
}

// TestCheckPathRefusesEveryControlAndBidi walks every code point so that a
// narrowed character class cannot go unnoticed.
func TestCheckPathRefusesEveryControlAndBidi(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !unicode.IsControl(r) && !unicode.Is(unicode.Bidi_Control, r) {
			continue
		}
		if p := checkPath("a" + string(r) + "b"); p == nil || p.Code != invalid {
			t.Errorf("checkPath accepts U+%04X", r)
		}
	}
}

func TestReadBounded(t *testing.T) {
	const limit = 100
	for _, c := range []struct {
		name    string
		size    int
		hint    int64
		wantLen int
	}{
		{"empty", 0, 0, 0},
		{"exact", limit, limit, limit},
		{"hint says empty, file is not", limit, 0, limit},
		{"grew past the limit", 10 * limit, 5, limit + 1},
		{"hint too big", 10, 1 << 40, 10},
		{"negative hint", 10, -1, 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := strings.NewReader(strings.Repeat("z", c.size))
			// OneByteReader makes every growth step of the buffer happen.
			got, err := readBounded(iotest.OneByteReader(src), c.hint, limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != c.wantLen {
				t.Errorf("read %d bytes, want %d", len(got), c.wantLen)
			}
			if rest := src.Len(); c.size > limit && rest != c.size-limit-1 {
				t.Errorf("consumed %d bytes, want %d", c.size-rest, limit+1)
			}
		})
	}
	if _, err := readBounded(iotest.ErrReader(errors.New("boom")), 0, limit); err == nil {
		t.Error("read error not reported")
	}
}

// TestReadDirectParams covers the second line behind the schema for callers
// of read that bypass it.
func TestReadDirectParams(t *testing.T) {
	f := newFixture(t)
	r := f.reader(t, backendOpenat2)
	big, zero := int64(testMaxBytes+1), int64(0)
	for _, in := range []Input{
		{RelativePath: "hello.txt", MaxBytes: &big},
		{RelativePath: "hello.txt", MaxBytes: &zero},
		{RelativePath: "hello.txt", Encoding: "utf-16"},
	} {
		_, err := r.read(context.Background(), in)
		var p *problem.Problem
		if !errors.As(err, &p) || p.Code != invalid {
			t.Errorf("read(%+v) = %v, want a validation problem", in, err)
		}
	}
}

// TestLeasedFile: the open is non-blocking (a FIFO must not hang it), so a
// file another process holds a write lease on answers EAGAIN, the errno of
// a rename racing a "..". The refusal names both causes rather than
// blaming the directory tree alone.
func TestLeasedFile(t *testing.T) {
	f := newFixture(t)
	w, err := os.OpenFile(filepath.Join(f.data, "hello.txt"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := unix.FcntlInt(w.Fd(), unix.F_SETLEASE, unix.F_WRLCK); err != nil {
		t.Skipf("cannot take a lease here: %v", err)
	}
	o := call(t, f.reader(t, backendOpenat2), argsFor(t, "hello.txt", 0, ""), false)
	if o.prob == nil || o.code() != problem.AccessDenied || !strings.Contains(o.prob.Detail, "holds a lease") {
		t.Errorf("read of a leased file = %v, want MCP_ACCESS_DENIED naming the lease", o.err)
	}
}
