//go:build linux

package sandboxfs

import (
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-bastion/bastion/internal/problem"
)

// Verdicts, short for the table.
const (
	ok       problem.Code = ""
	denied                = problem.AccessDenied
	notFound              = problem.NotFound
	tooBig                = problem.PayloadTooLarge
	invalid               = problem.Validation
)

// verdict returns a pointer to c, for corpusCase.osRoot.
func verdict(c problem.Code) *problem.Code { return &c }

// needs names a fixture feature a case depends on.
type needs int

const (
	needsNothing needs = iota
	needsFIFO
	needsSocket
	needsDevice
	needsNoDAC // mode bits must bind: run without DAC capabilities
)

type corpusCase struct {
	name     string
	path     string
	maxBytes int64  // 0: not sent
	encoding string // "": not sent
	raw      string // if set, the arguments verbatim (path etc. ignored)
	want     problem.Code
	content  string // the expected content of a success, decoded
	detail   string // if set, a part of the problem's detail
	// osRoot is the verdict under the os.Root fallback where it differs
	// from openat2's; see docs/sandbox.md.
	osRoot *problem.Code
	needs  needs
}

// corpus is the table every backend must pass. It refers to the fixture of
// newFixture.
func corpus(f *fixture) []corpusCase {
	long255 := strings.Repeat("n", 255)
	path4095 := strings.Repeat("x/", 2047) + "x" // 4095 bytes, components of 1
	path4096 := path4095 + "x"
	return []corpusCase{
		// Reads that succeed.
		{name: "plain file", path: "hello.txt", content: helloText},
		{name: "dot prefix", path: "./hello.txt", content: helloText},
		{name: "double slash", path: "a//b/c/deep.txt", content: deepText},
		{name: "nested dirs", path: "a/b/c/deep.txt", content: deepText},
		{name: "dotdot staying inside", path: "a/../hello.txt", content: helloText},
		{name: "deep dotdot staying inside", path: "a/b/c/../../../hello.txt", content: helloText},
		{name: "empty file", path: "empty.txt", content: ""},
		{name: "binary as base64", path: "binary.bin", encoding: "base64", content: string(binaryBytes)},
		{name: "text as base64", path: "hello.txt", encoding: "base64", content: helloText},
		{name: "explicit utf-8", path: "hello.txt", encoding: "utf-8", content: helloText},
		{name: "exactly the configured max", path: "exact.bin", content: strings.Repeat("x", testMaxBytes)},
		{name: "max_bytes equal to size", path: "hello.txt", maxBytes: int64(len(helloText)), content: helloText},
		{name: "symlink inside to inside", path: "link-inside", content: helloText},
		{name: "symlink chain inside", path: "link-chain", content: helloText},
		{name: "ten-hop symlink chain inside", path: "chain1", content: helloText, osRoot: verdict(denied)},
		{name: "dir symlink inside", path: "link-a/b/c/deep.txt", content: deepText},
		{name: "nested dir symlink inside", path: "link-ab/c/deep.txt", content: deepText},
		{name: "dotdot after dir symlink is physical", path: "link-ab/../b/c/deep.txt", content: deepText},
		{name: "relative symlink with dotdot inside", path: "a/b/up", content: helloText},
		{name: "unicode NFC name read as NFC", path: "caf\u00e9.txt", content: "nfc\n"},
		{name: "unicode NFD name read as NFD", path: "nai\u0308ve.txt", content: "nfd\n"},
		{name: "CJK names", path: "日本語/ファイル.txt", content: "cjk\n"},
		{name: "emoji name", path: "emoji-\U0001F600.txt", content: "emoji\n"},
		{name: "255-byte component", path: long255, content: "long name\n"},
		{name: "hidden file", path: ".hidden", content: "hidden\n"},
		{name: "three dots is a name", path: "...", content: "three dots\n"},
		{name: "space in name", path: "space name.txt", content: "space\n"},

		// Paths inside that do not exist.
		{name: "missing file", path: "missing.txt", want: notFound, detail: `"missing.txt" does not exist`},
		{name: "missing in subdir", path: "a/missing.txt", want: notFound},
		{name: "dangling symlink", path: "dangling", want: notFound},
		{name: "trailing slash on a file", path: "hello.txt/", want: notFound},
		{name: "file used as a dir", path: "hello.txt/x", want: notFound},
		{name: "NFC name read as NFD", path: "cafe\u0301.txt", want: notFound},
		{name: "NFD name read as NFC", path: "na\u00efve.txt", want: notFound},
		{name: "case differs", path: "HELLO.TXT", want: notFound},
		{name: "backslashes are not separators", path: `..\outside\marker.txt`, want: notFound},
		{name: "percent-encoding is not decoded", path: "%2e%2e/outside/marker.txt", want: notFound},
		{name: "tilde is not expanded", path: "~/outside/marker.txt", want: notFound},
		{name: "URL is a relative name", path: "file:///etc/passwd", want: notFound},
		{name: "dotdot after dir symlink lands in a/", path: "link-ab/../hello.txt", want: notFound},
		{name: "4095-byte path reaches the kernel", path: path4095, want: notFound},

		// Paths that leave the sandbox, lexically.
		{name: "dotdot to outside", path: "../outside/marker.txt", want: denied},
		{name: "sibling with the sandbox's name as prefix", path: "../data-secret/secret.txt", want: denied},
		{name: "out and back in by name", path: "../data/hello.txt", want: denied},
		{name: "dotdot below a dir", path: "a/../../outside/marker.txt", want: denied},
		{name: "dotdot below a missing dir", path: "missing/../../outside/marker.txt", want: denied},
		{name: "dotdot below a dir symlink", path: "link-a/../../outside/marker.txt", want: denied},
		{name: "many dotdots", path: "../../../../../../../../etc/passwd", want: denied},
		{name: "absolute path", path: "/etc/passwd", want: denied, detail: "absolute paths are refused"},
		{name: "absolute path into the sandbox", path: filepath.Join(f.data, "hello.txt"), want: denied},
		{name: "root", path: "/", want: denied},

		// Symlinks that leave the sandbox.
		{name: "relative symlink to outside", path: "esc-rel", want: denied, detail: "outside the sandbox"},
		{name: "relative symlink to missing outside", path: "esc-rel-missing", want: denied},
		{name: "absolute symlink to outside", path: "esc-abs", want: denied},
		{name: "absolute symlink to missing outside", path: "esc-abs-missing", want: denied, detail: "outside the sandbox"},
		{name: "relative dir symlink to outside", path: "esc-dir-rel/marker.txt", want: denied},
		{name: "relative dir symlink to outside, nested", path: "esc-dir-rel/sub/marker.txt", want: denied},
		{name: "absolute dir symlink to outside", path: "esc-dir-abs/marker.txt", want: denied},
		{name: "symlink to the prefixed sibling", path: "esc-sibling", want: denied},
		{name: "deep relative symlink to outside", path: "a/b/esc-deep", want: denied},
		{name: "symlink out and back in", path: "a/back", want: denied},
		{name: "absolute symlink pointing inside", path: "abs-inside", want: denied},
		{name: "escape hidden behind a lexically clean path", path: "esc-dir-rel/../data/hello.txt", want: denied},
		{name: "symlink loop", path: "loop1", want: denied, detail: "symbolic links"},
		{name: "self loop", path: "self-loop", want: denied},
		{name: "symlink to /dev/null", path: "dev-null", want: denied},
		{name: "symlink to /proc/self/root", path: "proc-root", want: denied},
		{name: "through /proc/self/root", path: "proc-root/etc/hostname", want: denied},

		// What is there but is not a plain, private, readable file.
		{name: "FIFO", path: "fifo", want: denied, detail: "named pipe", needs: needsFIFO},
		{name: "FIFO via dot", path: "./fifo", want: denied, needs: needsFIFO},
		{name: "FIFO as a directory", path: "fifo/x", want: notFound, needs: needsFIFO},
		{name: "unix socket", path: "sock", want: denied, detail: "not a regular file", needs: needsSocket},
		{name: "character device", path: "devnode", want: denied, detail: "a device", needs: needsDevice},
		{name: "directory", path: "a", want: denied, detail: "a directory"},
		{name: "directory with slash", path: "a/", want: denied},
		{name: "sandbox root", path: ".", want: denied},
		{name: "sandbox root via dotdot", path: "a/..", want: denied},
		{name: "hard link inside", path: "hardlinked.txt", want: denied},
		{name: "other name of the hard link", path: "hardlinked-2.txt", want: denied},
		{name: "hard link to a file outside", path: "hardlink-outside", want: denied, detail: "hard link"},
		{name: "unreadable file", path: "unreadable.txt", want: denied, detail: "not readable", needs: needsNoDAC},
		{name: "file in an unsearchable dir", path: "noperm/inner.txt", want: denied, detail: "not readable", needs: needsNoDAC},

		// Too large: refused, not cut.
		{name: "one byte over the configured max", path: "large.bin", want: tooBig, detail: "not truncated"},
		{name: "one byte over, as base64", path: "large.bin", encoding: "base64", want: tooBig},
		{name: "over the caller's max_bytes", path: "hello.txt", maxBytes: 5, want: tooBig},
		{name: "one byte over max_bytes", path: "hello.txt", maxBytes: int64(len(helloText)) - 1, want: tooBig},

		// Content that is not UTF-8.
		{name: "binary as utf-8", path: "binary.bin", want: invalid, detail: `encoding "base64"`},
		{name: "invalid UTF-8 sequence", path: "bad-utf8.txt", want: invalid},
		{name: "encoded surrogate", path: "surrogate.txt", want: invalid},

		// Text with control characters other than tab, LF and CR.
		{name: "terminal escape as utf-8", path: "ansi.txt", want: invalid, detail: `control character U+001B at byte 0`},
		{name: "NUL as utf-8", path: "nul.txt", want: invalid, detail: `control character U+0000 at byte 1`},
		{name: "DEL as utf-8", path: "del.txt", want: invalid, detail: `control character U+007F at byte 2`},
		{name: "8-bit CSI (C1) as utf-8", path: "csi.txt", want: invalid, detail: `control character U+009B at byte 2`},
		{name: "Latin-1 letters past C1 are text", path: "latin1.txt", content: "\u00a0é\u00ff"},
		{name: "terminal escape as base64", path: "ansi.txt", encoding: "base64", content: ansiText},
		{name: "tab, CR and LF are text", path: "whitespace.txt", content: whitespaceText},

		// Paths refused before any system call.
		{name: "empty path", path: "", want: invalid},
		{name: "NUL", path: "hello.txt\x00.png", want: invalid},
		{name: "newline", path: "hello\n.txt", want: invalid},
		{name: "tab", path: "hello\t.txt", want: invalid},
		{name: "DEL", path: "hello\x7f.txt", want: invalid},
		{name: "C1 control", path: "hello\u0085.txt", want: invalid},
		{name: "right-to-left override", path: "txt.\u202eexe", want: invalid},
		{name: "bidi isolate", path: "\u2066hello.txt", want: invalid},
		{name: "arabic letter mark", path: "hello\u061c.txt", want: invalid},
		{name: "right-to-left mark", path: "hello\u200f.txt", want: invalid},
		{name: "256-byte component", path: long255 + "n", want: invalid},
		{name: "4096-byte path", path: path4096, want: invalid},
		{name: "path beyond the schema's maxLength", path: strings.Repeat("x/", 2048) + "x", want: invalid},
		{name: "NUL before an escape", path: "../\x00", want: invalid},

		// Arguments refused by the schema or the typed decode.
		{name: "max_bytes zero", raw: `{"relative_path":"hello.txt","max_bytes":0}`, want: invalid},
		{name: "max_bytes above the configured max", raw: `{"relative_path":"hello.txt","max_bytes":65537}`, want: invalid},
		{name: "max_bytes as a string", raw: `{"relative_path":"hello.txt","max_bytes":"10"}`, want: invalid},
		{name: "max_bytes fractional", raw: `{"relative_path":"hello.txt","max_bytes":1.5}`, want: invalid},
		{name: "unknown encoding", raw: `{"relative_path":"hello.txt","encoding":"latin-1"}`, want: invalid},
		{name: "unknown field", raw: `{"relative_path":"hello.txt","follow_symlinks":true}`, want: invalid},
		{name: "missing relative_path", raw: `{}`, want: invalid},
		{name: "relative_path a number", raw: `{"relative_path":1}`, want: invalid},
		{name: "relative_path null", raw: `{"relative_path":null}`, want: invalid},
		{name: "relative_path an array", raw: `{"relative_path":["..","outside","marker.txt"]}`, want: invalid},
	}
}

func TestCorpusOpenat2(t *testing.T) { runCorpus(t, backendOpenat2) }

// TestCorpusOSRoot runs the same corpus through the fallback that is used
// where openat2 is missing.
func TestCorpusOSRoot(t *testing.T) { runCorpus(t, backendOSRoot) }

func runCorpus(t *testing.T, b backend) {
	f := newFixture(t)
	r := f.reader(t, b)
	cases := corpus(f)
	if len(cases) < 60 {
		t.Fatalf("corpus has %d cases, want at least 60", len(cases))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			switch {
			case c.needs == needsFIFO && f.noFIFO != "":
				t.Skip("no FIFO:", f.noFIFO)
			case c.needs == needsSocket && f.noSocket != "":
				t.Skip("no unix socket:", f.noSocket)
			case c.needs == needsDevice && f.noDevice != "":
				t.Skip("no device node:", f.noDevice)
			}
			want := c.want
			if b == backendOSRoot && c.osRoot != nil {
				want = *c.osRoot
			}
			args := c.raw
			if args == "" {
				args = argsFor(t, c.path, c.maxBytes, c.encoding)
			}
			o := call(t, r, args, c.needs == needsNoDAC)
			f.checkNoLeak(t, o.visible)
			if got := o.code(); got != want {
				t.Fatalf("verdict = %q, want %q (%v)", got, want, o.err)
			}
			if want != ok {
				if len(o.prob.InvalidParams) == 0 {
					t.Errorf("problem names no invalid_params: %v", o.prob)
				}
				if !strings.Contains(o.prob.Detail, c.detail) {
					t.Errorf("detail = %q, want it to contain %q", o.prob.Detail, c.detail)
				}
				return
			}
			if o.out.RelativePath != c.path {
				t.Errorf("relative_path = %q, want %q", o.out.RelativePath, c.path)
			}
			content := o.out.Content
			if o.out.Encoding == EncodingBase64 {
				raw, _ := base64.StdEncoding.DecodeString(content)
				content = string(raw)
			}
			if content != c.content {
				t.Errorf("content = %.80q, want %.80q", content, c.content)
			}
			if o.out.SizeBytes != int64(len(c.content)) {
				t.Errorf("size_bytes = %d, want %d", o.out.SizeBytes, len(c.content))
			}
			wantEnc := c.encoding
			if wantEnc == "" {
				wantEnc = EncodingUTF8
			}
			if o.out.Encoding != wantEnc {
				t.Errorf("encoding = %q, want %q", o.out.Encoding, wantEnc)
			}
		})
	}
}
