package admit

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// amountSchema is one schema of an anyOf: 170 bytes compact, its maximum
// at byte 73, so that six of them are past the cut of a shown value.
func amountSchema(i, maximum int) string {
	s := `{"type":"object","properties":{"amount":{"type":"integer","minimum":0,"maximum":` + strconv.Itoa(maximum) +
		`},"kind":{"const":"k` + strconv.Itoa(i) + `"},"note":{"type":"string","description":"`
	return s + strings.Repeat("n", 170-len(s)-4) + `"}}}`
}

// anyOf is an object holding a request schema whose anyOf lists the
// schemas, the last with maximum last.
func anyOf(n, last int) string {
	var items []string
	for i := range n {
		maximum := 100
		if i == n-1 {
			maximum = last
		}
		items = append(items, amountSchema(i, maximum))
	}
	return `{"inputSchema":{"type":"object","properties":{"req":{"anyOf":[` + strings.Join(items, ",") + `]}}}}`
}

// TestDiff: objects are compared member by member and arrays of equal
// length item by item, at any depth; anything else that differs is one
// change, and one whose value is over the cut is shown where the two
// differ: never as two equal sides, as a change past the first 512 bytes
// of an array once was.
func TestDiff(t *testing.T) {
	escaped := strings.Repeat(`\u0001`, 100) // 100 bytes of text, 600 of JSON
	type change struct {
		// before and after are shown exactly ("" absent), or, after a
		// "~", a part of the text of the JSON string shown.
		pointer, before, after string
	}
	for _, tc := range []struct {
		name   string
		before string
		after  string
		want   []change
	}{
		{"equal", anyOf(6, 100), anyOf(6, 100), nil},
		{"equal in another order and spelling", `{"a":[1,{"b":2,"c":[3]}],"d":1}`, `{"d":1.0,"a":[1,{"c":[3],"b":2}]}`, nil},
		{"item", `{"enum":["a","b","c"]}`, `{"enum":["a","x","c"]}`, []change{{"/enum/1", `"b"`, `"x"`}}},
		{"two items", `{"enum":["a","b","c"]}`, `{"enum":["x","b","y"]}`, []change{{"/enum/0", `"a"`, `"x"`}, {"/enum/2", `"c"`, `"y"`}}},
		{"nested arrays", `{"a":[[1,2],[3,4]]}`, `{"a":[[1,2],[3,5]]}`, []change{{"/a/1/1", `4`, `5`}}},
		{"member of an item", `{"a":[{"x":1}]}`, `{"a":[{"x":1,"y":2}]}`, []change{{"/a/0/y", "", `2`}}},
		{"item of another kind", `{"a":[1,{"x":1}]}`, `{"a":[1,[1]]}`, []change{{"/a/1", `{"x":1}`, `[1]`}}},
		{"array grown", `{"a":[1,2]}`, `{"a":[1,2,3]}`, []change{{"/a", `[1,2]`, `[1,2,3]`}}},
		{"past the cut of a long array", anyOf(6, 100), anyOf(6, 999),
			[]change{{"/inputSchema/properties/req/anyOf/5/properties/amount/maximum", `100`, `999`}}},
		{"long array grown", anyOf(6, 100), anyOf(7, 100),
			[]change{{"/inputSchema/properties/req/anyOf", "~", "~" + `"kind":{"const":"k6"}`}}},
		{"long array shrunk past the cut", anyOf(7, 100), anyOf(6, 100),
			[]change{{"/inputSchema/properties/req/anyOf", "~" + `"kind":{"const":"k6"}`, "~"}}},
		{"long value of another kind", `{"a":` + anyOf(6, 100) + `}`, `{"a":"short"}`,
			[]change{{"/a", "~", `~"short"`}}},
		{"escaped string past the cut", `{"d":"` + escaped + `a"}`, `{"d":"` + escaped + `b"}`,
			[]change{{"/d", "~\x01a", "~\x01b"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := Diff(jsontext.Value(tc.before), jsontext.Value(tc.after))
			if len(cs) != len(tc.want) {
				t.Fatalf("%d changes, want %d: %+v", len(cs), len(tc.want), cs)
			}
			for i, c := range cs {
				w := tc.want[i]
				if bytes.Equal(c.Before, c.After) {
					t.Errorf("change %+v: shown as no change", c)
				}
				if c.Pointer != w.pointer {
					t.Errorf("change %d at %q, want %q", i, c.Pointer, w.pointer)
				}
				for _, side := range []struct {
					name string
					got  jsontext.Value
					want string
				}{{"before", c.Before, w.before}, {"after", c.After, w.after}} {
					part, cut := strings.CutPrefix(side.want, "~")
					var text string
					switch {
					case cut && (json.Unmarshal(side.got, &text) != nil || !strings.Contains(text, part) || len(text) > maxDiffValue+2*len("…")):
						t.Errorf("change %d: %s %s, want a string of a part holding %q", i, side.name, side.got, part)
					case !cut && string(side.got) != side.want:
						t.Errorf("change %d: %s %s, want %s", i, side.name, side.got, side.want)
					}
				}
			}
			checkChanges(t, jsontext.Value(tc.before), jsontext.Value(tc.after), cs)
		})
	}
}
