// Package sandboxfs implements the sandbox_fs_read tool: it reads one
// regular file beneath a data directory that is opened once, at start-up,
// and kept open for the life of the process.
//
// # Containment
//
// Containment is not computed here; it is delegated to the kernel. On Linux
// every file is opened with openat2(2) relative to the data directory's
// descriptor with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS, so the kernel
// itself refuses, atomically with the lookup, any resolution step that would
// leave the directory: a ".." above it, an absolute symlink, a symlink whose
// target climbs out, a /proc magic link. Where openat2 does not exist (ENOSYS,
// or EPERM from a seccomp filter that predates it) the reader falls back to
// [os.Root], which walks the path one component at a time with O_NOFOLLOW
// and refuses the same escapes in user space.
//
// Before any system call the path is checked lexically (checkPath):
// relative only, valid UTF-8, no NUL, control or bidi characters, bounded
// length, and no ".." that would climb above the root. After the open the
// descriptor is fstat'ed: only regular files are read, and by default only
// those with a single hard link.
//
// docs/sandbox.md lists each guarantee with the mechanism that meets it and
// the residual risks.
//
// # Errors
//
// A refusal the caller can act on is a [*problem.Problem]
// (MCP_ACCESS_DENIED, MCP_NOT_FOUND, MCP_PAYLOAD_TOO_LARGE,
// MCP_VALIDATION_ERROR). Its detail repeats at most [problem.MaxEcho]
// characters of the caller's own relative_path and never an absolute host
// path. Every other error is an internal failure and carries no path at all.
package sandboxfs

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"syscall"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/problem"
	"github.com/mcp-bastion/bastion/internal/tool"
)

// Name is the tool's advertised name.
const Name = "sandbox_fs_read"

// MaxBytesCeiling is the largest maxBytes [New] accepts. A whole file is
// held in memory, and a tool result carries its content twice (structured
// content and its text copy), escaped for JSON: up to 6 bytes per byte
// read for text full of quotes or backslashes, 2.7 for base64. The ceiling
// keeps one call from claiming an unbounded share of the process.
const MaxBytesCeiling = 64 << 20

// The encodings a caller may ask for.
const (
	EncodingUTF8   = "utf-8"
	EncodingBase64 = "base64"
)

// Input is the arguments object of a sandbox_fs_read call.
type Input struct {
	// RelativePath names the file, relative to the data directory.
	RelativePath string `json:"relative_path"`
	// MaxBytes is the largest file the caller accepts; nil means the
	// configured maximum. A larger file is refused, never cut.
	MaxBytes *int64 `json:"max_bytes,omitzero"`
	// Encoding is EncodingUTF8 (the default when empty) or EncodingBase64.
	Encoding string `json:"encoding,omitzero"`
}

// Output is the structured result of a successful call.
type Output struct {
	// RelativePath is the caller's path, exactly as given.
	RelativePath string `json:"relative_path"`
	// SizeBytes is the number of bytes read, before any encoding.
	SizeBytes int64 `json:"size_bytes"`
	// Encoding is the encoding of Content.
	Encoding string `json:"encoding"`
	// Content is the file as text (utf-8) or as standard base64.
	Content string `json:"content"`
}

// Option changes a default of [New].
type Option func(*config)

type config struct {
	allowHardLinks bool
	backend        backend
}

// AllowHardLinks makes the reader serve regular files that have more than
// one hard link. By default they are refused: a hard link in the data
// directory may name a file that also lives outside it, and no check on the
// path can tell (see docs/sandbox.md). Use it only when the data directory
// is populated by a trusted process and mounted read-only.
func AllowHardLinks() Option {
	return func(c *config) { c.allowHardLinks = true }
}

// Reader is the sandbox_fs_read tool. It is safe for concurrent use. After
// [Reader.Close] every call fails with an internal error.
type Reader struct {
	tool           tool.Tool
	root           resolver
	maxBytes       int64
	allowHardLinks bool
}

var (
	_ tool.Tool = (*Reader)(nil)
	_ io.Closer = (*Reader)(nil)
)

// New opens dataDir, which must be a readable directory, and returns a
// reader confined to it. The directory is opened here, once; moving or
// replacing dataDir afterwards does not change what the reader serves.
// maxBytes, between 1 and [MaxBytesCeiling], is both the default and the
// largest max_bytes a caller may ask for.
//
// Errors from New are meant for the operator at start-up: those about the
// directory name it, and wrap the underlying error, so that
// errors.Is(err, fs.ErrNotExist) and fs.ErrPermission work.
func New(dataDir string, maxBytes int64, opts ...Option) (*Reader, error) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	return newReader(dataDir, maxBytes, c)
}

func newReader(dataDir string, maxBytes int64, c config) (*Reader, error) {
	if maxBytes < 1 || maxBytes > MaxBytesCeiling {
		return nil, fmt.Errorf("sandboxfs: max bytes %d is outside [1, %d]", maxBytes, MaxBytesCeiling)
	}
	if dataDir == "" {
		return nil, errors.New("sandboxfs: data directory is empty")
	}
	root, err := openResolver(dataDir, c.backend)
	if err != nil {
		return nil, err
	}
	r := &Reader{root: root, maxBytes: maxBytes, allowHardLinks: c.allowHardLinks}
	t, err := tool.New(descriptor(maxBytes, c.allowHardLinks), r.read)
	if err != nil {
		root.close()
		return nil, fmt.Errorf("sandboxfs: %w", err)
	}
	r.tool = t
	return r, nil
}

// Descriptor returns the tool's description; the input schema's maximum
// for max_bytes is the configured maxBytes.
func (r *Reader) Descriptor() tool.Descriptor { return r.tool.Descriptor() }

// Call decodes args strictly and reads the file. The read happens in the
// calling goroutine. ctx is checked before the open and again before the
// read; the read itself is not interrupted, but it is bounded by max_bytes,
// so a cancelled call returns within one bounded read.
func (r *Reader) Call(ctx context.Context, args jsontext.Value) (tool.Result, error) {
	return r.tool.Call(ctx, args)
}

// Close releases the data directory. Calls in flight finish against the
// directory they started with; later calls fail.
func (r *Reader) Close() error { return r.root.close() }

// Mechanism reports how paths are confined: "openat2" or "os.Root". It is
// meant for the start-up log.
func (r *Reader) Mechanism() string { return r.root.mechanism() }

func (r *Reader) read(ctx context.Context, in Input) (Output, error) {
	limit := r.maxBytes
	if in.MaxBytes != nil {
		// The schema already bounds max_bytes; this is the second line, for
		// callers that reach read without the schema (tests, fuzzing).
		if *in.MaxBytes < 1 || *in.MaxBytes > r.maxBytes {
			return Output{}, problem.Newf(problem.Validation, []string{"max_bytes"},
				"max_bytes must be between 1 and %d", r.maxBytes)
		}
		limit = *in.MaxBytes
	}
	enc := in.Encoding
	switch enc {
	case "":
		enc = EncodingUTF8
	case EncodingUTF8, EncodingBase64:
	default:
		return Output{}, problem.New(problem.Validation,
			`encoding must be "utf-8" or "base64"`, "encoding")
	}
	name := in.RelativePath
	if p := checkPath(name); p != nil {
		return Output{}, p
	}
	if err := ctx.Err(); err != nil {
		return Output{}, err
	}

	f, err := r.root.open(name)
	if err != nil {
		return Output{}, openProblem(name, err)
	}
	defer f.Close()

	fi, err := f.Stat()
	if err != nil {
		return Output{}, fmt.Errorf("sandboxfs: fstat: %w", stripPath(err))
	}
	if p := typeProblem(name, fi, r.allowHardLinks); p != nil {
		return Output{}, p
	}
	// The size is only a hint (it can change, and some files report 0), so
	// it refuses early but the bounded read below still decides.
	if fi.Size() > limit {
		return Output{}, tooLarge(name, limit)
	}
	if err := ctx.Err(); err != nil {
		return Output{}, err
	}
	data, err := readBounded(f, fi.Size(), limit)
	if err != nil {
		return Output{}, fmt.Errorf("sandboxfs: read: %w", stripPath(err))
	}
	if int64(len(data)) > limit {
		return Output{}, tooLarge(name, limit)
	}

	out := Output{RelativePath: name, SizeBytes: int64(len(data)), Encoding: enc}
	if enc == EncodingBase64 {
		out.Content = base64.StdEncoding.EncodeToString(data)
		return out, nil
	}
	if !utf8.Valid(data) {
		return Output{}, problem.Newf(problem.Validation, []string{"encoding"},
			`%s is not valid UTF-8; read it with encoding "base64"`, problem.Quote(name))
	}
	if i, r := control(data); i >= 0 {
		return Output{}, problem.Newf(problem.Validation, []string{"encoding"},
			`%s is not plain text (control character U+%04X at byte %d); read it with encoding "base64"`,
			problem.Quote(name), r, i)
	}
	out.Content = string(data)
	return out, nil
}

// control returns the offset and the character of the first control
// character in data, which is valid UTF-8: C0 other than tab, line feed
// and carriage return, DEL, or C1 (U+0080 to U+009F); or -1. Text with
// such characters is refused: JSON writes each as a six-byte escape, twice
// in a tool result (the structured content and its text copy), so a file
// of one-byte controls would answer with twelve bytes for every byte read;
// and escape sequences in "text" (ESC [, or the 8-bit CSI U+009B) are a
// way to smuggle terminal control into a client's display.
func control(data []byte) (int, rune) {
	for i, c := range data {
		switch {
		case c < 0x20 && c != '\t' && c != '\n' && c != '\r', c == 0x7f:
			return i, rune(c)
		case c == 0xc2 && i+1 < len(data) && data[i+1] >= 0x80 && data[i+1] <= 0x9f:
			// U+0080 to U+009F, encoded as C2 80 to C2 9F.
			return i, rune(data[i+1])
		}
	}
	return -1, 0
}

// readBounded reads at most limit+1 bytes: one more than allowed is enough
// to know the file is too large, and never more is held in memory.
func readBounded(r io.Reader, sizeHint, limit int64) ([]byte, error) {
	want := int(limit + 1)
	// Size the buffer from fstat so a file of the announced size is read
	// with one allocation; the extra byte detects a file that grew.
	buf := make([]byte, 0, min(int(max(sizeHint, 0))+1, want))
	for len(buf) < want {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(len(buf), want-len(buf)))
		}
		n, err := r.Read(buf[len(buf):min(cap(buf), want)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
	return buf, nil
}

func tooLarge(name string, limit int64) *problem.Problem {
	return problem.Newf(problem.PayloadTooLarge, []string{"relative_path"},
		"%s is larger than max_bytes (%d bytes); files are refused, not truncated",
		problem.Quote(name), limit).WithMetadata("max_bytes", limit)
}

// typeProblem refuses everything but a regular file, and a regular file
// with more than one link unless hard links are allowed.
func typeProblem(name string, fi os.FileInfo, allowHardLinks bool) *problem.Problem {
	var kind string
	switch m := fi.Mode(); {
	case m.IsRegular():
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && uint64(st.Nlink) > 1 && !allowHardLinks {
			return problem.Newf(problem.AccessDenied, []string{"relative_path"},
				"%s has more than one hard link; hard-linked files are refused because a link may name a file outside the sandbox",
				problem.Quote(name))
		}
		return nil
	case m.IsDir():
		kind = "a directory"
	case m&os.ModeNamedPipe != 0:
		kind = "a named pipe"
	case m&os.ModeSocket != 0:
		kind = "a socket"
	case m&os.ModeDevice != 0:
		kind = "a device"
	default:
		kind = "a special file"
	}
	return problem.Newf(problem.AccessDenied, []string{"relative_path"},
		"%s is %s; only regular files can be read", problem.Quote(name), kind)
}

// openProblem turns an open failure into what the peer sees. Only errnos
// that describe the caller's path become problems; anything else is an
// internal failure with the path stripped.
func openProblem(name string, err error) error {
	q := problem.Quote(name)
	deny := func(format string) *problem.Problem {
		return problem.Newf(problem.AccessDenied, []string{"relative_path"}, format, q).WithCause(stripPath(err))
	}
	var errno syscall.Errno
	switch {
	case errors.Is(err, errEscapes):
		return deny("%s resolves outside the sandbox")
	case !errors.As(err, &errno):
		return fmt.Errorf("sandboxfs: open: %w", stripPath(err))
	}
	switch errno {
	case syscall.EXDEV:
		// RESOLVE_BENEATH's answer to any step that would leave the root,
		// including an absolute symlink and a magic link.
		return deny("%s resolves outside the sandbox")
	case syscall.ELOOP:
		// A symlink loop, too many symlinks, or (RESOLVE_NO_MAGICLINKS) a
		// /proc magic link.
		return deny("%s could not be resolved: too many levels of symbolic links, or a link the sandbox does not follow")
	case syscall.EAGAIN:
		// Two causes share the errno: a rename or mount raced a ".."
		// step, or another process holds a lease on the file (the open
		// is non-blocking so that FIFOs cannot hang it).
		return deny("%s could not be opened: the directory tree changed meanwhile or another process holds a lease on the file; try again")
	case syscall.EACCES, syscall.EPERM:
		return deny("%s is not readable")
	case syscall.ENXIO, syscall.ENODEV:
		// open(2) of a socket, or of a device with no driver behind it.
		return deny("%s is not a regular file; only regular files can be read")
	case syscall.ENOENT, syscall.ENOTDIR:
		// Only reachable for paths whose resolution stayed inside: an
		// escape is EXDEV (or errEscapes) before anything outside is looked
		// at, so this cannot reveal whether an outside path exists.
		return problem.Newf(problem.NotFound, []string{"relative_path"}, "%s does not exist in the sandbox", q)
	case syscall.ENAMETOOLONG:
		return problem.Newf(problem.Validation, []string{"relative_path"}, "%s is too long", q)
	}
	return fmt.Errorf("sandboxfs: open: %w", errno)
}

// stripPath drops the path from a *PathError so that nothing that might
// reach a log carries a host path.
func stripPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
