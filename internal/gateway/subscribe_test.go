package gateway

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-bastion/bastion/internal/gateway/auth"
	"github.com/mcp-bastion/bastion/internal/gateway/catalog"
	"github.com/mcp-bastion/bastion/internal/mcp"
	"github.com/mcp-bastion/bastion/internal/session"
)

// startSubscribable runs a legacy fixture server "docs" that lists
// file:///watched.md and slowfail://doc (whose subscribe fails, slowly),
// every caller allowed to read both. Its FIXTURE_LOG is returned.
func startSubscribable(t *testing.T) (*Gateway, string) {
	t.Helper()
	dir := t.TempDir()
	res := filepath.Join(dir, "resources.json")
	if err := os.WriteFile(res, []byte(`{"resources":[{"uri":"file:///watched.md","name":"w"},{"uri":"slowfail://doc","name":"s"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "received.log")
	g, _ := startDocs(t, "    - {id: all, resources: [\"*:*\"], roles: [\"*\"]}\n",
		map[string]string{"FIXTURE_RESOURCES": res, "FIXTURE_ERA": "legacy", "FIXTURE_LOG": log},
		func(snap *catalog.Snapshot) bool { return len(snap.Resources) == 2 })
	return g, log
}

func subscribe(t *testing.T, g *Gateway, p auth.Principal, subscriber, uri string, expires time.Time) error {
	t.Helper()
	return g.Subscribe(t.Context(), SubscribeRequest{Subscriber: subscriber, Expires: expires, URI: uri, RequestID: "r", Principal: p})
}

func tooMany(err error) bool {
	var ge *Error
	return errors.As(err, &ge) && ge.Code == CodeTooManyRequests
}

// TestSubscriptionBoundPerPrincipal: one principal, however many
// sessions it opens, cannot take the table from the others.
func TestSubscriptionBoundPerPrincipal(t *testing.T) {
	g, _ := startSubscribable(t)
	mallory := auth.Principal{Subject: "mallory", Issuer: auth.IssuerStatic}
	alice := auth.Principal{Subject: "alice", Issuer: auth.IssuerStatic}
	for i := range maxSubscriptionsPerPrincipal {
		if err := subscribe(t, g, mallory, fmt.Sprintf("m-%d", i), "file:///watched.md", time.Time{}); err != nil {
			t.Fatalf("mallory's subscription %d: %v", i, err)
		}
	}
	if err := subscribe(t, g, mallory, "m-more", "file:///watched.md", time.Time{}); !tooMany(err) {
		t.Errorf("mallory's subscription past the bound: %v, want 429", err)
	}
	if err := subscribe(t, g, alice, "a-1", "file:///watched.md", time.Time{}); err != nil {
		t.Errorf("alice's first subscription: %v", err)
	}
	// Sessions that ended give their room back.
	g.Unsubscribed(t.Context(), "m-0")
	if err := subscribe(t, g, mallory, "m-more", "file:///watched.md", time.Time{}); err != nil {
		t.Errorf("mallory's subscription after one of its sessions ended: %v", err)
	}
}

// TestSubscriptionsOfExpiredSessions: subscriptions of sessions that
// expired without a DELETE are dropped when the room is needed.
func TestSubscriptionsOfExpiredSessions(t *testing.T) {
	g, _ := startSubscribable(t)
	p := auth.Principal{Subject: "bob", Issuer: auth.IssuerStatic}
	past := time.Now().Add(-time.Minute)
	for i := range maxSubscriptionsPerPrincipal {
		if err := subscribe(t, g, p, fmt.Sprintf("old-%d", i), "file:///watched.md", past); err != nil {
			t.Fatalf("subscription %d: %v", i, err)
		}
	}
	if err := subscribe(t, g, p, "new", "file:///watched.md", time.Now().Add(time.Hour)); err != nil {
		t.Fatalf("a live session's subscription, with the bound held by expired ones: %v", err)
	}
	g.subs.mu.Lock()
	n := g.subs.byPrincipal[principalKey(p)]
	g.subs.mu.Unlock()
	if n != 1 {
		t.Errorf("the principal holds %d subscriptions, want the live one only", n)
	}
}

// TestSubscribeWhileTheFirstFails: a second subscriber of a URI whose
// first subscribe is still on its way is not told it is subscribed before
// the downstream is: when the first fails, it tries in its turn, and is
// told of its own failure; no one is left in the table.
func TestSubscribeWhileTheFirstFails(t *testing.T) {
	g, log := startSubscribable(t)
	p := auth.Principal{Subject: "bob", Issuer: auth.IssuerStatic}
	first := make(chan error, 1)
	go func() { first <- subscribe(t, g, p, "s1", "slowfail://doc", time.Time{}) }()
	// Generous: it costs nothing once the subscribe arrives, and a child
	// started under -race on a loaded machine can be slow to.
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(log)
		if strings.Contains(string(b), `"resources/subscribe"`) {
			break // s1's subscribe is at the downstream
		}
		if time.Now().After(deadline) {
			t.Fatal("the first subscribe never reached the downstream")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := subscribe(t, g, p, "s2", "slowfail://doc", time.Time{}); err == nil {
		t.Error("the second subscriber was told it is subscribed, and the downstream is not")
	}
	if err := <-first; err == nil {
		t.Fatal("the first subscribe did not fail")
	}
	b, _ := os.ReadFile(log)
	if n := strings.Count(string(b), `"resources/subscribe"`); n != 2 {
		t.Errorf("the downstream got %d subscribes, want one for each subscriber in turn", n)
	}
	g.subs.mu.Lock()
	held, total := len(g.subs.byURI), g.subs.total
	g.subs.mu.Unlock()
	if held != 0 || total != 0 {
		t.Errorf("the table holds %d URIs and %d subscriptions after both failed", held, total)
	}
}

// TestSubscriptionsSurviveARestart: a downstream that restarts holds
// none of the subscriptions the gateway keeps for its subscribers; the
// gateway subscribes the new process again, in both eras, and the
// subscriber keeps hearing of updates.
func TestSubscriptionsSurviveARestart(t *testing.T) {
	for _, era := range []string{"legacy", "modern"} {
		t.Run(era, func(t *testing.T) {
			res := filepath.Join(t.TempDir(), "resources.json")
			if err := os.WriteFile(res, []byte(`{"resources":[{"uri":"file:///watched.md","name":"w"}]}`), 0o600); err != nil {
				t.Fatal(err)
			}
			updates := make(chan string, 64)
			g, _ := startDocsWith(t, "    - {id: all, resources: [\"*:*\"], tools: [\"*\"], roles: [\"*\"]}\n",
				map[string]string{"FIXTURE_RESOURCES": res, "FIXTURE_ERA": era, "FIXTURE_TOOLS": "touch,crash"},
				func(snap *catalog.Snapshot) bool { return len(snap.Resources) == 1 },
				func(g *Gateway) {
					g.OnResourceUpdated(func(subs []string, uri string) { updates <- fmt.Sprint(subs, " ", uri) })
				})
			p := auth.Principal{Subject: "bob", Issuer: auth.IssuerStatic}
			if err := subscribe(t, g, p, "s1", "file:///watched.md", time.Time{}); err != nil {
				t.Fatal(err)
			}
			// heard touches the resource until an update reaches s1 (a
			// modern server's listen opens in the background).
			heard := func(when string) {
				t.Helper()
				deadline := time.Now().Add(10 * time.Second)
				for {
					_, _ = invoke(t, g, "docs.touch", `{}`)
					select {
					case u := <-updates:
						if u != "[s1] file:///watched.md" {
							t.Fatalf("%s: the update %q", when, u)
						}
						return
					case <-time.After(100 * time.Millisecond):
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s: the subscriber heard no update", when)
					}
				}
			}
			heard("before the restart")
			_, _ = invoke(t, g, "docs.crash", `{}`)
			heard("after the restart")
		})
	}
}

// TestSessionCatalogWatchFollowsTheView: the stdio front's one client is
// told the tool list changed only when it changed as that client sees
// it: a tool only admins may call appearing sends it nothing.
func TestSessionCatalogWatchFollowsTheView(t *testing.T) {
	g, _ := startDocs(t, "    - {id: hidden, tools: [\"docs.added\"], roles: [admin]}\n    - {id: rest, tools: [\"*\"], roles: [\"*\"]}\n",
		map[string]string{"FIXTURE_TOOLS": "listchanged,echo", "FIXTURE_ERA": "legacy"},
		func(snap *catalog.Snapshot) bool { return len(snap.Tools) == 2 })
	enc, err := mcp.NewEncoder(mcp.Implementation{Name: "g", Version: "1"}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	viewer := auth.Principal{Subject: "desk", Issuer: "stdio", Roles: []string{"viewer"}}
	admin := auth.Principal{Subject: "root", Issuer: "stdio", Roles: []string{"admin"}}
	viewerChanges, stopViewer := g.SessionCatalog(enc, make([]byte, 32), viewer).Watch()
	defer stopViewer()
	adminChanges, stopAdmin := g.SessionCatalog(enc, make([]byte, 32), admin).Watch()
	defer stopAdmin()
	if _, err := invoke(t, g, "docs.listchanged", `{}`); err != nil {
		t.Fatal(err)
	}
	select {
	case <-adminChanges:
	case <-time.After(10 * time.Second):
		t.Fatal("the admin, who sees docs.added, was not told the list changed")
	}
	select {
	case <-viewerChanges:
		t.Error("the viewer, whose list did not change, was told it changed")
	case <-time.After(500 * time.Millisecond):
	}
}

// TestSessionRelayWatchFollowsTheView: the stdio front's relay reports a
// prompt list change only to a principal whose view of the list changed,
// and names the list.
func TestSessionRelayWatchFollowsTheView(t *testing.T) {
	dir := t.TempDir()
	prompts, pidfile := filepath.Join(dir, "prompts.json"), filepath.Join(dir, "fixture.pid")
	if err := os.WriteFile(prompts, []byte(`[{"name":"summarize"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	g, _ := startDocs(t, "    - {id: hidden, prompts: [\"docs.added\"], roles: [admin]}\n    - {id: rest, prompts: [\"*\"], roles: [\"*\"]}\n",
		map[string]string{"FIXTURE_PROMPTS": prompts, "FIXTURE_PIDFILE": pidfile, "FIXTURE_ERA": "legacy"},
		func(snap *catalog.Snapshot) bool { return len(snap.Prompts) == 1 })
	enc, err := mcp.NewEncoder(mcp.Implementation{Name: "g", Version: "1"}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	viewer := auth.Principal{Subject: "desk", Issuer: "stdio", Roles: []string{"viewer"}}
	admin := auth.Principal{Subject: "root", Issuer: "stdio", Roles: []string{"admin"}}
	viewerChanges, stopViewer := g.SessionRelay(enc, make([]byte, 32), viewer).Watch()
	defer stopViewer()
	adminChanges, stopAdmin := g.SessionRelay(enc, make([]byte, 32), admin).Watch()
	defer stopAdmin()

	if err := os.WriteFile(prompts, []byte(`[{"name":"summarize"},{"name":"added"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-adminChanges:
		if l != (session.Change{Lists: mcp.Listen{Prompts: true}}) {
			t.Errorf("the admin was told %+v, want the prompt list only", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the admin, who sees docs.added, was not told the prompt list changed")
	}
	select {
	case l := <-viewerChanges:
		t.Errorf("the viewer, whose list did not change, was told %+v", l)
	case <-time.After(500 * time.Millisecond):
	}
}

// TestResubscribeOnlyWhatIsServed: a server that reconnects is subscribed
// again only to what it still serves: a URI it no longer serves (its
// server came back as another one, and its lists are quarantined) hears
// no caller's subscription.
func TestResubscribeOnlyWhatIsServed(t *testing.T) {
	g, log := startSubscribable(t)
	p := auth.Principal{Subject: "bob", Issuer: auth.IssuerStatic, Roles: []string{"viewer"}}
	if err := subscribe(t, g, p, "s1", "file:///watched.md", time.Time{}); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		b, _ := os.ReadFile(log)
		return strings.Count(string(b), `"method":"resources/subscribe"`)
	}
	before := count()
	g.catalog.RemoveResources("docs") // still claimed, served by no one
	g.resubscribe("docs")
	if n := count(); n != before {
		t.Errorf("%d subscribes reached a server for a URI it no longer serves", n-before)
	}
}
