package e2e

import (
	"strings"
	"testing"
)

// logging/setLevel "error" after "debug": the one stdio client asked for
// error and above (MCP logging: "server then sends that level and more
// severe"; decision 23: the level the gateway relays to that caller), yet
// an info message from the downstream still reaches it.
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
	var logged []string
	for {
		m := p.recv()
		if m["method"] == "notifications/message" {
			logged = append(logged, mustJSON(t, m["params"]))
			continue
		}
		if m["id"] == float64(30) {
			break
		}
	}
	if len(logged) != 0 {
		t.Errorf("after logging/setLevel error the client heard %v", logged)
	}
	p.closeStdin()
	p.wait()
}
