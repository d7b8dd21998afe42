package jsonrpc

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// checkJSON fails unless b is one strict JSON value: valid for
// encoding/json and for jsontext, which also refuses duplicate names and
// invalid UTF-8.
func checkJSON(t *testing.T, b []byte) {
	t.Helper()
	if !json.Valid(b) {
		t.Fatalf("not JSON: %q", b)
	}
	if !jsontext.Value(b).IsValid() {
		t.Fatalf("not strict JSON (jsontext): %q", b)
	}
}

// response is the decoded shape of what the encoders write.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func decodeResponse(t *testing.T, b []byte) (response, map[string]json.RawMessage) {
	t.Helper()
	checkJSON(t, b)
	var r response
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		t.Fatal(err)
	}
	return r, members
}

func TestAppendResult(t *testing.T) {
	tests := []struct {
		name string
		id   ID
		want string
	}{
		{"int id", Int64ID(7), `{"jsonrpc":"2.0","id":7,"result":{"a":1}}`},
		{"negative id", Int64ID(-3), `{"jsonrpc":"2.0","id":-3,"result":{"a":1}}`},
		{"int64 min id", Int64ID(math.MinInt64), `{"jsonrpc":"2.0","id":-9223372036854775808,"result":{"a":1}}`},
		{"string id", StringID("abc"), `{"jsonrpc":"2.0","id":"abc","result":{"a":1}}`},
		{"empty string id", StringID(""), `{"jsonrpc":"2.0","id":"","result":{"a":1}}`},
		{"string id escaped", StringID("q\"\\\n\x00\x1f"), `{"jsonrpc":"2.0","id":"q\"\\\n\u0000\u001f","result":{"a":1}}`},
		{"string id invalid UTF-8", StringID("a\xffb"), `{"jsonrpc":"2.0","id":"a\ufffdb","result":{"a":1}}`},
		{"no id", ID{}, `{"jsonrpc":"2.0","result":{"a":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AppendResult([]byte("pre"), tt.id, []byte(`{"a":1}`))
			if !bytes.HasPrefix(got, []byte("pre")) {
				t.Fatalf("dst prefix lost: %q", got)
			}
			got = got[3:]
			if string(got) != tt.want {
				t.Errorf("AppendResult = %s, want %s", got, tt.want)
			}
			_, members := decodeResponse(t, got)
			if _, ok := members["id"]; ok != tt.id.IsValid() {
				t.Errorf("id member present = %v, want %v", ok, tt.id.IsValid())
			}
		})
	}
}

func TestAppendError(t *testing.T) {
	tests := []struct {
		name string
		err  *Error
		want string
	}{
		{"with id", NewError(Int64ID(1), CodeMethodNotFound, "Method not found"),
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}`},
		{"string id", NewError(StringID("x"), CodeInvalidParams, "bad"),
			`{"jsonrpc":"2.0","id":"x","error":{"code":-32602,"message":"bad"}}`},
		{"without id", &Error{Code: CodeParseError, Message: "Parse error: invalid JSON"},
			`{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error: invalid JSON"}}`},
		{"with data", &Error{ID: Int64ID(2), Code: CodeInternalError, Message: "Internal error", Data: []byte(`{"incident":"abc"}`)},
			`{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"Internal error","data":{"incident":"abc"}}}`},
		{"empty data is data", &Error{Code: -32000, Message: "m", Data: []byte(`null`)},
			`{"jsonrpc":"2.0","error":{"code":-32000,"message":"m","data":null}}`},
		{"quotes and backslashes", &Error{Code: 1, Message: `say "hi" \ bye`},
			`{"jsonrpc":"2.0","error":{"code":1,"message":"say \"hi\" \\ bye"}}`},
		{"control characters", &Error{Code: 1, Message: "a\nb\rc\td\x00e\x1ff\x08g\x0ch"},
			`{"jsonrpc":"2.0","error":{"code":1,"message":"a\nb\rc\td\u0000e\u001ff\u0008g\u000ch"}}`},
		{"DEL and non-ASCII left for the wire", &Error{Code: 1, Message: "\x7fé\u2028😀"},
			"{\"jsonrpc\":\"2.0\",\"error\":{\"code\":1,\"message\":\"\x7fé\u2028😀\"}}"},
		{"invalid UTF-8", &Error{Code: 1, Message: "a\xffb\xc3"},
			`{"jsonrpc":"2.0","error":{"code":1,"message":"a\ufffdb\ufffd"}}`},
		{"UTF-8 encoded surrogate", &Error{Code: 1, Message: "\xed\xa0\x80"},
			`{"jsonrpc":"2.0","error":{"code":1,"message":"\ufffd\ufffd\ufffd"}}`},
		{"HTML is not escaped", &Error{Code: 1, Message: "<a>&"},
			`{"jsonrpc":"2.0","error":{"code":1,"message":"<a>&"}}`},
		{"positive code", &Error{Code: 42, Message: ""},
			`{"jsonrpc":"2.0","error":{"code":42,"message":""}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AppendError(nil, tt.err)
			if string(got) != tt.want {
				t.Errorf("AppendError =\n %s\nwant\n %s", got, tt.want)
			}
			r, members := decodeResponse(t, got)
			if _, ok := members["id"]; ok != tt.err.ID.IsValid() {
				t.Errorf("id member present = %v, want %v", ok, tt.err.ID.IsValid())
			}
			if r.Error == nil || r.Error.Code != tt.err.Code {
				t.Fatalf("decoded error = %+v", r.Error)
			}
			if want := replaceInvalid(tt.err.Message); r.Error.Message != want {
				t.Errorf("decoded message = %q, want %q", r.Error.Message, want)
			}
		})
	}
}

// replaceInvalid is the reference for message encoding: every byte of
// invalid UTF-8 becomes U+FFFD.
func replaceInvalid(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r) // RuneError for an invalid byte
		i += size
	}
	return b.String()
}

// TestAppendErrorRandomMessages is a property test: for random byte
// strings the output is strict JSON whose message is the input with
// invalid UTF-8 replaced.
func TestAppendErrorRandomMessages(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"a", " ", "\"", "\\", "\n", "\x00", "\x1f", "\x7f", "é", "\u2028", "😀", "\xff", "\xc3", "\xed\xa0\x80", "\xf4\x90\x80\x80", "/"}
	for range 5000 {
		var b strings.Builder
		for n := rng.IntN(20); n > 0; n-- {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		msg := b.String()
		id := StringID(msg)
		out := AppendError(nil, &Error{ID: id, Code: -32600, Message: msg})
		r, _ := decodeResponse(t, out)
		want := replaceInvalid(msg)
		if r.Error.Message != want {
			t.Fatalf("message %q decoded as %q, want %q", msg, r.Error.Message, want)
		}
		var gotID string
		if err := json.Unmarshal(r.ID, &gotID); err != nil || gotID != want {
			t.Fatalf("id %q decoded as %q (%v), want %q", msg, gotID, err, want)
		}
	}
}

func TestErrorText(t *testing.T) {
	e := NewError(Int64ID(1), CodeInvalidRequest, "Invalid request: x")
	if got, want := e.Error(), "jsonrpc: -32600: Invalid request: x"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if e.ID != Int64ID(1) || e.Code != -32600 || e.Data != nil {
		t.Errorf("NewError = %+v", e)
	}
}

func TestCodes(t *testing.T) {
	for _, c := range []struct {
		got, want int
	}{
		{CodeParseError, -32700}, {CodeInvalidRequest, -32600}, {CodeMethodNotFound, -32601},
		{CodeInvalidParams, -32602}, {CodeInternalError, -32603},
	} {
		if c.got != c.want {
			t.Errorf("code %d, want %d", c.got, c.want)
		}
	}
	if Version != "2.0" {
		t.Errorf("Version = %q", Version)
	}
}
