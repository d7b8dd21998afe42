package catalog

import (
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
