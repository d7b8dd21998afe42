package admit

import (
	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mcp-bastion/bastion/internal/tool"
)

// Rejection categories: stable identifiers, documented in one table in
// docs/gateway.md. A rejected descriptor is never offered and never
// reviewed; it must change before it is judged again.
const (
	RejectMalformed       = "malformed"            // not valid strict JSON: a repeated member name, invalid UTF-8
	RejectNotObject       = "not_an_object"        // the descriptor is not a JSON object
	RejectName            = "invalid_name"         // name missing, not 1-128 of [A-Za-z0-9_.-], or the qualified name too long
	RejectDuplicateName   = "duplicate_name"       // two descriptors of one server share the name; none wins
	RejectInputSchema     = "invalid_input_schema" // not an object schema with type "object" at its root, or does not compile
	RejectOutputSchema    = "invalid_output_schema"
	RejectHeaderMirroring = "header_mirroring"  // an x-mcp-header out of place, not a token, repeated or on a bad type
	RejectSensitiveHeader = "sensitive_header"  // a mirror of a sensitive name
	RejectDigest          = "no_canonical_form" // the descriptor has no RFC 8785 form (a number out of range)
)

// Options are the operator's admission settings.
type Options struct {
	Headers   HeaderMode
	Sensitive []string
}

// Schemas is what admission makes of a descriptor's schemas.
type Schemas struct {
	Input, Output *jsonschema.Schema // Output nil without an outputSchema
	Mirrors       []Mirror
}

// Rejection is why a descriptor is refused: a category and the field at
// fault, never a value.
type Rejection struct {
	Category string
	Detail   string
}

// CheckSchemas compiles a descriptor's schemas — JSON Schema 2020-12, no
// reference that leaves the descriptor (decision 9) — and walks them for
// header mirroring (decision 8). name labels the compiled schemas.
func CheckSchemas(name string, input, output jsontext.Value, o Options) (*Schemas, *Rejection) {
	if detail := objectSchema(input); detail != "" {
		return nil, &Rejection{RejectInputSchema, detail}
	}
	in, err := tool.CompileSchema(name+"/input", input)
	if err != nil {
		return nil, &Rejection{RejectInputSchema, "inputSchema does not compile as JSON Schema 2020-12 without references outside the descriptor"}
	}
	s := &Schemas{Input: in}
	if output != nil {
		if output.Kind() != '{' && output.Kind() != 't' && output.Kind() != 'f' {
			return nil, &Rejection{RejectOutputSchema, "outputSchema is not a JSON Schema (an object or a boolean)"}
		}
		if s.Output, err = tool.CompileSchema(name+"/output", output); err != nil {
			return nil, &Rejection{RejectOutputSchema, "outputSchema does not compile as JSON Schema 2020-12 without references outside the descriptor"}
		}
	}
	mode := o.Headers
	if mode == "" {
		mode = HeaderStrict
	}
	sensitive := o.Sensitive
	if sensitive == nil {
		sensitive = DefaultSensitiveNames
	}
	mirrors, p := Headers(input, output, mode, sensitive)
	if p != nil {
		cat := RejectHeaderMirroring
		if p.Sensitive {
			cat = RejectSensitiveHeader
		}
		return nil, &Rejection{cat, p.Error()}
	}
	s.Mirrors = mirrors
	return s, nil
}

// objectSchema requires an object schema: a JSON object whose root
// "type" is "object". Missing, null, an array, a string, {} and untyped
// schemas would accept anything.
func objectSchema(s jsontext.Value) string {
	if len(s) == 0 {
		return "inputSchema is missing"
	}
	if s.Kind() != '{' {
		return "inputSchema is not a JSON object"
	}
	var root map[string]jsontext.Value
	if err := unmarshalRaw(s, &root); err != nil {
		return "inputSchema is not a JSON object"
	}
	var typ string
	if t, ok := root["type"]; !ok || t.Kind() != '"' || jsonUnquote(t, &typ) != nil || typ != "object" {
		return `inputSchema has no "type": "object" at its root`
	}
	return ""
}
