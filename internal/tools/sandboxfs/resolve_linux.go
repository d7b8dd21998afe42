package sandboxfs

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// openat2Root confines every open to the directory by the kernel's own
// path walk (openat2(2)):
//
//   - RESOLVE_BENEATH fails with EXDEV any step that would leave the
//     directory: ".." above it, an absolute path or absolute symlink (even
//     one pointing back inside), a symlink whose target climbs out. The
//     check is part of the lookup, so no rename between steps can defeat
//     it; a rename racing a ".." is reported as EAGAIN.
//   - RESOLVE_NO_MAGICLINKS fails with ELOOP on /proc magic links
//     (/proc/self/root, /proc/self/fd/N, …), which are not resolved by
//     their text and could otherwise jump anywhere.
type openat2Root struct {
	dir *os.File
	// raw holds a reference on dir's descriptor for the duration of each
	// open, so Close cannot free the number and let a reused descriptor
	// (some other directory) become the root of an in-flight open.
	raw syscall.RawConn
}

// resolveFlags are the openat2 resolve flags used for every open.
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS

// maxOpenAttempts bounds the retries of an open the kernel refused with
// EINTR or EAGAIN (a rename or mount raced a ".." step). After that the
// call is refused rather than retried forever.
const maxOpenAttempts = 8

func openOpenat2(dir string) (resolver, error) {
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, startErr(dir, err)
	}
	raw, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, startErr(dir, err)
	}
	o := &openat2Root{dir: f, raw: raw}
	// Probe with the flags of a real call. ENOSYS is a kernel before 5.6;
	// EPERM is a seccomp filter written before openat2 existed, which is
	// how older container runtimes answer a system call they do not know.
	probe, err := o.open(".")
	if err != nil {
		f.Close()
		if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
			return nil, errNoOpenat2
		}
		return nil, startErr(dir, err)
	}
	probe.Close()
	return o, nil
}

func (o *openat2Root) open(name string) (*os.File, error) {
	how := unix.OpenHow{
		Flags:   uint64(openFlags | unix.O_LARGEFILE),
		Resolve: resolveFlags,
	}
	var (
		fd  int
		err error
	)
	cerr := o.raw.Control(func(dirfd uintptr) {
		for range maxOpenAttempts {
			fd, err = unix.Openat2(int(dirfd), name, &how)
			if err != unix.EINTR && err != unix.EAGAIN {
				return
			}
		}
	})
	if cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, err
	}
	// The name is never a path: it would end up in error texts.
	return os.NewFile(uintptr(fd), "sandboxfs"), nil
}

func (o *openat2Root) close() error { return o.dir.Close() }

func (o *openat2Root) mechanism() string { return "openat2" }
