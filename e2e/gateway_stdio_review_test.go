package e2e

import (
	"strings"
	"testing"
)

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
	for _, want := range []string{`"prompts":{"listChanged":true}`, `"resources":{"listChanged":true,"subscribe":true}`, `"completions":{}`} {
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
