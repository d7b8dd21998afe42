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
// through `bastion gateway` with names: bare in front of it over stdio.
// The gateway's score is logged scenario by scenario; the scenarios in
// everythingMustPass must pass through it.

// everythingMustPass are the scenarios the gateway must pass in front of
// the everything-server.
var everythingMustPass = []string{
	"server-initialize", "ping", "tools-list", "dns-rebinding-protection",
	"tools-call-simple-text", "tools-call-image", "tools-call-audio", "tools-call-embedded-resource",
	"tools-call-mixed-content", "tools-call-error", "tools-call-with-progress",
	"resources-list", "resources-read-text", "resources-read-binary", "resources-templates-read",
	"prompts-list", "prompts-get-simple", "prompts-get-with-args", "prompts-get-embedded-resource", "prompts-get-with-image",
	"resources-subscribe", "resources-unsubscribe", "completion-complete", "logging-set-level",
}

// everythingWhy is why a scenario the gateway does not pass fails, for
// the score table.
var everythingWhy = map[string]string{
	"tools-call-with-logging":      "notifications/message are not relayed yet (decision 23)",
	"tools-call-sampling":          "server-to-client requests are not relayed yet (decision 24)",
	"tools-call-elicitation":       "server-to-client requests are not relayed yet (decision 24)",
	"elicitation-sep1034-defaults": "server-to-client requests are not relayed yet (decision 24)",
	"elicitation-sep1330-enums":    "server-to-client requests are not relayed yet (decision 24)",
	"server-sse-multiple-streams":  "gateway strictness: MCP-Protocol-Version header not the session's version",
}

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

// checks counts the checks that succeeded and those scored.
func checks(results map[string]conformanceResult) (passed, scored int) {
	for _, r := range results {
		passed += r.count("SUCCESS")
		scored += r.count("SUCCESS") + r.count("FAILURE")
	}
	return passed, scored
}

// TestGatewayEverythingServer: the official Go SDK's everything-server
// passes every check of the active suite on its own; through the gateway
// (names: bare, first_use pin) the scenarios of everythingMustPass pass,
// and the score is logged.
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
	basePassed, baseScored := checks(base)
	if basePassed != baseScored || basePassed == 0 {
		t.Fatalf("the everything-server on its own passes %d of %d checks", basePassed, baseScored)
	}

	mark := newMark()
	g := startGatewayWith(t, mark, "auth:\n  mode: none\nnames: bare\npolicy:\n  rules:\n"+
		"    - {id: all, tools: [\"*\"], prompts: [\"*\"], resources: [\"*:*\"], roles: [\"*\"]}\n"+
		"log:\n  level: debug\nservers:\n"+
		fmt.Sprintf("  - name: every\n    command: [%q]\n    env:\n      E2E_MARK: %q\n", server, mark))
	through := runSuite(t, g.url)
	passed, _ := checks(through)

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
		fmt.Fprintf(tw, "%s\t%d/%d\t%s %d/%d\t%s\t%s\n", n, b.count("SUCCESS"), b.count("SUCCESS")+b.count("FAILURE"),
			verdict, r.count("SUCCESS"), b.count("SUCCESS")+b.count("FAILURE"), why, first)
		must := slices.Contains(everythingMustPass, n)
		switch {
		case must && !r.passed():
			t.Errorf("%s fails through the gateway: %s", n, firstFailure(r))
		case !must && r.passed():
			t.Logf("%s now passes through the gateway: add it to everythingMustPass", n)
		}
	}
	_ = tw.Flush()
	t.Logf("the active suite (2025-11-25) against the official Go SDK everything-server: %d/%d checks on its own, "+
		"%d/%d through bastion gateway (names: bare)\n%s", basePassed, baseScored, passed, baseScored, table.String())
}
