package e2e

import (
	"os/exec"
	"strings"
	"testing"
)

// runBastion runs the binary to completion and returns its outputs and exit
// status.
func runBastion(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin("bastion"), args...)
	cmd.Env = env
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.Stdin = strings.NewReader("")
	code = exitCode(cmd.Run())
	return o.String(), e.String(), code
}

func TestServeHelpListsEveryVariable(t *testing.T) {
	t.Parallel()
	out, _, code := runBastion(t, baseEnv(), "serve", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, v := range []string{
		"MCP_SAFE_DATA_DIR", "MCP_SQL_DSN", "MCP_METRICS_ENABLED", "MCP_METRICS_DISK_PATH",
		"MCP_MAX_CONCURRENCY", "MCP_QUEUE_TIMEOUT_MS", "MCP_CALL_TIMEOUT_MS", "MCP_DRAIN_GRACE_MS",
		"MCP_MAX_FRAME_BYTES", "MCP_SQL_MAX_ROWS", "MCP_SQL_STATEMENT_TIMEOUT_MS", "MCP_SQL_POOL_MAX_SIZE",
		"MCP_SQL_MAX_RESULT_BYTES", "MCP_FS_MAX_BYTES", "MCP_LOG_LEVEL", "MCP_LOG_FORMAT",
	} {
		mustContain(t, out, v)
	}
	mustContain(t, out, "1..1024") // ranges are shown
}

func TestBadConfigurationExits2(t *testing.T) {
	t.Parallel()
	cases := []struct{ env, want string }{
		{"MCP_MAX_CONCURRENCY=0", "MCP_MAX_CONCURRENCY"},
		{"MCP_MAX_CONCURRENCY=ten", "MCP_MAX_CONCURRENCY"},
		{"MCP_MAX_CONCURRENCY=+16", "MCP_MAX_CONCURRENCY"},
		{"MCP_MAX_CONCURRENCY=016", "MCP_MAX_CONCURRENCY"},
		{"MCP_QUEUE_TIMEOUT_MS=-1", "MCP_QUEUE_TIMEOUT_MS"},
		{"MCP_METRICS_ENABLED=yes", "MCP_METRICS_ENABLED"},
		{"MCP_LOG_LEVEL=verbose", "MCP_LOG_LEVEL"},
		{"MCP_MAX_FRAME_BYTES=", "MCP_MAX_FRAME_BYTES"},
		{"MCP_METRICS_DISK_PATH=relative/path", "MCP_METRICS_DISK_PATH"},
		{"MCP_SQL_MAX_ROW=5", "MCP_SQL_MAX_ROW"}, // a typo is not silently ignored
	}
	for _, c := range cases {
		out, errOut, code := runBastion(t, baseEnv(c.env), "serve")
		if code != 2 {
			t.Errorf("%s: exit %d, want 2", c.env, code)
		}
		if out != "" {
			t.Errorf("%s: stdout %q", c.env, out)
		}
		mustContain(t, errOut, c.want)
	}
}

func TestSecretNeverPrinted(t *testing.T) {
	t.Parallel()
	// A DSN with a password, and another variable wrong: the error report
	// and the logs must never contain the DSN.
	const dsn = "postgres://reader:hunter2-secret@db.internal:5432/app"
	_, errOut, code := runBastion(t, baseEnv("MCP_SQL_DSN="+dsn, "MCP_LOG_LEVEL=loud"), "serve")
	if code != 2 {
		t.Fatalf("exit %d", code)
	}
	if strings.Contains(errOut, "hunter2") || strings.Contains(errOut, "db.internal") {
		t.Fatalf("DSN leaked: %s", errOut)
	}
}

func TestCheckAndVersion(t *testing.T) {
	t.Parallel()
	_, errOut, code := runBastion(t, baseEnv(), "serve", "--check")
	if code != 0 {
		t.Fatalf("--check exit %d: %s", code, errOut)
	}
	out, _, code := runBastion(t, baseEnv(), "version")
	if code != 0 || !strings.HasPrefix(out, "bastion ") {
		t.Fatalf("version: %d %q", code, out)
	}
	_, _, code = runBastion(t, baseEnv(), "frobnicate")
	if code != 2 {
		t.Fatalf("unknown command exit %d", code)
	}
	_, _, code = runBastion(t, baseEnv(), "serve", "--nope")
	if code != 2 {
		t.Fatalf("unknown flag exit %d", code)
	}
}
