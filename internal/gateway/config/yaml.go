package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The strict YAML decoding of the configuration. go.yaml.in/yaml/v3 parses
// the text into a node tree; this file maps that tree onto the Config
// structs itself, rather than through yaml's own Decode with KnownFields,
// so that every error names the key path that caused it ("servers[1].url")
// and not a line and a Go type. It refuses, wherever they occur: duplicate
// keys, keys the structs do not have, anchors and aliases (an alias bomb
// costs nothing to write), more than one document, and values of the
// wrong kind.

// scalar is a type that reads itself from a YAML scalar.
type scalar interface {
	setScalar(s string) error
}

// parseYAML decodes data, one YAML document, strictly into dst (a pointer
// to a struct), and returns the line of each key path for the
// validator's errors. Errors are *Error values, joined.
func parseYAML(data []byte, dst any) (map[string]int, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{Path: "", Msg: "the file is empty"}
		}
		return nil, &Error{Path: "", Msg: "not valid YAML: " + yamlMessage(err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &Error{Path: "", Msg: "the file holds more than one YAML document"}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) != 1 {
			return nil, &Error{Path: "", Msg: "the file is empty"}
		}
		root = root.Content[0]
	}
	var errs []error
	decodeNode("", root, reflect.ValueOf(dst).Elem(), &errs)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	lines := map[string]int{}
	nodeLines("", root, lines)
	return lines, nil
}

// nodeLines records the line of every key path of n (as decodeNode and
// the validator spell them: a.b, a[0]), so that an error the validator
// finds in a value says where the value is.
func nodeLines(path string, n *yaml.Node, lines map[string]int) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			kp := join(path, n.Content[i].Value)
			lines[kp] = n.Content[i].Line // the key's: a list's items start below it
			nodeLines(kp, n.Content[i+1], lines)
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			ip := fmt.Sprintf("%s[%d]", path, i)
			lines[ip] = item.Line
			nodeLines(ip, item, lines)
		}
	}
}

// lineOf is the line of path, or of the nearest key above it that the
// file holds (a key the file leaves out, such as one a default fills, has
// none); 0 when none is known.
func lineOf(lines map[string]int, path string) int {
	for path != "" {
		if l, ok := lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return 0
		}
		path = path[:i]
	}
	return 0
}

// yamlMessage strips the package prefix from a parse error.
func yamlMessage(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	// go.yaml.in/yaml/v3 v3.0.6 places its parser's problems (not its
	// scanner's) at a line counted from 0 (decode.go, parser.fail), and
	// that line is the faulty one or where the collection it breaks
	// begins: "line 7" for a mapping that begins on line 8 and breaks on
	// line 15. Said as it is. TestSyntaxErrorLines holds this to the
	// library's behaviour.
	rest, ok := strings.CutPrefix(msg, "line ")
	if !ok {
		return msg
	}
	num, problem, ok := strings.Cut(rest, ": ")
	n, err2 := strconv.Atoi(num)
	if !ok || err2 != nil {
		return msg
	}
	for _, p := range parserProblems {
		if strings.HasPrefix(problem, p) {
			return fmt.Sprintf("line %d or the block that begins there: %s", n+1, problem)
		}
	}
	return msg
}

// parserProblems begin the problems go.yaml.in/yaml/v3's parser reports
// (parserc.go); its scanner's are counted from 1 already.
var parserProblems = []string{
	"did not find expected ",
	"found duplicate %TAG directive",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found undefined tag handle",
}

// decodeNode decodes n into v, appending errors (one per bad key) to errs.
func decodeNode(path string, n *yaml.Node, v reflect.Value, errs *[]error) {
	fail := func(format string, args ...any) {
		*errs = append(*errs, &Error{Path: path, Line: n.Line, Msg: fmt.Sprintf(format, args...)})
	}
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		fail("anchors and aliases are not accepted")
		return
	}
	if s, ok := v.Addr().Interface().(scalar); ok {
		if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
			fail("must be a single value")
			return
		}
		if err := s.setScalar(n.Value); err != nil {
			fail("%v", err)
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			return // an explicitly empty section: left unset
		}
		v.Set(reflect.New(v.Type().Elem()))
		decodeNode(path, n, v.Elem(), errs)
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			fail("must be a mapping of keys to values")
			return
		}
		fields := structFields(v.Type())
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			kp := join(path, k.Value)
			if k.Kind != yaml.ScalarNode {
				*errs = append(*errs, &Error{Path: path, Line: k.Line, Msg: "keys must be plain names"})
				continue
			}
			if seen[k.Value] {
				*errs = append(*errs, &Error{Path: kp, Line: k.Line, Msg: "the key appears twice"})
				continue
			}
			seen[k.Value] = true
			idx, ok := fields[k.Value]
			if !ok {
				*errs = append(*errs, &Error{Path: kp, Line: k.Line, Msg: "unknown key" + suggestion(k.Value, fields)})
				continue
			}
			decodeNode(kp, val, v.Field(idx), errs)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			fail("must be a list")
			return
		}
		out := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			decodeNode(fmt.Sprintf("%s[%d]", path, i), item, out.Index(i), errs)
		}
		v.Set(out)
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			panic("config: map keys must be strings")
		}
		if n.Kind != yaml.MappingNode {
			fail("must be a mapping of names to values")
			return
		}
		out := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			kp := join(path, k.Value)
			if k.Kind != yaml.ScalarNode {
				*errs = append(*errs, &Error{Path: path, Line: k.Line, Msg: "keys must be plain names"})
				continue
			}
			if out.MapIndex(reflect.ValueOf(k.Value)).IsValid() {
				*errs = append(*errs, &Error{Path: kp, Line: k.Line, Msg: "the key appears twice"})
				continue
			}
			elem := reflect.New(v.Type().Elem()).Elem()
			decodeNode(kp, val, elem, errs)
			out.SetMapIndex(reflect.ValueOf(k.Value), elem)
		}
		v.Set(out)
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
			fail("must be a single value")
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			fail("must be true or false")
			return
		}
		b, _ := strconv.ParseBool(n.Value)
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		x, err := strconv.ParseInt(n.Value, 10, 64)
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || err != nil {
			fail("must be a whole number")
			return
		}
		v.SetInt(x)
	default:
		panic("config: unsupported field type " + v.Type().String())
	}
}

// structFields maps the yaml names of t's fields to their index.
func structFields(t reflect.Type) map[string]int {
	m := map[string]int{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			m[name] = i
		}
	}
	return m
}

// suggestion names the known key closest to a misspelt one.
func suggestion(key string, fields map[string]int) string {
	best, dist := "", 3
	for name := range fields {
		if d := editDistance(strings.ToLower(key), name); d < dist || (d == dist && name < best && best != "") {
			best, dist = name, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
