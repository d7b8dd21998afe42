package wire

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

// tooLarge stands for a *FrameTooLargeError in a list of expected frames.
const tooLarge = "<frame too large>"

// readAll reads r to the end and returns its frames, with tooLarge for each
// oversized line. Any other error fails the test.
func readAll(t testing.TB, r *Reader, limit int) []string {
	t.Helper()
	var got []string
	for i := 0; ; i++ {
		if i > 1<<20 {
			t.Fatal("reader does not reach the end of its input")
		}
		frame, err := r.Next()
		var fte *FrameTooLargeError
		switch {
		case err == nil:
			got = append(got, string(frame))
		case errors.As(err, &fte):
			if fte.Limit != limit {
				t.Fatalf("FrameTooLargeError.Limit = %d, want %d", fte.Limit, limit)
			}
			if frame != nil {
				t.Fatalf("Next returned a frame (%d bytes) with %v", len(frame), err)
			}
			got = append(got, tooLarge)
		case errors.Is(err, io.EOF):
			if frame != nil {
				t.Fatalf("Next returned a frame with io.EOF")
			}
			return got
		default:
			t.Fatalf("Next: unexpected error %v", err)
		}
	}
}

// naiveFrames is the reference framing: split on LF, drop one CR before
// each terminator (and at the end of input), refuse lines longer than
// limit, skip blank lines.
func naiveFrames(in []byte, limit int) []string {
	var out []string
	lines := bytes.Split(in, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1] // input ended with LF (or was empty)
	}
	for _, l := range lines {
		l = bytes.TrimSuffix(l, []byte("\r"))
		switch {
		case len(l) > limit:
			out = append(out, tooLarge)
		case len(bytes.Trim(l, " \t\r")) == 0:
			// blank
		default:
			out = append(out, string(l))
		}
	}
	return out
}

func TestReaderFrames(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		limit int
		want  []string
	}{
		{"empty input", "", 16, nil},
		{"one line", "{}\n", 16, []string{"{}"}},
		{"split on LF", "a\nb\nc\n", 16, []string{"a", "b", "c"}},
		{"CRLF tolerated", "a\r\nb\r\n", 16, []string{"a", "b"}},
		{"mixed terminators", "a\r\nb\nc\r\n", 16, []string{"a", "b", "c"}},
		{"only one CR dropped", "a\r\r\n", 16, []string{"a\r"}},
		{"lone CR is not a terminator", "a\rb\n", 16, []string{"a\rb"}},
		{"final line without LF", "a\nb", 16, []string{"a", "b"}},
		{"final line with CR only", "a\nb\r", 16, []string{"a", "b"}},
		{"blank lines skipped", "\n\n\na\n\n\nb\n\n", 16, []string{"a", "b"}},
		{"whitespace-only lines skipped", " \n\t\n \t \r\n\r\na\n \t", 16, []string{"a"}},
		{"inner whitespace kept", "  a b \t\n", 16, []string{"  a b \t"}},
		{"only blank lines", "\n \n\r\n\t", 16, nil},
		{"NUL and non-ASCII are data", "\x00\n\xff\xfe\n", 16, []string{"\x00", "\xff\xfe"}},
		{"form feed is not blank", "\f\n", 16, []string{"\f"}},
		{"exactly the cap", "abcd\n", 4, []string{"abcd"}},
		{"exactly the cap with CRLF", "abcd\r\n", 4, []string{"abcd"}},
		{"exactly the cap at EOF", "abcd", 4, []string{"abcd"}},
		{"one over the cap", "abcde\nok\n", 4, []string{tooLarge, "ok"}},
		{"one over the cap with CRLF", "abcde\r\nok\n", 4, []string{tooLarge, "ok"}},
		{"one over the cap at EOF", "ok\nabcde", 4, []string{"ok", tooLarge}},
		{"two over the cap", "abcdef\nok", 4, []string{tooLarge, "ok"}},
		{"CR counts when it is not a terminator", "abc\r\r\n", 4, []string{"abc\r"}},
		{"CR counts over the cap", "abcd\r\r\n", 4, []string{tooLarge}},
		{"oversized whitespace line is still oversized", "      \nok\n", 4, []string{tooLarge, "ok"}},
		{"several oversized in a row", "aaaaa\nbbbbb\r\nccccc\nok", 4, []string{tooLarge, tooLarge, tooLarge, "ok"}},
		{"blank between oversized", "aaaaa\n\n  \nbbbbb\nok", 4, []string{tooLarge, tooLarge, "ok"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := readAll(t, NewReader(strings.NewReader(tt.in), tt.limit), tt.limit)
			if !slices.Equal(got, tt.want) {
				t.Errorf("frames = %q, want %q", got, tt.want)
			}
			// The reference agrees with the table, so the fuzz target's
			// reference is checked too.
			if ref := naiveFrames([]byte(tt.in), tt.limit); !slices.Equal(ref, tt.want) {
				t.Errorf("naive reference = %q, want %q", ref, tt.want)
			}
			// Short reads from the source change nothing.
			got = readAll(t, NewReader(iotest.OneByteReader(strings.NewReader(tt.in)), tt.limit), tt.limit)
			if !slices.Equal(got, tt.want) {
				t.Errorf("frames with one-byte reads = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestReaderCapBoundary checks max accepted and max+1 refused for caps
// around the size of the read buffer, with every kind of line end, and
// that the line after a refused one is intact.
func TestReaderCapBoundary(t *testing.T) {
	caps := []int{1, 2, 100, chunkSize - 3, chunkSize - 2, chunkSize - 1, chunkSize, chunkSize + 1, 3*chunkSize + 5}
	ends := []struct {
		name string
		eol  string
	}{{"LF", "\n"}, {"CRLF", "\r\n"}, {"EOF", ""}}
	for _, limit := range caps {
		for _, end := range ends {
			for _, n := range []int{limit - 1, limit, limit + 1, limit + 2, limit + 3} {
				if n < 1 {
					continue
				}
				line := strings.Repeat("x", n)
				in := "1\n" + line + end.eol
				want := []string{"1"}
				if n <= limit {
					want = append(want, line)
				} else {
					want = append(want, tooLarge)
				}
				if end.eol != "" {
					in += "2\n"
					want = append(want, "2")
				}
				r := NewReader(strings.NewReader(in), limit)
				got := readAll(t, r, limit)
				if !slices.Equal(got, want) {
					t.Errorf("cap %d, line %d bytes + %s: got %s, want %s", limit, n, end.name, summary(got), summary(want))
				}
			}
		}
	}
}

// TestReaderOversizedSpansChunks discards a line many times the size of the
// read buffer and reads the next line intact, also when the oversized line
// is the last one.
func TestReaderOversizedSpansChunks(t *testing.T) {
	big := strings.Repeat("y", 20*chunkSize+123)
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"LF after", "a\n" + big + "\n" + `{"next":true}` + "\n", []string{"a", tooLarge, `{"next":true}`}},
		{"CRLF after", big + "\r\n" + `{"next":true}`, []string{tooLarge, `{"next":true}`}},
		{"at EOF", "a\n" + big, []string{"a", tooLarge}},
		{"twice", big + "\n" + big + "\nz\n", []string{tooLarge, tooLarge, "z"}},
		{"terminator on a chunk boundary", strings.Repeat("w", chunkSize-1) + "\nz\n", []string{tooLarge, "z"}},
		{"terminator one past a chunk boundary", strings.Repeat("w", chunkSize) + "\nz\n", []string{tooLarge, "z"}},
	}
	const limit = 1024
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := readAll(t, NewReader(strings.NewReader(tt.in), limit), limit)
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %s, want %s", summary(got), summary(tt.want))
			}
		})
	}
}

func TestReaderDefaultCap(t *testing.T) {
	for _, limit := range []int{0, -1} {
		in := strings.Repeat("d", DefaultMaxFrameBytes) + "\n" + strings.Repeat("e", DefaultMaxFrameBytes+1) + "\nok"
		got := readAll(t, NewReader(strings.NewReader(in), limit), DefaultMaxFrameBytes)
		want := []string{strings.Repeat("d", DefaultMaxFrameBytes), tooLarge, "ok"}
		if !slices.Equal(got, want) {
			t.Errorf("NewReader(_, %d): got %s, want %s", limit, summary(got), summary(want))
		}
	}
}

func TestReaderSourceError(t *testing.T) {
	errSource := errors.New("source failed")
	r := NewReader(io.MultiReader(strings.NewReader("a\npartial"), iotest.ErrReader(errSource)), 64)
	if f, err := r.Next(); err != nil || string(f) != "a" {
		t.Fatalf("Next = %q, %v; want \"a\", nil", f, err)
	}
	if _, err := r.Next(); !errors.Is(err, errSource) {
		t.Fatalf("Next error = %v, want %v", err, errSource)
	}
}

func TestFrameTooLargeErrorText(t *testing.T) {
	// Error texts are API.
	if got, want := (&FrameTooLargeError{Limit: 1048576}).Error(), "wire: frame exceeds 1048576 bytes"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// lazyLine generates one line of n bytes and then tail, without ever
// holding the line: it stands for a peer that streams a huge frame.
type lazyLine struct {
	remaining int
	tail      []byte
}

var filler = bytes.Repeat([]byte("x"), 32<<10)

func (l *lazyLine) Read(p []byte) (int, error) {
	if l.remaining > 0 {
		n := copy(p[:min(len(p), l.remaining)], filler)
		l.remaining -= n
		return n, nil
	}
	if len(l.tail) > 0 {
		n := copy(p, l.tail)
		l.tail = l.tail[n:]
		return n, nil
	}
	return 0, io.EOF
}

// TestReaderMemoryBounded feeds a 50 MiB line and checks that the reader
// allocated only about its cap, not the line.
func TestReaderMemoryBounded(t *testing.T) {
	const lineBytes = 50 << 20
	src := &lazyLine{remaining: lineBytes, tail: []byte("\n{\"after\":1}\n")}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	r := NewReader(src, DefaultMaxFrameBytes)
	got := readAll(t, r, DefaultMaxFrameBytes)

	runtime.ReadMemStats(&after)
	if want := []string{tooLarge, `{"after":1}`}; !slices.Equal(got, want) {
		t.Fatalf("got %s, want %s", summary(got), summary(want))
	}
	if src.remaining != 0 {
		t.Fatalf("%d bytes of the line were not consumed", src.remaining)
	}
	// The reader holds its 64 KiB buffer and at most one cap's worth of
	// frame; growing that frame by append costs a few times the cap in
	// total. Anything near the line's size means the line was buffered.
	const bound = 8 * DefaultMaxFrameBytes
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > bound {
		t.Errorf("reading a %d-byte line allocated %d bytes, want at most %d", lineBytes, alloc, bound)
	}
}

// endless repeats one line forever.
type endless struct {
	line []byte
	off  int
}

func (e *endless) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], e.line[e.off:])
		n += c
		e.off = (e.off + c) % len(e.line)
	}
	return n, nil
}

// TestReaderSteadyStateAllocs checks that frames reuse the reader's buffer:
// once warm, reading a frame allocates nothing but the error value of an
// oversized line.
func TestReaderSteadyStateAllocs(t *testing.T) {
	tests := []struct {
		name   string
		line   string
		allocs float64
	}{
		{"small frames", `{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n", 0},
		{"blank lines between", "\n \r\n{}\r\n", 0},
		{"oversized lines", strings.Repeat("z", 3000) + "\n", 1}, // the *FrameTooLargeError
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(&endless{line: []byte(tt.line)}, 1024)
			for range 100 { // warm up: grow the frame buffer once
				r.Next()
			}
			if allocs := testing.AllocsPerRun(1000, func() { r.Next() }); allocs != tt.allocs {
				t.Errorf("Next allocates %.1f times per frame, want %.0f", allocs, tt.allocs)
			}
		})
	}
}

// summary shortens long frames so a failure message stays readable.
func summary(frames []string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, f := range frames {
		if i > 0 {
			b.WriteString(", ")
		}
		if len(f) > 40 {
			b.WriteString(f[:20] + "…(" + strconv.Itoa(len(f)) + " bytes)")
		} else {
			b.WriteString(`"` + f + `"`)
		}
	}
	b.WriteByte(']')
	return b.String()
}
