//go:build !linux

package sandboxfs

// openOpenat2 reports that openat2, a Linux system call, is not available,
// so the reader falls back to os.Root.
func openOpenat2(string) (resolver, error) { return nil, errNoOpenat2 }
