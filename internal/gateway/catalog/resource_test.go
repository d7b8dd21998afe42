package catalog

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-bastion/bastion/internal/gateway/admit"
)

// TestResourceRejections: each resource and template descriptor is judged
// on its own; a URI two descriptors of one server share is given to
// neither.
func TestResourceRejections(t *testing.T) {
	c := New(AdmitAll{}, admit.Options{})
	err := c.UpdateResources(Server{Name: "s"}, raws(
		`{"uri":"file:///ok.md","name":"ok"}`,
		`{"uri":"relative/path","name":"r"}`,
		`{"uri":"file:///a b","name":"space"}`,
		`{"uri":"file:///noname"}`,
		`{"uri":"file:///size","name":"n","size":"big"}`,
		`{"uri":"file:///twice","name":"a"}`, `{"uri":"file:///twice","name":"b"}`,
		`{"uri":"file:///dup","uri":"file:///dup","name":"d"}`,
	), raws(
		`{"uriTemplate":"users://{id}","name":"u"}`,
		`{"uriTemplate":"{scheme}://x","name":"no literal scheme"}`,
		`{"uriTemplate":"users://{id","name":"unclosed"}`,
	))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Snapshot()
	if len(s.Resources) != 1 || s.Resources[0].URI != "file:///ok.md" || len(s.Templates) != 1 {
		t.Fatalf("offered %+v %+v", s.Resources, s.Templates)
	}
	want := map[string]string{
		"resource/1": admit.RejectName, "resource/2": admit.RejectName, "resource/3": admit.RejectName,
		"resource/4": admit.RejectMalformed, "resource/5": admit.RejectDuplicateName, "resource/6": admit.RejectDuplicateName,
		"resource/7": admit.RejectMalformed, "template/1": admit.RejectName, "template/2": admit.RejectName,
	}
	if len(s.Rejected) != len(want) {
		t.Fatalf("rejected %+v", s.Rejected)
	}
	for _, r := range s.Rejected {
		if k := string(r.Kind) + "/" + string(rune('0'+r.Index)); want[k] != r.Category {
			t.Errorf("%s: %s (%s), want %s", k, r.Category, r.Detail, want[k])
		}
	}
}

// TestResourceOwnership: a URI two servers offer is owned by the one
// listed first in the configuration, whatever order they were updated
// in, and the other's copy is shadowed; reads route by exact URI first,
// then by the templates in configuration order.
func TestResourceOwnership(t *testing.T) {
	for _, updates := range [][]string{{"first", "second"}, {"second", "first"}} {
		c := New(AdmitAll{}, admit.Options{})
		c.SetOrder([]string{"second", "first"})
		for _, srv := range updates {
			if err := c.UpdateResources(Server{Name: srv}, raws(`{"uri":"file:///shared","name":"s"}`, `{"uri":"file:///`+srv+`","name":"own"}`),
				raws(`{"uriTemplate":"file:///t/{x}","name":"t"}`, `{"uriTemplate":"`+srv+`://{x}","name":"own"}`)); err != nil {
				t.Fatal(err)
			}
		}
		s := c.Snapshot()
		if r, ok := s.LookupResource("file:///shared"); !ok || r.Server != "second" {
			t.Errorf("updated %v: the shared URI is %+v", updates, r)
		}
		if len(s.Shadowed) != 2 || s.Shadowed[0] != (Shadowed{Kind: admit.KindResource, URI: "file:///shared", Owner: "second", Server: "first"}) ||
			s.Shadowed[1] != (Shadowed{Kind: admit.KindTemplate, URI: "file:///t/{x}", Owner: "second", Server: "first"}) {
			t.Errorf("updated %v: shadowed %+v", updates, s.Shadowed)
		}
		for uri, want := range map[string]string{"file:///first": "first", "file:///t/9": "second", "first://9": "first", "second://9": "second"} {
			r, tm := s.Route(uri)
			got := ""
			switch {
			case r != nil:
				got = r.Server
			case tm != nil:
				got = tm.Server
			}
			if got != want {
				t.Errorf("updated %v: %s routed to %q, want %q", updates, uri, got, want)
			}
		}
		if r, tm := s.Route("file:///nowhere"); r != nil || tm != nil {
			t.Errorf("an unknown URI routed to %v %v", r, tm)
		}
	}
}

// heldJudge holds every resource of one server for review and admits
// the rest.
type heldJudge struct{ server string }

func (j heldJudge) Judge(srv Server, kind admit.Kind, entries []Entry) ([]admit.Record, error) {
	recs, err := AdmitAll{}.Judge(srv, kind, entries)
	for i := range recs {
		if srv.Name == j.server {
			recs[i].Status = admit.Pending
		}
	}
	return recs, err
}

// TestResourceClaims: a server owns what it claims in configuration
// order whether it offers it now or not — down at start (the ledger's
// claim), gone since, or holding it for review — so a server listed after
// it never serves its URIs or its templates' meanwhile; Owner names it.
func TestResourceClaims(t *testing.T) {
	route := func(s *Snapshot, uri string) string {
		switch r, tm := s.Route(uri); {
		case r != nil:
			return r.Server
		case tm != nil:
			return tm.Server
		}
		return ""
	}
	plugin := func(c *Catalog) {
		t.Helper()
		if err := c.UpdateResources(Server{Name: "plugin"}, raws(`{"uri":"file:///etc/app.conf","name":"spoof"}`, `{"uri":"plugin://notes","name":"own"}`),
			raws(`{"uriTemplate":"file:///etc/{+path}","name":"etc"}`)); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, s *Snapshot, offered bool) {
		t.Helper()
		want := ""
		if offered {
			want = "config"
		}
		for _, uri := range []string{"file:///etc/app.conf", "file:///etc/app/db.conf"} {
			if got := route(s, uri); got != want {
				t.Errorf("%s: %s routed to %q, want %q", what, uri, got, want)
			}
			if got := s.Owner(uri); got != "config" {
				t.Errorf("%s: the owner of %s is %q", what, uri, got)
			}
		}
		if got := route(s, "plugin://notes"); got != "plugin" {
			t.Errorf("%s: plugin's own URI routed to %q", what, got)
		}
		if got := route(s, "file:///etc/passwd"); got != "plugin" {
			t.Errorf("%s: a URI only plugin's template matches routed to %q", what, got)
		}
		if len(s.Shadowed) != 1 || s.Shadowed[0].URI != "file:///etc/app.conf" || s.Shadowed[0].Owner != "config" {
			t.Errorf("%s: shadowed %+v", what, s.Shadowed)
		}
	}
	config := func(c *Catalog) {
		t.Helper()
		if err := c.UpdateResources(Server{Name: "config"}, raws(`{"uri":"file:///etc/app.conf","name":"conf"}`),
			raws(`{"uriTemplate":"file:///etc/app/{name}","name":"app"}`)); err != nil {
			t.Fatal(err)
		}
	}

	// Down at start: the ledger's claim holds.
	c := New(AdmitAll{}, admit.Options{})
	c.SetOrder([]string{"config", "plugin"})
	c.Claim("config", []string{"file:///etc/app.conf"}, []string{"file:///etc/app/{name}"})
	plugin(c)
	check("config down at start", c.Snapshot(), false)
	// Up: it serves them.
	config(c)
	check("config up", c.Snapshot(), true)
	// Gone again: its last list still claims them; a late ledger claim
	// does not replace what it listed.
	c.Remove("config")
	c.RemoveResources("config")
	c.Claim("config", nil, nil)
	check("config gone", c.Snapshot(), false)

	// Held for review: still its own.
	h := New(heldJudge{server: "config"}, admit.Options{})
	h.SetOrder([]string{"config", "plugin"})
	config(h)
	plugin(h)
	check("config held for review", h.Snapshot(), false)
}

// TestSpellingsListedExactly: another spelling of a URI an earlier
// server lists or claims exactly — in either direction, whatever the
// spelling a lenient server reads as the same resource — listed exactly
// by a later server is shadowed: it routes nowhere, its owner is the
// earlier server, and a later server's template that matches it routes
// nothing either. Another resource is not.
func TestSpellingsListedExactly(t *testing.T) {
	const readme = "file:///shared/readme.md"
	same := []struct{ earlier, later string }{
		{readme, readme + "?v=1"},
		{readme, readme + "#top"},
		{readme, readme + "/"},
		{readme + "?v=1", readme},
		{readme + "?v=1", readme + "#top"},
		{"file:///shared/docs/", "file:///shared/docs"},
		{readme, "file:/shared/readme.md"},
		{readme, "file://localhost/shared/readme.md"},
		{readme, "file://LOCALHOST/shared/readme.md"},
		{readme, "FILE:///shared/readme.md"},
		{readme, "file:///shared/./readme.md"},
		{readme, "file:///shared/x/../readme.md"},
		{readme, "file:///shared//readme.md"},
		{readme, "file:///shared/%72eadme.md"},
		{readme, "file:///shared%2Freadme.md"},
		{readme, "file:///shared\\readme.md"},
		{"file:///shared/caf%C3%A9.md", "file:///shared/café.md"},
		{"https://example.com/a", "https://EXAMPLE.com/a?x"},
		{readme, readme + "%3Fv=1"},              // decoded before the query is cut
		{readme, readme + "%23top"},              // and the fragment
		{readme, "file:///shared/%2572eadme.md"}, // decoded twice
		{"docs://private/s.md", "docs:///private/s.md"},
		{"docs://private/s.md", "docs:private/s.md"},
		{"docs://private/s.md", "docs://public/../private/s.md"},
		{"docs://Private/s.md", "docs://private/s.md"},
		{readme, "file:/%2Fshared/readme.md"}, // the host cut before decoding: //shared/… is /shared/…
		{readme, "file:/%5Cshared/readme.md"},
		{"https://api.example.com/v1/report", "https://api.example.com:443/v1/report"},
		{"https://api.example.com/v1/report", "https://api.example.com:/v1/report"},
		{"https://api.example.com/v1/report", "https://api.example.com./v1/report"},
		{"https://api.example.com/v1/report", "https://user@api.example.com/v1/report"},
	}
	other := []struct{ earlier, later string }{
		{readme, "file:///shared/README.md"},
		{readme, "file:///shared/readme.md.bak"},
		{readme, "file:///shared"},
		{"file:///shared", readme},
		{"https://example.com/a", "https://example.org/a"},
		{"https://example.com/a", "https://example.com:8443/a"},
		{"https://example.com/a", "http://example.com/a"},
		{"docs://private/s.md", "docs://public/s.md"},
		{"docs://private/s.md", "docs://private/S.md"},
		{"http://api.example.com/a", "http://api.example.com:443/a"},
		{"https://[::1]:8443/a", "https://[::1]/a"},
	}
	for _, offered := range []bool{true, false} {
		for _, tc := range append(same, other...) {
			shadowed := slices.Contains(same, tc)
			t.Run(fmt.Sprintf("offered=%v/%s|%s", offered, tc.earlier, tc.later), func(t *testing.T) {
				c := New(AdmitAll{}, admit.Options{})
				c.SetOrder([]string{"a", "b", "c"})
				if offered {
					if err := c.UpdateResources(Server{Name: "a"}, raws(fmt.Sprintf(`{"uri":%q,"name":"r"}`, tc.earlier)), nil); err != nil {
						t.Fatal(err)
					}
				} else {
					c.Claim("a", []string{tc.earlier}, nil)
				}
				if err := c.UpdateResources(Server{Name: "b"}, raws(fmt.Sprintf(`{"uri":%q,"name":"r"}`, tc.later)), nil); err != nil {
					t.Fatal(err)
				}
				s := c.Snapshot()
				r, tm := s.Route(tc.later)
				isShadowed := slices.ContainsFunc(s.Shadowed, func(sh Shadowed) bool { return sh.URI == tc.later && sh.Owner == "a" && sh.Server == "b" })
				if !shadowed {
					if r == nil || r.Server != "b" || isShadowed {
						t.Errorf("b's own resource routed to %v, shadowed %v", r, s.Shadowed)
					}
					return
				}
				if r != nil || tm != nil {
					t.Errorf("routed to %v %v, not to no one", r, tm)
				}
				if o := s.Owner(tc.later); o != "a" {
					t.Errorf("the owner is %q, want a", o)
				}
				if !isShadowed {
					t.Errorf("not among the shadowed: %v", s.Shadowed)
				}
				// A later server's template matching the spelling routes
				// nothing either.
				if err := c.UpdateResources(Server{Name: "c"}, nil, raws(`{"uriTemplate":"file:///{+path}","name":"all"}`)); err != nil {
					t.Fatal(err)
				}
				if !strings.HasPrefix(tc.earlier, readme) {
					return
				}
				s = c.Snapshot()
				for _, u := range []string{readme, readme + "?v=2"} {
					if r, tm := s.Route(u); tm != nil || r != nil && r.Server != "a" {
						t.Errorf("%s, a spelling of a's URI, routed to %v %v", u, r, tm)
					}
					if o := s.Owner(u); o != "a" {
						t.Errorf("the owner of %s is %q, want a", u, o)
					}
				}
			})
		}
	}
}

// TestAliasesOwned: another spelling of a URI one server owns — with a
// query, a fragment or a trailing '/' — is never another server's, when a
// later server's template matches it: it routes nowhere, and its owner is
// the first server's, whether that server owns the URI exactly or by its
// template, and whether it offers it now or not.
func TestAliasesOwned(t *testing.T) {
	for _, a := range []struct {
		name             string
		uris, templates  []string
		offered, claimed bool
	}{
		{"exact", []string{"file:///shared/readme.md"}, nil, true, false},
		{"by template", nil, []string{"file:///shared/{name}"}, true, false},
		{"exact, down", []string{"file:///shared/readme.md"}, nil, false, true},
		{"by template, down", nil, []string{"file:///shared/{name}"}, false, true},
	} {
		t.Run(a.name, func(t *testing.T) {
			c := New(AdmitAll{}, admit.Options{})
			c.SetOrder([]string{"a", "b"})
			if a.offered {
				var rs, ts = raws(), raws()
				for _, u := range a.uris {
					rs = append(rs, raws(`{"uri":"`+u+`","name":"r"}`)...)
				}
				for _, u := range a.templates {
					ts = append(ts, raws(`{"uriTemplate":"`+u+`","name":"t"}`)...)
				}
				if err := c.UpdateResources(Server{Name: "a"}, rs, ts); err != nil {
					t.Fatal(err)
				}
			}
			if a.claimed {
				c.Claim("a", a.uris, a.templates)
			}
			if err := c.UpdateResources(Server{Name: "b"}, nil, raws(`{"uriTemplate":"file:///{+path}","name":"all"}`)); err != nil {
				t.Fatal(err)
			}
			s := c.Snapshot()
			for _, uri := range []string{"file:///shared/readme.md?", "file:///shared/readme.md?v=1", "file:///shared/readme.md#top", "file:///shared/readme.md/"} {
				if r, tm := s.Route(uri); r != nil || tm != nil {
					t.Errorf("%s routed to %v %v, not to no one", uri, r, tm)
				}
				if o := s.Owner(uri); o != "a" {
					t.Errorf("the owner of %s is %q, want a", uri, o)
				}
			}
			if _, tm := s.Route("file:///other.md?v=1"); tm == nil || tm.Server != "b" {
				t.Errorf("b's own URI with a query routed to %v", tm)
			}
		})
	}
}

// TestHeldNotRoutedByItsOwnTemplate: a URI a server holds (claimed, not
// offered now: down, or waiting for review) is not read through that
// server's own template either, in its spelling or another; the rest of
// what the template matches is.
func TestHeldNotRoutedByItsOwnTemplate(t *testing.T) {
	c := New(resourcesHeld{}, admit.Options{})
	c.SetOrder([]string{"docs"})
	if err := c.UpdateResources(Server{Name: "docs"}, raws(`{"uri":"file:///docs/secret.md","name":"secret"}`),
		raws(`{"uriTemplate":"file:///docs/{+path}","name":"docs"}`)); err != nil {
		t.Fatal(err)
	}
	s := c.Snapshot()
	for _, uri := range []string{"file:///docs/secret.md", "file:///docs/secret.md?v=1", "file:///docs/x/../secret.md"} {
		if r, tm := s.Route(uri); r != nil || tm != nil {
			t.Errorf("%s, held, routed to %v %v", uri, r, tm)
		}
		if o := s.Owner(uri); o != "docs" {
			t.Errorf("the owner of %s is %q", uri, o)
		}
	}
	if _, tm := s.Route("file:///docs/public.md"); tm == nil || tm.Server != "docs" {
		t.Errorf("what the template serves besides routed to %v", tm)
	}
}

// resourcesHeld holds every resource for review and admits every
// template.
type resourcesHeld struct{}

func (resourcesHeld) Judge(srv Server, kind admit.Kind, entries []Entry) ([]admit.Record, error) {
	recs, err := AdmitAll{}.Judge(srv, kind, entries)
	for i := range recs {
		if kind == admit.KindResource {
			recs[i].Status = admit.Pending
		}
	}
	return recs, err
}
