package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mcp-bastion/bastion/internal/mcp/schematest"
	"github.com/mcp-bastion/bastion/internal/problem"
	"github.com/mcp-bastion/bastion/internal/tool"
)

var testInfo = Implementation{Name: "bastion", Title: "MCP Bastion", Version: "1.2.3"}

const testInstructions = "Read-only tools."

var testTools = []tool.Descriptor{
	{
		Name:         "read_only_sql",
		Title:        "Read-only SQL",
		Description:  "Runs one SELECT.",
		InputSchema:  jsontext.Value(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"],"additionalProperties":false}`),
		OutputSchema: jsontext.Value(`{"type":"object","properties":{"rows":{"type":"array"}}}`),
		Annotations:  tool.ReadOnly,
	},
	{
		// No title, no output schema, annotations with their own title.
		Name:        "plain",
		InputSchema: jsontext.Value(`{"type":"object"}`),
		Annotations: tool.Annotations{Title: "Plain tool", DestructiveHint: true, OpenWorldHint: true},
	},
}

func newTestEncoder(t *testing.T) *Encoder {
	t.Helper()
	e, err := NewEncoder(testInfo, testInstructions, testTools)
	if err != nil {
		t.Fatalf("NewEncoder: %v", err)
	}
	return e
}

// object checks that b is one strict JSON object and decodes it with
// numbers kept as written.
func object(t *testing.T, b []byte) map[string]any {
	t.Helper()
	if !json.Valid(b) || !jsontext.Value(b).IsValid() {
		t.Fatalf("not strict JSON: %s", b)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("not a JSON object: %s: %v", b, err)
	}
	return m
}

func keys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// checkModern checks the members every modern result carries, and that a
// legacy result carries none of them.
func checkModern(t *testing.T, v string, res map[string]any) {
	t.Helper()
	_, hasMeta := res["_meta"]
	_, hasType := res["resultType"]
	if !FeaturesOf(v).Modern {
		if hasMeta || hasType {
			t.Errorf("%s result has modern members: %v", v, keys(res))
		}
		return
	}
	if res["resultType"] != "complete" {
		t.Errorf("%s resultType = %v, want \"complete\"", v, res["resultType"])
	}
	meta, _ := res["_meta"].(map[string]any)
	want := map[string]any{"name": testInfo.Name, "title": testInfo.Title, "version": testInfo.Version}
	if !reflect.DeepEqual(meta[MetaServerInfo], want) {
		t.Errorf("%s _meta = %v, want %s: %v", v, meta, MetaServerInfo, want)
	}
}

func TestToolsListShapes(t *testing.T) {
	e := newTestEncoder(t)
	wantKeys := map[string][][]string{
		V20241105: {
			{"description", "inputSchema", "name"},
			{"inputSchema", "name"},
		},
		V20250326: {
			{"annotations", "description", "inputSchema", "name"},
			{"annotations", "inputSchema", "name"},
		},
		V20250618: {
			{"annotations", "description", "inputSchema", "name", "outputSchema", "title"},
			{"annotations", "inputSchema", "name"},
		},
		V20251125: {
			{"annotations", "description", "inputSchema", "name", "outputSchema", "title"},
			{"annotations", "inputSchema", "name"},
		},
		V20260728: {
			{"annotations", "description", "inputSchema", "name", "outputSchema", "title"},
			{"annotations", "inputSchema", "name"},
		},
	}
	for _, v := range AllVersions() {
		t.Run(v, func(t *testing.T) {
			raw := e.ToolsList(v)
			res := object(t, raw)
			checkModern(t, v, res)
			wantTop := []string{"tools"}
			if FeaturesOf(v).Modern {
				wantTop = []string{"_meta", "cacheScope", "resultType", "tools", "ttlMs"}
				if res["ttlMs"] != json.Number("60000") || res["cacheScope"] != "public" {
					t.Errorf("ttlMs = %v, cacheScope = %v", res["ttlMs"], res["cacheScope"])
				}
			}
			if got := keys(res); !slices.Equal(got, wantTop) {
				t.Errorf("result members = %q, want %q", got, wantTop)
			}
			tools, _ := res["tools"].([]any)
			if len(tools) != len(testTools) {
				t.Fatalf("%d tools, want %d", len(tools), len(testTools))
			}
			for i, x := range tools {
				tl := x.(map[string]any)
				if got := keys(tl); !slices.Equal(got, wantKeys[v][i]) {
					t.Errorf("tool %d members = %q, want %q", i, got, wantKeys[v][i])
				}
				if tl["name"] != testTools[i].Name {
					t.Errorf("tool %d name = %v", i, tl["name"])
				}
				var wantIn any
				json.Unmarshal(testTools[i].InputSchema, &wantIn)
				if !jsonEqual(tl["inputSchema"], wantIn) {
					t.Errorf("tool %d inputSchema = %v", i, tl["inputSchema"])
				}
			}
			if !FeaturesOf(v).Annotations {
				return
			}
			// Annotations: every hint always sent; the tool title stands in
			// for a missing annotation title.
			a0 := tools[0].(map[string]any)["annotations"].(map[string]any)
			want0 := map[string]any{"title": "Read-only SQL", "readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}
			if !reflect.DeepEqual(a0, want0) {
				t.Errorf("annotations of tool 0 = %v, want %v", a0, want0)
			}
			a1 := tools[1].(map[string]any)["annotations"].(map[string]any)
			want1 := map[string]any{"title": "Plain tool", "readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true}
			if !reflect.DeepEqual(a1, want1) {
				t.Errorf("annotations of tool 1 = %v, want %v", a1, want1)
			}
		})
	}
}

// jsonEqual compares two decoded JSON values, numbers by their text.
func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

func TestInitialize(t *testing.T) {
	e := newTestEncoder(t)
	for _, v := range LegacyVersions() {
		t.Run(v, func(t *testing.T) {
			res := object(t, e.Initialize(v))
			if got, want := keys(res), []string{"capabilities", "instructions", "protocolVersion", "serverInfo"}; !slices.Equal(got, want) {
				t.Errorf("members = %q, want %q", got, want)
			}
			if res["protocolVersion"] != v {
				t.Errorf("protocolVersion = %v, want %s", res["protocolVersion"], v)
			}
			if res["instructions"] != testInstructions {
				t.Errorf("instructions = %v", res["instructions"])
			}
			wantCaps := map[string]any{"tools": map[string]any{"listChanged": false}}
			if !reflect.DeepEqual(res["capabilities"], wantCaps) {
				t.Errorf("capabilities = %v, want %v", res["capabilities"], wantCaps)
			}
			wantInfo := map[string]any{"name": "bastion", "version": "1.2.3"}
			if FeaturesOf(v).Structured {
				wantInfo["title"] = "MCP Bastion"
			}
			if !reflect.DeepEqual(res["serverInfo"], wantInfo) {
				t.Errorf("serverInfo = %v, want %v", res["serverInfo"], wantInfo)
			}
		})
	}
	if got := e.Initialize(V20260728); got != nil {
		t.Errorf("Initialize(%s) = %s, want nil: the modern era has no initialize", V20260728, got)
	}
	if got := e.Initialize("2099-01-01"); got != nil {
		t.Errorf("Initialize of an unknown version = %s, want nil", got)
	}
}

func TestInitializeWithoutInstructions(t *testing.T) {
	e, err := NewEncoder(Implementation{Name: "n", Version: "v"}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range LegacyVersions() {
		res := object(t, e.Initialize(v))
		if _, ok := res["instructions"]; ok {
			t.Errorf("%s: empty instructions sent", v)
		}
		if _, ok := res["serverInfo"].(map[string]any)["title"]; ok {
			t.Errorf("%s: empty title sent", v)
		}
	}
	res := object(t, e.ToolsList(V20251125))
	if tools, ok := res["tools"].([]any); !ok || len(tools) != 0 {
		t.Errorf("tools/list without tools = %v, want an empty array", res["tools"])
	}
	if _, ok := object(t, e.Discover())["instructions"]; ok {
		t.Error("discover: empty instructions sent")
	}
}

func TestDiscover(t *testing.T) {
	e := newTestEncoder(t)
	res := object(t, e.Discover())
	checkModern(t, V20260728, res)
	if got, want := keys(res), []string{"_meta", "cacheScope", "capabilities", "instructions", "resultType", "supportedVersions", "ttlMs"}; !slices.Equal(got, want) {
		t.Errorf("members = %q, want %q", got, want)
	}
	if !reflect.DeepEqual(res["supportedVersions"], []any{V20260728}) {
		t.Errorf("supportedVersions = %v", res["supportedVersions"])
	}
	if res["ttlMs"] != json.Number("60000") || res["cacheScope"] != "public" {
		t.Errorf("ttlMs = %v, cacheScope = %v", res["ttlMs"], res["cacheScope"])
	}
}

func TestEmpty(t *testing.T) {
	e := newTestEncoder(t)
	for _, v := range AllVersions() {
		res := object(t, e.Empty(v))
		checkModern(t, v, res)
		want := []string{}
		if FeaturesOf(v).Modern {
			want = []string{"_meta", "resultType"}
		}
		if got := keys(res); !slices.Equal(got, want) {
			t.Errorf("Empty(%s) members = %q, want %q", v, got, want)
		}
	}
}

func TestAppendCallResult(t *testing.T) {
	e := newTestEncoder(t)
	structured := []byte(`{"b":"é\u00e9 \"q\" \\","a":[1,2.50,1e2,-0],"c":{"d":null,"e":true},"s":"` + "\u2028" + `"}`)
	for _, v := range AllVersions() {
		t.Run(v, func(t *testing.T) {
			raw := e.AppendCallResult([]byte("pre"), v, structured)
			if !bytes.HasPrefix(raw, []byte("pre")) {
				t.Fatalf("dst prefix lost")
			}
			raw = raw[3:]
			res := object(t, raw)
			checkModern(t, v, res)
			want := []string{"content", "isError"}
			if FeaturesOf(v).Structured {
				want = append(want, "structuredContent")
			}
			if FeaturesOf(v).Modern {
				want = append(want, "_meta", "resultType")
			}
			slices.Sort(want)
			if got := keys(res); !slices.Equal(got, want) {
				t.Errorf("members = %q, want %q", got, want)
			}
			if res["isError"] != false {
				t.Errorf("isError = %v", res["isError"])
			}
			content, _ := res["content"].([]any)
			if len(content) != 1 {
				t.Fatalf("content = %v, want one block", res["content"])
			}
			block := content[0].(map[string]any)
			if got := keys(block); !slices.Equal(got, []string{"text", "type"}) || block["type"] != "text" {
				t.Errorf("content block = %v", block)
			}
			// The text block is exactly the structured JSON, byte for byte.
			if block["text"] != string(structured) {
				t.Errorf("text = %q, want exactly %q", block["text"], structured)
			}
			if !FeaturesOf(v).Structured {
				return
			}
			var members struct {
				StructuredContent json.RawMessage `json:"structuredContent"`
			}
			if err := json.Unmarshal(raw, &members); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(members.StructuredContent, structured) {
				t.Errorf("structuredContent = %s, want %s", members.StructuredContent, structured)
			}
		})
	}
}

func TestAppendCallProblem(t *testing.T) {
	e := newTestEncoder(t)
	secret := errors.New("dial tcp 10.0.0.1:5432: password=hunter2")
	p := problem.New(problem.NotFound, "file "+problem.Quote("a\"b\u202e.txt")+" does not exist", "relative_path").
		WithCause(secret).WithMetadata("hint", "list the directory")
	for _, v := range AllVersions() {
		t.Run(v, func(t *testing.T) {
			raw := e.AppendCallProblem(nil, v, p)
			res := object(t, raw)
			checkModern(t, v, res)
			want := []string{"content", "isError"}
			if FeaturesOf(v).Modern {
				want = append(want, "_meta", "resultType")
			}
			slices.Sort(want)
			if got := keys(res); !slices.Equal(got, want) {
				t.Errorf("members = %q, want %q (never structuredContent)", got, want)
			}
			if res["isError"] != true {
				t.Errorf("isError = %v", res["isError"])
			}
			content, _ := res["content"].([]any)
			if len(content) != 1 {
				t.Fatalf("content = %v, want one block", res["content"])
			}
			block := content[0].(map[string]any)
			if block["type"] != "text" {
				t.Errorf("block type = %v", block["type"])
			}
			text, _ := block["text"].(string)
			if !bytes.Equal([]byte(text), ProblemData(p)) {
				t.Errorf("text = %s, want the problem document %s", text, ProblemData(p))
			}
			doc := object(t, []byte(text))
			if got, want := keys(doc), []string{"code", "detail", "invalid_params", "metadata", "status", "title", "type"}; !slices.Equal(got, want) {
				t.Errorf("problem members = %q, want %q", got, want)
			}
			if doc["code"] != "MCP_NOT_FOUND" || doc["status"] != json.Number("404") || doc["type"] != "urn:mcp-bastion:problem:not-found" {
				t.Errorf("problem = %v", doc)
			}
			if strings.Contains(string(raw), "hunter2") || strings.Contains(string(raw), "10.0.0.1") {
				t.Errorf("the cause reached the peer: %s", raw)
			}
		})
	}
}

func TestProblemData(t *testing.T) {
	p := problem.New(problem.Validation, "bad", "query").WithCause(errors.New("secret cause"))
	got := string(ProblemData(p))
	want := `{"type":"urn:mcp-bastion:problem:validation-error","title":"Invalid tool arguments","status":422,"detail":"bad","code":"MCP_VALIDATION_ERROR","invalid_params":["query"],"metadata":{}}`
	if got != want {
		t.Errorf("ProblemData =\n %s\nwant\n %s", got, want)
	}
}

func TestUnsupportedVersionData(t *testing.T) {
	tests := []struct {
		requested string
		want      string
	}{
		{"2099-01-01", `{"supported":["2026-07-28"],"requested":"2099-01-01"}`},
		{"", `{"supported":["2026-07-28"],"requested":""}`},
		{"a\"b\\\n", `{"supported":["2026-07-28"],"requested":"a\"b\\\n"}`},
		{"é", `{"supported":["2026-07-28"],"requested":"é"}`},
		// Peer input cut to a byte length may end inside a character: the
		// data is still JSON rather than a panic.
		{strings.Repeat("a", 63) + "\xc3", `{"supported":["2026-07-28"],"requested":"` + strings.Repeat("a", 63) + "\ufffd" + `"}`},
		{"\xff\xfe", `{"supported":["2026-07-28"],"requested":"` + "\ufffd\ufffd" + `"}`},
	}
	for _, tt := range tests {
		got := UnsupportedVersionData(tt.requested)
		if string(got) != tt.want {
			t.Errorf("UnsupportedVersionData(%q) = %s, want %s", tt.requested, got, tt.want)
		}
		object(t, got)
	}
}

// TestProblemInvalidUTF8 checks that a problem whose strings hold invalid
// UTF-8 is still sent, with U+FFFD, instead of panicking the encoder.
func TestProblemInvalidUTF8(t *testing.T) {
	e := newTestEncoder(t)
	p := problem.New(problem.NotFound, "file \xff.txt", "a\xc3").WithMetadata("k\xfe", "v\xed\xa0\x80")
	want := `{"type":"urn:mcp-bastion:problem:not-found","title":"Resource not found","status":404,` +
		"\"detail\":\"file \ufffd.txt\",\"code\":\"MCP_NOT_FOUND\",\"invalid_params\":[\"a\ufffd\"],\"metadata\":{\"k\ufffd\":\"v\ufffd\ufffd\ufffd\"}}"
	if got := string(ProblemData(p)); got != want {
		t.Errorf("ProblemData =\n %s\nwant\n %s", got, want)
	}
	for _, v := range AllVersions() {
		res := object(t, e.AppendCallProblem(nil, v, p))
		text := res["content"].([]any)[0].(map[string]any)["text"].(string)
		if text != want {
			t.Errorf("%s: problem text =\n %s\nwant\n %s", v, text, want)
		}
	}
}

// TestNewEncoderRefusesBadSchema checks that a tool whose schema is not
// JSON stops construction instead of producing a broken tools/list.
func TestNewEncoderRefusesBadSchema(t *testing.T) {
	for _, d := range []tool.Descriptor{
		{Name: "x", InputSchema: jsontext.Value(`{"type":`)},
		{Name: "x", InputSchema: jsontext.Value(`{}`), OutputSchema: jsontext.Value(`{"a":1,"a":2}`)},
	} {
		if _, err := NewEncoder(testInfo, "", []tool.Descriptor{d}); err == nil || !strings.HasPrefix(err.Error(), "mcp: tools/list result: ") {
			t.Errorf("NewEncoder with schema %s / %s: err = %v, want a tools/list error", d.InputSchema, d.OutputSchema, err)
		}
	}
}

// TestEncoderConcurrent uses one Encoder from many goroutines.
func TestEncoderConcurrent(t *testing.T) {
	e := newTestEncoder(t)
	want := map[string]string{}
	for _, v := range AllVersions() {
		want[v] = string(e.ToolsList(v))
	}
	p := problem.New(problem.Internal, "x")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				for _, v := range AllVersions() {
					if string(e.ToolsList(v)) != want[v] {
						t.Error("tools/list changed")
						return
					}
					e.AppendCallResult(nil, v, []byte(`{}`))
					e.AppendCallProblem(nil, v, p)
					e.Empty(v)
					e.Initialize(v)
				}
				e.Discover()
			}
		})
	}
	wg.Wait()
}

func officialSchema(t *testing.T, v, def string) *jsonschema.Schema {
	t.Helper()
	return schematest.Definition(t, v, def)
}

// TestOfficialSchemas validates every fixed result and both call results
// against the official schema of each version.
func TestOfficialSchemas(t *testing.T) {
	e := newTestEncoder(t)
	p := problem.New(problem.Validation, "bad", "query")
	for _, v := range AllVersions() {
		t.Run(v, func(t *testing.T) {
			results := map[string][][]byte{
				"ListToolsResult": {e.ToolsList(v)},
				"CallToolResult":  {e.AppendCallResult(nil, v, []byte(`{"rows":[]}`)), e.AppendCallProblem(nil, v, p)},
			}
			if IsLegacy(v) {
				results["InitializeResult"] = [][]byte{e.Initialize(v)}
			} else {
				results["DiscoverResult"] = [][]byte{e.Discover()}
				results["InputRequiredResult"] = [][]byte{
					e.AppendInputRequired(nil, []byte(`{"confirm":{"method":"elicitation/create","params":{"message":"?","requestedSchema":{"type":"object","properties":{}}}}}`), "sealed"),
					e.AppendInputRequired(nil, nil, "only a state \"quoted\""),
				}
			}
			for def, docs := range results {
				s := officialSchema(t, v, def)
				for _, raw := range docs {
					inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
					if err != nil {
						t.Fatal(err)
					}
					if err := s.Validate(inst); err != nil {
						t.Errorf("%s %s: %s\ndoes not validate: %v", v, def, raw, err)
					}
				}
			}
		})
	}
}
