package front

import (
	"mime"
	"strings"
	"testing"
)

// TestAccepts holds accepts to reading every member of Accept with
// mime.ParseMediaType, as it did before its fast path for members
// without parameters, over every combination of a set of members.
func TestAccepts(t *testing.T) {
	members := []string{
		"application/json", "text/event-stream", "*/*", "application/*", "text/*",
		"Application/JSON", " text/event-stream ", "application/json;q=0", "text/event-stream; q=0.000",
		"application/json;q=0.5", "text/html", "", "application/json;", "*/*;q=0", "text/event-stream;q=abc",
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

// acceptsByParse is accepts with every member parsed.
func acceptsByParse(values []string) (jsonOK, sseOK bool) {
	if len(values) == 0 {
		return true, true
	}
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil || refused(params["q"]) {
				continue
			}
			switch mt {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				sseOK = true
			case "*/*":
				jsonOK, sseOK = true, true
			}
		}
	}
	return jsonOK, sseOK
}
