package tool

import (
	"bytes"
	"context"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/mcp-bastion/bastion/internal/jsondec"
	"github.com/mcp-bastion/bastion/internal/problem"
)

// Func is the typed body of a tool: it receives arguments already decoded
// into In and returns the structured result Out, which must marshal to a
// JSON object.
type Func[In, Out any] func(ctx context.Context, in In) (Out, error)

type typed[In, Out any] struct {
	desc  Descriptor
	input *jsonschema.Schema
	fn    Func[In, Out]
}

// New returns a Tool that validates arguments against d.InputSchema, decodes
// them strictly into In and calls fn. It fails if a schema does not compile.
func New[In, Out any](d Descriptor, fn Func[In, Out]) (Tool, error) {
	in, err := CompileSchema(d.Name+"/input", d.InputSchema)
	if err != nil {
		return nil, err
	}
	// The output schema is only compiled to refuse a broken one at start-up;
	// results are checked against it by tests and by components that
	// forward them (ValidateOutput), not on every call.
	if len(d.OutputSchema) > 0 {
		if _, err := CompileSchema(d.Name+"/output", d.OutputSchema); err != nil {
			return nil, err
		}
	}
	return &typed[In, Out]{desc: d, input: in, fn: fn}, nil
}

// MustNew is [New] for descriptors that are constants of the program.
func MustNew[In, Out any](d Descriptor, fn Func[In, Out]) Tool {
	t, err := New(d, fn)
	if err != nil {
		panic(err)
	}
	return t
}

func (t *typed[In, Out]) Descriptor() Descriptor { return t.desc }

func (t *typed[In, Out]) Call(ctx context.Context, args jsontext.Value) (Result, error) {
	in, err := DecodeArgs[In](t.input, args)
	if err != nil {
		return Result{}, err
	}
	out, err := t.fn(ctx, in)
	if err != nil {
		return Result{}, err
	}
	b, err := json.Marshal(out, json.Deterministic(true))
	if err != nil {
		return Result{}, fmt.Errorf("tool: %s: marshal result: %w", t.desc.Name, err)
	}
	if len(b) == 0 || b[0] != '{' {
		return Result{}, errNotObject
	}
	return Result{Structured: b}, nil
}

// DecodeArgs validates args against schema and decodes them into a new In
// with unknown members refused and no type coercion. Failures are
// *ArgumentError.
func DecodeArgs[In any](schema *jsonschema.Schema, args jsontext.Value) (In, error) {
	var in In
	if err := ValidateValue(schema, args); err != nil {
		return in, err
	}
	// The schema has already refused what it can describe; the typed
	// decode is the second, independent line: it refuses unknown members
	// and any value that does not fit the Go type exactly.
	if err := json.Unmarshal(args, &in, json.RejectUnknownMembers(true)); err != nil {
		var se *json.SemanticError
		if errors.As(err, &se) {
			name := topLevelName(string(se.JSONPointer))
			if name != "" {
				return in, NewArgumentError(fmt.Sprintf("%s: %s", problem.Quote(name), describeSemantic(se)), name)
			}
		}
		return in, NewArgumentError("arguments do not match the tool's input type")
	}
	return in, nil
}

func describeSemantic(se *json.SemanticError) string {
	if se.JSONKind != 0 && se.GoType != nil {
		return fmt.Sprintf("a JSON %s cannot be used here", se.JSONKind)
	}
	return "unknown or invalid field"
}

func topLevelName(ptr string) string {
	ptr = strings.TrimPrefix(ptr, "/")
	if i := strings.IndexByte(ptr, '/'); i >= 0 {
		ptr = ptr[:i]
	}
	return strings.NewReplacer("~1", "/", "~0", "~").Replace(ptr)
}

// ValidateValue validates the JSON value v against schema and converts a
// failure into an *ArgumentError naming the arguments at fault.
func ValidateValue(schema *jsonschema.Schema, v jsontext.Value) error {
	inst, err := instance(v)
	if err != nil {
		return NewArgumentError("arguments are not valid JSON")
	}
	err = schema.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return NewArgumentError("arguments do not match the input schema")
	}
	var (
		names   = map[string]bool{}
		reasons []string
	)
	collect(ve, names, &reasons)
	params := make([]string, 0, len(names))
	for n := range names {
		params = append(params, n)
	}
	sort.Strings(params)
	detail := strings.Join(reasons, "; ")
	if detail == "" {
		detail = "arguments do not match the input schema"
	}
	return NewArgumentError(detail, params...)
}

var printer = message.NewPrinter(language.English)

// collect walks the leaves of a validation error. Messages never repeat an
// argument's value: only names, the failed keyword and the schema's own
// bounds.
func collect(ve *jsonschema.ValidationError, names map[string]bool, reasons *[]string) {
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			collect(c, names, reasons)
		}
		return
	}
	where := "arguments"
	if len(ve.InstanceLocation) > 0 {
		names[ve.InstanceLocation[0]] = true
		where = problem.Quote(strings.Join(ve.InstanceLocation, "."))
	}
	var msg string
	switch k := ve.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			names[p] = true
		}
		quoted := make([]string, len(k.Properties))
		for i, p := range k.Properties {
			quoted[i] = problem.Quote(p)
		}
		msg = "unknown field " + strings.Join(quoted, ", ")
	case *kind.Required:
		for _, p := range k.Missing {
			names[p] = true
		}
		msg = "missing required field " + strings.Join(k.Missing, ", ")
	case *kind.Type:
		msg = fmt.Sprintf("must be %s, not %s", strings.Join(k.Want, " or "), k.Got)
	case *kind.Pattern:
		msg = "does not match the pattern " + k.Want
	case *kind.Format:
		msg = "is not a valid " + k.Want
	case *kind.MinLength:
		msg = fmt.Sprintf("must be at least %d characters long", k.Want)
	case *kind.MaxLength:
		msg = fmt.Sprintf("must be at most %d characters long", k.Want)
	case *kind.Minimum:
		msg = "must be >= " + ratString(k.Want)
	case *kind.Maximum:
		msg = "must be <= " + ratString(k.Want)
	case *kind.ExclusiveMinimum:
		msg = "must be > " + ratString(k.Want)
	case *kind.ExclusiveMaximum:
		msg = "must be < " + ratString(k.Want)
	case *kind.Enum, *kind.Const:
		msg = ve.ErrorKind.LocalizedString(printer)
	default:
		msg = "failed the " + strings.Join(ve.ErrorKind.KeywordPath(), "/") + " constraint"
	}
	*reasons = append(*reasons, where+": "+msg)
}

// CompileSchema compiles a JSON Schema document. Schemas without $schema are
// 2020-12; formats are asserted; no $ref is ever loaded from outside the
// document.
func CompileSchema(name string, doc jsontext.Value) (*jsonschema.Schema, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("tool: schema %s: %w", name, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(noLoader{})
	url := "urn:mcp-bastion:schema:" + name
	if err := c.AddResource(url, v); err != nil {
		return nil, fmt.Errorf("tool: schema %s: %w", name, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("tool: schema %s: %w", name, err)
	}
	return s, nil
}

// noLoader refuses every external reference: a schema may only refer to
// itself.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("tool: refusing to load external schema %q", url)
}

// ValidateOutput checks a structured result against the tool's output
// schema. It is meant for tests and for components that forward results.
func ValidateOutput(t Tool, structured jsontext.Value) error {
	d := t.Descriptor()
	if len(d.OutputSchema) == 0 {
		return nil
	}
	s, err := CompileSchema(d.Name+"/output", d.OutputSchema)
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(structured))
	if err != nil {
		return err
	}
	return s.Validate(inst)
}

// instance turns a JSON value into the form the schema validator takes:
// maps, slices, strings, booleans, nil and encoding/json Numbers, which
// keep every number's exact text. It reads the value once with jsontext
// rather than handing it to encoding/json again.
func instance(v jsontext.Value) (any, error) {
	d := jsondec.Borrow(v)
	defer jsondec.Return(d)
	x, err := instanceValue(d)
	if err != nil {
		return nil, err
	}
	return x, nil
}

func instanceValue(d *jsontext.Decoder) (any, error) {
	tok, err := d.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case '{':
		m := map[string]any{}
		for d.PeekKind() != '}' {
			name, err := d.ReadToken()
			if err != nil {
				return nil, err
			}
			// A token is only valid until the next read.
			key := name.String()
			val, err := instanceValue(d)
			if err != nil {
				return nil, err
			}
			m[key] = val
		}
		_, err := d.ReadToken()
		return m, err
	case '[':
		a := []any{}
		for d.PeekKind() != ']' {
			val, err := instanceValue(d)
			if err != nil {
				return nil, err
			}
			a = append(a, val)
		}
		_, err := d.ReadToken()
		return a, err
	case '"':
		return tok.String(), nil
	case '0':
		return stdjson.Number(tok.String()), nil
	case 't':
		return true, nil
	case 'f':
		return false, nil
	case 'n':
		return nil, nil
	}
	return nil, fmt.Errorf("tool: unexpected JSON token %v", tok.Kind())
}

// ratString writes a bound of the tool's own schema as a decimal number;
// big.Rat's String would write 0 as "0/1".
func ratString(r *big.Rat) string {
	if r.IsInt() && r.Num().IsInt64() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}
