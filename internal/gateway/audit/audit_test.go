package audit

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestAppendJSONAsMarshal: an event is written as encoding/json writes it
// from the struct tags (less its HTML escaping of <, > and &, which a log
// does not need): the same members in the same order, the same values,
// byte for byte wherever the strings are valid UTF-8, and never a raw line
// separator.
func TestAppendJSONAsMarshal(t *testing.T) {
	ms, zero := 0.412, 0.0
	at := time.Date(2026, 12, 3, 15, 4, 5, 123456789, time.UTC)
	events := []Event{
		{Time: at},
		{Time: at, RequestID: "01JD3Q", Subject: "alice@example.com", Issuer: "https://issuer.example", Roles: []string{"support", "viewer"},
			Method: "tools/call", Tool: "refund.lookup", Rule: "support-read", Outcome: Allow, DownstreamMS: &ms},
		{Time: at, Method: "tools/call", Outcome: Deny, Reason: "no_rule", Code: -32001, Headers: []Header{{"Region", "plain"}, {"Name", "base64"}}},
		{Time: at, Kind: KindAdmission, Server: "s", Digest: "ab12", Status: "quarantined", Category: "changed", Mode: "pin", Resource: "docs://a"},
		{Time: at, Method: "prompts/get", Prompt: "p.q", Arguments: []string{"a", "b"}, Level: "debug", DownstreamMS: &zero},
		{Time: at.In(time.FixedZone("x", 3600)), Roles: []string{}, Arguments: []string{""}, Headers: []Header{}},
		{Time: at, Subject: "<script>&\u2028\u2029\"\\\x00\x1f\t\n\b\f", Issuer: "é ſ 😀", Tool: "bad\xffutf8\xc3"},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		events = append(events, randomEvent(r, at))
	}
	for i, e := range events {
		got := e.appendJSON(nil)
		want := marshal(t, e)
		if !json.Valid(got) {
			t.Fatalf("event %d: not JSON: %s", i, got)
		}
		if bytes.ContainsAny(got, "\n\r\u2028\u2029") {
			t.Errorf("event %d: a line separator is written raw: %q", i, got)
		}
		if !slices.Equal(keys(t, got), keys(t, want)) {
			t.Errorf("event %d: members %v, encoding/json writes %v", i, keys(t, got), keys(t, want))
		}
		var g, w any
		_ = json.Unmarshal(got, &g)
		_ = json.Unmarshal(want, &w)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("event %d:\n got %s\nwant %s", i, got, want)
		}
		if plain(e) && !bytes.Equal(got, want) {
			t.Errorf("event %d, bytes:\n got %s\nwant %s", i, got, want)
		}
	}
}

// TestAppendJSONEveryField: an event with every field set writes every
// member encoding/json writes, so a field added to Event without a line
// in appendJSON fails here.
func TestAppendJSONEveryField(t *testing.T) {
	var e Event
	v := reflect.ValueOf(&e).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("x")
		case reflect.Int:
			f.SetInt(7)
		case reflect.Slice:
			s := reflect.MakeSlice(f.Type(), 1, 1)
			if s.Index(0).Kind() == reflect.String {
				s.Index(0).SetString("x")
			} else {
				s.Index(0).Field(0).SetString("x")
			}
			f.Set(s)
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
			f.Elem().SetFloat(1.5)
		case reflect.Struct:
			f.Set(reflect.ValueOf(time.Now()))
		default:
			t.Fatalf("field %s of kind %s: teach this test and appendJSON", v.Type().Field(i).Name, f.Kind())
		}
	}
	if got, want := keys(t, e.appendJSON(nil)), keys(t, marshal(t, e)); !slices.Equal(got, want) || len(want) != v.NumField() {
		t.Errorf("members %v, encoding/json writes %v (%d fields)", got, want, v.NumField())
	}
}

func marshal(t *testing.T, e Event) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// keys are the top-level member names of an object, in order.
func keys(t *testing.T, b []byte) []string {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	var out []string
	depth := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		switch tok := tok.(type) {
		case json.Delim:
			if tok == '{' || tok == '[' {
				depth++
			} else {
				depth--
			}
		case string:
			// At depth 1 a string is a name: its value is skipped whole
			// right after it.
			if depth == 1 {
				out = append(out, tok)
				if err := skipValue(d); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

func skipValue(d *json.Decoder) error {
	var v json.RawMessage
	return d.Decode(&v)
}

// plain reports whether every string of e is valid UTF-8: encoding/json
// writes an invalid byte as the escape \ufffd, appendJSON as the
// character itself.
func plain(e Event) bool {
	all := []string{e.Kind, e.RequestID, e.Subject, e.Issuer, e.Method, e.Tool, e.Prompt, e.Resource, e.Level, e.Rule,
		e.Outcome, e.Reason, e.Server, e.Digest, e.Status, e.Category, e.Mode}
	all = append(all, e.Roles...)
	all = append(all, e.Arguments...)
	for _, h := range e.Headers {
		all = append(all, h.Name, h.Encoding)
	}
	for _, s := range all {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

func randomEvent(r *rand.Rand, at time.Time) Event {
	str := func() string {
		if r.IntN(3) == 0 {
			return ""
		}
		const alphabet = "abcXYZ09 ./:-_<>&\"\\\t\x01é😀\u2028"
		runes := []rune(alphabet)
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteRune(runes[r.IntN(len(runes))])
		}
		if r.IntN(20) == 0 {
			b.WriteByte(0xff)
		}
		return b.String()
	}
	strs := func() []string {
		var out []string
		for range r.IntN(3) {
			out = append(out, str())
		}
		return out
	}
	e := Event{Time: at.Add(time.Duration(r.Int64N(1e15))), Kind: str(), RequestID: str(), Subject: str(), Issuer: str(), Roles: strs(),
		Method: str(), Tool: str(), Prompt: str(), Resource: str(), Arguments: strs(), Level: str(), Rule: str(), Outcome: str(),
		Reason: str(), Code: r.IntN(3) * (r.IntN(70000) - 35000), Server: str(), Digest: str(), Status: str(), Category: str(), Mode: str()}
	if r.IntN(2) == 0 {
		ms := float64(r.IntN(5_000_000)) / 1000
		if r.IntN(10) == 0 {
			ms = r.Float64() * 1e-7
		}
		e.DownstreamMS = &ms
	}
	for range r.IntN(3) {
		e.Headers = append(e.Headers, Header{Name: str(), Encoding: str()})
	}
	return e
}

// BenchmarkRecord encodes and writes one forwarded call's event, as every
// tools/call does before it is answered.
func BenchmarkRecord(b *testing.B) {
	s := New(io.Discard)
	ms := 0.412
	e := Event{RequestID: "01JD3Q4X5Y6Z7A8B", Subject: "alice@example.com", Issuer: "https://issuer.example",
		Roles: []string{"support"}, Method: "tools/call", Tool: "refund.lookup", Rule: "support-read", Outcome: Allow, DownstreamMS: &ms}
	b.ReportAllocs()
	for b.Loop() {
		s.Record(e)
	}
}
