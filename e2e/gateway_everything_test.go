package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
)

// The official conformance suite's active server suite (2025-11-25), run
// against the official Go SDK's conformance everything-server twice: on
// its own over Streamable HTTP (the baseline: every check must pass), and
// through `bastion gateway` with names: bare in front of it over stdio,
// in the session era (protocol: legacy), in which the server can ask the
// client for sampling and elicitation and log during a call. Every check
// the server passes on its own must pass through the gateway; the score
// is logged scenario by scenario.

// everythingWhy is why a scenario the gateway does not pass fails, for
// the score table; none is expected to.
var everythingWhy = map[string]string{}

// resultStamp is the time the suite appends to a scenario's directory.
var resultStamp = regexp.MustCompile(`-\d{4}-\d{2}-\d{2}T[0-9-]+Z$`)

// buildEverythingServer builds the Go SDK's conformance everything-server
// from the module cache (the SDK is a test dependency of this module).
func buildEverythingServer(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "everything-server")
	cmd := exec.CommandContext(ctxT(t), "go", "build", "-o", out, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server")
	cmd.Dir = ".."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the everything-server: %v\n%s", err, b)
	}
	return out
}

// runSuite runs the active suite for 2025-11-25 against url, in one CLI
// run, and returns each scenario's result by name.
func runSuite(t *testing.T, url string) map[string]conformanceResult {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.CommandContext(ctxT(t), "node", "--import", "./"+filepath.ToSlash(filepath.Join(conformanceDir, "register.mjs")),
		conformanceCLI(), "server", "--url", url, "--suite", "active", "--spec-version", "2025-11-25", "-o", dir)
	cmd.Env = append(baseEnv(), "NO_COLOR=1")
	cmd.WaitDelay = waitLimit
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errorAs(err, &ee) {
		t.Fatalf("run the suite: %v\n%s", err, out)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "server-*", "checks.json"))
	if len(files) == 0 {
		t.Fatalf("the suite saved no checks (%v):\n%s", err, out)
	}
	results := map[string]conformanceResult{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(resultStamp.ReplaceAllString(filepath.Base(filepath.Dir(f)), ""), "server-")
		r := conformanceResult{scenario: name}
		if json.Unmarshal(b, &r.raw) != nil || json.Unmarshal(b, &r.checks) != nil {
			t.Fatalf("%s: checks.json does not parse", f)
		}
		results[name] = r
	}
	return results
}

func errorAs(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	if ok {
		*ee = e
	}
	return ok
}

// checks counts the checks: all of them, those that failed (FAILURE or
// WARNING) and those that are informational (INFO: the suite's word for a
// behaviour the spec leaves optional, such as answering in JSON where an
// event stream may be used).
func checks(results map[string]conformanceResult) (all, failed, info int) {
	for _, r := range results {
		all += len(r.checks)
		failed += r.count("FAILURE") + r.count("WARNING")
		info += r.count("INFO")
	}
	return all, failed, info
}

// TestGatewayEverythingServer: the official Go SDK's everything-server
// passes every check of the active suite on its own, and through the
// gateway (names: bare, first_use pin, protocol: legacy) every check
// succeeds too: none fails, none is merely informational.
func TestGatewayEverythingServer(t *testing.T) {
	requireConformance(t)
	server := buildEverythingServer(t)

	// The baseline: the server on its own, stateful Streamable HTTP, as
	// the SDK's own conformance CI runs it.
	port := freePort(t)
	direct := exec.CommandContext(ctxT(t), server, fmt.Sprintf("-http=127.0.0.1:%d", port), "-stateless=false")
	direct.Env = baseEnv()
	if err := direct.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = direct.Process.Kill(); _ = direct.Wait() })
	waitUntil(t, "the everything-server listening", func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	base := runSuite(t, fmt.Sprintf("http://127.0.0.1:%d/", port))
	baseAll, baseFailed, _ := checks(base)
	if baseFailed != 0 || baseAll == 0 {
		t.Fatalf("the everything-server on its own fails %d of %d checks", baseFailed, baseAll)
	}

	mark := newMark()
	g := startGatewayWith(t, mark, "auth:\n  mode: none\nnames: bare\npolicy:\n  rules:\n"+
		"    - {id: all, tools: [\"*\"], prompts: [\"*\"], resources: [\"*:*\"], roles: [\"*\"]}\n"+
		"log:\n  level: debug\nservers:\n"+
		fmt.Sprintf("  - name: every\n    command: [%q]\n    protocol: legacy\n    env:\n      E2E_MARK: %q\n", server, mark))
	through := runSuite(t, g.url)
	all, failed, info := checks(through)
	if all != baseAll || failed != 0 || info != 0 {
		t.Errorf("through the gateway %d checks ran (%d on its own): %d failed, %d only informational", all, baseAll, failed, info)
	}

	names := make([]string, 0, len(base))
	for n := range base {
		names = append(names, n)
	}
	slices.Sort(names)
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tDIRECT\tTHROUGH THE GATEWAY\tWHY\tFIRST FAILURE")
	for _, n := range names {
		b, r := base[n], through[n]
		verdict, why, first := "pass", "", ""
		if !r.passed() {
			verdict, why, first = "FAIL", everythingWhy[n], clip(firstFailure(r))
		}
		if r.count("INFO") > 0 {
			why = fmt.Sprintf("%d informational (the suite: optional behaviour)", r.count("INFO"))
		}
		fmt.Fprintf(tw, "%s\t%d/%d\t%s %d/%d\t%s\t%s\n", n, b.count("SUCCESS"), len(b.checks),
			verdict, r.count("SUCCESS"), len(r.checks), why, first)
		if !r.passed() {
			t.Errorf("%s fails through the gateway: %s", n, firstFailure(r))
		}
	}
	_ = tw.Flush()
	t.Logf("the active suite (2025-11-25) against the official Go SDK everything-server: %d checks, %d failed on its own; "+
		"through bastion gateway (names: bare, protocol: legacy): %d checks, %d failed, %d informational\n%s",
		baseAll, baseFailed, all, failed, info, table.String())
}
