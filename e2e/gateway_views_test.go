package e2e

import (
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestGatewayListChangedFollowsTheView: a list-changed notification
// reaches a caller only when the list changed as that caller sees it
// (decision 26). One change adds a resource only admins may read: a
// viewer's subscriptions/listen stream hears nothing, an admin's hears
// resources/list_changed. A second change adds one everyone may read:
// then the viewer hears it too.
func TestGatewayListChangedFollowsTheView(t *testing.T) {
	suiteLeaks.secret(adminToken, viewerToken, supportTok)
	res := filepath.Join(t.TempDir(), "resources.json")
	public := resourceDesc("file:///public.md", "public", "P.")
	writeFile(t, res, `{"resources":[`+public+`]}`)
	mark := newMark()
	pol := "policy:\n  rules:\n    - {id: secret, resources: [\"fx:file:///secret*\"], roles: [admin]}\n" +
		"    - {id: reads, resources: [\"*:*\"], roles: [\"*\"]}\n    - {id: tools, tools: [\"*\"], roles: [\"*\"]}\n  rate: {per_principal: \"off\"}\n"
	body := "auth:\n  tokens_env: E2E_TOKENS\n" + pol + "admission: {first_use: pin}\nservers:\n" +
		fixture("fx", mark, map[string]string{"FIXTURE_RESOURCES": res, "FIXTURE_TOOLS": "listchanged", "FIXTURE_ERA": "legacy"})
	g := startGatewayWith(t, mark, body, "E2E_TOKENS="+tokensEnv())

	listen := func(tok string) <-chan map[string]any {
		t.Helper()
		stream := listenStream(ctxT(t), t, g, tok, "l1", map[string]any{"resourcesListChanged": true})
		next(t, stream, "the acknowledgement")
		return stream
	}
	viewer, admin := listen(viewerToken), listen(adminToken)
	changed := func(m map[string]any) bool {
		method, _ := m["method"].(string)
		return method == "notifications/resources/list_changed"
	}

	// An admin-only resource appears.
	writeFile(t, res, `{"resources":[`+public+`,`+resourceDesc("file:///secret-plan.md", "plan", "S.")+`]}`)
	structured(t, callAs(g, adminToken, "fx.listchanged", map[string]any{}, 1))
	if m := next(t, admin, "the admin's notification"); !changed(m) {
		t.Fatalf("the admin heard %v", m)
	}
	if got := resourcesAs(g, viewerToken, false); !slices.Equal(got, []string{"file:///public.md"}) {
		t.Fatalf("the viewer lists %v", got)
	}
	select {
	case m := <-viewer:
		t.Errorf("the viewer, whose list did not change, heard %v", m)
	case <-time.After(time.Second):
	}

	// One everyone may read appears: both hear it.
	writeFile(t, res, `{"resources":[`+public+`,`+resourceDesc("file:///secret-plan.md", "plan", "S.")+`,`+
		resourceDesc("file:///more.md", "more", "M.")+`]}`)
	structured(t, callAs(g, adminToken, "fx.listchanged", map[string]any{}, 2))
	if m := next(t, viewer, "the viewer's notification"); !changed(m) {
		t.Errorf("the viewer heard %v", m)
	}
	if m := next(t, admin, "the admin's second notification"); !changed(m) {
		t.Errorf("the admin heard %v", m)
	}
}
