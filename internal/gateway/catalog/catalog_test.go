package catalog

import (
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

func raws(ss ...string) []jsontext.Value {
	out := make([]jsontext.Value, len(ss))
	for i, s := range ss {
		out[i] = jsontext.Value(s)
	}
	return out
}

func desc(name string) string {
	return `{"name":"` + name + `","description":"d","inputSchema":{"type":"object","additionalProperties":false}}`
}

func names(s *Snapshot) string {
	var out []string
	for _, t := range s.Tools {
		out = append(out, t.Qualified)
	}
	return strings.Join(out, ",")
}

// TestQualifiedNamesAndCollisions: two servers offering the same name get
// two qualified names; the merge is sorted whatever order servers arrive
// in; names with dots stay the downstream's own.
func TestQualifiedNamesAndCollisions(t *testing.T) {
	for _, order := range [][]string{{"b", "a"}, {"a", "b"}} {
		c := New(AdmitAll{})
		for _, srv := range order {
			c.Update(srv, raws(desc("search"), desc("x.y")))
		}
		s := c.Snapshot()
		if got := names(s); got != "a.search,a.x.y,b.search,b.x.y" {
			t.Fatalf("order %v: %s", order, got)
		}
		tl, ok := s.Lookup("a.x.y")
		if !ok || tl.Server != "a" || tl.Name != "x.y" {
			t.Fatalf("a.x.y = %+v", tl)
		}
	}
}

// TestRejectedOneByOne: each bad descriptor is rejected on its own, with
// a stable category, and the valid ones beside it are admitted.
func TestRejectedOneByOne(t *testing.T) {
	c := New(AdmitAll{})
	c.Update("srv", raws(
		desc("good"),
		`[1]`,
		`{"inputSchema":{"type":"object"}}`,
		`{"name":"bad name!","inputSchema":{"type":"object"}}`,
		`{"name":"`+strings.Repeat("n", 125)+`","inputSchema":{"type":"object"}}`,
		desc("twice"), desc("twice"),
		`{"name":"noschema"}`,
		`{"name":"nullschema","inputSchema":null}`,
		`{"name":"arrayschema","inputSchema":[]}`,
		`{"name":"stringschema","inputSchema":"object"}`,
		`{"name":"emptyschema","inputSchema":{}}`,
		`{"name":"untyped","inputSchema":{"properties":{}}}`,
		`{"name":"arraytype","inputSchema":{"type":"array"}}`,
		`{"name":"remote","inputSchema":{"type":"object","$ref":"https://evil.example/s.json"}}`,
		`{"name":"alsogood","inputSchema":{"type":"object"}}`,
	))
	s := c.Snapshot()
	if got := names(s); got != "srv.alsogood,srv.good" {
		t.Errorf("admitted %s", got)
	}
	want := map[int]string{
		1: RejectNotObject, 2: RejectName, 3: RejectName, 4: RejectName, 5: RejectDuplicateName, 6: RejectDuplicateName,
		7: RejectInputSchema, 8: RejectInputSchema, 9: RejectInputSchema, 10: RejectInputSchema, 11: RejectInputSchema,
		12: RejectInputSchema, 13: RejectInputSchema, 14: RejectInputSchema,
	}
	if len(s.Rejected) != len(want) {
		t.Fatalf("%d rejected: %+v", len(s.Rejected), s.Rejected)
	}
	for _, r := range s.Rejected {
		if want[r.Index] != r.Category {
			t.Errorf("descriptor %d: %s (%s), want %s", r.Index, r.Category, r.Detail, want[r.Index])
		}
	}
}

// TestRemoveAndRevision: a server whose list failed exposes nothing; every
// change raises the revision and notifies subscribers without blocking.
func TestRemoveAndRevision(t *testing.T) {
	c := New(AdmitAll{})
	ch := c.Changed()
	c.Update("a", raws(desc("t")))
	c.Update("b", raws(desc("t")))
	r := c.Snapshot().Revision
	c.Remove("a")
	s := c.Snapshot()
	if names(s) != "b.t" || s.Revision != r+1 {
		t.Fatalf("after Remove: %s rev %d", names(s), s.Revision)
	}
	<-ch // one pending value, however many changes
	select {
	case <-ch:
		t.Fatal("more than one pending notification")
	default:
	}
	c.Remove("nosuch")
	if c.Snapshot().Revision != s.Revision {
		t.Error("removing an unknown server changed the revision")
	}
	c.Unsubscribe(ch)
}

type refuseAll struct{}

func (refuseAll) Admit(string, *Tool) Verdict {
	return Verdict{Category: "held", Detail: "waits for review"}
}

func TestAdmitterSeam(t *testing.T) {
	c := New(refuseAll{})
	c.Update("a", raws(desc("t")))
	s := c.Snapshot()
	if len(s.Tools) != 0 || len(s.Rejected) != 1 || s.Rejected[0].Category != "held" {
		t.Fatalf("%+v", s)
	}
}

func TestRawKept(t *testing.T) {
	c := New(AdmitAll{})
	in := `{"name":"t","inputSchema":{"type":"object"},"x-unknown":{"kept":true},"annotations":{"readOnlyHint":true}}`
	c.Update("a", raws(in))
	tl, _ := c.Snapshot().Lookup("a.t")
	if string(tl.Raw) != in || string(tl.Annotations) != `{"readOnlyHint":true}` || tl.Input == nil {
		t.Fatalf("%+v", tl)
	}
}
