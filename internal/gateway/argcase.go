package gateway

import (
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mcp-bastion/bastion/internal/jsondec"
)

// caseVariant finds a member of args that the tool's input schema does
// not declare by its exact name but whose name folds to one it declares
// ("TO" where the schema declares "to"), and returns both names.
//
// Such a member is judged by the schema as an undeclared one (allowed
// unless additionalProperties says otherwise) and is absent to a policy
// condition (has(args.to) is false), while a downstream whose decoder
// folds case — Go's encoding/json matches struct fields so — reads it as
// the declared member: the gateway would check one call and forward
// another. foldedDuplicate catches two members that collide with each
// other; this catches one that collides with the schema.
//
// Names fold as foldedDuplicate folds them (foldCase), which is
// encoding/json's folding rune for rune: the Kelvin sign K folds to k,
// long s ſ to s, dotted İ and dotless ı to i; and, here, without their
// dashes and underscores, which json/v2's case:ignore matching drops
// ("amo-unt" and "a_mount" are read as "amount"), and which a name the
// gateway passes may hold (guard.Limits.AnyNames).
//
// Every object level the schema describes is searched, as foldedDuplicate
// searches every level: the value of a member goes with its properties
// (or patternProperties, else additionalProperties) schemas, an array's
// items with its items or prefixItems schemas, through $ref, allOf, anyOf,
// oneOf, if/then/else and dependent schemas. A name declared in any of
// the schemas that apply at a level is declared there, so a schema with
// alternatives refuses only names no alternative declares.
func caseVariant(schema *jsonschema.Schema, args jsontext.Value) (given, declared string, found bool) {
	if schema == nil {
		return "", "", false
	}
	w := caseWalk{dec: jsondec.Borrow(args, jsontext.AllowDuplicateNames(true))}
	defer jsondec.Return(w.dec)
	if !w.value(applied(nil, schema)) {
		return "", "", false
	}
	return w.given, w.declared, true
}

// caseWalk is one search of caseVariant. A read error ends it with
// nothing found: the arguments passed the schema, so they are valid JSON.
type caseWalk struct {
	dec *jsontext.Decoder
	// folds are a schema's property names by their fold, made when a
	// name is first looked up there, so that a hostile array of many
	// objects costs one map per schema rather than one per object.
	folds           map[*jsonschema.Schema]map[string]string
	given, declared string
}

// value reads the next value, which ss apply to, and reports whether it
// holds a case variant.
func (w *caseWalk) value(ss []*jsonschema.Schema) bool {
	switch k := w.dec.PeekKind(); {
	case k == '{' && describesMembers(ss):
		return w.object(ss)
	case k == '[' && describesMembers(ss):
		return w.array(ss)
	}
	_ = w.dec.SkipValue()
	return false
}

func (w *caseWalk) object(ss []*jsonschema.Schema) bool {
	if _, err := w.dec.ReadToken(); err != nil {
		return false
	}
	for w.dec.PeekKind() != '}' {
		tok, err := w.dec.ReadToken()
		if err != nil {
			return false
		}
		name := tok.String()
		sub, exact := members(ss, name)
		if !exact {
			if d, ok := w.foldsTo(ss, name); ok {
				w.given, w.declared = name, d
				return true
			}
		}
		if w.value(sub) {
			return true
		}
	}
	_, _ = w.dec.ReadToken()
	return false
}

func (w *caseWalk) array(ss []*jsonschema.Schema) bool {
	if _, err := w.dec.ReadToken(); err != nil {
		return false
	}
	for i := 0; w.dec.PeekKind() != ']'; i++ {
		if w.dec.PeekKind() == 0 { // a read error
			return false
		}
		if w.value(items(ss, i)) {
			return true
		}
	}
	_, _ = w.dec.ReadToken()
	return false
}

// foldsTo returns the property name of ss that name folds to.
func (w *caseWalk) foldsTo(ss []*jsonschema.Schema, name string) (string, bool) {
	folded := variantFold(name)
	for _, s := range ss {
		if len(s.Properties) == 0 {
			continue
		}
		m, ok := w.folds[s]
		if !ok {
			m = make(map[string]string, len(s.Properties))
			for p := range s.Properties {
				m[variantFold(p)] = p
			}
			if w.folds == nil {
				w.folds = map[*jsonschema.Schema]map[string]string{}
			}
			w.folds[s] = m
		}
		if d, ok := m[folded]; ok {
			return d, true
		}
	}
	return "", false
}

// members returns the schemas that apply to the value of the member name
// of an object ss apply to, and reports whether one of ss declares name
// in its properties.
func members(ss []*jsonschema.Schema, name string) (sub []*jsonschema.Schema, declared bool) {
	for _, s := range ss {
		if p, ok := s.Properties[name]; ok {
			declared = true
			sub = applied(sub, p)
		}
		matched := false
		for re, p := range s.PatternProperties {
			if re.MatchString(name) {
				matched = true
				sub = applied(sub, p)
			}
		}
		if _, ok := s.Properties[name]; !ok && !matched {
			if p, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
				sub = applied(sub, p)
			}
		}
	}
	return sub, declared
}

// items returns the schemas that apply to the i-th item of an array ss
// apply to (2020-12 prefixItems and items; draft-07 items and
// additionalItems).
func items(ss []*jsonschema.Schema, i int) []*jsonschema.Schema {
	var sub []*jsonschema.Schema
	for _, s := range ss {
		switch {
		case i < len(s.PrefixItems):
			sub = applied(sub, s.PrefixItems[i])
		case s.Items2020 != nil:
			sub = applied(sub, s.Items2020)
		}
		switch it := s.Items.(type) {
		case *jsonschema.Schema:
			sub = applied(sub, it)
		case []*jsonschema.Schema:
			if i < len(it) {
				sub = applied(sub, it[i])
			} else if p, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
				sub = applied(sub, p)
			}
		}
	}
	return sub
}

// applied appends s and every schema that applies to the same instance
// through an in-place applicator ($ref, allOf, anyOf, oneOf, if/then/else,
// dependent schemas), each once: a schema already in dst is not walked
// again, which also ends a cycle of references.
func applied(dst []*jsonschema.Schema, s *jsonschema.Schema) []*jsonschema.Schema {
	if s == nil || slices.Contains(dst, s) {
		return dst
	}
	dst = append(dst, s)
	dst = applied(dst, s.Ref)
	dst = applied(dst, s.RecursiveRef)
	if s.DynamicRef != nil {
		dst = applied(dst, s.DynamicRef.Ref)
	}
	for _, group := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf} {
		for _, x := range group {
			dst = applied(dst, x)
		}
	}
	dst = applied(dst, s.If)
	dst = applied(dst, s.Then)
	dst = applied(dst, s.Else)
	for _, x := range s.DependentSchemas {
		dst = applied(dst, x)
	}
	for _, x := range s.Dependencies {
		if x, ok := x.(*jsonschema.Schema); ok {
			dst = applied(dst, x)
		}
	}
	return dst
}

// describesMembers reports whether one of ss says anything of an
// object's members or an array's items: otherwise a value they apply to
// is skipped whole.
func describesMembers(ss []*jsonschema.Schema) bool {
	for _, s := range ss {
		_, additional := s.AdditionalProperties.(*jsonschema.Schema)
		if len(s.Properties) > 0 || len(s.PatternProperties) > 0 || additional ||
			len(s.PrefixItems) > 0 || s.Items2020 != nil || s.Items != nil {
			return true
		}
	}
	return false
}

// variantFold is name folded as caseVariant compares names: case folded
// (foldCase), dashes and underscores dropped.
func variantFold(name string) string {
	if strings.ContainsAny(name, "-_") {
		name = strings.NewReplacer("-", "", "_", "").Replace(name)
	}
	return foldCase(name)
}
