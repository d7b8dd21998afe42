package admit

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mcp-bastion/bastion/internal/tool"
)

// Rejection categories: stable identifiers, documented in one table in
// docs/admission.md. A rejected descriptor is never offered and never
// reviewed; it must change before it is judged again.
const (
	RejectMalformed       = "malformed"            // not valid strict JSON: a repeated member name, invalid UTF-8
	RejectNotObject       = "not_an_object"        // the descriptor is not a JSON object
	RejectName            = "invalid_name"         // name missing, not 1-128 of [A-Za-z0-9_.-], or the qualified name too long
	RejectDuplicateName   = "duplicate_name"       // two descriptors of one server share the name, case ignored; none wins
	RejectInputSchema     = "invalid_input_schema" // not an object schema with type "object" at its root, or does not compile
	RejectOutputSchema    = "invalid_output_schema"
	RejectHeaderMirroring = "header_mirroring"  // an x-mcp-header out of place, not a token, repeated or on a bad type
	RejectSensitiveHeader = "sensitive_header"  // a mirror of a sensitive name
	RejectDigest          = "no_canonical_form" // the descriptor has no RFC 8785 form (a number out of range)
	RejectArguments       = "invalid_arguments" // a prompt's arguments are not an array of objects with unique string names
)

// Options are the operator's admission settings.
type Options struct {
	Headers   HeaderMode
	Sensitive []string
	// Schemas, when set, reuses the compilation of a schema seen before
	// byte for byte (many tools of a list share one).
	Schemas *SchemaCache

	trees trees // set by Check: the schemas already decoded
}

type trees struct {
	set           bool
	input, output any
}

// Check is the whole of admission's checks on one descriptor, decoding
// it once: its schemas (CheckSchemas) and the scanner (Scan). raw must be
// the descriptor whose input and output schemas are given.
func Check(raw, input, output jsontext.Value, o Options, others []string) (*Schemas, []Finding, *Rejection) {
	tree, err := decodeTree(raw)
	obj, ok := tree.(map[string]any)
	if err != nil || !ok {
		return nil, nil, &Rejection{RejectMalformed, "the descriptor is not a valid strict JSON object"}
	}
	o.trees = trees{set: true, input: obj["inputSchema"], output: obj["outputSchema"]}
	s, rej := CheckSchemas(input, output, o)
	if rej != nil {
		return nil, nil, rej
	}
	return s, scanTree(tree, others), nil
}

// SchemaCache holds compiled schemas by the SHA-256 of their bytes. It is
// safe for concurrent use and bounded: past maxCached entries it starts
// afresh. A compiled schema depends on nothing but its bytes (references
// never leave it), so sharing one between descriptors is sound; its label
// is its digest, never a tool's name.
type SchemaCache struct {
	mu sync.Mutex
	m  map[[32]byte]*jsonschema.Schema
}

const maxCached = 100_000

func (c *SchemaCache) compile(doc jsontext.Value) (*jsonschema.Schema, error) {
	if c == nil {
		return tool.CompileSchema("descriptor", doc)
	}
	key := sha256.Sum256(doc)
	c.mu.Lock()
	s, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := tool.CompileSchema(hex.EncodeToString(key[:]), doc)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCached {
		c.m = map[[32]byte]*jsonschema.Schema{}
	}
	c.m[key] = s
	c.mu.Unlock()
	return s, nil
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
// header mirroring (decision 8).
func CheckSchemas(input, output jsontext.Value, o Options) (*Schemas, *Rejection) {
	if detail := objectSchema(input); detail != "" {
		return nil, &Rejection{RejectInputSchema, detail}
	}
	in, err := o.Schemas.compile(input)
	if err != nil {
		return nil, &Rejection{RejectInputSchema, "inputSchema does not compile as JSON Schema 2020-12 without references outside the descriptor"}
	}
	s := &Schemas{Input: in}
	if output != nil {
		if output.Kind() != '{' && output.Kind() != 't' && output.Kind() != 'f' {
			return nil, &Rejection{RejectOutputSchema, "outputSchema is not a JSON Schema (an object or a boolean)"}
		}
		if s.Output, err = o.Schemas.compile(output); err != nil {
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
	in2, out2 := o.trees.input, o.trees.output
	if !o.trees.set {
		var err error
		if in2, err = decodeTree(input); err != nil {
			return nil, &Rejection{RejectInputSchema, "inputSchema is not valid JSON"}
		}
		if output != nil {
			if out2, err = decodeTree(output); err != nil {
				return nil, &Rejection{RejectOutputSchema, "outputSchema is not valid JSON"}
			}
		}
	}
	mirrors, p := headersTree(in2, out2, output != nil, mode, sensitive)
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
	var root struct {
		Type jsontext.Value `json:"type"`
	}
	if err := unmarshalRaw(s, &root); err != nil {
		return "inputSchema is not a JSON object"
	}
	if string(root.Type) != `"object"` && !unquotesTo(root.Type, "object") {
		return `inputSchema has no "type": "object" at its root`
	}
	return ""
}

// unquotesTo reports whether v is a JSON string equal to want (written
// with escapes, perhaps).
func unquotesTo(v jsontext.Value, want string) bool {
	if v.Kind() != '"' {
		return false
	}
	var got string
	return unmarshalRaw(v, &got) == nil && got == want
}
