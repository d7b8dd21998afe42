package review

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

func removeSocket(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		// Never remove a file that is not a socket: the path may be
		// misconfigured onto something that matters.
		return errors.New("review: " + path + " exists and is not a socket")
	}
	return os.Remove(path)
}

func chmod(path string) error {
	if err := os.Chmod(path, 0o600); err != nil {
		return fmt.Errorf("review: %w", err)
	}
	return nil
}
