package sandboxfs

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// resolver opens files beneath the data directory. open returns the error
// of the system call (a syscall.Errno, possibly wrapped), errEscapes, or an
// internal failure; never a success for a file outside the directory.
type resolver interface {
	open(name string) (*os.File, error)
	close() error
	mechanism() string
}

// backend selects a resolver. Only tests ask for one explicitly, to run the
// same corpus through the fallback.
type backend int

const (
	backendAuto    backend = iota // openat2, else os.Root
	backendOpenat2                // openat2 or fail
	backendOSRoot                 // os.Root only
)

// openFlags opens for reading only (nothing can be created or truncated).
// O_NONBLOCK makes the open of a FIFO return at once instead of waiting for
// a writer; O_NOCTTY keeps a terminal from becoming the process's
// controlling terminal; O_CLOEXEC keeps the descriptor from any child.
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY | syscall.O_CLOEXEC

var (
	// errEscapes reports a path that leaves the sandbox, found in user
	// space (by os.Root) rather than by the kernel (EXDEV).
	errEscapes = errors.New("sandboxfs: path escapes the sandbox")
	// errNoOpenat2 reports a kernel, or a seccomp filter, without openat2.
	errNoOpenat2 = errors.New("sandboxfs: openat2 is not available")
)

func openResolver(dir string, b backend) (resolver, error) {
	switch b {
	case backendOpenat2:
		return openOpenat2(dir)
	case backendOSRoot:
		return openOSRoot(dir)
	}
	r, err := openOpenat2(dir)
	if errors.Is(err, errNoOpenat2) {
		return openOSRoot(dir)
	}
	return r, err
}

// startErr is for the operator at start-up, so it names the directory.
func startErr(dir string, err error) error {
	return fmt.Errorf("sandboxfs: data directory %q cannot be used (%w)", dir, stripPath(err))
}

// osRoot is the fallback: os.Root walks the path one component at a time
// from the directory's descriptor with O_NOFOLLOW, reads each symlink it
// meets and refuses a target that is absolute or climbs above the root.
type osRoot struct{ root *os.Root }

func openOSRoot(dir string) (resolver, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, startErr(dir, err)
	}
	return osRoot{root: r}, nil
}

func (o osRoot) open(name string) (*os.File, error) {
	f, err := o.root.OpenFile(name, openFlags, 0)
	if err == nil {
		return f, nil
	}
	var errno syscall.Errno
	switch {
	case errors.As(err, &errno):
		return nil, errno
	case errors.Is(err, os.ErrClosed):
		return nil, err
	}
	// os.Root reports an escape with an unexported error. Anything it
	// reports that is neither an errno nor "closed" is taken for one: an
	// unknown refusal must deny, not serve.
	return nil, fmt.Errorf("%w: %w", errEscapes, stripPath(err))
}

func (o osRoot) close() error { return o.root.Close() }

func (o osRoot) mechanism() string { return "os.Root" }
