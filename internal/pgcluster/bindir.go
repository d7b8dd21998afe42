package pgcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrNotFound reports that no PostgreSQL server binaries were found. Test
// helpers match it with [errors.Is] to tell a machine without PostgreSQL
// (skip, or fail in CI) from a cluster that failed to start (always fail).
var ErrNotFound = errors.New("PostgreSQL server binaries not found")

// debianRoot is where Debian and Ubuntu install one bin directory per server
// major version.
const debianRoot = "/usr/lib/postgresql"

// FindBinDir returns the directory holding initdb, pg_ctl and postgres. It
// looks, in order, at $PG_BIN (an explicit override, used as is), at
// /usr/lib/postgresql/<highest version>/bin, and at `pg_config --bindir`.
// The error wraps [ErrNotFound] when none of them holds initdb and pg_ctl.
func FindBinDir() (string, error) {
	if dir := os.Getenv("PG_BIN"); dir != "" {
		// An override that does not work is an error, not a hint to look
		// elsewhere: a silently different server version would be worse.
		if !hasServer(dir) {
			return "", fmt.Errorf("pgcluster: PG_BIN=%q has no initdb and pg_ctl: %w", dir, ErrNotFound)
		}
		return dir, nil
	}
	if dir, ok := debianBinDir(debianRoot); ok {
		return dir, nil
	}
	// pg_config comes with libpq-dev and may name a bin directory whose
	// server package is not installed, hence the check.
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if dir := strings.TrimSpace(string(out)); dir != "" && hasServer(dir) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("pgcluster: looked in $PG_BIN, %s/*/bin and pg_config --bindir: %w", debianRoot, ErrNotFound)
}

// debianBinDir returns root/<v>/bin for the highest version v that holds a
// server.
func debianBinDir(root string) (string, bool) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return "", false
	}
	var versions []string
	for _, e := range entries {
		if _, ok := parseVersion(e.Name()); ok && hasServer(filepath.Join(root, e.Name(), "bin")) {
			versions = append(versions, e.Name())
		}
	}
	if len(versions) == 0 {
		return "", false
	}
	best := slices.MaxFunc(versions, compareVersions)
	return filepath.Join(root, best, "bin"), true
}

// parseVersion parses a major version directory name such as "9.6" or "17".
func parseVersion(s string) ([]int, bool) {
	var v []int
	for part := range strings.SplitSeq(s, ".") {
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 {
			return nil, false
		}
		v = append(v, n)
	}
	return v, true
}

// compareVersions orders version names numerically, so that "10" sorts
// after "9.6" where a string comparison would not.
func compareVersions(a, b string) int {
	va, _ := parseVersion(a)
	vb, _ := parseVersion(b)
	return slices.Compare(va, vb)
}

// hasServer reports whether dir holds the two programs a cluster needs.
func hasServer(dir string) bool {
	for _, name := range []string{"initdb", "pg_ctl"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}
