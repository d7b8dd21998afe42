package e2e

import (
	"strings"
	"testing"
)

// TestGatewayStdioSetLevelRaised: after logging/setLevel "debug" and then
// "error", the one stdio client hears error and above only (MCP logging:
// "server then sends that level and more severe"; decision 23: the level
// the gateway relays to that caller): the downstream's info message of a
// call no longer reaches it, though the downstream is still at debug for
// any other caller.
func TestGatewayStdioSetLevelRaised(t *testing.T) {
	mark := newMark()
	path, _ := stdioRelayConfig(t, mark)
	p := start(t, "bastion", []string{"gateway", "--stdio", "--config", path}, baseEnv("E2E_TOKENS="+tokensEnv()))
	p.initialize("2025-11-25")
	p.sendJSON(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	for i, level := range []string{"debug", "error"} {
		p.sendJSON(map[string]any{"jsonrpc": "2.0", "id": 20 + i, "method": "logging/setLevel", "params": map[string]any{"level": level}})
		if m := mustJSON(t, p.recvID(20+i)); !strings.Contains(m, `"result":{}`) {
			t.Fatalf("logging/setLevel %s: %s", level, m)
		}
	}
	p.call(30, "fx.log", map[string]any{})
	if logged := p.messagesUntil(30); len(logged) != 0 {
		t.Errorf("after logging/setLevel error the client heard %v", logged)
	}
	p.closeStdin()
	p.wait()
}
