package admit

import (
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

func TestHeaders(t *testing.T) {
	const region = `"region":{"type":"string","x-mcp-header":"Region"}`
	for _, tc := range []struct {
		name          string
		input, output string
		mode          HeaderMode
		want          string // "" admits; else a substring of the problem
		mirrors       int
	}{
		{"none", `{"type":"object"}`, "", HeaderStrict, "", 0},
		{"a direct property", `{"type":"object","properties":{` + region + `}}`, "", HeaderStrict, "", 1},
		{"integer and boolean", `{"type":"object","properties":{"n":{"type":"integer","x-mcp-header":"N"},"b":{"type":"boolean","x-mcp-header":"B"}}}`, "", HeaderStrict, "", 2},
		{"a nested property, strict", `{"type":"object","properties":{"o":{"type":"object","properties":{` + region + `}}}}`, "", HeaderStrict, "/inputSchema/properties/o/properties/region/x-mcp-header: x-mcp-header is only allowed", 0},
		{"a nested property, spec", `{"type":"object","properties":{"o":{"type":"object","properties":{` + region + `}}}}`, "", HeaderSpec, "", 1},
		{"on the root", `{"type":"object","x-mcp-header":"Root"}`, "", HeaderSpec, "/inputSchema/x-mcp-header", 0},
		{"under items", `{"type":"object","properties":{"l":{"type":"array","items":{"type":"string","x-mcp-header":"L"}}}}`, "", HeaderSpec, "/items/x-mcp-header", 0},
		{"under oneOf, a branch never used", `{"type":"object","properties":{"a":{"type":"string","oneOf":[{"type":"string","x-mcp-header":"A"},{"const":"never"}]}}}`, "", HeaderStrict, "/oneOf/0/x-mcp-header", 0},
		{"in a $ref target used nowhere", `{"type":"object","$defs":{"unused":{"type":"string","x-mcp-header":"U"}}}`, "", HeaderStrict, "/$defs/unused/x-mcp-header", 0},
		{"in definitions", `{"type":"object","definitions":{"d":{"type":"string","x-mcp-header":"D"}}}`, "", HeaderSpec, "/definitions/d/x-mcp-header", 0},
		{"under not", `{"type":"object","properties":{"a":{"type":"string","not":{"type":"string","x-mcp-header":"N"}}}}`, "", HeaderSpec, "/not/x-mcp-header", 0},
		{"another spelling", `{"type":"object","properties":{"password":{"type":"string","X-MCP-Header":"Pw"}}}`, "", HeaderStrict, "/inputSchema/properties/password/X-MCP-Header: x-mcp-header must be spelled in lower case", 0},
		{"a dotted sensitive header", `{"type":"object","properties":{"k":{"type":"string","x-mcp-header":"X-Api.Key"}}}`, "", HeaderStrict, "sensitive name (api_key)", 0},
		{"a sensitive parent, spec", `{"type":"object","properties":{"token":{"type":"object","properties":{"value":{"type":"string","x-mcp-header":"V"}}}}}`, "", HeaderSpec, "sensitive name (token)", 0},
		{"under anyOf", `{"type":"object","properties":{"a":{"anyOf":[{"type":"string","x-mcp-header":"A"}]}}}`, "", HeaderSpec, "/anyOf/0/x-mcp-header", 0},
		{"in $defs", `{"type":"object","$defs":{"d":{"type":"string","x-mcp-header":"D"}},"properties":{"a":{"$ref":"#/$defs/d"}}}`, "", HeaderSpec, "/$defs/d/x-mcp-header", 0},
		{"under an unknown keyword", `{"type":"object","x-vendor":{"nested":{"x-mcp-header":"V"}}}`, "", HeaderSpec, "/x-vendor/nested/x-mcp-header", 0},
		{"in additionalProperties", `{"type":"object","additionalProperties":{"type":"string","x-mcp-header":"X"}}`, "", HeaderSpec, "/additionalProperties/x-mcp-header", 0},
		{"in patternProperties", `{"type":"object","patternProperties":{"^a":{"type":"string","x-mcp-header":"P"}}}`, "", HeaderSpec, "/patternProperties/^a/x-mcp-header", 0},
		{"in if/then", `{"type":"object","if":{"properties":{"a":{"type":"string","x-mcp-header":"I"}}}}`, "", HeaderSpec, "/if/properties/a/x-mcp-header", 0},
		{"in the output schema", `{"type":"object"}`, `{"type":"object","properties":{` + region + `}}`, HeaderSpec, "/outputSchema/properties/region/x-mcp-header", 0},
		{"a number", `{"type":"object","properties":{"f":{"type":"number","x-mcp-header":"F"}}}`, "", HeaderStrict, "type string, integer or boolean", 0},
		{"an untyped property", `{"type":"object","properties":{"f":{"x-mcp-header":"F"}}}`, "", HeaderStrict, "type string, integer or boolean", 0},
		{"a type list", `{"type":"object","properties":{"f":{"type":["string","null"],"x-mcp-header":"F"}}}`, "", HeaderStrict, "type string, integer or boolean", 0},
		{"an empty name", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":""}}}`, "", HeaderStrict, "non-empty header name token", 0},
		{"a name with a space", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"A B"}}}`, "", HeaderStrict, "token", 0},
		{"a name with a colon", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"A:"}}}`, "", HeaderStrict, "token", 0},
		{"a non-ASCII name", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"Régión"}}}`, "", HeaderStrict, "token", 0},
		{"not a string", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":7}}}`, "", HeaderStrict, "token", 0},
		{"repeated without case", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"Region"},"b":{"type":"string","x-mcp-header":"REGION"}}}`, "", HeaderStrict, "mirrored twice", 0},
		{"a sensitive property", `{"type":"object","properties":{"access_token":{"type":"string","x-mcp-header":"Access"}}}`, "", HeaderStrict, "sensitive name (token)", 0},
		{"a sensitive header", `{"type":"object","properties":{"key":{"type":"string","x-mcp-header":"X-Api-Key"}}}`, "", HeaderStrict, "sensitive name (api_key)", 0},
		{"a sensitive name in another case", `{"type":"object","properties":{"Pass-Word":{"type":"string","x-mcp-header":"P"}}}`, "", HeaderStrict, "sensitive name (password)", 0},
		{"Method is only a name", `{"type":"object","properties":{"m":{"type":"string","x-mcp-header":"Method"}}}`, "", HeaderStrict, "", 1},
		{"a property named x-mcp-header", `{"type":"object","properties":{"x-mcp-header":{"type":"string"}}}`, "", HeaderStrict, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out jsontext.Value
			if tc.output != "" {
				out = jsontext.Value(tc.output)
			}
			mirrors, p := Headers(jsontext.Value(tc.input), out, tc.mode, DefaultSensitiveNames)
			switch {
			case tc.want == "" && p != nil:
				t.Fatalf("refused: %v", p)
			case tc.want != "" && (p == nil || !strings.Contains(p.Error(), tc.want)):
				t.Fatalf("got %v, want a problem with %q", p, tc.want)
			case len(mirrors) != tc.mirrors:
				t.Fatalf("mirrors %+v, want %d", mirrors, tc.mirrors)
			}
		})
	}
}

func TestHeadersMirrorPath(t *testing.T) {
	in := `{"type":"object","properties":{"o":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}}}`
	m, p := Headers(jsontext.Value(in), nil, HeaderSpec, nil)
	if p != nil || len(m) != 1 || strings.Join(m[0].Path, ".") != "o.region" || m[0].Header != "Region" || m[0].Type != "string" {
		t.Fatalf("%+v %v", m, p)
	}
}

func TestHeadersRefusesRepeatedMembers(t *testing.T) {
	in := `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"A","x-mcp-header":"B"}}}`
	if _, p := Headers(jsontext.Value(in), nil, HeaderStrict, nil); p == nil {
		t.Fatal("a schema with a repeated member was read")
	}
}

// FuzzHeaders: whatever the schemas, the walk does not panic, and what it
// admits mirrors only token names, once each without regard to case, on
// properties of an allowed type, at a path strict mode allows.
func FuzzHeaders(f *testing.F) {
	f.Add(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`, `{}`)
	f.Add(`{"type":"object","properties":{"o":{"properties":{"a":{"type":"integer","x-mcp-header":"A"}}}}}`, `null`)
	f.Add(`{"$defs":{"x":{"x-mcp-header":"X"}}}`, `{"x-mcp-header":"Y"}`)
	f.Fuzz(func(t *testing.T, input, output string) {
		if !jsontext.Value(input).IsValid() {
			return
		}
		var out jsontext.Value
		if jsontext.Value(output).IsValid() {
			out = jsontext.Value(output)
		}
		mirrors, p := Headers(jsontext.Value(input), out, HeaderStrict, DefaultSensitiveNames)
		if p != nil {
			return
		}
		seen := map[string]bool{}
		for _, m := range mirrors {
			if !tchar.MatchString(m.Header) || seen[strings.ToLower(m.Header)] || len(m.Path) != 1 ||
				(m.Type != "string" && m.Type != "integer" && m.Type != "boolean") {
				t.Fatalf("admitted %+v from %s", m, input)
			}
			seen[strings.ToLower(m.Header)] = true
		}
	})
}
