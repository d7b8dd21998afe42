package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestGatewayMetrics: the opt-in metrics endpoint counts requests, tool
// calls by server, tool and outcome, discovery and downstream health; a
// name a caller made up is never a label; the MCP address serves none
// of it.
func TestGatewayMetrics(t *testing.T) {
	mark := newMark()
	port := freePort(t)
	g := startGateway(t, mark, fixture("fx", mark, map[string]string{"FIXTURE_TOOLS": "echo,iserror", "FIXTURE_PAGES": "2"}),
		fmt.Sprintf("metrics:\n  listen: 127.0.0.1:%d\n", port))
	structured(t, g.call("fx.echo", map[string]any{"secret_value": "s3cr3t"}))
	g.call("fx.iserror", map[string]any{})
	g.call("fx.made-up-by-caller", map[string]any{})

	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	suiteLeaks.watch(func() string { return string(body) })
	resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		`bastion_gateway_tool_calls_total{outcome="ok",server="fx",tool="echo"} 1`,
		`bastion_gateway_tool_calls_total{outcome="is_error",server="fx",tool="iserror"} 1`,
		`bastion_gateway_tool_calls_total{outcome="unknown_tool",server="",tool="(unknown)"} 1`,
		`bastion_gateway_requests_total{method="tools/call",outcome="200"} 3`,
		`bastion_gateway_downstream_up{server="fx"} 1`,
		`bastion_gateway_downstream_tools{server="fx"} 2`,
		`bastion_gateway_discovery_pages_total{server="fx"} 2`,
		`bastion_gateway_tool_call_duration_seconds_bucket{server="fx",le="+Inf"} 2`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	for _, never := range []string{"made-up-by-caller", "s3cr3t", "secret_value"} {
		if strings.Contains(text, never) {
			t.Errorf("a caller's text reached the metrics: %q", never)
		}
	}
	if r, err := http.Get(g.base + "/metrics"); err != nil || r.StatusCode != http.StatusNotFound {
		t.Errorf("the MCP address serves /metrics: %v %v", err, r)
	}
}

// TestGatewayMetricsHost: the metrics endpoint on a loopback address
// answers a foreign Host (a DNS name rebound to 127.0.0.1 by a page in a
// browser) or a foreign Origin with 403 and none of its metrics, as the
// MCP endpoint does; its own address and localhost read them.
func TestGatewayMetricsHost(t *testing.T) {
	mark := newMark()
	port := freePort(t)
	startGateway(t, mark, fixture("fx", mark, nil), fmt.Sprintf("metrics:\n  listen: 127.0.0.1:%d\n", port))
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	for _, tc := range []struct {
		host, origin string
		status       int
	}{
		{fmt.Sprintf("rebound.example:%d", port), "", http.StatusForbidden},
		{"", "http://rebound.example", http.StatusForbidden},
		{"", "", http.StatusOK},
		{fmt.Sprintf("localhost:%d", port), "", http.StatusOK},
	} {
		req, err := http.NewRequestWithContext(ctxT(t), http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc.host != "" {
			req.Host = tc.host
		}
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || (tc.status != http.StatusOK) == strings.Contains(string(body), "bastion_gateway_") {
			t.Errorf("Host %q, Origin %q: HTTP %d, want %d:\n%.200s", tc.host, tc.origin, resp.StatusCode, tc.status, body)
		}
	}
}
