package admit

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/gowebpki/jcs"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func cand(digest string, id Identity, findings ...Finding) Candidate {
	return Candidate{Digest: digest, Descriptor: []byte(`{}`), Identity: id, Findings: findings, Seen: t0}
}

// TestObserve is the lifecycle table: first use in both modes, rug pulls,
// identity changes, a revert to what was approved, and rejection.
func TestObserve(t *testing.T) {
	v1 := Identity{Publisher: "io.github.acme/x", Name: "x", Version: "1"}
	v2 := Identity{Publisher: "io.github.acme/x", Name: "x", Version: "2"}
	hit := Finding{Category: ScanConcealment, Pointer: "/description"}
	approved := Record{Qualified: "s.t", Server: "s", Name: "t", Status: Admitted, Digest: "d1", Identity: &v1,
		Approval: &Approval{By: "alice", At: t0, Mode: "review"}}
	quarantined := approved
	quarantined.Status, quarantined.Reason, quarantined.Pending = Quarantined, ReasonDigestChanged, &Candidate{Digest: "d2", Identity: v1}
	rejected := Record{Qualified: "s.t", Status: Rejected, Reason: ReasonReviewer, Pending: &Candidate{Digest: "d9", Identity: v1},
		RejectedDigests: []string{"d9"}}
	flipped := rejected
	flipped.Status, flipped.Reason, flipped.Pending = Pending, ReasonFirstUse, &Candidate{Digest: "d10", Identity: v1}
	for _, tc := range []struct {
		name   string
		prev   *Record
		c      Candidate
		mode   FirstUse
		status Status
		reason string
	}{
		{"first use, review", nil, cand("d1", v1), FirstUseReview, Pending, ReasonFirstUse},
		{"first use, pin", nil, cand("d1", v1), FirstUsePin, Admitted, ""},
		{"first use, pin, with findings", nil, cand("d1", v1, hit), FirstUsePin, Pending, ReasonScannerFindings},
		{"unchanged", &approved, cand("d1", v1), FirstUseReview, Admitted, ""},
		{"unchanged, findings do not matter once approved", &approved, cand("d1", v1, hit), FirstUseReview, Admitted, ""},
		{"digest changed", &approved, cand("d2", v1), FirstUsePin, Quarantined, ReasonDigestChanged},
		{"identity changed, digest unchanged", &approved, cand("d1", v2), FirstUsePin, Quarantined, ReasonIdentityChanged},
		{"publisher changed", &approved, cand("d1", Identity{Publisher: "io.github.evil/x", Name: "x", Version: "1"}), FirstUsePin, Quarantined, ReasonIdentityChanged},
		{"reverted to the approved digest", &quarantined, cand("d1", v1), FirstUseReview, Admitted, ""},
		{"still changed", &quarantined, cand("d3", v1), FirstUseReview, Quarantined, ReasonDigestChanged},
		{"rejected digest stays rejected", &rejected, cand("d9", v1), FirstUsePin, Rejected, ReasonReviewer},
		{"rejected digest stays rejected behind a new identity", &rejected, cand("d9", v2), FirstUsePin, Rejected, ReasonReviewer},
		{"rejected digest stays rejected after a flip to another", &flipped, cand("d9", v1), FirstUseReview, Rejected, ReasonReviewer},
		{"a new digest after a rejection is judged anew", &rejected, cand("d10", v1), FirstUsePin, Admitted, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Observe(tc.prev, KindTool, "s.t", "s", "t", tc.c, tc.mode, t0)
			if r.Status != tc.status || r.Reason != tc.reason {
				t.Fatalf("%s (%s), want %s (%s)", r.Status, r.Reason, tc.status, tc.reason)
			}
			if r.Status == Admitted && r.Digest != tc.c.Digest {
				t.Errorf("admitted with digest %q, serving %q", r.Digest, tc.c.Digest)
			}
			if r.Status != Admitted && (r.Pending == nil || r.Pending.Digest != tc.c.Digest) {
				t.Errorf("held without the candidate: %+v", r.Pending)
			}
		})
	}
}

// TestReview: approval names the digest that was read; rejection holds.
func TestReview(t *testing.T) {
	id := Identity{Name: "x", Version: "1"}
	r := Observe(nil, KindTool, "s.t", "s", "t", cand("d1", id), FirstUseReview, t0)
	if _, err := Approve(r, "d0", "alice", t0); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("approve of another digest: %v", err)
	}
	a, err := Approve(r, "d1", "alice", t0)
	if err != nil || a.Status != Admitted || a.Digest != "d1" || a.Approval.By != "alice" || a.Pending != nil {
		t.Fatalf("approve: %v %+v", err, a)
	}
	if _, err := Approve(a, "d1", "alice", t0); !errors.Is(err, ErrNothingPending) {
		t.Errorf("approving an admitted tool: %v", err)
	}
	q := Observe(&a, KindTool, "s.t", "s", "t", cand("d2", id), FirstUseReview, t0)
	rj, err := Reject(q, t0)
	if err != nil || rj.Status != Rejected {
		t.Fatalf("reject: %v %+v", err, rj)
	}
	// What was approved stays pinned under a rejection: the server
	// going back to it is admitted again.
	if back := Observe(&rj, KindTool, "s.t", "s", "t", cand("d1", id), FirstUseReview, t0); back.Status != Admitted {
		t.Errorf("back to the approved digest: %s", back.Status)
	}
	gone := Remove(a, t0)
	if gone.Status != Removed {
		t.Fatal(gone.Status)
	}
	if again := Observe(&gone, KindTool, "s.t", "s", "t", cand("d1", id), FirstUseReview, t0); again.Status != Admitted {
		t.Errorf("a removed tool back unchanged: %s", again.Status)
	}
}

// TestDigestWholeDescriptor: the digest covers every member, unknown ones
// too, and not the bytes' layout.
func TestDigestWholeDescriptor(t *testing.T) {
	base, _, err := Digest([]byte(`{"name":"t","description":"d","inputSchema":{"type":"object"}}`))
	if err != nil {
		t.Fatal(err)
	}
	same, _, _ := Digest([]byte(` { "inputSchema" : {"type":"object"}, "description":"d", "name":"t" }`))
	if same != base {
		t.Error("member order or whitespace changed the digest")
	}
	for _, changed := range []string{
		`{"name":"t","description":"d","inputSchema":{"type":"object","properties":{"x":{"type":"string"}}}}`,
		`{"name":"t","description":"d","inputSchema":{"type":"object"},"x-unknown":1}`,
		`{"name":"t","description":"d","inputSchema":{"type":"object"},"_meta":{"a":1}}`,
		`{"name":"t","description":"d","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`,
	} {
		if d, _, _ := Digest([]byte(changed)); d == base {
			t.Errorf("%s: same digest", changed)
		}
	}
}

// TestDigestMatchesReferenceJCS: the canonical form is byte for byte the
// one of the RFC 8785 reference implementation, on the cases RFC 8785
// calls out (number forms, escapes, non-BMP characters, member order by
// UTF-16 code units) and on nested descriptors.
func TestDigestMatchesReferenceJCS(t *testing.T) {
	for _, in := range []string{
		`{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001,-0,1e21,1e-7,9007199254740993,123456789012345680000]}`,
		`{"string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}`,
		`{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
		`{"name":"t","inputSchema":{"type":"object","properties":{"b":{"type":"string","enum":["y","x"]},"a":{"default":1.0e+0}}},"_meta":{"z":{},"a":[]}}`,
		` { "a" : [ 1 , { "c" : "<>&\u2028" , "b" : -1.5E-10 } ] } `,
	} {
		ref, err := jcs.Transform([]byte(in))
		if err != nil {
			t.Fatalf("%s: reference: %v", in, err)
		}
		_, got, err := Digest(jsontext.Value(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if string(got) != string(ref) {
			t.Errorf("%s:\n got %s\nwant %s", in, got, ref)
		}
	}
	for _, in := range []string{`{"n":1e400}`, `{"n":[-1e999]}`} {
		if _, _, err := Digest(jsontext.Value(in)); err == nil {
			t.Errorf("%s: a number beyond float64 was given a digest", in)
		}
	}
}

// TestKeys pins the ledger keys of decision 17: a tool's is its qualified
// name (the keys ledgers already hold), a prompt's another that no tool
// name can take, both under the server's prefix; and the reviewer's
// reference of each leads back to its key.
func TestKeys(t *testing.T) {
	cases := []struct {
		kind      Kind
		qualified string
		key, ref  string
	}{
		{KindTool, "docs.search", "docs.search", "docs.search"},
		{KindTool, "docs.a.b", "docs.a.b", "docs.a.b"},
		{KindPrompt, "docs.search", "docs.prompt:search", "prompt:docs.search"},
		{KindPrompt, "docs.a.b", "docs.prompt:a.b", "prompt:docs.a.b"},
		{KindResource, "docs.file:///srv/a.md", "docs.resource:file:///srv/a.md", "resource:docs.file:///srv/a.md"},
		{KindTemplate, "docs.file:///srv/{name}", "docs.template:file:///srv/{name}", "template:docs.file:///srv/{name}"},
	}
	for _, tc := range cases {
		if got := Key(tc.kind, tc.qualified); got != tc.key {
			t.Errorf("Key(%q, %q) = %q, want %q", tc.kind, tc.qualified, got, tc.key)
		}
		if !strings.HasPrefix(tc.key, "docs.") {
			t.Errorf("%q is not under the server's prefix", tc.key)
		}
		r := Record{Kind: tc.kind, Qualified: tc.qualified}
		if r.Ref() != tc.ref || r.Key() != tc.key {
			t.Errorf("%+v: ref %q key %q", r, r.Ref(), r.Key())
		}
		if got := KeyOfRef(tc.ref); got != tc.key {
			t.Errorf("KeyOfRef(%q) = %q, want %q", tc.ref, got, tc.key)
		}
	}
	if Key(KindTool, "docs.search") == Key(KindPrompt, "docs.search") {
		t.Error("a tool and a prompt of one name share a key")
	}
}

// TestForget: the ledger forgets, past MaxRemoved of a kind, the oldest
// removed records no reviewer decided anything of — never an approval by
// review, a rejected digest, or a record still listed.
func TestForget(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := func(kind Kind, i int, mut func(*Record)) Record {
		r := Record{Kind: kind, Qualified: fmt.Sprintf("srv.t%05d", i), Server: "srv", Name: fmt.Sprintf("t%05d", i),
			Status: Removed, Updated: base.Add(time.Duration(i) * time.Second)}
		if mut != nil {
			mut(&r)
		}
		return r
	}
	keep := []Record{
		rec(KindTool, 0, func(r *Record) { r.Approval = &Approval{By: "alice", Mode: "review"} }),
		rec(KindTool, 1, func(r *Record) { r.RejectedDigests = []string{"d"} }),
		rec(KindTool, 2, func(r *Record) { r.Status = Admitted }),
		rec(KindTool, 3, func(r *Record) { r.Status = Pending }),
		// A first-use pin is what a changed descriptor is compared with:
		// forgetting it would undo a quarantine.
		rec(KindTool, 4, func(r *Record) { r.Approval = &Approval{By: "first-use", Mode: string(FirstUsePin)} }),
	}
	for _, r := range keep {
		if Forgettable(r) {
			t.Errorf("%+v is forgettable", r)
		}
	}
	recs := slices.Clone(keep)
	const extra = 7
	for i := range MaxRemoved + extra {
		recs = append(recs, rec(KindTool, 10+i, nil))
	}
	for i := range MaxRemoved { // another kind, within its bound
		recs = append(recs, rec(KindPrompt, 10+i, nil))
	}
	got := Forget(recs)
	if len(got) != extra {
		t.Fatalf("forgot %d records, want %d", len(got), extra)
	}
	for i, k := range got { // the oldest, tools only
		if want := fmt.Sprintf("srv.t%05d", 10+i); k != want {
			t.Errorf("forgot %s, want %s", k, want)
		}
	}
}

// TestCheckForget: a reviewer may forget a name its server no longer
// lists only when it holds nothing a reviewer did not approve: a record
// that was ever quarantined (for its digest or its server's identity)
// and not approved since, or with a digest refused, is kept — even when
// the server went back to what was pinned before it stopped listing it —
// so that a change cannot come back as a first use.
func TestCheckForget(t *testing.T) {
	id, other := Identity{Name: "x", Version: "1"}, Identity{Name: "y", Version: "1"}
	pin := func() Record { return Observe(nil, KindTool, "s.t", "s", "t", cand("d1", id), FirstUsePin, t0) }
	then := func(r Record, c Candidate) Record { return Observe(&r, KindTool, "s.t", "s", "t", c, FirstUsePin, t0) }
	reject := func(r Record) Record {
		t.Helper()
		r, err := Reject(r, t0)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	approve := func(r Record, digest string) Record {
		t.Helper()
		r, err := Approve(r, digest, "alice", t0)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, tc := range []struct {
		name string
		r    Record
		want error
	}{
		{"listed", pin(), ErrStillListed},
		{"quarantined, listed", then(pin(), cand("d2", id)), ErrStillListed},
		{"removed when admitted", Remove(pin(), t0), nil},
		{"removed when waiting for a first review", Remove(Observe(nil, KindTool, "s.t", "s", "t", cand("d1", id), FirstUseReview, t0), t0), nil},
		{"removed when quarantined for its digest", Remove(then(pin(), cand("d2", id)), t0), ErrHeld},
		{"removed when quarantined for its identity", Remove(then(pin(), cand("d1", other)), t0), ErrHeld},
		{"removed when rejected", Remove(reject(then(pin(), cand("d2", id))), t0), ErrHeld},
		{"removed when rejected at a first review", Remove(reject(Observe(nil, KindTool, "s.t", "s", "t", cand("d1", id), FirstUseReview, t0)), t0), ErrHeld},
		{"removed after a rejection, back to the pin", Remove(then(reject(then(pin(), cand("d2", id))), cand("d1", id)), t0), ErrHeld},
		{"removed after a quarantine, back to the pin", Remove(then(then(pin(), cand("d2", id)), cand("d1", id)), t0), ErrHeld},
		{"removed after an identity quarantine, back to the pin", Remove(then(then(pin(), cand("d1", other)), cand("d1", id)), t0), ErrHeld},
		{"quarantined as an earlier version recorded it, then removed", Remove(func() Record {
			r := then(pin(), cand("d2", id))
			r.HeldDigests = nil // written before HeldDigests were kept
			return r
		}(), t0), ErrHeld},
		{"a held digest pushed out by as many more, each approved since", Remove(func() Record {
			r := pin()
			for i := range maxRejected + 1 {
				r = then(r, cand(fmt.Sprintf("c%d", i), id))
			}
			for i := 1; i <= maxRejected; i++ { // c0 was dropped: the list empties
				r = approve(then(r, cand(fmt.Sprintf("c%d", i), id)), fmt.Sprintf("c%d", i))
			}
			if len(r.HeldDigests) != 0 {
				t.Fatalf("held %v", r.HeldDigests)
			}
			return r
		}(), t0), ErrHeld},
		{"removed after its change was approved", Remove(approve(then(pin(), cand("d2", id)), "d2"), t0), nil},
		{"removed after one change was approved and another held", Remove(then(approve(then(then(pin(), cand("d3", id)), cand("d2", id)), "d2"), cand("d2", id)), t0), ErrHeld},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := CheckForget(tc.r); !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
				t.Errorf("CheckForget = %v, want %v (record %s %q)", err, tc.want, tc.r.Status, tc.r.Reason)
			}
		})
	}
}
