// Package admit decides whether a downstream tool descriptor may be
// offered (GATEWAY.md decisions 7–9). It is pure — no I/O, no clock — so
// every rule is table-tested without a server, and one descriptor's
// verdict never depends on another's.
//
// This file is the x-mcp-header walk of decision 8: where a descriptor
// may ask a client to mirror an argument into an Mcp-Param-* header.
package admit

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// HeaderMode says where x-mcp-header is legal.
type HeaderMode string

// Header modes.
const (
	// HeaderStrict allows x-mcp-header only on a direct member of the
	// input schema's properties (seed 001).
	HeaderStrict HeaderMode = "strict"
	// HeaderSpec allows it on any property reachable from the root
	// through properties keys only (the 2026-07-28 rule).
	HeaderSpec HeaderMode = "spec"
)

// DefaultSensitiveNames are the names a mirrored property or header may
// neither equal nor end with, compared without case, "-" or "_".
var DefaultSensitiveNames = []string{"password", "secret", "token", "api_key", "authorization"}

// Mirror is one argument the descriptor mirrors into a header.
type Mirror struct {
	// Path is the property path from the input schema's root.
	Path []string
	// Header is the x-mcp-header value: Mcp-Param-<Header>.
	Header string
	// Type is the property's JSON type: string, integer or boolean.
	Type string
}

// Problem is why a descriptor's header mirroring is refused: the JSON
// pointer of the member at fault and what is wrong with it.
type Problem struct {
	Pointer string
	Detail  string
	// Sensitive marks a mirror of a sensitive name.
	Sensitive bool
}

func (p *Problem) Error() string { return p.Pointer + ": " + p.Detail }

// tchar is RFC 9110's token: the syntax of a header name.
var tchar = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// Headers walks the raw JSON of a tool's input and output schemas and
// returns the mirrors the input schema declares, or the first problem.
// Every x-mcp-header member anywhere is examined — whatever keyword holds
// it, $defs and $ref targets, unknown keywords, the whole output schema —
// and one that is not where mode allows, not a token, repeated without
// regard to case, on a property that is not string, integer or boolean,
// or on a sensitive name, refuses the descriptor.
func Headers(input, output jsontext.Value, mode HeaderMode, sensitive []string) ([]Mirror, *Problem) {
	in, err := decodeTree(input)
	if err != nil {
		return nil, &Problem{Pointer: "/inputSchema", Detail: "not valid JSON"}
	}
	var out any
	if output != nil {
		if out, err = decodeTree(output); err != nil {
			return nil, &Problem{Pointer: "/outputSchema", Detail: "not valid JSON"}
		}
	}
	return headersTree(in, out, output != nil, mode, sensitive)
}

// decodeTree decodes v strictly into maps, slices and scalars, once, so
// that the walks below never parse a subtree twice.
func decodeTree(v jsontext.Value) (any, error) {
	var t any
	err := json.Unmarshal(v, &t)
	return t, err
}

// headersTree is Headers on decoded schemas; hasOutput says whether the
// descriptor has an outputSchema at all.
func headersTree(input, output any, hasOutput bool, mode HeaderMode, sensitive []string) ([]Mirror, *Problem) {
	var mirrors []Mirror
	seen := map[string]bool{}
	var found *Problem
	visit := func(pointer string, legal []string, schema map[string]any) {
		if found != nil {
			return
		}
		// A reader that matches member names without regard to case
		// would take X-MCP-Header for the annotation: only the exact
		// spelling is an annotation, and no other spelling is allowed.
		for k := range schema {
			if len(k) == len("x-mcp-header") && k != "x-mcp-header" && strings.EqualFold(k, "x-mcp-header") {
				found = &Problem{Pointer: pointer + "/" + escape(k), Detail: "x-mcp-header must be spelled in lower case"}
				return
			}
		}
		raw, ok := schema["x-mcp-header"]
		if !ok {
			return
		}
		at := pointer + "/x-mcp-header"
		if legal == nil {
			found = &Problem{Pointer: at, Detail: "x-mcp-header is only allowed on a property of the input schema (" + string(mode) + " mode)"}
			return
		}
		name, isString := raw.(string)
		if !isString || name == "" || !tchar.MatchString(name) {
			found = &Problem{Pointer: at, Detail: "must be a non-empty header name token"}
			return
		}
		if seen[strings.ToLower(name)] {
			found = &Problem{Pointer: at, Detail: fmt.Sprintf("header %s is mirrored twice (names compare without case)", strconv.Quote(name))}
			return
		}
		seen[strings.ToLower(name)] = true
		typ, _ := schema["type"].(string)
		if typ != "string" && typ != "integer" && typ != "boolean" {
			found = &Problem{Pointer: pointer, Detail: "a mirrored property must have type string, integer or boolean"}
			return
		}
		if s := sensitiveMatch(legal, name, sensitive); s != "" {
			found = &Problem{Pointer: at, Detail: fmt.Sprintf("mirrors a sensitive name (%s) into a header", s), Sensitive: true}
			return
		}
		mirrors = append(mirrors, Mirror{Path: legal, Header: name, Type: typ})
	}
	walk(input, "/inputSchema", []string{}, mode, visit)
	if found == nil && hasOutput {
		walk(output, "/outputSchema", nil, mode, visit)
	}
	if found != nil {
		return nil, found
	}
	return mirrors, nil
}

// walk visits every JSON object in v, depth first. path is the property
// path when the object is a schema reachable through properties keys only
// (nil when it is not, or when mirroring is never legal there); an
// x-mcp-header is legal at a non-empty path, and in strict mode only at a
// path of one.
func walk(v any, pointer string, path []string, mode HeaderMode, visit func(string, []string, map[string]any)) {
	switch v := v.(type) {
	case []any:
		for i, it := range v {
			walk(it, pointer+"/"+strconv.Itoa(i), nil, mode, visit)
		}
	case map[string]any:
		var legal []string
		if len(path) > 0 && (mode == HeaderSpec || len(path) == 1) {
			legal = path
		}
		visit(pointer, legal, v)
		// In name order: the verdict, and the first problem it names,
		// must not depend on a map's order.
		for _, k := range slices.Sorted(maps.Keys(v)) {
			child := v[k]
			if props, ok := child.(map[string]any); ok && k == "properties" && path != nil {
				// The members of properties are schemas of named
				// properties; each extends the chain.
				for _, name := range slices.Sorted(maps.Keys(props)) {
					p := append(append([]string{}, path...), name)
					walk(props[name], pointer+"/properties/"+escape(name), p, mode, visit)
				}
				continue
			}
			// Under any other keyword no property path continues.
			walk(child, pointer+"/"+escape(k), nil, mode, visit)
		}
	}
}

// sensitiveMatch returns the sensitive name that a name of the property's
// path, or the header name, equals or ends with, compared on letters and
// digits only, without case.
func sensitiveMatch(path []string, header string, sensitive []string) string {
	names := make([]string, 0, len(path)+1)
	for _, p := range path {
		names = append(names, normalize(p))
	}
	names = append(names, normalize(header))
	for _, s := range sensitive {
		n := normalize(s)
		if n == "" {
			continue
		}
		for _, name := range names {
			if strings.HasSuffix(name, n) {
				return s
			}
		}
	}
	return ""
}

// normalize lower-cases s and keeps its letters and digits only, so that
// no separator (-, _, ., a space) hides a name: X-Api.Key is apikey.
func normalize(s string) string {
	b := make([]byte, 0, len(s))
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b = utf8.AppendRune(b, r)
		}
	}
	return string(b)
}

// escape is a JSON pointer reference token (RFC 6901).
func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// unmarshalRaw decodes strictly: a repeated member name is an error, so
// that no two readers of a descriptor can see different members.
func unmarshalRaw[T any](v jsontext.Value, dst *T) error { return json.Unmarshal(v, dst) }
