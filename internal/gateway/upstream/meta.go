package upstream

import (
	"bytes"
	"errors"
	"slices"

	"github.com/go-json-experiment/json/jsontext"
)

// withMeta returns the params object p (nil for none) with the given
// members set in its _meta object, which it creates when missing. Other
// members, and other _meta members, are kept as they are, in their order.
// p must be a JSON object: the gateway re-encodes what it parsed, it
// never passes a peer's bytes on unchecked.
func withMeta(p []byte, set map[string]jsontext.Value) ([]byte, error) {
	if len(set) == 0 {
		return p, nil
	}
	if p == nil {
		p = []byte("{}")
	}
	if !bytes.Contains(p, []byte(`"_meta"`)) {
		// No _meta anywhere (the common case: params the gateway built):
		// the new member goes before the closing brace, without a parse.
		if b := bytes.TrimSpace(p); len(b) >= 2 && b[0] == '{' && b[len(b)-1] == '}' {
			out := append([]byte(nil), b[:len(b)-1]...)
			if len(bytes.TrimSpace(b[1:len(b)-1])) > 0 {
				out = append(out, ',')
			}
			out = append(out, `"_meta":`...)
			out = append(out, metaObject(nil, set)...)
			return append(out, '}'), nil
		}
	}
	members, err := objectMembers(p)
	if err != nil {
		return nil, err
	}
	var meta []member
	at := -1
	for i, m := range members {
		if m.name == "_meta" {
			if m.value.Kind() != '{' {
				return nil, errors.New("upstream: params._meta is not an object")
			}
			if meta, err = objectMembers(m.value); err != nil {
				return nil, err
			}
			at = i
		}
	}
	metaValue := metaObject(meta, set)
	if at >= 0 {
		members[at].value = metaValue
	} else {
		members = append(members, member{"_meta", metaValue})
	}
	return encodeObject(members), nil
}

// metaObject returns the members of meta with those of set replaced or
// added (in sorted order), as a JSON object.
func metaObject(meta []member, set map[string]jsontext.Value) jsontext.Value {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		i := slices.IndexFunc(meta, func(m member) bool { return m.name == k })
		if i >= 0 {
			meta[i].value = set[k]
		} else {
			meta = append(meta, member{k, set[k]})
		}
	}
	return encodeObject(meta)
}

// member is one member of a JSON object.
type member struct {
	name  string
	value jsontext.Value
}

// objectMembers splits a JSON object into its members.
func objectMembers(obj []byte) ([]member, error) {
	d := jsontext.NewDecoder(bytes.NewReader(obj))
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, errors.New("upstream: not a JSON object")
	}
	var out []member
	for d.PeekKind() != '}' {
		tok, err := d.ReadToken()
		if err != nil {
			return nil, err
		}
		name := tok.String() // before the next read voids the token
		v, err := d.ReadValue()
		if err != nil {
			return nil, err
		}
		// Compact: the object is re-encoded for a peer, whose framing
		// (a stdio line, an SSE data line) a raw CR or LF would end.
		v = v.Clone()
		if err := v.Compact(); err != nil {
			return nil, err
		}
		out = append(out, member{name, v})
	}
	return out, nil
}

// encodeObject writes members as a JSON object.
func encodeObject(members []member) jsontext.Value {
	b := []byte{'{'}
	for i, m := range members {
		if i > 0 {
			b = append(b, ',')
		}
		b, _ = jsontext.AppendQuote(b, m.name)
		b = append(b, ':')
		b = append(b, m.value...)
	}
	return append(b, '}')
}

// quote returns s as a JSON string value.
func quote(s string) jsontext.Value {
	b, _ := jsontext.AppendQuote(nil, s)
	return b
}
