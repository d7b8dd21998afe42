package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// errDuplicate is the reference decoder's duplicate-name error.
var errDuplicate = errors.New("duplicate name")

// errTooDeep is the reference decoder's nesting error.
var errTooDeep = errors.New("nesting too deep")

// refDecode is the naive reference decoder: it reads b token by token with
// duplicate names allowed by jsontext and checks them itself, with a
// seen-set per object. It returns the value as plain Go values
// (map[string]any, []any, string, json.Number, bool, nil) or an error when
// b is not exactly one strict JSON value within MaxNesting.
func refDecode(b []byte) (any, error) {
	d := jsontext.NewDecoder(bytes.NewReader(b), jsontext.AllowDuplicateNames(true))
	v, err := refValue(d, 0)
	if err != nil {
		return nil, err
	}
	if _, err := d.ReadToken(); err != io.EOF {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

func refValue(d *jsontext.Decoder, depth int) (any, error) {
	tok, err := d.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case '{':
		if depth+1 > MaxNesting {
			return nil, errTooDeep
		}
		obj := map[string]any{}
		for d.PeekKind() != '}' {
			name, err := d.ReadToken()
			if err != nil {
				return nil, err
			}
			if name.Kind() != '"' {
				return nil, errors.New("name is not a string")
			}
			key := name.String() // before the next read voids the token
			if _, dup := obj[key]; dup {
				return nil, errDuplicate
			}
			v, err := refValue(d, depth+1)
			if err != nil {
				return nil, err
			}
			obj[key] = v
		}
		if _, err := d.ReadToken(); err != nil {
			return nil, err
		}
		return obj, nil
	case '[':
		if depth+1 > MaxNesting {
			return nil, errTooDeep
		}
		arr := []any{}
		for d.PeekKind() != ']' {
			v, err := refValue(d, depth+1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		if _, err := d.ReadToken(); err != nil {
			return nil, err
		}
		return arr, nil
	case '"':
		return tok.String(), nil
	case '0':
		return json.Number(tok.String()), nil
	case 't', 'f':
		return tok.Bool(), nil
	case 'n':
		return nil, nil
	}
	return nil, errors.New("unexpected token")
}

// refID is the reference id rule: a string, or an integer literal without
// fraction, exponent or negative zero that fits int64.
func refID(v any) (ID, bool) {
	switch v := v.(type) {
	case string:
		return StringID(v), true
	case json.Number:
		s := string(v)
		if s == "-0" || strings.ContainsAny(s, ".eE") {
			return ID{}, false
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return ID{}, false
		}
		return Int64ID(n), true
	}
	return ID{}, false
}

// refEnvelope is the reference envelope check of one decoded object: the
// message it is, or ok false with the id an error must echo.
func refEnvelope(obj map[string]any) (m Message, ok bool, echo ID) {
	ok = true
	for name := range obj {
		switch name {
		case "jsonrpc", "id", "method", "params", "result", "error":
		default:
			ok = false
		}
	}
	if s, isStr := obj["jsonrpc"].(string); !isStr || s != Version {
		ok = false
	}
	if raw, has := obj["id"]; has {
		id, valid := refID(raw)
		if !valid {
			ok = false
		}
		m.ID, echo = id, id
	}
	if raw, has := obj["params"]; has {
		if _, isObj := raw.(map[string]any); !isObj {
			ok = false
		}
	}
	_, hasResult := obj["result"]
	_, hasError := obj["error"]
	if raw, has := obj["method"]; has {
		s, isStr := raw.(string)
		if !isStr || hasResult || hasError {
			ok = false
		}
		m.Method = s
		m.Kind = KindNotification
		if _, hasID := obj["id"]; hasID {
			m.Kind = KindRequest
		}
	} else if hasResult || hasError {
		m.Kind = KindResponse
		_, hasID := obj["id"]
		if _, isObj := obj["error"].(map[string]any); (hasError && !isObj) || (hasResult && hasError) || (hasResult && !hasID) {
			ok = false
		}
	} else {
		ok = false
	}
	return m, ok, echo
}

// checkItem compares one decoded item with the reference for a batch
// member or single message v.
func checkItem(t *testing.T, it Item, v any) {
	t.Helper()
	if (it.Msg == nil) == (it.Err == nil) {
		t.Fatalf("item has Msg %v and Err %v: want exactly one", it.Msg, it.Err)
	}
	obj, isObj := v.(map[string]any)
	if !isObj {
		if it.Err == nil || it.Err.Code != CodeInvalidRequest || it.Err.ID.IsValid() {
			t.Fatalf("non-object member %#v: got %s, want -32600 without id", v, describe(it))
		}
		return
	}
	want, ok, echo := refEnvelope(obj)
	if !ok {
		if it.Err == nil || it.Err.Code != CodeInvalidRequest {
			t.Fatalf("envelope %#v: got %s, want -32600", obj, describe(it))
		}
		if it.Err.ID != echo {
			t.Fatalf("envelope %#v: error id %v, want %v", obj, it.Err.ID, echo)
		}
		return
	}
	if it.Msg == nil {
		t.Fatalf("valid envelope %#v refused: %v", obj, it.Err)
	}
	m := it.Msg
	if m.Kind != want.Kind || m.ID != want.ID || m.Method != want.Method {
		t.Fatalf("envelope %#v: got %s, want kind %d id %v method %q", obj, describe(it), want.Kind, want.ID, want.Method)
	}
	params, has := obj["params"]
	if has != (m.Params != nil) {
		t.Fatalf("params present %v, Params %q", has, m.Params)
	}
	if has {
		var got any
		d := json.NewDecoder(bytes.NewReader(m.Params))
		d.UseNumber()
		if err := d.Decode(&got); err != nil || !reflect.DeepEqual(got, params) {
			t.Fatalf("Params %q decode to %#v (%v), want %#v", m.Params, got, err, params)
		}
	}
	for _, member := range []struct {
		name string
		raw  []byte
	}{{"result", m.Result}, {"error", m.Error}} {
		want, has := obj[member.name]
		if has != (member.raw != nil) {
			t.Fatalf("%s present %v, raw %q", member.name, has, member.raw)
		}
		if has {
			var got any
			d := json.NewDecoder(bytes.NewReader(member.raw))
			d.UseNumber()
			if err := d.Decode(&got); err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("%s %q decodes to %#v (%v), want %#v", member.name, member.raw, got, err, want)
			}
		}
	}
	if m.ID.IsValid() {
		// The id travels back unchanged.
		var resp struct{ ID json.RawMessage }
		out := AppendResult(nil, m.ID, []byte(`{}`))
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatalf("AppendResult for id %v: %q: %v", m.ID, out, err)
		}
		var back any
		d := json.NewDecoder(bytes.NewReader(resp.ID))
		d.UseNumber()
		if err := d.Decode(&back); err != nil || !reflect.DeepEqual(back, normalizeID(obj["id"])) {
			t.Fatalf("id %#v echoed as %s", obj["id"], resp.ID)
		}
	}
}

// normalizeID renders an integer id as the encoder writes it (so 1 and
// -5 compare as json.Number, whatever spaces surrounded them).
func normalizeID(v any) any {
	if n, ok := v.(json.Number); ok {
		i, _ := strconv.ParseInt(string(n), 10, 64)
		return json.Number(strconv.FormatInt(i, 10))
	}
	return v
}

// FuzzDecodeFrame checks DecodeFrame against the naive reference: a frame
// is a parse error exactly when it is not one strict JSON value (invalid
// for encoding/json, invalid UTF-8 or lone surrogates, duplicate names,
// nesting beyond MaxNesting); otherwise every item is what the reference
// envelope rules say, with the right id echoed.
func FuzzDecodeFrame(f *testing.F) {
	for _, tt := range decodeCases {
		if len(tt.in) < 4096 {
			f.Add([]byte(tt.in))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		frame := DecodeFrame(in)
		if len(frame.Items) == 0 {
			t.Fatal("DecodeFrame returned no items")
		}
		for _, it := range frame.Items {
			if (it.Msg == nil) == (it.Err == nil) {
				t.Fatalf("item has Msg %v and Err %v: want exactly one", it.Msg, it.Err)
			}
		}
		isParseErr := !frame.Batch && len(frame.Items) == 1 && frame.Items[0].Err != nil &&
			frame.Items[0].Err.Code == CodeParseError
		for _, it := range frame.Items {
			if it.Err != nil && it.Err.Code == CodeParseError && !isParseErr {
				t.Fatalf("-32700 inside a multi-item frame: %+v", frame)
			}
		}
		if isParseErr && frame.Items[0].Err.ID.IsValid() {
			t.Fatalf("parse error echoes id %v", frame.Items[0].Err.ID)
		}

		v, refErr := refDecode(in)
		if !json.Valid(in) && !isParseErr {
			t.Fatalf("encoding/json rejects %q but DecodeFrame gave %+v", in, frame)
		}
		if (refErr != nil) != isParseErr {
			t.Fatalf("input %q: reference error %v, DecodeFrame parse error %v", in, refErr, isParseErr)
		}
		if refErr != nil {
			return
		}
		if !json.Valid(in) {
			t.Fatalf("accepted %q, which encoding/json rejects", in)
		}

		switch v := v.(type) {
		case []any:
			if len(v) == 0 {
				if frame.Batch || len(frame.Items) != 1 || frame.Items[0].Err == nil || frame.Items[0].Err.Code != CodeInvalidRequest {
					t.Fatalf("empty batch: got %+v, want one -32600", frame)
				}
				return
			}
			if !frame.Batch || len(frame.Items) != len(v) {
				t.Fatalf("batch of %d: got batch=%v with %d items", len(v), frame.Batch, len(frame.Items))
			}
			for i, member := range v {
				checkItem(t, frame.Items[i], member)
			}
		default:
			if frame.Batch || len(frame.Items) != 1 {
				t.Fatalf("single value: got batch=%v with %d items", frame.Batch, len(frame.Items))
			}
			checkItem(t, frame.Items[0], v)
		}
	})
}
