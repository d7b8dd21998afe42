package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// readyTimeout bounds the wait for the gateway's /readyz: it answers once
// every downstream was discovered and admitted.
const readyTimeout = 60 * time.Second

// protocolVersion is the version the gateway walkthrough speaks: stateless
// requests, each carrying its version and capabilities in _meta and its
// method and tool name in headers.
const protocolVersion = "2026-07-28"

// rpc builds one request of the gateway walkthrough; members are the
// params' own, to which the _meta every 2026-07-28 request carries is
// added.
func rpc(id int, method, members string) string {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + protocolVersion + `","io.modelcontextprotocol/clientCapabilities":{}}`
	if members != "" {
		meta = members + "," + meta
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s}}`, id, method, meta)
}

// httpCall is one step of the gateway walkthrough.
type httpCall struct {
	label string
	// as is the subject whose token the request carries; "" sends none.
	as   string
	body string
	// headerMethod, when set, is sent as Mcp-Method instead of the body's
	// method: a request whose headers contradict its body.
	headerMethod string
	// bare sends only Content-Type: a client that knows nothing of MCP's
	// headers.
	bare       bool
	wantStatus int
	want       outcome
}

func gatewaySteps() []httpCall {
	return []httpCall{
		{label: "bob (viewer) lists the tools: both servers' tools, merged, prefixed with the server's name, and only those the policy may allow him:",
			as: "bob", body: rpc(1, "tools/list", ""), wantStatus: 200, want: answered},
		{label: "a call to the refund server:",
			as: "bob", body: rpc(2, "tools/call", `"name":"refund.get_customer_record","arguments":{"customer_id":"CUST-00001"}`), wantStatus: 200, want: answered},
		{label: "a call to bastion serve:",
			as: "bob", body: rpc(3, "tools/call", `"name":"db.read_only_sql","arguments":{"query":"SELECT full_name FROM reporting.customers ORDER BY 1","max_rows":2}`), wantStatus: 200, want: answered},
		{label: "the same bypass through the gateway is refused by bastion serve behind it:",
			as: "bob", body: rpc(4, "tools/call", `"name":"db.read_only_sql","arguments":{"query":"COMMIT; DROP SCHEMA reporting CASCADE;"}`), wantStatus: 200, want: refused},
		{label: "arguments that fail the tool's input schema are refused by the gateway itself, in band so that the model can correct them:",
			as: "bob", body: rpc(5, "tools/call", `"name":"refund.trigger_refund","arguments":{"customer_id":"CUST-00001","amount":"10.0","reason":"a string is not an amount"}`), wantStatus: 200, want: refused},
		{label: "an unqualified name (read_only_sql, not db.read_only_sql) names no tool:",
			as: "bob", body: rpc(6, "tools/call", `"name":"read_only_sql","arguments":{}`), wantStatus: 200, want: refused},
		{label: "a request whose Mcp-Method header (tools/call) contradicts its body (tools/list) is refused:",
			as: "bob", body: rpc(7, "tools/list", ""), headerMethod: "tools/call", wantStatus: 400, want: refused},
	}
}

func authorizationSteps() []httpCall {
	return []httpCall{
		{label: "bob (viewer) calls refund.admin_reset_key: the gateway refuses it alone, the refund server never sees it (403, -32001):",
			as: "bob", body: rpc(10, "tools/call", `"name":"refund.admin_reset_key","arguments":{"key_id":"KEY-PRIMARY"}`), wantStatus: 403, want: refused},
		{label: "a request with no token at all (401, -32000):",
			body: `{"jsonrpc":"2.0","id":11,"method":"tools/list"}`, bare: true, wantStatus: 401, want: refused},
		{label: "alice (admin) calls refund.admin_reset_key: forwarded:",
			as: "alice", body: rpc(12, "tools/call", `"name":"refund.admin_reset_key","arguments":{"key_id":"KEY-PRIMARY"}`), wantStatus: 200, want: answered},
		{label: "what reached the refund server, by its own audit log: one reset, alice's:",
			as: "alice", body: rpc(13, "tools/call", `"name":"refund.admin_list_audit_log","arguments":{}`), wantStatus: 200, want: answered},
	}
}

// runGateway runs the gateway walkthrough against the gateway at base.
func runGateway(w *walkthrough, base, auditPath string) error {
	tokens, err := callerTokens(os.Getenv("MCP_GATEWAY_TOKENS"))
	if err != nil {
		return err
	}
	for _, who := range []string{"alice", "bob"} {
		if tokens[who] == "" {
			return fmt.Errorf("MCP_GATEWAY_TOKENS has no token for %s", who)
		}
	}
	g := &gatewayClient{w: w, endpoint: base + "/mcp", tokens: tokens, http: &http.Client{Timeout: responseTimeout}}

	w.printf("waiting for bastion gateway to report ready (GET %s/readyz)…\n", base)
	if err := g.awaitReady(base + "/readyz"); err != nil {
		return err
	}

	w.printf("\n== client -> bastion gateway -> refund and bastion serve, over Streamable HTTP at %s\n", g.endpoint)
	w.printf("   every request is a stateless %s one: its _meta carries the protocol version and the client's\n", protocolVersion)
	w.printf("   capabilities (left out below), its headers mirror its body (MCP-Protocol-Version, Mcp-Method, Mcp-Name),\n")
	w.printf("   and it carries the caller's bearer token; the HTTP status is shown with each response\n")
	for _, c := range gatewaySteps() {
		if err := g.call(c); err != nil {
			return err
		}
	}

	w.printf("\n== authorization: the policy lets only admins call refund.admin_* (rule admin-tools)\n")
	for _, c := range authorizationSteps() {
		if err := g.call(c); err != nil {
			return err
		}
	}

	w.printf("\nthe gateway's decision log (%s): one line per decision — names, never argument values or tokens:\n", auditPath)
	return printDecisions(w, auditPath)
}

// callerTokens maps each subject to its token, from the gateway's own
// MCP_GATEWAY_TOKENS: {"token": "role"} or {"token": {"sub": …, "role": …}}.
func callerTokens(env string) (map[string]string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(env), &m); err != nil {
		return nil, fmt.Errorf("MCP_GATEWAY_TOKENS: %w", err)
	}
	bySubject := make(map[string]string, len(m))
	for token, v := range m {
		var who struct {
			Sub string `json:"sub"`
		}
		if json.Unmarshal(v, &who) == nil && who.Sub != "" {
			bySubject[who.Sub] = token
		}
	}
	return bySubject, nil
}

type gatewayClient struct {
	w        *walkthrough
	endpoint string
	tokens   map[string]string
	http     *http.Client
}

func (g *gatewayClient) awaitReady(url string) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		resp, err := g.http.Get(url)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bastion gateway did not become ready within %s; see its log", readyTimeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// call posts one request, prints the step with the HTTP status and checks
// both the status and the outcome.
func (g *gatewayClient) call(c httpCall) error {
	req, err := parseRequest(c.body)
	if err != nil {
		return err
	}
	hreq, err := http.NewRequest(http.MethodPost, g.endpoint, strings.NewReader(c.body))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", "application/json")
	if !c.bare {
		method := req.Method
		if c.headerMethod != "" {
			method = c.headerMethod
		}
		hreq.Header.Set("Accept", "application/json, text/event-stream")
		hreq.Header.Set("MCP-Protocol-Version", protocolVersion)
		hreq.Header.Set("Mcp-Method", method)
		if method == "tools/call" && req.Params.Name != "" {
			hreq.Header.Set("Mcp-Name", req.Params.Name)
		}
	}
	if c.as != "" {
		hreq.Header.Set("Authorization", "Bearer "+g.tokens[c.as])
	}
	label := strings.TrimSuffix(c.label, ":")
	hresp, err := g.http.Do(hreq)
	if err != nil {
		return fmt.Errorf("step %q: %w", label, err)
	}
	body, err := io.ReadAll(hresp.Body)
	hresp.Body.Close()
	if err != nil {
		return fmt.Errorf("step %q: reading the response: %w", label, err)
	}
	resp := body
	if strings.HasPrefix(hresp.Header.Get("Content-Type"), "text/event-stream") {
		if resp, err = eventResponse(body, req.ID); err != nil {
			return fmt.Errorf("step %q: %w", label, err)
		}
	}

	// The transcript shows the headers sent, the token left out.
	headers := map[string]string{}
	for k := range hreq.Header {
		if k != "Authorization" {
			headers[k] = hreq.Header.Get(k)
		}
	}
	if err := g.w.record(exchange{Label: c.label, As: c.as, Headers: headers, Request: asJSON([]byte(c.body)), Status: hresp.StatusCode, Response: asJSON(body)}); err != nil {
		return err
	}

	text, got, err := describe(req.Method, resp)
	if err != nil {
		text, got = strings.TrimSpace(clean(string(body))), refused
	}
	as := "(no token)"
	if c.as != "" {
		as = c.as
	}
	summary := as + ": " + summarizeRequest([]byte(c.body))
	if c.headerMethod != "" {
		summary += "   with the header Mcp-Method: " + c.headerMethod
	}
	g.w.step(c.label, summary, fmt.Sprintf("[HTTP %d] %s", hresp.StatusCode, text), []byte(c.body), body)
	if hresp.StatusCode != c.wantStatus {
		return fmt.Errorf("step %q: want HTTP %d, got %d", label, c.wantStatus, hresp.StatusCode)
	}
	return check(c.label, c.want, got)
}

// eventResponse picks the JSON-RPC response with id out of a
// text/event-stream body.
func eventResponse(body []byte, id json.RawMessage) ([]byte, error) {
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, len(body)+1)
	var data []string
	flush := func() []byte {
		msg := []byte(strings.Join(data, "\n"))
		data = data[:0]
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(msg, &m) == nil && bytes.Equal(m.ID, id) {
			return msg
		}
		return nil
	}
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if msg := flush(); msg != nil {
				return msg, nil
			}
			continue
		}
		if d, ok := strings.CutPrefix(line, "data:"); ok {
			data = append(data, strings.TrimPrefix(d, " "))
		}
	}
	if msg := flush(); msg != nil {
		return msg, nil
	}
	return nil, errors.New("the event stream holds no response to the request")
}

// decision is the part of a decision log line the demo shows.
type decision struct {
	Event   string   `json:"event"`
	Subject string   `json:"subject"`
	Roles   []string `json:"roles"`
	Method  string   `json:"method"`
	Tool    string   `json:"tool"`
	Rule    string   `json:"rule"`
	Outcome string   `json:"outcome"`
	Reason  string   `json:"reason"`
	Code    int      `json:"code"`
}

// printDecisions prints the decision log as a table, one line a decision,
// and the reviewer's approvals as one count.
func printDecisions(w *walkthrough, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("the decision log: %w", err)
	}
	tw := tabwriter.NewWriter(w.out, 0, 0, 2, ' ', 0)
	approvals, decisions := 0, 0
	for _, line := range bytes.Split(data, []byte("\n")) {
		var d decision
		if len(bytes.TrimSpace(line)) == 0 || json.Unmarshal(line, &d) != nil {
			continue
		}
		if d.Event == "approval" {
			approvals++
			continue
		}
		if d.Event != "" || d.Outcome == "" {
			continue
		}
		decisions++
		who := orDash(d.Subject)
		if len(d.Roles) > 0 {
			who += " (" + strings.Join(d.Roles, ",") + ")"
		}
		var why []string
		if d.Rule != "" {
			why = append(why, "rule "+d.Rule)
		}
		if d.Reason != "" {
			why = append(why, d.Reason)
		}
		if d.Code != 0 {
			why = append(why, fmt.Sprint(d.Code))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", clean(who), clean(d.Method), clean(orDash(d.Tool)), clean(d.Outcome), clean(strings.Join(why, ", ")))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if approvals > 0 {
		w.printf("  (before these, the reviewer's %s, one line each)\n", plural(approvals, "approval", "approvals"))
	}
	if decisions == 0 {
		return errors.New("the decision log holds no decision")
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
