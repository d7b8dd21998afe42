package admit

import (
	"bytes"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Change is one field that differs between a pinned descriptor and the
// one served now. Before or After is absent (nil) for a member added or
// removed.
type Change struct {
	Pointer string         `json:"pointer"`
	Before  jsontext.Value `json:"before,omitempty"`
	After   jsontext.Value `json:"after,omitempty"`
}

// maxDiffValue bounds a value shown in a change; a longer one is cut and
// marked, so that one huge schema does not bury the rest of the diff.
const maxDiffValue = 512

// Diff is the field-level difference of two JSON values, ordered by
// pointer: objects are compared member by member and arrays of equal
// length item by item (/0, /1, …), at any depth; anything else that
// differs is one change (an array that grew or shrank, a value of another
// kind). A changed value over 512 bytes compact is shown cut around where
// the two differ, so a change is never shown as two equal values. Both
// must be valid.
func Diff(before, after jsontext.Value) []Change {
	var out []Change
	diff(before, after, "", &out)
	return out
}

func diff(a, b jsontext.Value, pointer string, out *[]Change) {
	switch {
	case a.Kind() == '{' && b.Kind() == '{':
		var am, bm map[string]jsontext.Value
		if unmarshalRaw(a, &am) == nil && unmarshalRaw(b, &bm) == nil {
			keys := slices.Sorted(maps.Keys(am))
			for k := range bm {
				if _, ok := am[k]; !ok {
					keys = append(keys, k)
				}
			}
			slices.Sort(keys)
			for _, k := range keys {
				p := pointer + "/" + escape(k)
				av, aok := am[k]
				bv, bok := bm[k]
				switch {
				case !aok:
					*out = append(*out, Change{Pointer: p, After: shown(bv)})
				case !bok:
					*out = append(*out, Change{Pointer: p, Before: shown(av)})
				default:
					diff(av, bv, p, out)
				}
			}
			return
		}
	case a.Kind() == '[' && b.Kind() == '[':
		// Item by item, or one item changed in a long list (anyOf, enum)
		// would be the whole list, cut before the change.
		var as, bs []jsontext.Value
		if unmarshalRaw(a, &as) == nil && unmarshalRaw(b, &bs) == nil && len(as) == len(bs) {
			for i := range as {
				diff(as[i], bs[i], pointer+"/"+strconv.Itoa(i), out)
			}
			return
		}
	}
	if equalJSON(a, b) {
		return
	}
	ca, cb := compact(a), compact(b)
	if len(ca) <= maxDiffValue && len(cb) <= maxDiffValue {
		*out = append(*out, Change{Pointer: pointer, Before: ca, After: cb})
		return
	}
	// Over the cap, both sides cut at the front (as shown cuts) would
	// hide a change past the cut and read as no change at all: both are
	// shown where they differ instead. Two strings are compared as text,
	// anything else as its compact JSON.
	as, bs := string(ca), string(cb)
	var at, bt string
	if a.Kind() == '"' && b.Kind() == '"' && unmarshalRaw(a, &at) == nil && unmarshalRaw(b, &bt) == nil {
		as, bs = at, bt
	}
	before, after := differing(as, bs)
	*out = append(*out, Change{Pointer: pointer, Before: before, After: after})
}

// differing returns the parts of two strings that differ, each with up
// to 64 bytes of common context, as JSON strings marked with … where cut.
func differing(a, b string) (jsontext.Value, jsontext.Value) {
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	q := 0
	for q < len(a)-p && q < len(b)-p && a[len(a)-1-q] == b[len(b)-1-q] {
		q++
	}
	window := func(s string) jsontext.Value {
		from, to := max(p-64, 0), min(len(s)-q+64, len(s))
		for from > 0 && !utf8.RuneStart(s[from]) {
			from--
		}
		for to < len(s) && !utf8.RuneStart(s[to]) {
			to++
		}
		if to-from > maxDiffValue {
			to = from + maxDiffValue
			for to > from && !utf8.RuneStart(s[to]) {
				to--
			}
		}
		w := s[from:to]
		if from > 0 {
			w = "…" + w
		}
		if to < len(s) {
			w += "…"
		}
		v, _ := jsontext.AppendQuote(nil, w)
		return v
	}
	return window(a), window(b)
}

// equalJSON compares two values in canonical form, or, should one have
// none, compacted: values that differ in layout alone are never a change
// whose two sides show the same.
func equalJSON(a, b jsontext.Value) bool {
	ca, cb := bytes.Clone(a), bytes.Clone(b)
	if (*jsontext.Value)(&ca).Canonicalize() != nil || (*jsontext.Value)(&cb).Canonicalize() != nil {
		return bytes.Equal(compact(a), compact(b))
	}
	return bytes.Equal(ca, cb)
}

// compact is a copy of v without insignificant whitespace.
func compact(v jsontext.Value) jsontext.Value {
	c := bytes.Clone(v)
	_ = (*jsontext.Value)(&c).Compact()
	return c
}

// shown is v compacted, or, over maxDiffValue bytes, a JSON string of its
// beginning with the size noted: for a member added or removed, whose
// other side is absent.
func shown(v jsontext.Value) jsontext.Value {
	c := compact(v)
	if len(c) <= maxDiffValue {
		return c
	}
	cut := string(c[:maxDiffValue])
	q, _ := jsontext.AppendQuote(nil, cut+"… ("+strconv.Itoa(len(c))+" bytes)")
	return q
}
