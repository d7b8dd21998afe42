package discover

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// pages is a scripted server: the result for each cursor ("" for the
// first request, which sends none).
type pages map[string]string

func (p pages) lister(t *testing.T, sent *[]string) Lister {
	return ListerFunc(func(ctx context.Context, params []byte) (jsontext.Value, error) {
		var req struct {
			Cursor *string `json:"cursor"`
		}
		if err := json.Unmarshal(params, &req); err != nil {
			t.Fatalf("params %s: %v", params, err)
		}
		key := "<none>"
		if req.Cursor != nil {
			key = *req.Cursor
		}
		*sent = append(*sent, key)
		res, ok := p[key]
		switch {
		case !ok:
			return nil, fmt.Errorf("no page for cursor %q", key)
		case res == "hang":
			<-ctx.Done()
			return nil, context.Cause(ctx)
		case res == "error":
			return nil, errors.New("page failed")
		}
		return jsontext.Value(res), nil
	})
}

var lim = Limits{Pages: 10, Tools: 5, Timeout: time.Second}

func tool(name string) string { return `{"name":"` + name + `","inputSchema":{"type":"object"}}` }

func TestWalk(t *testing.T) {
	tests := []struct {
		name    string
		pages   pages
		tools   int
		sent    string
		err     error
		cursors string // NextCursor of each page
	}{
		{"one page, cursor absent", pages{"<none>": `{"tools":[` + tool("a") + `]}`}, 1, "<none>", nil, "absent"},
		{"null cursor ends", pages{"<none>": `{"tools":[` + tool("a") + `],"nextCursor":null}`}, 1, "<none>", nil, "null"},
		{"empty-string cursor continues", pages{"<none>": `{"tools":[` + tool("a") + `],"nextCursor":""}`, "": `{"tools":[` + tool("b") + `]}`}, 2, "<none>,", nil, "value,absent"},
		{"empty page continues", pages{"<none>": `{"tools":[],"nextCursor":"x"}`, "x": `{"tools":[` + tool("b") + `]}`}, 1, "<none>,x", nil, "value,absent"},
		{"unknown members ignored", pages{"<none>": `{"tools":[` + tool("a") + `],"ttlMs":5,"_meta":{}}`}, 1, "<none>", nil, "absent"},
		{"repeated cursor", pages{"<none>": `{"tools":[],"nextCursor":"s"}`, "s": `{"tools":[],"nextCursor":"s"}`}, 0, "<none>,s", ErrCycle, "value,value"},
		{"cycle", pages{"<none>": `{"tools":[],"nextCursor":"a"}`, "a": `{"tools":[],"nextCursor":"b"}`, "b": `{"tools":[],"nextCursor":"a"}`}, 0, "<none>,a,b", ErrCycle, "value,value,value"},
		{"too many tools", pages{"<none>": `{"tools":[` + strings.Repeat(tool("a")+",", 5) + tool("b") + `]}`}, 0, "<none>", ErrTooMany, "absent"},
		{"error midway", pages{"<none>": `{"tools":[` + tool("a") + `],"nextCursor":"2"}`, "2": "error"}, 0, "<none>,2", nil, "value,"},
		{"tools not an array", pages{"<none>": `{"tools":{}}`}, 0, "<none>", ErrMalformed, ""},
		{"no tools member", pages{"<none>": `{}`}, 0, "<none>", ErrMalformed, ""},
		{"cursor a number", pages{"<none>": `{"tools":[],"nextCursor":7}`}, 0, "<none>", ErrMalformed, ""},
		{"result not an object", pages{"<none>": `[]`}, 0, "<none>", ErrMalformed, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sent []string
			res := Walk(t.Context(), tt.pages.lister(t, &sent), lim)
			if got := strings.Join(sent, ","); got != tt.sent {
				t.Errorf("requests %q, want %q", got, tt.sent)
			}
			if len(res.Tools) != tt.tools {
				t.Errorf("%d tools, want %d", len(res.Tools), tt.tools)
			}
			if tt.err != nil && !errors.Is(res.Err, tt.err) {
				t.Errorf("Err = %v, want %v", res.Err, tt.err)
			}
			if tt.err == nil && tt.tools == 0 && res.Err == nil {
				t.Error("a failed walk reported no error")
			}
			if res.Err != nil && res.Tools != nil {
				t.Error("a failed walk returned tools")
			}
			if len(res.Trace) != len(sent) {
				t.Errorf("trace has %d pages, %d requests were sent", len(res.Trace), len(sent))
			}
			var kinds []string
			for _, p := range res.Trace {
				kinds = append(kinds, p.NextCursor)
			}
			if tt.cursors != "" && strings.Join(kinds, ",") != tt.cursors {
				t.Errorf("next cursors %q, want %q", strings.Join(kinds, ","), tt.cursors)
			}
		})
	}
}

func TestWalkLimits(t *testing.T) {
	endless := ListerFunc(func(ctx context.Context, params []byte) (jsontext.Value, error) {
		var req struct {
			Cursor string `json:"cursor"`
		}
		json.Unmarshal(params, &req)
		return jsontext.Value(fmt.Sprintf(`{"tools":[],"nextCursor":"%s+"}`, req.Cursor)), nil
	})
	res := Walk(t.Context(), endless, lim)
	if !errors.Is(res.Err, ErrTooManyPage) || len(res.Trace) != lim.Pages {
		t.Errorf("endless list: %v after %d pages", res.Err, len(res.Trace))
	}
	var sent []string
	hang := pages{"<none>": `{"tools":[` + tool("a") + `],"nextCursor":"2"}`, "2": "hang"}
	start := time.Now()
	res = Walk(t.Context(), hang.lister(t, &sent), Limits{Pages: 10, Tools: 10, Timeout: 50 * time.Millisecond})
	if res.Err == nil || !strings.Contains(res.Err.Error(), "took longer than 50ms") || res.Tools != nil {
		t.Errorf("hanging page: %v, %d tools", res.Err, len(res.Tools))
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("the walk outlived its timeout")
	}
}

// TestTraceHidesCursorValues: cursors are the server's opaque data; the
// trace keeps their length only.
func TestTraceHidesCursorValues(t *testing.T) {
	var sent []string
	p := pages{"<none>": `{"tools":[],"nextCursor":"s3cr3t-cursor"}`, "s3cr3t-cursor": `{"tools":[]}`}
	res := Walk(t.Context(), p.lister(t, &sent), lim)
	b, _ := json.Marshal(res.Trace)
	if strings.Contains(string(b), "s3cr3t") || res.Trace[1].CursorSentBytes != len("s3cr3t-cursor") {
		t.Errorf("trace %s", b)
	}
}

// TestParsePageRepeatedNames: a descriptor with a repeated member is kept
// raw for admission to reject alone; a page whose own members repeat is
// malformed.
func TestParsePageRepeatedNames(t *testing.T) {
	tools, _, err := parsePage(jsontext.Value(`{"tools":[{"name":"a","name":"a"},{"name":"b"}]}`), "tools")
	if err != nil || len(tools) != 2 || string(tools[0]) != `{"name":"a","name":"a"}` {
		t.Fatalf("%v %s", err, tools)
	}
	for _, page := range []string{
		`{"tools":[],"tools":[]}`,
		`{"tools":[],"nextCursor":"a","nextCursor":null}`,
		`{"tools":[],"_meta":{"x":1,"x":2}}`,
	} {
		if _, _, err := parsePage(jsontext.Value(page), "tools"); err == nil {
			t.Errorf("%s: accepted", page)
		}
	}
}

// TestWalkPrompts: a prompts/list is walked by the same rules, its items
// read from "prompts"; a page that holds them under another member is
// malformed, so a tools page never passes for a prompts page.
func TestWalkPrompts(t *testing.T) {
	var sent []string
	res := WalkList(context.Background(), pages{
		"<none>": `{"prompts":[{"name":"a"}],"nextCursor":"p2"}`,
		"p2":     `{"prompts":[{"name":"b"}]}`,
	}.lister(t, &sent), "prompts", lim)
	if res.Err != nil || len(res.Tools) != 2 || len(res.Trace) != 2 {
		t.Fatalf("%+v", res)
	}
	sent = nil
	res = WalkList(context.Background(), pages{"<none>": `{"tools":[{"name":"a"}]}`}.lister(t, &sent), "prompts", lim)
	if !errors.Is(res.Err, ErrMalformed) || res.Tools != nil || !strings.Contains(res.Err.Error(), "no prompts member") {
		t.Fatalf("%+v", res)
	}
}
