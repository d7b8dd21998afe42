package catalog

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/gateway/admit"
	"github.com/mcp-bastion/bastion/internal/tool"
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
		c := New(AdmitAll{}, admit.Options{})
		for _, srv := range order {
			c.Update(Server{Name: srv}, raws(desc("search"), desc("x.y")))
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
	c := New(AdmitAll{}, admit.Options{})
	c.Update(Server{Name: "srv"}, raws(
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
		1: admit.RejectNotObject, 2: admit.RejectName, 3: admit.RejectName, 4: admit.RejectName, 5: admit.RejectDuplicateName, 6: admit.RejectDuplicateName,
		7: admit.RejectInputSchema, 8: admit.RejectInputSchema, 9: admit.RejectInputSchema, 10: admit.RejectInputSchema, 11: admit.RejectInputSchema,
		12: admit.RejectInputSchema, 13: admit.RejectInputSchema, 14: admit.RejectInputSchema,
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
	c := New(AdmitAll{}, admit.Options{})
	ch := c.Changed(admit.KindTool)
	c.Update(Server{Name: "a"}, raws(desc("t")))
	c.Update(Server{Name: "b"}, raws(desc("t")))
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

type holdAll struct{}

func (holdAll) Judge(_ Server, kind admit.Kind, entries []Entry) ([]admit.Record, error) {
	out := make([]admit.Record, len(entries))
	for i, e := range entries {
		out[i] = admit.Record{Kind: kind, Qualified: e.Qualified, Status: admit.Pending, Reason: admit.ReasonFirstUse}
	}
	return out, nil
}

type failJudge struct{}

func (failJudge) Judge(Server, admit.Kind, []Entry) ([]admit.Record, error) {
	return nil, errors.New("ledger down")
}

// TestJudgeHolds: a tool the judge does not admit is held, not offered;
// a judge that fails offers nothing of the server.
func TestJudgeHolds(t *testing.T) {
	c := New(holdAll{}, admit.Options{})
	if err := c.Update(Server{Name: "a"}, raws(desc("t"))); err != nil {
		t.Fatal(err)
	}
	s := c.Snapshot()
	if len(s.Tools) != 0 || len(s.Held) != 1 || s.Held[0].Status != admit.Pending {
		t.Fatalf("%+v", s)
	}
	c = New(AdmitAll{}, admit.Options{})
	_ = c.Update(Server{Name: "a"}, raws(desc("t")))
	c.judge = failJudge{}
	if err := c.Update(Server{Name: "a"}, raws(desc("t"))); err == nil || len(c.Snapshot().Tools) != 0 {
		t.Fatalf("a failing judge: %v, %s", err, names(c.Snapshot()))
	}
}

// TestSchemaRejections: the admission checks beyond structure reject one
// descriptor each and admit the rest.
func TestSchemaRejections(t *testing.T) {
	c := New(AdmitAll{}, admit.Options{})
	_ = c.Update(Server{Name: "s"}, raws(
		desc("good"),
		`{"name":"dup","name":"dup","inputSchema":{"type":"object"}}`,
		`{"name":"nested","inputSchema":{"type":"object","properties":{"o":{"type":"object","properties":{"r":{"type":"string","x-mcp-header":"R"}}}}}}`,
		`{"name":"secret","inputSchema":{"type":"object","properties":{"api_key":{"type":"string","x-mcp-header":"K"}}}}`,
		`{"name":"out","inputSchema":{"type":"object"},"outputSchema":"object"}`,
		`{"name":"outref","inputSchema":{"type":"object"},"outputSchema":{"$ref":"file:///etc/passwd"}}`,
		`{"name":"outhdr","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"r":{"type":"string","x-mcp-header":"R"}}}}`,
		`{"name":"withoutput","inputSchema":{"type":"object"},"outputSchema":{"type":"array"}}`,
		`{"name":"deepdup","inputSchema":{"type":"object","properties":{"a":{"type":"string"},"a":{"type":"integer"}}}}`,
		`{"name":"hugenumber","inputSchema":{"type":"object","properties":{"a":{"type":"integer","maximum":1e400}}}}`,
	))
	s := c.Snapshot()
	if got := names(s); got != "s.good,s.withoutput" {
		t.Errorf("admitted %s", got)
	}
	want := map[int]string{1: admit.RejectMalformed, 2: admit.RejectHeaderMirroring, 3: admit.RejectSensitiveHeader,
		4: admit.RejectOutputSchema, 5: admit.RejectOutputSchema, 6: admit.RejectHeaderMirroring, 8: admit.RejectMalformed,
		9: admit.RejectMalformed}
	if len(s.Rejected) != len(want) {
		t.Fatalf("%d rejected: %+v", len(s.Rejected), s.Rejected)
	}
	for _, r := range s.Rejected {
		if want[r.Index] != r.Category || len(r.Raw) == 0 {
			t.Errorf("descriptor %d: %s (%s), want %s", r.Index, r.Category, r.Detail, want[r.Index])
		}
	}
	if tl, _ := s.Lookup("s.withoutput"); tl.Output == nil || len(tl.Digest) != 64 {
		t.Errorf("withoutput: %+v", tl)
	}
}

// TestSameNameTwoServers: two servers that both expose search become two
// qualified names and two digests.
func TestSameNameTwoServers(t *testing.T) {
	c := New(AdmitAll{}, admit.Options{})
	_ = c.Update(Server{Name: "a"}, raws(`{"name":"search","description":"a","inputSchema":{"type":"object"}}`))
	_ = c.Update(Server{Name: "b"}, raws(`{"name":"search","description":"b","inputSchema":{"type":"object"}}`))
	a, _ := c.Snapshot().Lookup("a.search")
	b, _ := c.Snapshot().Lookup("b.search")
	if a == nil || b == nil || a.Digest == b.Digest {
		t.Fatalf("a %+v b %+v", a, b)
	}
}

func TestRawKept(t *testing.T) {
	c := New(AdmitAll{}, admit.Options{})
	in := `{"name":"t","inputSchema":{"type":"object"},"x-unknown":{"kept":true},"annotations":{"readOnlyHint":true}}`
	c.Update(Server{Name: "a"}, raws(in))
	tl, _ := c.Snapshot().Lookup("a.t")
	if string(tl.Raw) != in || string(tl.Annotations) != `{"readOnlyHint":true}` || tl.Input == nil {
		t.Fatalf("%+v", tl)
	}
}

// TestCanonicalIsWhatIsChecked: a number spelled two ways with one
// canonical form (1e-400 underflows to 0) gets one digest, and then one
// meaning: the schema compiled and listed is the canonical one, so the
// validator, the reviewer and the callers read what was pinned.
func TestCanonicalIsWhatIsChecked(t *testing.T) {
	c := New(AdmitAll{}, admit.Options{})
	_ = c.Update(Server{Name: "a"}, raws(`{"name":"neg","inputSchema":{"type":"object","properties":{"n":{"type":"integer","exclusiveMaximum":1e-400}},"required":["n"]}}`))
	tl, ok := c.Snapshot().Lookup("a.neg")
	if !ok {
		t.Fatal(c.Snapshot().Rejected)
	}
	if !strings.Contains(string(tl.InputSchema), `"exclusiveMaximum":0`) {
		t.Errorf("listed schema %s", tl.InputSchema)
	}
	if err := tool.ValidateValue(tl.Input, jsontext.Value(`{"n":0}`)); err == nil {
		t.Error("0 passes exclusiveMaximum 0")
	}
}

// TestDuplicateNames: names of one server that rules cannot tell apart
// — equal, or equal but for case, as policy matches them — are given to
// none of their descriptors, not even when one copy is rejected for its
// own fault; the detail says when they differ only in case. Names that
// differ in more than case are two names.
func TestDuplicateNames(t *testing.T) {
	// A copy rejected for its own fault: a header on a nested property.
	bad := func(name string) string {
		return `{"name":"` + name + `","inputSchema":{"type":"object","properties":{"o":{"type":"object","properties":{"r":{"type":"string","x-mcp-header":"R"}}}}}}`
	}
	for _, tc := range []struct {
		name        string
		descriptors []string
		admitted    string
		duplicates  []int // the indexes rejected as duplicate_name
		cased       bool  // whose detail says they differ only in case
	}{
		{"exact", []string{desc("t"), desc("t"), desc("u")}, "s.u", []int{0, 1}, false},
		{"case", []string{desc("read_report"), desc("READ_REPORT")}, "", []int{0, 1}, true},
		{"case after", []string{desc("READ_REPORT"), desc("u"), desc("read_report")}, "s.u", []int{0, 2}, true},
		{"three spellings", []string{desc("Read_Report"), desc("read_report"), desc("READ_REPORT")}, "", []int{0, 1, 2}, true},
		{"exact and case", []string{desc("t"), desc("t"), desc("T")}, "", []int{0, 1, 2}, true},
		{"rejected copy", []string{desc("t"), bad("t")}, "", []int{0}, false},
		{"rejected copy in another case", []string{desc("t"), bad("T")}, "", []int{0}, true},
		{"more than case", []string{desc("read_report"), desc("read-report"), desc("readreport")}, "s.read-report,s.read_report,s.readreport", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(AdmitAll{}, admit.Options{})
			if err := c.Update(Server{Name: "s"}, raws(tc.descriptors...)); err != nil {
				t.Fatal(err)
			}
			s := c.Snapshot()
			if got := names(s); got != tc.admitted {
				t.Errorf("admitted %q, want %q", got, tc.admitted)
			}
			checkDuplicates(t, s.Rejected, tc.duplicates, tc.cased)
		})
	}
}

// checkDuplicates checks that exactly the descriptors at indexes were
// rejected as duplicate_name, each with a detail that says, as cased does,
// whether the names differ only in case.
func checkDuplicates(t *testing.T, rejected []Rejected, indexes []int, cased bool) {
	t.Helper()
	var dups []int
	for _, r := range rejected {
		if r.Category != admit.RejectDuplicateName {
			continue
		}
		dups = append(dups, r.Index)
		if got := strings.Contains(r.Detail, "only in case"); got != cased {
			t.Errorf("descriptor %d: detail %q, want differing only in case %v", r.Index, r.Detail, cased)
		}
	}
	if !slices.Equal(dups, indexes) {
		t.Errorf("duplicates %v, want %v (rejected %+v)", dups, indexes, rejected)
	}
}

// TestBareNames: under names: bare a tool and a prompt are listed and
// looked up by the downstream's own name, and only by it; the qualified
// name stays what the judge (the ledger, the rules) sees.
func TestBareNames(t *testing.T) {
	c := New(AdmitAll{}, admit.Options{})
	c.SetBare(true)
	if err := c.Update(Server{Name: "s"}, raws(desc("t"))); err != nil {
		t.Fatal(err)
	}
	if err := c.UpdatePrompts(Server{Name: "s"}, raws(`{"name":"p"}`)); err != nil {
		t.Fatal(err)
	}
	snap := c.Snapshot()
	tl, ok := snap.Lookup("t")
	if !ok || tl.Public != "t" || tl.Qualified != "s.t" {
		t.Fatalf("tool %+v", tl)
	}
	if _, ok := snap.Lookup("s.t"); ok {
		t.Error("the qualified name is a public name too")
	}
	if p, ok := snap.LookupPrompt("p"); !ok || p.Qualified != "s.p" {
		t.Errorf("prompt %+v", p)
	}
}
