package gateway

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/gateway/audit"
	"github.com/mcp-bastion/bastion/internal/gateway/auth"
	"github.com/mcp-bastion/bastion/internal/gateway/catalog"
	"github.com/mcp-bastion/bastion/internal/gateway/config"
	"github.com/mcp-bastion/bastion/internal/jsonrpc"
)

func TestParseInputRound(t *testing.T) {
	elicit := `{"method":"elicitation/create","params":{"message":"?"}}`
	for _, tc := range []struct {
		name, res string
		requests  int
		state     string
		notInput  bool
		bad       string
	}{
		{name: "a result", res: `{"content":[],"isError":false}`, notInput: true},
		{name: "complete", res: `{"resultType":"complete","content":[{"type":"text","text":"input_required"}]}`, notInput: true},
		{name: "not an object", res: `["input_required"]`, notInput: true},
		{name: "requests and state", res: `{"resultType":"input_required","inputRequests":{"a":` + elicit + `},"requestState":"s"}`, requests: 1, state: "s"},
		{name: "state alone", res: `{"resultType":"input_required","requestState":"s"}`, state: "s"},
		{name: "requests alone, params absent", res: `{"resultType":"input_required","inputRequests":{"r":{"method":"roots/list"}}}`, requests: 1},
		{name: "neither", res: `{"resultType":"input_required"}`, bad: "neither"},
		{name: "another method", res: `{"resultType":"input_required","inputRequests":{"a":{"method":"tools/call","params":{}}}}`, bad: "is not sampling"},
		{name: "params not an object", res: `{"resultType":"input_required","inputRequests":{"a":{"method":"roots/list","params":[]}}}`, bad: "not an object"},
		{name: "too many", res: `{"resultType":"input_required","inputRequests":{` + manyRequests(maxInputRequests+1, elicit) + `}}`, bad: "more than"},
		{name: "an escape spells input_required", res: `{"resultType":"input\u005frequired","inputRequests":[]}`, bad: "does not match"},
		{name: "requests not an object", res: `{"resultType":"input_required","inputRequests":[]}`, bad: "does not match"},
		{name: "state not a string", res: `{"resultType":"input_required","requestState":7}`, bad: "does not match"},
		{name: "a request not an object", res: `{"resultType":"input_required","inputRequests":{"a":"roots/list"}}`, bad: "does not match"},
		// Not valid JSON for the gateway at all: parseResult refuses it
		// (TestParseResultKinds).
		{name: "a repeated key", res: `{"resultType":"input_required","inputRequests":{"SECRET":{"method":"roots/list"},"SECRET":{"method":"roots/list"}}}`, notInput: true},
		{name: "as many as may be", res: `{"resultType":"input_required","inputRequests":{` + manyRequests(maxInputRequests, elicit) + `}}`, requests: maxInputRequests},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := parseInputRound(jsontext.Value(tc.res))
			switch {
			case tc.notInput:
				if !errors.Is(err, errNotInputRequired) {
					t.Fatalf("parseInputRound = %+v, %v; want errNotInputRequired", in, err)
				}
			case tc.bad != "":
				if err == nil || errors.Is(err, errNotInputRequired) || !strings.Contains(err.Error(), tc.bad) {
					t.Fatalf("parseInputRound = %+v, %v; want an error saying %q", in, err, tc.bad)
				}
				if strings.Contains(err.Error(), `"a"`) || strings.Contains(err.Error(), "SECRET") {
					t.Errorf("the error repeats the server's words: %v", err)
				}
			default:
				if err != nil || len(in.Requests) != tc.requests || (tc.state == "") != (in.State == nil) || (in.State != nil && *in.State != tc.state) {
					t.Fatalf("parseInputRound = %+v, %v", in, err)
				}
			}
		})
	}
}

func manyRequests(n int, req string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = `"k` + strings.Repeat("x", i) + `":` + req
	}
	return strings.Join(parts, ",")
}

func TestWithInput(t *testing.T) {
	state := `a "quoted" state`
	got, err := withInput([]byte(`{"name":"t","arguments":{}}`), map[string]jsontext.Value{"b": jsontext.Value(`{"x":1}`), "a": jsontext.Value(`{}`)}, &state)
	if want := `{"name":"t","arguments":{},"inputResponses":{"a":{},"b":{"x":1}},"requestState":"a \"quoted\" state"}`; err != nil || string(got) != want {
		t.Errorf("withInput = %s, %v\nwant %s", got, err, want)
	}
	got, err = withInput([]byte(`{"name":"t"}`), map[string]jsontext.Value{}, nil)
	if want := `{"name":"t","inputResponses":{}}`; err != nil || string(got) != want {
		t.Errorf("withInput without a state = %s, %v", got, err)
	}
	if _, err := withInput([]byte(`[]`), nil, nil); err == nil {
		t.Error("withInput of params that are not an object succeeded")
	}
}

func TestCapabilitiesOf(t *testing.T) {
	ask := ClientRequester(func(context.Context, string, jsontext.Value) (jsontext.Value, *jsonrpc.Error) { return nil, nil })
	all := ClientCapabilities{Sampling: true, Elicitation: true, Roots: true}
	for _, tc := range []struct {
		name string
		c    Call
		want string
	}{
		{"a caller that can be asked", Call{ClientCapabilities: all, ClientRequests: ask}, `{"elicitation":{},"roots":{},"sampling":{}}`},
		{"what it declared", Call{ClientCapabilities: ClientCapabilities{Roots: true}, ClientRequests: ask}, `{"roots":{}}`},
		{"nothing declared", Call{ClientRequests: ask}, `{}`},
		{"a caller that cannot be asked, whatever it declared", Call{ClientCapabilities: all}, `{}`},
		{"a caller that takes rounds itself", Call{ClientCapabilities: ClientCapabilities{Elicitation: true}, TakesRounds: true}, `{"elicitation":{}}`},
		{"one that declared nothing", Call{TakesRounds: true}, `{}`},
	} {
		if got := string(capabilitiesOf(tc.c)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestParseResultKinds: a result of another kind than complete is not
// relayed as one, and what is wrong is said without the server's words.
func TestParseResultKinds(t *testing.T) {
	for _, tc := range []struct {
		name, res string
		ok        bool
	}{
		{"complete", `{"resultType":"complete","content":[]}`, true},
		{"no kind", `{"content":[{"type":"text","text":"x"}]}`, true},
		{"another kind", `{"resultType":"task","content":[]}`, false},
		{"input_required, escaped", `{"resultType":"input\u005frequired","content":[]}`, false},
		{"a repeated member", `{"content":[],"SECRET":1,"SECRET":2}`, false},
	} {
		_, err := parseResult(jsontext.Value(tc.res))
		if (err == nil) != tc.ok {
			t.Errorf("%s: parseResult = %v", tc.name, err)
		}
		if err != nil && strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: the error repeats the server's words: %v", tc.name, err)
		}
	}
}

// TestCapabilityDetails: what a caller declared reaches a 2026-07-28
// server whole — the modes of elicitation, the features of sampling — and
// a request needs the part it uses: a url elicitation the url mode, a
// form one the form mode ({} is form alone), a sampling request with
// tools the tools feature.
func TestCapabilityDetails(t *testing.T) {
	for _, tc := range []struct {
		declared, want string
	}{
		{`{"elicitation":{"url":{}},"sampling":{"tools":{},"context":{}}}`, `{"elicitation":{"url":{}},"sampling":{"context":{},"tools":{}}}`},
		{`{"elicitation":{}}`, `{"elicitation":{"form":{}}}`},
		{`{"elicitation":{"form":{},"url":{}},"roots":{"listChanged":true}}`, `{"elicitation":{"form":{},"url":{}},"roots":{}}`},
		{`{"elicitation":true,"sampling":[]}`, `{}`},
	} {
		c := Call{ClientCapabilities: CapabilitiesIn(jsontext.Value(tc.declared)), TakesRounds: true}
		if got := string(capabilitiesOf(c)); got != tc.want {
			t.Errorf("%s: declared as %s, want %s", tc.declared, got, tc.want)
		}
	}
	for _, tc := range []struct {
		declared, method, params string
		want                     bool
	}{
		{`{"elicitation":{}}`, "elicitation/create", `{"message":"?"}`, true},
		{`{"elicitation":{}}`, "elicitation/create", `{"mode":"form","message":"?"}`, true},
		{`{"elicitation":{}}`, "elicitation/create", `{"mode":"url","url":"https://example.com"}`, false},
		{`{"elicitation":{"form":{}}}`, "elicitation/create", `{"mode":"url","url":"https://example.com"}`, false},
		{`{"elicitation":{"url":{}}}`, "elicitation/create", `{"mode":"url","url":"https://example.com"}`, true},
		{`{"elicitation":{"url":{}}}`, "elicitation/create", `{"message":"?"}`, false},
		{`{"elicitation":{"form":{},"url":{}}}`, "elicitation/create", `{"mode":"telepathy"}`, false},
		{`{"elicitation":{}}`, "elicitation/create", `{"mode":"url","mode":"form"}`, false},
		{`{"sampling":{}}`, "sampling/createMessage", `{"messages":[],"maxTokens":1}`, true},
		{`{"sampling":{}}`, "sampling/createMessage", `{"messages":[],"maxTokens":1,"tools":[]}`, false},
		{`{"sampling":{"tools":{}}}`, "sampling/createMessage", `{"messages":[],"maxTokens":1,"tools":[],"toolChoice":{"mode":"auto"}}`, true},
		{`{"sampling":{}}`, "sampling/createMessage", `{"messages":[],"maxTokens":1,"includeContext":"none"}`, true},
		{`{"sampling":{}}`, "sampling/createMessage", `{"messages":[],"maxTokens":1,"includeContext":"allServers"}`, false},
		{`{"sampling":{"context":{}}}`, "sampling/createMessage", `{"messages":[],"maxTokens":1,"includeContext":"thisServer"}`, true},
		{`{"roots":{}}`, "roots/list", ``, true},
		{`{}`, "roots/list", ``, false},
	} {
		if got, _ := CapabilitiesIn(jsontext.Value(tc.declared)).declares(tc.method, jsontext.Value(tc.params)); got != tc.want {
			t.Errorf("%s asked %s %s: %v, want %v", tc.declared, tc.method, tc.params, got, tc.want)
		}
	}
}

// TestRelayAnswerSanitized: a client's answer to a downstream's request
// is held to the checks of a call's arguments before the downstream gets
// it; the downstream is told only that it was refused.
func TestRelayAnswerSanitized(t *testing.T) {
	g := New(&config.Config{}, nil)
	for _, tc := range []struct {
		answer string
		ok     bool
	}{
		{`{"action":"accept","content":{"first name":"Ada"}}`, true},
		{`{"action":"accept","content":{"name":"\u202etxt.exe"}}`, false},
		{`{"action":"accept","content":{"n":1e400}}`, false},
	} {
		c := Call{ClientCapabilities: CapabilitiesIn(jsontext.Value(`{"elicitation":{}}`)),
			ClientRequests: func(context.Context, string, jsontext.Value) (jsontext.Value, *jsonrpc.Error) {
				return jsontext.Value(tc.answer), nil
			}}
		res, err := g.relayRequests(c, &catalog.Tool{Server: "s", Qualified: "s.t"})(t.Context(), "elicitation/create", jsontext.Value(`{"message":"?"}`))
		switch {
		case tc.ok && (err != nil || string(res) != tc.answer):
			t.Errorf("%s: %s %v", tc.answer, res, err)
		case !tc.ok && (err == nil || res != nil || strings.Contains(err.Message, "txt.exe")):
			t.Errorf("%s was relayed: %s %v", tc.answer, res, err)
		}
	}
}

// TestRelayRefusalsAuditedOnce: a server that repeats a request its
// caller cannot be asked is refused each time, and audited once per
// method and reason of the call, so it cannot flood the decision log.
func TestRelayRefusalsAuditedOnce(t *testing.T) {
	buf := &syncBuffer{}
	g := &Gateway{audit: audit.New(buf)}
	ask := g.relayRequests(Call{RequestID: "r1", Principal: auth.Principal{Subject: "bob", Issuer: auth.IssuerStatic}},
		&catalog.Tool{Qualified: "fx.t", Server: "fx", Name: "t"})
	for range 100 {
		for _, method := range []string{"sampling/createMessage", "roots/list"} {
			if _, err := ask(t.Context(), method, jsontext.Value(`{}`)); err == nil || err.Code != jsonrpc.CodeMethodNotFound {
				t.Fatalf("%s was not refused: %v", method, err)
			}
		}
	}
	if n := strings.Count(buf.String(), `"outcome":"deny","reason":"capability_not_declared"`); n != 2 {
		t.Errorf("%d refusals audited, want one per method:\n%s", n, buf.String())
	}
}

// TestRelayedRequestEmbeds: a server's request to its caller is held to
// the rule of its results: one that embeds, at any depth, a resource
// labelled with another server's URI, or holds member names that differ
// only in case, is refused to the server and never reaches the caller.
func TestRelayedRequestEmbeds(t *testing.T) {
	g, buf := resourceGateway(t, []string{"config", "plugin"}, map[string][2][]string{
		"config": {{"file:///etc/app.conf"}, nil},
		"plugin": {{"plugin://notes"}, nil},
	}, nil)
	asked := 0
	c := Call{RequestID: "r1", Principal: auth.Principal{Subject: "bob", Issuer: auth.IssuerStatic},
		ClientCapabilities: ClientCapabilities{Sampling: true},
		ClientRequests: func(context.Context, string, jsontext.Value) (jsontext.Value, *jsonrpc.Error) {
			asked++
			return jsontext.Value(`{"role":"assistant","content":{"type":"text","text":"ok"}}`), nil
		}}
	ask := g.relayRequests(c, &catalog.Tool{Qualified: "plugin.t", Server: "plugin", Name: "t"})
	msg := func(block string) jsontext.Value {
		return jsontext.Value(`{"maxTokens":1,"messages":[{"role":"user","content":{"type":"tool_result","toolUseId":"x","content":[` + block + `]}}]}`)
	}
	for _, tc := range []struct {
		name   string
		params jsontext.Value
		ok     bool
	}{
		{"its own resource", msg(`{"type":"resource","resource":{"uri":"plugin://notes","text":"x"}}`), true},
		{"another server's resource", msg(`{"type":"resource","resource":{"uri":"file:///etc/app.conf","text":"spoofed"}}`), false},
		{"a resource without a URI", msg(`{"type":"resource","resource":{"text":"x"}}`), false},
		{"member names in two cases", msg(`{"type":"resource","resource":{"uri":"plugin://notes","URI":"file:///etc/app.conf","text":"x"}}`), false},
	} {
		asked = 0
		_, err := ask(t.Context(), "sampling/createMessage", tc.params)
		if (err == nil) != tc.ok || (asked == 1) != tc.ok {
			t.Errorf("%s: %v, asked %d times", tc.name, err, asked)
		}
	}
	if !strings.Contains(buf.String(), `"reason":"embedded_resource"`) {
		t.Errorf("the audit does not say why:\n%s", buf.String())
	}
}

// TestHandOverEmbeds: a round of input handed to a 2026-07-28 caller is
// held to the rule of the server's results: a request embedding a
// resource labelled with another server's URI fails the call (-32003),
// and is never handed over.
func TestHandOverEmbeds(t *testing.T) {
	g, _ := resourceGateway(t, []string{"config", "plugin"}, map[string][2][]string{
		"config": {{"file:///etc/app.conf"}, nil},
		"plugin": {{"plugin://notes"}, nil},
	}, nil)
	c := Call{Principal: auth.Principal{Subject: "bob", Issuer: auth.IssuerStatic}, TakesRounds: true,
		ClientCapabilities: ClientCapabilities{Sampling: true}, Arguments: jsontext.Value(`{}`)}
	tl := &catalog.Tool{Qualified: "plugin.t", Server: "plugin", Name: "t"}
	round := func(uri string) *inputRound {
		return &inputRound{Requests: map[string]inputRequest{"s": {Method: "sampling/createMessage",
			Params: jsontext.Value(`{"maxTokens":1,"messages":[{"role":"user","content":{"type":"resource","resource":{"uri":"` + uri + `","text":"x"}}}]}`)}}}
	}
	if res, err := g.handOver(c, tl, round("plugin://notes"), 1); err != nil || res.Input == nil {
		t.Fatalf("a round embedding the server's own resource: %v", err)
	}
	if _, err := g.handOver(c, tl, round("file:///etc/app.conf"), 1); codeOf(err) != CodeBadGateway {
		t.Errorf("a round embedding another server's resource: %v, want -32003", err)
	}
}
