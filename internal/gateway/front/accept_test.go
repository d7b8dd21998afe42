package front

import (
	"mime"
	"strings"
	"testing"
)

// TestAccepts: each answer form is judged by the most specific range
// that names it (RFC 9110 §12.5.1), a weight of zero refuses it, and the
// members written without parameters are read as ParseMediaType reads
// them (acceptsByParse, over every combination of a set of members).
func TestAccepts(t *testing.T) {
	for _, tc := range []struct {
		accept    []string
		json, sse bool
	}{
		{nil, true, true},
		{[]string{"application/json, text/event-stream"}, true, true},
		{[]string{"application/json"}, true, false},
		{[]string{"text/event-stream"}, false, true},
		{[]string{"*/*"}, true, true},
		{[]string{"*/*, application/json;q=0"}, false, true},
		{[]string{"application/json;q=0, */*"}, false, true},
		{[]string{"application/json;q=0, application/*"}, false, false},
		{[]string{"application/*;q=0, application/json"}, true, false},
		{[]string{"text/event-stream;q=0, text/*"}, false, false},
		{[]string{"text/event-stream;q=0", "*/*"}, true, false},
		{[]string{"*/*;q=0, application/json"}, true, false},
		{[]string{"application/json;q=0, application/json"}, true, false},
		{[]string{"application/json;q=0.000, text/*;q=0.5"}, false, true},
		{[]string{"text/html"}, false, false},
		{[]string{""}, false, false},
	} {
		j, s := accepts(tc.accept)
		if j != tc.json || s != tc.sse {
			t.Errorf("accepts(%q) = %v, %v; want %v, %v", tc.accept, j, s, tc.json, tc.sse)
		}
	}
	members := []string{
		"application/json", "text/event-stream", "*/*", "application/*", "text/*",
		"Application/JSON", " text/event-stream ", "application/json;q=0", "text/event-stream; q=0.000",
		"application/json;q=0.5", "text/html", "", "application/json;", "*/*;q=0", "text/event-stream;q=abc",
		"TEXT/*;q=0", "application/*; q=0",
	}
	var values [][]string
	for _, a := range members {
		values = append(values, []string{a})
		for _, b := range members {
			values = append(values, []string{a + "," + b}, []string{a, b})
		}
	}
	values = append(values, nil, []string{}, []string{","}, []string{",,application/json"})
	for _, v := range values {
		j, s := accepts(v)
		wj, ws := acceptsByParse(v)
		if j != wj || s != ws {
			t.Errorf("accepts(%q) = %v, %v; by ParseMediaType %v, %v", v, j, s, wj, ws)
		}
	}
}

// acceptsByParse is accepts with every member parsed by ParseMediaType,
// and the specificity of a range counted from its wildcards.
func acceptsByParse(values []string) (jsonOK, sseOK bool) {
	if len(values) == 0 {
		return true, true
	}
	best := map[string][2]int{} // form → {specificity, taken (0 or 1)}
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			ok := 1
			if refused(params["q"]) {
				ok = 0
			}
			typ, sub, _ := strings.Cut(mt, "/")
			for _, form := range []string{"application/json", "text/event-stream"} {
				ft, _, _ := strings.Cut(form, "/")
				spec := 0
				switch {
				case mt == form:
					spec = 3
				case typ == ft && sub == "*":
					spec = 2
				case mt == "*/*":
					spec = 1
				}
				if spec == 0 {
					continue
				}
				if b := best[form]; spec > b[0] {
					best[form] = [2]int{spec, ok}
				} else if spec == b[0] && ok == 1 {
					best[form] = [2]int{spec, 1}
				}
			}
		}
	}
	return best["application/json"][1] == 1, best["text/event-stream"][1] == 1
}
