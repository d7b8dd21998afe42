package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The stdio front beyond tools: `bastion gateway --stdio` relays the
// catalog's prompts, resources and completion to its one client, decided
// for auth.stdio_principal by the same rules as over HTTP, and declares
// neither resource subscriptions nor logging, which it does not relay.

// stdioRelayConfig writes the configuration of one fixture "fx" offering
// two prompts, two resources and a template (and logging), behind rules
// that refuse the stdio viewer the secret prompt and the secret resource.
// The fixture records what it receives in fixture.log beside path.
func stdioRelayConfig(t *testing.T, mark string) (path, audit string) {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "prompts.json"), "["+summarizePrompt+`,{"name":"secret","description":"Admins only."}]`)
	writeFile(t, filepath.Join(dir, "resources.json"), `{"resources":[`+resourceDesc("file:///docs/readme.md", "readme", "The readme.")+`,`+
		resourceDesc("file:///secret/keys.md", "keys", "Admins only.")+`],"resourceTemplates":[{"uriTemplate":"file:///docs/{name}","name":"docs"}]}`)
	audit = filepath.Join(dir, "audit.jsonl")
	cfg := "auth:\n  tokens_env: E2E_TOKENS\n  stdio_principal: {subject: desk, roles: [viewer]}\n" +
		`policy:
  rules:
    - {id: secret-prompt, prompts: ["fx.secret"], roles: [admin]}
    - {id: prompts, prompts: ["*"], roles: ["*"]}
    - {id: secret-resource, resources: ["fx:file:///secret/*"], roles: [admin]}
    - {id: reads, resources: ["*:*"], roles: ["*"]}
    - {id: tools, tools: ["*"], roles: ["*"]}
` + fmt.Sprintf("audit: {file: %q}\n", audit) + "servers:\n" +
		fixture("fx", mark, map[string]string{"FIXTURE_NAME": "alpha", "FIXTURE_TOOLS": "echo,touch,log", "FIXTURE_LOGGING": "1",
			"FIXTURE_LOG":     filepath.Join(dir, "fixture.log"),
			"FIXTURE_PROMPTS": filepath.Join(dir, "prompts.json"), "FIXTURE_RESOURCES": filepath.Join(dir, "resources.json")})
	cfg += stateKeys(t, cfg)
	path = filepath.Join(dir, "gateway.yaml")
	writeFile(t, path, cfg)
	return path, audit
}

// TestGatewayStdioRelay: the official Go SDK client, in both eras, lists
// and gets prompts, lists and reads resources and templates, and
// completes a prompt argument through `bastion gateway --stdio`; the
// viewer it runs as neither lists nor gets the secret prompt, nor lists
// nor reads the secret resource; every decision is audited for it.
func TestGatewayStdioRelay(t *testing.T) {
	mark := newMark()
	path, audit := stdioRelayConfig(t, mark)
	for _, version := range []string{"", "2025-11-25"} {
		t.Run("era "+version, func(t *testing.T) {
			ctx := ctxT(t)
			cs := goSDKCommandSession(t, version, baseEnv("E2E_TOKENS="+tokensEnv()), "gateway", "--stdio", "--config", path)
			// Discovery may still be running: until the fixture is
			// connected nothing offers prompts (-32601), and its
			// resources are discovered after its prompts.
			var names []string
			deadline := time.Now().Add(waitLimit)
			for {
				names = names[:0]
				prompts, perr := cs.ListPrompts(ctx, nil)
				resources, rerr := cs.ListResources(ctx, nil)
				if perr == nil && rerr == nil && len(prompts.Prompts) > 0 && len(resources.Resources) > 0 {
					for _, p := range prompts.Prompts {
						names = append(names, p.Name)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("prompts and resources never listed: %v %v", perr, rerr)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if !slices.Equal(names, []string{"fx.summarize"}) {
				t.Errorf("the stdio viewer lists prompts %v", names)
			}
			got, err := cs.GetPrompt(ctx, &sdkmcp.GetPromptParams{Name: "fx.summarize", Arguments: map[string]string{"topic": "stdio-topic"}})
			if err != nil || len(got.Messages) != 1 {
				t.Fatalf("prompts/get: %v %+v", err, got)
			}
			if text, ok := got.Messages[0].Content.(*sdkmcp.TextContent); !ok || !strings.Contains(text.Text, "of alpha") {
				t.Errorf("prompts/get message %+v", got.Messages[0].Content)
			}
			if _, err := cs.GetPrompt(ctx, &sdkmcp.GetPromptParams{Name: "fx.secret"}); err == nil || !strings.Contains(err.Error(), "requires one of the roles admin") {
				t.Errorf("the viewer's get of fx.secret: %v", err)
			}

			var uris []string
			for r, err := range cs.Resources(ctx, nil) {
				if err != nil {
					t.Fatalf("resources/list: %v", err)
				}
				uris = append(uris, r.URI)
			}
			if !slices.Equal(uris, []string{"file:///docs/readme.md"}) {
				t.Errorf("the stdio viewer lists resources %v", uris)
			}
			var templates []string
			for rt, err := range cs.ResourceTemplates(ctx, nil) {
				if err != nil {
					t.Fatalf("resources/templates/list: %v", err)
				}
				templates = append(templates, rt.URITemplate)
			}
			if !slices.Equal(templates, []string{"file:///docs/{name}"}) {
				t.Errorf("templates %v", templates)
			}
			for _, uri := range []string{"file:///docs/readme.md", "file:///docs/guide.md"} {
				read, err := cs.ReadResource(ctx, &sdkmcp.ReadResourceParams{URI: uri})
				if err != nil || len(read.Contents) != 1 || read.Contents[0].Text != "resource "+uri+" of alpha" {
					t.Errorf("resources/read %s: %v %+v", uri, err, read)
				}
			}
			if _, err := cs.ReadResource(ctx, &sdkmcp.ReadResourceParams{URI: "file:///secret/keys.md"}); err == nil {
				t.Error("the stdio viewer read the secret resource")
			}

			comp, err := cs.Complete(ctx, &sdkmcp.CompleteParams{Ref: &sdkmcp.CompleteReference{Type: "ref/prompt", Name: "fx.summarize"},
				Argument: sdkmcp.CompleteParamsArgument{Name: "topic", Value: "ti"}})
			if err != nil || !slices.Equal(comp.Completion.Values, []string{"ti-alpha-1", "ti-alpha-2"}) {
				t.Errorf("completion/complete: %v %+v", err, comp)
			}
			if err := cs.Close(); err != nil {
				t.Errorf("the gateway did not exit cleanly: %v", err)
			}
		})
	}
	b, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"subject":"desk","issuer":"stdio","roles":["viewer"],"method":"prompts/get","prompt":"fx.secret","rule":"secret-prompt","outcome":"deny"`,
		`"method":"prompts/get","prompt":"fx.summarize","arguments":["topic"],"rule":"prompts","outcome":"allow"`,
		`"method":"resources/read","resource":"file:///secret/keys.md","rule":"secret-resource","outcome":"deny"`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("no audit event with %s in:\n%s", want, b)
		}
	}
	if strings.Contains(string(b), "stdio-topic") {
		t.Errorf("the audit holds an argument value:\n%s", b)
	}
	waitUntil(t, "no child left", func() bool { return len(leftovers(mark)) == 0 })
}

// TestGatewayStdioDeclares: what --stdio declares follows what the
// fixture offers: prompts, resources (with subscribe), completions and
// logging; logging/setLevel is applied, and a 2026-07-28 client's
// resources/subscribe is -32601 (it has no session to follow a resource
// on).
func TestGatewayStdioDeclares(t *testing.T) {
	mark := newMark()
	path, _ := stdioRelayConfig(t, mark)
	p := start(t, "bastion", []string{"gateway", "--stdio", "--config", path}, baseEnv("E2E_TOKENS="+tokensEnv()))
	meta := map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}
	deadline := time.Now().Add(waitLimit)
	for id := 100; ; id += 2 {
		p.sendJSON(map[string]any{"jsonrpc": "2.0", "id": id, "method": "prompts/list", "params": map[string]any{"_meta": meta}})
		prompts := mustJSON(t, p.recvID(id))
		p.sendJSON(map[string]any{"jsonrpc": "2.0", "id": id + 1, "method": "resources/list", "params": map[string]any{"_meta": meta}})
		resources := mustJSON(t, p.recvID(id+1))
		if strings.Contains(prompts, `"fx.summarize"`) && strings.Contains(resources, `"file:///docs/readme.md"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("prompts and resources never listed: %s %s", prompts, resources)
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.sendJSON(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": map[string]any{"_meta": meta}})
	caps := mustJSON(t, p.recvID(1))
	for _, want := range []string{`"prompts":{"listChanged":true}`, `"resources":{"listChanged":true,"subscribe":true}`, `"completions":{}`, `"logging":{}`} {
		if !strings.Contains(caps, want) {
			t.Errorf("server/discover declares no %s: %s", want, caps)
		}
	}
	p.sendJSON(map[string]any{"jsonrpc": "2.0", "id": 10, "method": "resources/subscribe", "params": map[string]any{"_meta": meta, "uri": "file:///docs/readme.md"}})
	if m := mustJSON(t, p.recvID(10)); !strings.Contains(m, "-32601") || !strings.Contains(m, "needs a session") {
		t.Errorf("a stateless resources/subscribe over --stdio: %s", m)
	}
	p.sendJSON(map[string]any{"jsonrpc": "2.0", "id": 11, "method": "logging/setLevel", "params": map[string]any{"_meta": meta, "level": "debug"}})
	if m := mustJSON(t, p.recvID(11)); !strings.Contains(m, `"result"`) {
		t.Errorf("logging/setLevel over --stdio: %s", m)
	}
	p.sendJSON(map[string]any{"jsonrpc": "2.0", "id": 12, "method": "logging/setLevel", "params": map[string]any{"_meta": meta, "level": "loud"}})
	if m := mustJSON(t, p.recvID(12)); !strings.Contains(m, "-32602") {
		t.Errorf("logging/setLevel of no level over --stdio: %s", m)
	}
	// A log message the downstream sends while it serves a call reaches
	// the client, before the answer, tagged with the server's name.
	p.sendJSON(map[string]any{"jsonrpc": "2.0", "id": 13, "method": "tools/call", "params": map[string]any{"_meta": meta, "name": "fx.log", "arguments": map[string]any{}}})
	if logged := p.messagesUntil(13); !slices.Equal(logged, []string{`{"data":"fixture log line","level":"info","logger":"fx/work"}`}) {
		t.Errorf("log messages heard during the call: %v", logged)
	}
	p.closeStdin()
	if code := p.wait(); code != 0 {
		t.Errorf("exit %d; stderr:\n%s", code, p.stderr.String())
	}
	waitUntil(t, "no child left", func() bool { return len(leftovers(mark)) == 0 })
}

// TestGatewayStdioSubscriptions: a legacy --stdio client subscribes to a
// resource it may read and hears notifications/resources/updated when the
// downstream updates it, until it unsubscribes; a resource its principal
// is refused cannot be subscribed to.
func TestGatewayStdioSubscriptions(t *testing.T) {
	mark := newMark()
	path, _ := stdioRelayConfig(t, mark)
	p := start(t, "bastion", []string{"gateway", "--stdio", "--config", path}, baseEnv("E2E_TOKENS="+tokensEnv()))
	p.initialize("2025-11-25")
	deadline := time.Now().Add(waitLimit)
	for id := 100; ; id++ {
		p.sendJSON(map[string]any{"jsonrpc": "2.0", "id": id, "method": "resources/list"})
		if m := mustJSON(t, p.recvID(id)); strings.Contains(m, `"file:///docs/readme.md"`) {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("resources never listed: %s", m)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// touchUpdates calls fx.touch, which updates every subscribed
	// resource before it answers, and returns the updates heard: want of
	// them, or, when want is 0, those heard within a moment of the
	// answer. An update is a notification of its own, not part of the
	// call's answer: it may be written before or after it.
	touchUpdates := func(id, want int) []string {
		t.Helper()
		p.call(id, "fx.touch", map[string]any{})
		var updated []string
		var grace <-chan time.Time
		for answered := false; !answered || len(updated) < want; {
			var m msg
			if answered && want == 0 {
				if grace == nil {
					grace = time.After(500 * time.Millisecond)
				}
				select {
				case line, ok := <-p.lines:
					if !ok {
						t.Fatalf("server closed stdout; stderr:\n%s", p.stderr.String())
					}
					if err := json.Unmarshal(line, &m); err != nil {
						t.Fatalf("stdout line is not a JSON object: %v: %q", err, line)
					}
				case <-grace:
					return updated
				}
			} else {
				m = p.recv()
			}
			if m["method"] == "notifications/resources/updated" {
				updated = append(updated, mustJSON(t, m["params"]))
				continue
			}
			if m["id"] == float64(id) {
				answered = true
			}
		}
		return updated
	}
	p.sendJSON(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe", "params": map[string]any{"uri": "file:///docs/readme.md"}})
	if m := mustJSON(t, p.recvID(1)); !strings.Contains(m, `"result":{}`) {
		t.Fatalf("resources/subscribe: %s", m)
	}
	p.sendJSON(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": map[string]any{"uri": "file:///secret/keys.md"}})
	if m := mustJSON(t, p.recvID(2)); !strings.Contains(m, "-32001") {
		t.Errorf("the viewer's subscription to the secret resource: %s", m)
	}
	if got := touchUpdates(3, 1); !slices.Equal(got, []string{`{"uri":"file:///docs/readme.md"}`}) {
		t.Errorf("updates heard while subscribed: %v", got)
	}
	p.sendJSON(map[string]any{"jsonrpc": "2.0", "id": 4, "method": "resources/unsubscribe", "params": map[string]any{"uri": "file:///docs/readme.md"}})
	if m := mustJSON(t, p.recvID(4)); !strings.Contains(m, `"result":{}`) {
		t.Fatalf("resources/unsubscribe: %s", m)
	}
	// The gateway had the only subscription, so the downstream is told:
	// it speaks 2026-07-28, so the listen request that followed the
	// resource is cancelled.
	rec := filepath.Join(filepath.Dir(path), "fixture.log")
	waitUntil(t, "the downstream told of the unsubscribe", func() bool {
		return strings.Contains(received(t, rec), `"method":"notifications/cancelled"`)
	})
	if got := touchUpdates(5, 0); len(got) != 0 {
		t.Errorf("updates heard after unsubscribing: %v", got)
	}
	p.closeStdin()
	if code := p.wait(); code != 0 {
		t.Errorf("exit %d; stderr:\n%s", code, p.stderr.String())
	}
	waitUntil(t, "no child left", func() bool { return len(leftovers(mark)) == 0 })
}

// TestGatewayStdioListenResources: the official Go SDK client in the
// 2026-07-28 era follows a resource through `bastion gateway --stdio`
// (Subscribe opens a subscriptions/listen that names it): the update
// reaches it, the secret resource the viewer may not read is refused,
// audited and never reaches the downstream, and Unsubscribe ends the
// downstream's subscription.
func TestGatewayStdioListenResources(t *testing.T) {
	mark := newMark()
	path, audit := stdioRelayConfig(t, mark)
	rec := filepath.Join(filepath.Dir(path), "fixture.log")
	updated := make(chan string, 16)
	cs := goSDKClientSession(t, "", &sdkmcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *sdkmcp.ResourceUpdatedNotificationRequest) { updated <- req.Params.URI }},
		baseEnv("E2E_TOKENS="+tokensEnv()), "gateway", "--stdio", "--config", path)
	ctx := ctxT(t)
	for _, uri := range []string{"file:///docs/readme.md", "file:///secret/keys.md"} {
		if err := cs.Subscribe(ctx, &sdkmcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatalf("subscribe %s: %v", uri, err)
		}
	}
	waitUntil(t, "the downstream subscribed", func() bool { return strings.Contains(received(t, rec), "file:///docs/readme.md") })
	waitUntil(t, "the refusal audited", func() bool {
		b, _ := os.ReadFile(audit)
		return strings.Contains(string(b), `"method":"subscriptions/listen","resource":"file:///secret/keys.md","rule":"secret-resource","outcome":"deny"`)
	})
	if _, err := cs.CallTool(ctx, &sdkmcp.CallToolParams{Name: "fx.touch", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	select {
	case uri := <-updated:
		if uri != "file:///docs/readme.md" {
			t.Errorf("heard an update of %s", uri)
		}
	case <-time.After(waitLimit):
		t.Fatal("no update heard")
	}
	if strings.Contains(received(t, rec), "secret") {
		t.Error("a refused subscription reached the downstream")
	}
	if err := cs.Unsubscribe(ctx, &sdkmcp.UnsubscribeParams{URI: "file:///docs/readme.md"}); err != nil {
		t.Fatal(err)
	}
	// The downstream speaks 2026-07-28: the listen that followed the
	// resource there is cancelled.
	waitUntil(t, "the downstream told of the unsubscribe", func() bool {
		return strings.Contains(received(t, rec), `"method":"notifications/cancelled"`)
	})
	if err := cs.Close(); err != nil {
		t.Errorf("the gateway did not exit cleanly: %v", err)
	}
	waitUntil(t, "no child left", func() bool { return len(leftovers(mark)) == 0 })
}

// messagesUntil reads up to the answer to request id and returns the
// params of the log messages heard before it.
func (p *proc) messagesUntil(id int) []string {
	p.t.Helper()
	var logged []string
	for {
		m := p.recv()
		if m["method"] == "notifications/message" {
			logged = append(logged, mustJSON(p.t, m["params"]))
			continue
		}
		if m["id"] == float64(id) {
			return logged
		}
	}
}

// TestGatewayStdioDeclaresAtInitialize: a client that initializes the
// moment it has started `bastion gateway --stdio`, as every stdio client
// does, is told of the prompts, resources and completion the gateway
// relays: the answer to initialize is its only declaration of them in
// the session.
func TestGatewayStdioDeclaresAtInitialize(t *testing.T) {
	mark := newMark()
	path, _ := stdioRelayConfig(t, mark)
	p := start(t, "bastion", []string{"gateway", "--stdio", "--config", path}, baseEnv("E2E_TOKENS="+tokensEnv()))
	caps := mustJSON(t, p.initialize("2025-11-25")["result"])
	for _, want := range []string{`"prompts":{"listChanged":true}`, `"resources":{"listChanged":true,"subscribe":true}`, `"completions":{}`, `"logging":{}`} {
		if !strings.Contains(caps, want) {
			t.Errorf("initialize declares no %s: %s", want, caps)
		}
	}
	// Its first listing, right after, already holds what it may list.
	p.sendJSON(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "prompts/list"})
	if m := mustJSON(t, p.recvID(1)); !strings.Contains(m, `"fx.summarize"`) {
		t.Errorf("the first prompts/list: %s", m)
	}
	p.closeStdin()
	if code := p.wait(); code != 0 {
		t.Errorf("exit %d; stderr:\n%s", code, p.stderr.String())
	}
	waitUntil(t, "no child left", func() bool { return len(leftovers(mark)) == 0 })
}

// TestGatewayStdioClientGoneWhileSettling: a client that closes its end
// while `bastion gateway --stdio` still waits for a server to settle
// (here one whose tools/list hangs, with a long list timeout) is noticed
// then, not when the wait ends: the gateway stops at once, exits 0 and
// leaves no child behind. One that sent its initialize and then closed
// is not taken for gone: its request is still to be read.
func TestGatewayStdioClientGoneWhileSettling(t *testing.T) {
	for _, sends := range []bool{false, true} {
		t.Run(fmt.Sprintf("sent-first=%v", sends), func(t *testing.T) {
			mark := newMark()
			cfg := "auth:\n  mode: none\npolicy:\n  rules:\n    - {id: all, tools: [\"*\"], roles: [\"*\"]}\n" +
				"discovery:\n  list_timeout: 60s\nservers:\n" + fixture("fx", mark, map[string]string{"FIXTURE_PAGES": "hang-at-2"})
			cfg += stateKeys(t, cfg)
			path := filepath.Join(t.TempDir(), "gateway.yaml")
			writeFile(t, path, cfg)
			p := start(t, "bastion", []string{"gateway", "--stdio", "--config", path}, baseEnv())
			waitUntil(t, "the gateway waits for the server", func() bool { return strings.Contains(p.stderr.String(), `"downstream connected"`) })
			if !sends {
				p.closeStdin()
				if code := p.wait(); code != 0 {
					t.Errorf("exit %d; stderr:\n%s", code, p.stderr.String())
				}
				if !strings.Contains(p.stderr.String(), "closed its input before the servers settled") {
					t.Errorf("the stop is not logged; stderr:\n%s", p.stderr.String())
				}
				waitUntil(t, "no child left", func() bool { return len(leftovers(mark)) == 0 })
				return
			}
			// Sent, then closed: the request is still to be read, so the
			// gateway waits for the servers and answers it.
			p.sendJSON(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{
				"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "e2e", "version": "1"}}})
			p.closeStdin()
			time.Sleep(300 * time.Millisecond) // several of the wait's looks at stdin
			if strings.Contains(p.stderr.String(), "closed its input") {
				t.Fatalf("a client whose request is unread was taken for gone; stderr:\n%s", p.stderr.String())
			}
			p.signal(syscall.SIGTERM) // ends the wait without serving
			if code := p.wait(); code != 0 {
				t.Errorf("exit %d; stderr:\n%s", code, p.stderr.String())
			}
		})
	}
}

// TestGatewayStdioAsks: a session-era downstream's requests reach the one
// --stdio client while it serves that client's call — when the client
// declared the capability at initialize — under the gateway's own ids;
// an answer to another id is dropped, the right one reaches the
// downstream, and a call the client cancels while it is asked tells it
// the request is cancelled too. A capability it did not declare is
// refused to the downstream (-32601) without asking. The official Go SDK
// client's elicitation handler answers through it.
func TestGatewayStdioAsks(t *testing.T) {
	mark := newMark()
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec.log")
	cfg := "auth:\n  mode: none\npolicy:\n  rules:\n    - {id: all, tools: [\"*\"], roles: [\"*\"]}\nservers:\n" +
		fixture("fx", mark, map[string]string{"FIXTURE_TOOLS": "sample,elicit", "FIXTURE_ERA": "legacy", "FIXTURE_LOG": rec}, "protocol: legacy")
	cfg += stateKeys(t, cfg)
	path := filepath.Join(dir, "gateway.yaml")
	writeFile(t, path, cfg)

	t.Run("raw", func(t *testing.T) {
		p := start(t, "bastion", []string{"gateway", "--stdio", "--config", path}, baseEnv())
		p.sendJSON(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{
			"protocolVersion": "2025-11-25", "capabilities": map[string]any{"sampling": map[string]any{}}, "clientInfo": map[string]any{"name": "e2e", "version": "1"}}})
		if m := p.recv(); m["result"] == nil {
			t.Fatalf("initialize: %v", m)
		}
		p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		// The first request sent is the downstream's, under the gateway's id.
		nextRequest := func() msg {
			t.Helper()
			for {
				m := p.recv()
				if m["method"] != nil && m["id"] != nil {
					return m
				}
				if m["id"] != nil {
					t.Fatalf("answered before asking: %v", m)
				}
			}
		}
		p.call(1, "fx.sample", map[string]any{})
		ask := nextRequest()
		id, _ := ask["id"].(string)
		if ask["method"] != "sampling/createMessage" || !strings.HasPrefix(id, "bastion-ask-") {
			t.Fatalf("the client was sent %v", ask)
		}
		p.sendJSON(map[string]any{"jsonrpc": "2.0", "id": id + "0", "result": map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "not this one"}, "model": "m"}})
		p.sendJSON(map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "from the desk"}, "model": "m"}})
		if m := mustJSON(t, p.recvID(1)); !strings.Contains(m, "from the desk") || strings.Contains(m, "not this one") {
			t.Errorf("the call's answer: %s", m)
		}

		// Not declared: the downstream is refused, the client never asked.
		p.call(2, "fx.elicit", map[string]any{})
		if m := mustJSON(t, p.recvID(2)); !strings.Contains(m, "-32601") {
			t.Errorf("elicitation the client did not declare: %s", m)
		}

		// The client cancels its call while it is asked: the request is
		// withdrawn, and the call gets no answer.
		p.call(3, "fx.sample", map[string]any{})
		ask = nextRequest()
		p.sendJSON(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": map[string]any{"requestId": 3}})
		for {
			m := p.recv()
			if m["id"] != nil {
				t.Fatalf("a message after the cancel: %v", m)
			}
			if m["method"] == "notifications/cancelled" {
				params, _ := m["params"].(map[string]any)
				if params["requestId"] != ask["id"] {
					t.Errorf("cancelled %v, asked %v", params["requestId"], ask["id"])
				}
				break
			}
		}
		// The client's input ends while it is asked: nothing it sends
		// can be read any more, so the request ends at once (not when
		// the drain's grace does), and the call is answered.
		p.call(4, "fx.sample", map[string]any{})
		nextRequest()
		p.closeStdin()
		if m := mustJSON(t, p.recvID(4)); !strings.Contains(m, "can no longer answer") {
			t.Errorf("the call asking a client whose input ended: %s", m)
		}
		if code := p.wait(); code != 0 {
			t.Errorf("exit %d; stderr:\n%s", code, p.stderr.String())
		}
	})

	t.Run("a call that ends while asking", func(t *testing.T) {
		// A deadline of its own: the request is withdrawn before the
		// call's answer, never after it.
		cfg := "auth:\n  mode: none\npolicy:\n  rules:\n    - {id: all, tools: [\"*\"], roles: [\"*\"]}\nservers:\n" +
			fixture("fx", mark, map[string]string{"FIXTURE_TOOLS": "sample", "FIXTURE_ERA": "legacy"}, "protocol: legacy", "timeout: 300ms")
		cfg += stateKeys(t, cfg)
		short := filepath.Join(t.TempDir(), "gateway.yaml")
		writeFile(t, short, cfg)
		p := start(t, "bastion", []string{"gateway", "--stdio", "--config", short}, baseEnv())
		p.sendJSON(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{
			"protocolVersion": "2025-11-25", "capabilities": map[string]any{"sampling": map[string]any{}}, "clientInfo": map[string]any{"name": "e2e", "version": "1"}}})
		p.recv()
		for id := 1; id <= 8; id++ {
			p.call(id, "fx.sample", map[string]any{})
			withdrawn := false
			for {
				m := p.recv()
				if m["method"] == "notifications/cancelled" {
					withdrawn = true
				}
				if m["id"] == float64(id) {
					if !withdrawn {
						t.Errorf("call %d was answered before its request was withdrawn: %v", id, m)
					}
					break
				}
			}
		}
		p.closeStdin()
		p.wait()
	})

	t.Run("the official Go SDK client", func(t *testing.T) {
		cs := goSDKClientSession(t, "2025-11-25", &sdkmcp.ClientOptions{
			ElicitationHandler: func(context.Context, *sdkmcp.ElicitRequest) (*sdkmcp.ElicitResult, error) {
				return &sdkmcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "answered by the SDK"}}, nil
			}}, baseEnv(), "gateway", "--stdio", "--config", path)
		ctx := ctxT(t)
		res, err := cs.CallTool(ctx, &sdkmcp.CallToolParams{Name: "fx.elicit", Arguments: map[string]any{}})
		if err != nil {
			t.Fatalf("fx.elicit: %v", err)
		}
		if text := contentText(res); !strings.Contains(text, "answered by the SDK") {
			t.Errorf("fx.elicit: %q", text)
		}
	})
	waitUntil(t, "no child left", func() bool { return len(leftovers(mark)) == 0 })
}

// TestGatewayLogsNoCallerText: a tools/call or prompts/get naming no tool
// or prompt the catalog holds, with a name that is not one (a secret, a
// bidirectional override, a line break that would forge a log line), is
// logged as "(not a tool name)" on both fronts, and the stdio session's
// line names the outcome unknown_tool.
func TestGatewayLogsNoCallerText(t *testing.T) {
	const secret = "hunter2-zq7"
	name := "password=" + secret + " \u202e\nlevel=ERROR msg=forged"
	mark := newMark()
	path, _ := stdioRelayConfig(t, mark)
	p := start(t, "bastion", []string{"gateway", "--stdio", "--config", path}, baseEnv("E2E_TOKENS="+tokensEnv()))
	meta := map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}
	p.sendJSON(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"_meta": meta, "name": name, "arguments": map[string]any{}}})
	if m := mustJSON(t, p.recvID(1)); !strings.Contains(m, "-32602") {
		t.Errorf("stdio: a call of no tool: %s", m)
	}
	p.sendJSON(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "prompts/get", "params": map[string]any{"_meta": meta, "name": name}})
	p.recvID(2)
	p.closeStdin()
	p.wait()
	stdioLog := p.stderr.String()
	if !strings.Contains(stdioLog, `"tool":"(not a tool name)"`) || !strings.Contains(stdioLog, `"outcome":"unknown_tool"`) {
		t.Errorf("stdio: the call's line:\n%s", stdioLog)
	}

	g := startGateway(t, mark, fixture("fx", mark, nil), "")
	s := g.legacy("2025-11-25")
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": map[string]any{"name": name, "arguments": map[string]any{}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := s.post(ctxT(t), string(body)); !strings.Contains(string(r.body), "-32602") {
		t.Errorf("http: a call of no tool: %s", r.body)
	}
	g.stop()
	httpLog := g.p.stderr.String()
	if !strings.Contains(httpLog, `"tool":"(not a tool name)"`) {
		t.Errorf("http: the call's line:\n%s", httpLog)
	}
	for front, log := range map[string]string{"stdio": stdioLog, "http": httpLog} {
		if strings.Contains(log, secret) || strings.Contains(log, "\u202e") || strings.Contains(log, "forged") {
			t.Errorf("%s: the log holds the caller's text:\n%s", front, log)
		}
	}
}
