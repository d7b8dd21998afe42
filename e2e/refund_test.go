package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

func refund(t testing.TB) *proc {
	t.Helper()
	p := start(t, "refund", nil, baseEnv())
	p.initialize("2025-11-25")
	return p
}

func TestRefundToolsListed(t *testing.T) {
	t.Parallel()
	p := refund(t)
	p.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	tools := result(t, p.recv())["tools"].([]any)
	var names []string
	byName := map[string]map[string]any{}
	for _, x := range tools {
		tl := x.(map[string]any)
		name := tl["name"].(string)
		names = append(names, name)
		byName[name] = tl
		if tl["outputSchema"] == nil {
			t.Errorf("%s has no outputSchema", name)
		}
		if tl["inputSchema"].(map[string]any)["additionalProperties"] != false {
			t.Errorf("%s input schema allows unknown fields", name)
		}
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "admin_list_audit_log,admin_reset_key,get_customer_record,trigger_refund" {
		t.Fatalf("tools = %v", names)
	}
	props := byName["trigger_refund"]["inputSchema"].(map[string]any)["properties"].(map[string]any)
	if props["amount"].(map[string]any)["type"] != "number" || props["reason"].(map[string]any)["minLength"] != float64(10) {
		t.Fatalf("trigger_refund schema = %v", props)
	}
	req := byName["trigger_refund"]["inputSchema"].(map[string]any)["required"].([]any)
	if len(req) != 3 {
		t.Fatalf("required = %v", req)
	}
	if byName["trigger_refund"]["annotations"].(map[string]any)["readOnlyHint"] != false {
		t.Fatal("trigger_refund claims to be read-only")
	}
}

func TestRefundHappyPaths(t *testing.T) {
	t.Parallel()
	p := refund(t)
	p.call(1, "get_customer_record", map[string]any{"customer_id": "CUST-00001"})
	sc := result(t, p.recv())["structuredContent"].(map[string]any)
	if sc["found"] != true || sc["record"].(map[string]any)["name"] != "Ada Lovelace" {
		t.Fatalf("got %v", sc)
	}
	p.call(2, "trigger_refund", map[string]any{"customer_id": "CUST-00002", "amount": 12.5, "reason": "item arrived damaged"})
	r := result(t, p.recv())
	sc = r["structuredContent"].(map[string]any)
	if sc["status"] != "refund_initiated" || sc["amount"] != 12.5 || !strings.HasPrefix(sc["refund_id"].(string), "REF-") {
		t.Fatalf("got %v", sc)
	}
	// The text block is the identical JSON.
	var fromText map[string]any
	if err := json.Unmarshal([]byte(toolText(t, p.exchangeMsg(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_customer_record","arguments":{"customer_id":"CUST-00002"}}}`), false)), &fromText); err != nil {
		t.Fatal(err)
	}
	if fromText["found"] != true {
		t.Fatalf("text block = %v", fromText)
	}
	p.call(4, "admin_reset_key", map[string]any{"key_id": "KEY-PRIMARY"})
	if sc := result(t, p.recv())["structuredContent"].(map[string]any); sc["status"] != "key_reset" {
		t.Fatalf("got %v", sc)
	}
	p.call(5, "admin_list_audit_log", map[string]any{})
	entries := result(t, p.recv())["structuredContent"].(map[string]any)["entries"].([]any)
	if len(entries) != 2 {
		t.Fatalf("audit = %v", entries)
	}
	raw, _ := json.Marshal(entries)
	if strings.Contains(string(raw), "damaged") {
		t.Fatal("the audit log keeps the refund reason (a value)")
	}
}

func (p *proc) exchangeMsg(line string) msg {
	p.t.Helper()
	p.send(line)
	return p.recv()
}

func TestRefundNotFoundIsSuccess(t *testing.T) {
	t.Parallel()
	p := refund(t)
	p.call(1, "get_customer_record", map[string]any{"customer_id": "CUST-99999"})
	r := result(t, p.recv())
	if r["isError"] != false || r["structuredContent"].(map[string]any)["found"] != false {
		t.Fatalf("got %v", r)
	}
	p.call(2, "trigger_refund", map[string]any{"customer_id": "CUST-ZZZZZ", "amount": 1, "reason": "long enough reason"})
	r = result(t, p.recv())
	if sc := r["structuredContent"].(map[string]any); sc["found"] != false || sc["status"] != "customer_not_found" {
		t.Fatalf("got %v", r)
	}
}

// TestRefundValidationEdges: every invalid argument is a JSON-RPC -32602
// naming the argument at fault.
func TestRefundValidationEdges(t *testing.T) {
	t.Parallel()
	good := func() map[string]any {
		return map[string]any{"customer_id": "CUST-00001", "amount": 10.0, "reason": "damaged on arrival"}
	}
	with := func(k string, v any) map[string]any { m := good(); m[k] = v; return m }
	without := func(k string) map[string]any { m := good(); delete(m, k); return m }
	cases := []struct {
		name  string
		tool  string
		args  any
		param string
	}{
		{"negative amount", "trigger_refund", with("amount", -5), "amount"},
		{"zero amount", "trigger_refund", with("amount", 0), "amount"},
		{"boolean amount true", "trigger_refund", with("amount", true), "amount"},
		{"boolean amount false", "trigger_refund", with("amount", false), "amount"},
		{"string amount", "trigger_refund", with("amount", "10.0"), "amount"},
		{"null amount", "trigger_refund", with("amount", nil), "amount"},
		{"missing amount", "trigger_refund", without("amount"), "amount"},
		// Positive numbers a float64 would change: refunding them would
		// report a different amount as done.
		{"amount below float64 range", "trigger_refund", with("amount", json.RawMessage("1e-400")), "amount"},
		{"amount beyond float64 precision", "trigger_refund", with("amount", json.RawMessage("9007199254740993")), "amount"},
		{"amount with 20 significant digits", "trigger_refund", with("amount", json.RawMessage("1.0000000000000000001")), "amount"},
		{"short reason", "trigger_refund", with("reason", "too short"), "reason"},
		{"reason not a string", "trigger_refund", with("reason", 1234567890), "reason"},
		{"lower-case customer id", "trigger_refund", with("customer_id", "cust-00001"), "customer_id"},
		{"short customer id", "trigger_refund", with("customer_id", "CUST-0001"), "customer_id"},
		{"long customer id", "trigger_refund", with("customer_id", "CUST-000001"), "customer_id"},
		{"customer id with suffix", "trigger_refund", with("customer_id", "CUST-00001\n"), "customer_id"},
		{"extra field", "trigger_refund", with("admin", true), "admin"},
		{"malformed customer id", "get_customer_record", map[string]any{"customer_id": "12345"}, "customer_id"},
		{"numeric customer id", "get_customer_record", map[string]any{"customer_id": 12345}, "customer_id"},
		{"missing customer id", "get_customer_record", map[string]any{}, "customer_id"},
		{"extra field lookup", "get_customer_record", map[string]any{"customer_id": "CUST-00001", "x": 1}, "x"},
		{"bad key id", "admin_reset_key", map[string]any{"key_id": "../../etc"}, "key_id"},
		{"audit log args", "admin_list_audit_log", map[string]any{"all": true}, "all"},
	}
	p := refund(t)
	for i, c := range cases {
		p.call(i, c.tool, c.args)
		m := p.recv()
		if errCode(t, m) != -32602 {
			t.Errorf("%s: got %v", c.name, m)
			continue
		}
		data := m["error"].(map[string]any)["data"].(map[string]any)
		b, _ := json.Marshal(data["invalid_params"])
		if !strings.Contains(string(b), `"`+c.param+`"`) || data["code"] != "MCP_VALIDATION_ERROR" {
			t.Errorf("%s: data %v", c.name, data)
		}
	}
}

func TestRefundUnknownTool(t *testing.T) {
	t.Parallel()
	p := refund(t)
	p.call(1, "delete_everything", map[string]any{})
	if c := errCode(t, p.recv()); c != -32602 {
		t.Fatalf("code %d, want -32602 (DESIGN.md decision 2)", c)
	}
}

// TestRefundStdoutIsOnlyJSON talks to the raw subprocess, with no client
// library, and checks every stdout line is one JSON-RPC message.
func TestRefundStdoutIsOnlyJSON(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(bin("refund"))
	cmd.Env = baseEnv("MCP_LOG_LEVEL=debug")
	cmd.Stdin = strings.NewReader(strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"trigger_refund","arguments":{"customer_id":"CUST-00001","amount":5,"reason":"duplicate charge"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"trigger_refund","arguments":{"customer_id":"CUST-00001","amount":-5,"reason":"x"}}}`,
		`not json`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"nope"}}`,
	}, "\n") + "\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v; stderr:\n%s", err, stderr.String())
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	n := 0
	for sc.Scan() {
		n++
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m["jsonrpc"] != "2.0" {
			t.Fatalf("stdout line %d is not a JSON-RPC message: %q", n, sc.Text())
		}
	}
	if n != 6 {
		t.Fatalf("%d stdout lines, want 6:\n%s", n, out)
	}
	if !strings.Contains(stderr.String(), `"level"`) {
		t.Fatal("no structured logs on stderr")
	}
}

// TestRefundREADMEBuildAndRun runs the refund README's "Build and run"
// block as written, from the root of the checkout, with only the output
// path moved out of the tree: the build must work and the exchange must
// be the one the README describes (the string amount refused, the number
// refunded).
func TestRefundREADMEBuildAndRun(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join("..", "examples", "refund", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := codeBlocks(string(readme), "## Build and run")
	if len(blocks) == 0 || blocks[0].lang != "sh" {
		t.Fatal(`examples/refund/README.md: no sh block under "## Build and run"`)
	}
	script := blocks[0].text
	if !strings.Contains(script, "go build -o bin/refund ./examples/refund") || !strings.Contains(script, "export GOTOOLCHAIN=") {
		t.Fatalf("the block no longer builds bin/refund with the pinned toolchain:\n%s", script)
	}
	out := filepath.Join(t.TempDir(), "refund")
	script = strings.ReplaceAll(script, "bin/refund", out)
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = ".."
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the README's block failed: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("stdout has %d lines, want the three responses:\n%s", len(lines), stdout.String())
	}
	// The two calls run concurrently, so their answers may come in
	// either order: pair them by id.
	byID := map[float64]map[string]any{}
	for _, l := range lines {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) != nil {
			t.Fatalf("responses are not JSON:\n%s", stdout.String())
		}
		id, _ := m["id"].(float64)
		byID[id] = m
	}
	refused, refunded := byID[2], byID[3]
	if refused == nil || refunded == nil || byID[1] == nil {
		t.Fatalf("want the answers to ids 1, 2 and 3:\n%s", stdout.String())
	}
	if e, _ := refused["error"].(map[string]any); e == nil || e["code"] != float64(-32602) || !strings.Contains(fmt.Sprint(e["message"]), `"amount": must be number, not string`) {
		t.Errorf("the string amount: %v", refused)
	}
	sc, _ := result(t, refunded)["structuredContent"].(map[string]any)
	if sc["status"] != "refund_initiated" || sc["amount"] != float64(10) || !strings.Contains(string(readme), `"status":"refund_initiated"`) {
		t.Errorf("the number amount: %v", refunded)
	}
}
