package stdio

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestInputClosed: a pipe or a socket whose writer is gone, with nothing
// left to read, is closed; one whose writer is there, or that still holds
// bytes (a request not yet read), is not; nor is a regular file or
// /dev/null, whose end cannot be told without reading.
func TestInputClosed(t *testing.T) {
	pipe := func(t *testing.T) (r, w *os.File) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close(); w.Close() })
		return r, w
	}
	socket := func(t *testing.T) (in *os.File, peer int) {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err != nil {
			t.Fatal(err)
		}
		in = os.NewFile(uintptr(fds[0]), "in")
		t.Cleanup(func() { in.Close() })
		return in, fds[1]
	}
	for _, tc := range []struct {
		name   string
		open   func(t *testing.T) *os.File
		closed bool
	}{
		{"a pipe, writer open", func(t *testing.T) *os.File { r, _ := pipe(t); return r }, false},
		{"a pipe, writer gone", func(t *testing.T) *os.File { r, w := pipe(t); w.Close(); return r }, true},
		{"a pipe, writer gone, a request unread", func(t *testing.T) *os.File {
			r, w := pipe(t)
			w.Write([]byte("{}\n"))
			w.Close()
			return r
		}, false},
		{"a pipe, writer gone, the request read", func(t *testing.T) *os.File {
			r, w := pipe(t)
			w.Write([]byte("{}\n"))
			w.Close()
			r.Read(make([]byte, 8))
			return r
		}, true},
		{"a socket, peer open", func(t *testing.T) *os.File {
			in, peer := socket(t)
			t.Cleanup(func() { unix.Close(peer) })
			return in
		}, false},
		{"a socket, peer gone", func(t *testing.T) *os.File { in, peer := socket(t); unix.Close(peer); return in }, true},
		{"a socket, peer done writing", func(t *testing.T) *os.File {
			in, peer := socket(t)
			unix.Shutdown(peer, unix.SHUT_WR)
			t.Cleanup(func() { unix.Close(peer) })
			return in
		}, true},
		{"a socket, peer gone, a request unread", func(t *testing.T) *os.File {
			in, peer := socket(t)
			unix.Write(peer, []byte("{}\n"))
			unix.Close(peer)
			return in
		}, false},
		{"a regular file", func(t *testing.T) *os.File {
			path := filepath.Join(t.TempDir(), "in")
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		}, false},
		{"/dev/null", func(t *testing.T) *os.File {
			f, err := os.Open(os.DevNull)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := InputClosed(tc.open(t)); got != tc.closed {
				t.Errorf("InputClosed = %v, want %v", got, tc.closed)
			}
		})
	}
}
