package jsonrpc

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// describe renders an item compactly for the tables below:
//
//	req <id> <method> [params]   a request
//	notif <method> [params]      a notification
//	resp [<id>]                  a response
//	err <code> [id=<id>]         an error owed to the peer
func describe(it Item) string {
	switch {
	case it.Msg != nil && it.Err != nil:
		return "BOTH"
	case it.Err != nil:
		s := "err " + strconv.Itoa(it.Err.Code)
		if it.Err.ID.IsValid() {
			s += " id=" + it.Err.ID.String()
		}
		return s
	case it.Msg == nil:
		return "EMPTY"
	}
	m := it.Msg
	var s string
	switch m.Kind {
	case KindRequest:
		s = fmt.Sprintf("req %s %q", m.ID, m.Method)
	case KindNotification:
		s = fmt.Sprintf("notif %q", m.Method)
		if m.ID.IsValid() {
			s += " WITH ID " + m.ID.String()
		}
	case KindResponse:
		s = "resp"
		if m.ID.IsValid() {
			s += " " + m.ID.String()
		}
		if m.Method != "" {
			s += " WITH METHOD"
		}
	default:
		s = fmt.Sprintf("kind %d", m.Kind)
	}
	if m.Params != nil {
		s += " " + string(m.Params)
	}
	return s
}

func describeFrame(f Frame) (batch bool, items []string) {
	for _, it := range f.Items {
		items = append(items, describe(it))
	}
	return f.Batch, items
}

// req builds a frame from members after "jsonrpc":"2.0".
func req(members string) string { return `{"jsonrpc":"2.0",` + members + `}` }

// nest returns a value n arrays/objects deep: {"a":{"a":…1…}}.
func nest(n int) string {
	return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n)
}

type decodeCase struct {
	name  string
	in    string
	batch bool
	want  []string
}

// decodeCases is the unit table; the fuzz target is seeded from it too.
var decodeCases = []decodeCase{
	// Well-formed messages.
	{"request", req(`"id":1,"method":"ping"`), false, []string{`req 1 "ping"`}},
	{"request with params", req(`"id":"a","method":"tools/call","params":{"name":"x","arguments":{}}`), false,
		[]string{`req "a" "tools/call" {"name":"x","arguments":{}}`}},
	{"member order free", `{"method":"ping","id":7,"jsonrpc":"2.0"}`, false, []string{`req 7 "ping"`}},
	{"whitespace around", " \t{ \"jsonrpc\" : \"2.0\" , \"id\" : 1 , \"method\" : \"ping\" } \r\n", false, []string{`req 1 "ping"`}},
	{"notification", req(`"method":"notifications/initialized"`), false, []string{`notif "notifications/initialized"`}},
	{"notification with params", req(`"method":"notifications/cancelled","params":{"requestId":1}`), false,
		[]string{`notif "notifications/cancelled" {"requestId":1}`}},
	{"escaped method", req(`"id":1,"method":"p\u0069ng"`), false, []string{`req 1 "ping"`}},
	{"unknown method", req(`"id":1,"method":"x/y"`), false, []string{`req 1 "x/y"`}},
	{"empty method", req(`"id":1,"method":""`), false, []string{`req 1 ""`}},
	{"non-ASCII method", req(`"id":1,"method":"é\ud83d\ude00"`), false, []string{`req 1 "é😀"`}},
	{"jsonrpc escaped", `{"jsonrpc":"2\u002e0","id":1,"method":"ping"}`, false, []string{`req 1 "ping"`}},
	{"empty params", req(`"id":1,"method":"m","params":{}`), false, []string{`req 1 "m" {}`}},
	{"nested params kept raw", req(`"id":1,"method":"m","params":{"a":[1,{"b":"\u00e9"}],"c":null}`), false,
		[]string{`req 1 "m" {"a":[1,{"b":"\u00e9"}],"c":null}`}},

	// Ids.
	{"id string", req(`"id":"abc","method":"m"`), false, []string{`req "abc" "m"`}},
	{"id empty string", req(`"id":"","method":"m"`), false, []string{`req "" "m"`}},
	{"id escaped string", req(`"id":"a\"b\u00e9","method":"m"`), false, []string{`req "a\"bé" "m"`}},
	{"id zero", req(`"id":0,"method":"m"`), false, []string{`req 0 "m"`}},
	{"id negative", req(`"id":-5,"method":"m"`), false, []string{`req -5 "m"`}},
	{"id int64 max", req(`"id":9223372036854775807,"method":"m"`), false, []string{`req 9223372036854775807 "m"`}},
	{"id int64 min", req(`"id":-9223372036854775808,"method":"m"`), false, []string{`req -9223372036854775808 "m"`}},
	{"id int64 max+1", req(`"id":9223372036854775808,"method":"m"`), false, []string{`err -32600`}},
	{"id int64 min-1", req(`"id":-9223372036854775809,"method":"m"`), false, []string{`err -32600`}},
	{"id huge", req(`"id":1` + strings.Repeat("0", 400) + `,"method":"m"`), false, []string{`err -32600`}},
	{"id negative zero", req(`"id":-0,"method":"m"`), false, []string{`err -32600`}},
	{"id fraction", req(`"id":1.0,"method":"m"`), false, []string{`err -32600`}},
	{"id fraction nonzero", req(`"id":1.5,"method":"m"`), false, []string{`err -32600`}},
	{"id exponent", req(`"id":1e3,"method":"m"`), false, []string{`err -32600`}},
	{"id exponent upper", req(`"id":1E3,"method":"m"`), false, []string{`err -32600`}},
	{"id negative zero fraction", req(`"id":-0.0,"method":"m"`), false, []string{`err -32600`}},
	{"id null", req(`"id":null,"method":"m"`), false, []string{`err -32600`}},
	{"id true", req(`"id":true,"method":"m"`), false, []string{`err -32600`}},
	{"id false", req(`"id":false,"method":"m"`), false, []string{`err -32600`}},
	{"id object", req(`"id":{"a":1},"method":"m"`), false, []string{`err -32600`}},
	{"id array", req(`"id":[1],"method":"m"`), false, []string{`err -32600`}},
	{"valid id echoed on a later violation", req(`"id":"q","method":1`), false, []string{`err -32600 id="q"`}},
	{"valid id echoed before it appears", `{"method":1,"jsonrpc":"2.0","id":3}`, false, []string{`err -32600 id=3`}},
	{"invalid id not echoed with other violations", req(`"id":1.5,"method":1,"x":2`), false, []string{`err -32600`}},

	// The jsonrpc member.
	{"jsonrpc missing", `{"id":1,"method":"m"}`, false, []string{`err -32600 id=1`}},
	{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":1,"method":"m"}`, false, []string{`err -32600 id=1`}},
	{"jsonrpc 2", `{"jsonrpc":"2","id":1,"method":"m"}`, false, []string{`err -32600 id=1`}},
	{"jsonrpc number", `{"jsonrpc":2.0,"id":1,"method":"m"}`, false, []string{`err -32600 id=1`}},
	{"jsonrpc padded", `{"jsonrpc":"2.0 ","id":1,"method":"m"}`, false, []string{`err -32600 id=1`}},
	{"jsonrpc null", `{"jsonrpc":null,"id":1,"method":"m"}`, false, []string{`err -32600 id=1`}},
	{"jsonrpc empty", `{"jsonrpc":"","id":1,"method":"m"}`, false, []string{`err -32600 id=1`}},

	// The method member.
	{"method number", req(`"id":1,"method":1`), false, []string{`err -32600 id=1`}},
	{"method null", req(`"id":1,"method":null`), false, []string{`err -32600 id=1`}},
	{"method bool", req(`"id":1,"method":true`), false, []string{`err -32600 id=1`}},
	{"method object", req(`"id":1,"method":{}`), false, []string{`err -32600 id=1`}},
	{"method array", req(`"id":1,"method":["ping"]`), false, []string{`err -32600 id=1`}},
	{"method missing", req(`"id":1,"params":{}`), false, []string{`err -32600 id=1`}},
	{"empty object", `{}`, false, []string{`err -32600`}},

	// The params member.
	{"params array", req(`"id":1,"method":"m","params":[1]`), false, []string{`err -32600 id=1`}},
	{"params null", req(`"id":1,"method":"m","params":null`), false, []string{`err -32600 id=1`}},
	{"params string", req(`"id":1,"method":"m","params":"{}"`), false, []string{`err -32600 id=1`}},
	{"params number", req(`"id":1,"method":"m","params":0`), false, []string{`err -32600 id=1`}},
	{"params bool", req(`"id":1,"method":"m","params":false`), false, []string{`err -32600 id=1`}},

	// Unknown and wrong-case members.
	{"unknown member", req(`"id":1,"method":"m","extra":1`), false, []string{`err -32600 id=1`}},
	{"unknown member in a notification", req(`"method":"m","x":{}`), false, []string{`err -32600`}},
	{"wrong-case id", req(`"ID":1,"method":"m"`), false, []string{`err -32600`}},
	{"wrong-case method", req(`"id":1,"Method":"m"`), false, []string{`err -32600 id=1`}},
	{"wrong-case jsonrpc", `{"JSONRPC":"2.0","id":1,"method":"m"}`, false, []string{`err -32600 id=1`}},
	{"wrong-case params", req(`"id":1,"method":"m","Params":{}`), false, []string{`err -32600 id=1`}},
	{"name with trailing space", req(`"id":1,"method ":"m"`), false, []string{`err -32600 id=1`}},
	{"Kelvin sign name", req(`"id":1,"method":"m","\u212aey":1`), false, []string{`err -32600 id=1`}},

	// Responses.
	{"result response", req(`"id":1,"result":{}`), false, []string{`resp 1`}},
	{"error response", req(`"id":"r","error":{"code":-1,"message":"x"}`), false, []string{`resp "r"`}},
	{"response without id", req(`"result":{}`), false, []string{`err -32600`}},
	{"error response without id", req(`"error":{"code":-32700,"message":"m"}`), false, []string{`resp`}},
	{"response with result and error", req(`"id":1,"result":{},"error":{}`), false, []string{`err -32600 id=1`}},
	{"error that is not an object", req(`"id":1,"error":"boom"`), false, []string{`err -32600 id=1`}},
	{"response with params", req(`"id":1,"result":{},"params":{}`), false, []string{`resp 1 {}`}},
	{"response with bad id", req(`"id":null,"result":{}`), false, []string{`err -32600`}},
	{"request with result", req(`"id":1,"method":"m","result":{}`), false, []string{`err -32600 id=1`}},
	{"notification with error", req(`"method":"m","error":{}`), false, []string{`err -32600`}},

	// Not an object.
	{"top-level number", `1`, false, []string{`err -32600`}},
	{"top-level string", `"x"`, false, []string{`err -32600`}},
	{"top-level null", `null`, false, []string{`err -32600`}},
	{"top-level true", `true`, false, []string{`err -32600`}},

	// Not strict JSON: one -32700 without id, whatever else the frame says.
	{"empty frame", ``, false, []string{`err -32700`}},
	{"whitespace frame", " \t ", false, []string{`err -32700`}},
	{"truncated", req(`"id":1,"method":"m"`)[:20], false, []string{`err -32700`}},
	{"duplicate top-level", `{"jsonrpc":"2.0","id":1,"method":"m","method":"n"}`, false, []string{`err -32700`}},
	{"duplicate top-level id", `{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}`, false, []string{`err -32700`}},
	{"duplicate in params", req(`"id":1,"method":"m","params":{"a":1,"a":2}`), false, []string{`err -32700`}},
	{"duplicate deep", req(`"id":1,"method":"m","params":{"a":[{"b":{"c":1,"c":1}}]}`), false, []string{`err -32700`}},
	{"duplicate via escape", `{"jsonrpc":"2.0","id":1,"method":"m","\u006dethod":"n"}`, false, []string{`err -32700`}},
	{"duplicate via escape nested", req(`"id":1,"method":"m","params":{"é":1,"\u00e9":2}`), false, []string{`err -32700`}},
	{"duplicate via surrogate escape", req(`"id":1,"method":"m","params":{"😀":1,"\ud83d\ude00":2}`), false, []string{`err -32700`}},
	{"duplicate in unknown member", req(`"id":1,"method":"m","x":{"a":1,"a":1}`), false, []string{`err -32700`}},
	{"duplicate in result", req(`"id":1,"result":{"a":1,"a":1}`), false, []string{`err -32700`}},
	{"same name in sibling objects is fine", req(`"id":1,"method":"m","params":{"a":{"b":1},"c":{"b":1}}`), false,
		[]string{`req 1 "m" {"a":{"b":1},"c":{"b":1}}`}},
	{"invalid UTF-8 in value", req(`"id":1,"method":"m","params":{"a":"` + "\xff" + `"}`), false, []string{`err -32700`}},
	{"invalid UTF-8 in name", req(`"id":1,"method":"m","params":{"` + "\xc3" + `":1}`), false, []string{`err -32700`}},
	{"invalid UTF-8 in method", req(`"id":1,"method":"` + "\xed\xa0\x80" + `"`), false, []string{`err -32700`}},
	{"lone high surrogate", req(`"id":1,"method":"m","params":{"a":"\ud800"}`), false, []string{`err -32700`}},
	{"lone low surrogate", req(`"id":1,"method":"m","params":{"a":"\udc00"}`), false, []string{`err -32700`}},
	{"high surrogate then letter", req(`"id":1,"method":"m","params":{"a":"\ud800\u0041"}`), false, []string{`err -32700`}},
	{"reversed surrogates", req(`"id":1,"method":"m","params":{"a":"\ude00\ud83d"}`), false, []string{`err -32700`}},
	{"lone surrogate in id", req(`"id":"\ud800","method":"m"`), false, []string{`err -32700`}},
	{"NaN", req(`"id":1,"method":"m","params":{"a":NaN}`), false, []string{`err -32700`}},
	{"Infinity", req(`"id":1,"method":"m","params":{"a":Infinity}`), false, []string{`err -32700`}},
	{"negative Infinity", req(`"id":1,"method":"m","params":{"a":-Infinity}`), false, []string{`err -32700`}},
	{"NaN id", req(`"id":NaN,"method":"m"`), false, []string{`err -32700`}},
	{"plus sign", req(`"id":+1,"method":"m"`), false, []string{`err -32700`}},
	{"leading zero", req(`"id":01,"method":"m"`), false, []string{`err -32700`}},
	{"hex", req(`"id":0x1,"method":"m"`), false, []string{`err -32700`}},
	{"bare fraction", req(`"id":.5,"method":"m"`), false, []string{`err -32700`}},
	{"single quotes", `{'jsonrpc':'2.0','id':1,'method':'m'}`, false, []string{`err -32700`}},
	{"unquoted name", `{jsonrpc:"2.0",id:1,method:"m"}`, false, []string{`err -32700`}},
	{"trailing comma", req(`"id":1,"method":"m",`), false, []string{`err -32700`}},
	{"comment", req(`"id":1,/* c */"method":"m"`), false, []string{`err -32700`}},
	{"raw control character", req(`"id":1,"method":"a` + "\x01" + `"`), false, []string{`err -32700`}},
	{"raw tab in string", req(`"id":1,"method":"a` + "\t" + `"`), false, []string{`err -32700`}},
	{"bad escape", req(`"id":1,"method":"\x"`), false, []string{`err -32700`}},
	{"BOM", "\ufeff" + req(`"id":1,"method":"m"`), false, []string{`err -32700`}},
	{"trailing object", req(`"id":1,"method":"m"`) + `{}`, false, []string{`err -32700`}},
	{"trailing garbage", req(`"id":1,"method":"m"`) + ` x`, false, []string{`err -32700`}},
	{"trailing bracket", req(`"id":1,"method":"m"`) + `]`, false, []string{`err -32700`}},
	{"trailing NUL", req(`"id":1,"method":"m"`) + "\x00", false, []string{`err -32700`}},
	{"two scalars", `1 2`, false, []string{`err -32700`}},
	{"parse error after envelope violation", req(`"id":1,"bogus":1,"params":{"a":1,"a":2}`), false, []string{`err -32700`}},
	{"parse error after valid id", req(`"id":1,"method":"m","params":{"a":NaN}`), false, []string{`err -32700`}},

	// Nesting: the top-level object counts as one level.
	{"nesting exactly MaxNesting", req(`"id":1,"method":"m","params":` + nest(MaxNesting-1)), false,
		[]string{`req 1 "m" ` + nest(MaxNesting-1)}},
	{"nesting MaxNesting+1", req(`"id":1,"method":"m","params":` + nest(MaxNesting)), false, []string{`err -32700`}},
	{"nesting of arrays MaxNesting+1", req(`"id":1,"method":"m","params":{"a":` + strings.Repeat("[", MaxNesting-1) + strings.Repeat("]", MaxNesting-1) + `}`), false,
		[]string{`err -32700`}},
	{"nesting of arrays exactly MaxNesting", req(`"id":1,"method":"m","params":{"a":` + strings.Repeat("[", MaxNesting-2) + strings.Repeat("]", MaxNesting-2) + `}`), false,
		[]string{`req 1 "m" {"a":` + strings.Repeat("[", MaxNesting-2) + strings.Repeat("]", MaxNesting-2) + `}`}},
	{"brackets in strings do not nest", req(`"id":1,"method":"` + strings.Repeat(`[{`, 100) + `\"` + strings.Repeat(`\\[`, 10) + `"`), false,
		[]string{`req 1 "` + strings.Repeat(`[{`, 100) + `\"` + strings.Repeat(`\\[`, 10) + `"`}},
	{"nesting in a batch exactly MaxNesting", `[` + req(`"method":"m","params":`+nest(MaxNesting-2)) + `]`, true,
		[]string{`notif "m" ` + nest(MaxNesting-2)}},
	{"nesting in a batch MaxNesting+1", `[` + req(`"method":"m","params":`+nest(MaxNesting-1)) + `]`, false, []string{`err -32700`}},
	{"very deep", strings.Repeat("[", 100000), false, []string{`err -32700`}},

	// Batches.
	{"empty batch", `[]`, false, []string{`err -32600`}},
	{"empty batch with space", ` [ ] `, false, []string{`err -32600`}},
	{"batch of one", `[` + req(`"id":1,"method":"ping"`) + `]`, true, []string{`req 1 "ping"`}},
	{"batch mixed", `[` + req(`"id":1,"method":"a"`) + `,` + req(`"method":"b"`) + `,` + req(`"id":2,"method":3`) + `,` +
		req(`"id":3,"result":{}`) + `,` + req(`"id":null,"method":"c"`) + `]`, true,
		[]string{`req 1 "a"`, `notif "b"`, `err -32600 id=2`, `resp 3`, `err -32600`}},
	{"batch non-object members", `[1,"x",null,true,[],{}]`, true,
		[]string{`err -32600`, `err -32600`, `err -32600`, `err -32600`, `err -32600`, `err -32600`}},
	{"batch nested batch", `[[` + req(`"id":1,"method":"a"`) + `]]`, true, []string{`err -32600`}},
	{"batch with duplicate in a member", `[` + req(`"id":1,"method":"a"`) + `,{"a":1,"a":2}]`, false, []string{`err -32700`}},
	{"batch with NaN in a member", `[` + req(`"id":1,"method":"a"`) + `,NaN]`, false, []string{`err -32700`}},
	{"batch with invalid UTF-8", `[` + req(`"id":1,"method":"a"`) + `,"` + "\xff" + `"]`, false, []string{`err -32700`}},
	{"batch truncated", `[` + req(`"id":1,"method":"a"`), false, []string{`err -32700`}},
	{"batch trailing comma", `[` + req(`"id":1,"method":"a"`) + `,]`, false, []string{`err -32700`}},
	{"batch trailing data", `[` + req(`"id":1,"method":"a"`) + `] []`, false, []string{`err -32700`}},
	{"batch of duplicates ids is the session's business", `[` + req(`"id":1,"method":"a"`) + `,` + req(`"id":1,"method":"a"`) + `]`, true,
		[]string{`req 1 "a"`, `req 1 "a"`}},
}

func TestDecodeFrame(t *testing.T) {
	for _, tt := range decodeCases {
		t.Run(tt.name, func(t *testing.T) {
			batch, got := describeFrame(DecodeFrame([]byte(tt.in)))
			if batch != tt.batch || !slices.Equal(got, tt.want) {
				t.Errorf("DecodeFrame(%.200q)\n got batch=%v %q\nwant batch=%v %q", tt.in, batch, got, tt.batch, tt.want)
			}
		})
	}
}

// TestDecodeFrameErrorTexts pins the error messages: they are API.
func TestDecodeFrameErrorTexts(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{`{"a":1,"a":2}`, "Parse error: a member name is repeated in an object (each name may appear once)"},
		{req(`"id":1,"method":"m","params":{"x":{"a":1,"a":2}}`), "Parse error: a member name is repeated in an object (each name may appear once)"},
		{req(`"id":1,"id":2,"method":"m"`), "Parse error: a member name is repeated in an object (each name may appear once)"},
		{`[` + req(`"id":1,"method":"m","method":"n"`) + `]`, "Parse error: a member name is repeated in an object (each name may appear once)"},
		{`{"a":1,"b":`, "Parse error: invalid JSON"},
		{`{"a":"\xff"}`, "Parse error: invalid JSON"},
		{"[" + nest(MaxNesting) + "]", "Parse error: nesting too deep"},
		{`{"jsonrpc":"2.0","method":"m"} {}`, "Parse error: trailing data after the message"},
		{`[{"jsonrpc":"2.0","method":"m"}] {}`, "Parse error: trailing data after the message"},
		{`1 2`, "Parse error: invalid JSON"},
		{`1`, "Invalid request: a message must be a JSON object"},
		{`[]`, "Invalid request: empty batch"},
		{`{"id":1,"method":"m"}`, `Invalid request: missing "jsonrpc"`},
		{`{"jsonrpc":"2.1","id":1,"method":"m"}`, `Invalid request: "jsonrpc" must be "2.0"`},
		{req(`"id":true,"method":"m"`), `Invalid request: "id" must be a string or an integer`},
		{req(`"id":1,"method":2`), `Invalid request: "method" must be a string`},
		{req(`"id":1,"method":"m","params":[]`), `Invalid request: "params" must be an object`},
		{req(`"id":1`), `Invalid request: missing "method"`},
		{req(`"id":1,"method":"m","result":1`), `Invalid request: a request must not carry "result" or "error"`},
		{req(`"id":1,"method":"m","Params":{}`), `Invalid request: unknown member "Params"`},
		{req(`"id":1,"method":"m","` + strings.Repeat("n", 100) + `":{}`), `Invalid request: unknown member "` + strings.Repeat("n", 64) + `"`},
		{req(`"id":1,"method":"m","\u202e\n":{}`), `Invalid request: unknown member "\u202e\n"`},
		// The first violation is reported.
		{`{"id":1,"method":2,"params":[]}`, `Invalid request: "method" must be a string`},
	}
	for _, tt := range tests {
		f := DecodeFrame([]byte(tt.in))
		if len(f.Items) != 1 || f.Items[0].Err == nil {
			t.Errorf("DecodeFrame(%.80q): want one error, got %+v", tt.in, f)
			continue
		}
		if got := f.Items[0].Err.Message; got != tt.want {
			t.Errorf("DecodeFrame(%.80q) message = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestDecodeFrameParamsDoNotAlias checks that Params survives the caller
// reusing the frame buffer, as the wire reader does.
func TestDecodeFrameParamsDoNotAlias(t *testing.T) {
	in := []byte(req(`"id":1,"method":"m","params":{"a":"b"}`))
	f := DecodeFrame(in)
	for i := range in {
		in[i] = 'X'
	}
	if got := string(f.Items[0].Msg.Params); got != `{"a":"b"}` {
		t.Errorf("Params after the frame was overwritten = %q", got)
	}
	// The same for a batch member.
	in = []byte(`[` + req(`"id":1,"method":"m","params":{"a":"b"}`) + `]`)
	f = DecodeFrame(in)
	for i := range in {
		in[i] = 'X'
	}
	if got := string(f.Items[0].Msg.Params); got != `{"a":"b"}` {
		t.Errorf("batch Params after the frame was overwritten = %q", got)
	}
}

// TestDecodeFrameReuse decodes frames of every class one after another, so
// that a decoder returned to the pool in a bad state shows up.
func TestDecodeFrameReuse(t *testing.T) {
	for range 3 {
		for _, tt := range decodeCases {
			batch, got := describeFrame(DecodeFrame([]byte(tt.in)))
			if batch != tt.batch || !slices.Equal(got, tt.want) {
				t.Fatalf("after reuse, DecodeFrame(%.80q) = %v %q, want %v %q", tt.in, batch, got, tt.batch, tt.want)
			}
		}
	}
}

func TestDecodeFrameConcurrent(t *testing.T) {
	done := make(chan struct{})
	for g := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range decodeCases {
				tt := decodeCases[(i+g*17)%len(decodeCases)]
				batch, got := describeFrame(DecodeFrame([]byte(tt.in)))
				if batch != tt.batch || !slices.Equal(got, tt.want) {
					t.Errorf("concurrent DecodeFrame(%.80q) = %v %q, want %v %q", tt.in, batch, got, tt.batch, tt.want)
					return
				}
			}
		}()
	}
	for range 8 {
		<-done
	}
}

func TestDecodeFrameIntIDs(t *testing.T) {
	for _, n := range []int64{0, 1, -1, 42, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64, 1 << 53, 1<<53 + 1} {
		f := DecodeFrame([]byte(req(`"id":` + strconv.FormatInt(n, 10) + `,"method":"m"`)))
		m := f.Items[0].Msg
		if m == nil {
			t.Errorf("id %d refused: %v", n, f.Items[0].Err)
			continue
		}
		if got, ok := m.ID.Int(); !ok || got != n {
			t.Errorf("id %d decoded as %v", n, m.ID)
		}
	}
}

// TestInvalidNotificationsAndResponsesAreNotAnswered: an envelope error in
// a message without an id (a notification) or without a method (a
// response) is marked NoReply; one in a request is answered.
func TestInvalidNotificationsAndResponsesAreNotAnswered(t *testing.T) {
	for _, c := range []struct {
		frame   string
		noReply bool
	}{
		{`{"jsonrpc":"2.0","id":7,"result":{},"bogus":1}`, true},
		{`{"jsonrpc":"2.0","id":7,"error":{"code":1,"message":"x"},"x":1}`, true},
		{`{"jsonrpc":"1.0","method":"notifications/x"}`, true},
		{`{"jsonrpc":"2.0","method":"notifications/x","params":[1]}`, true},
		{`{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}`, false},
		{`{"jsonrpc":"2.0","id":null,"method":"ping"}`, false},
		{`{"jsonrpc":"2.0","id":1}`, false},
	} {
		f := DecodeFrame([]byte(c.frame))
		e := f.Items[0].Err
		if e == nil {
			t.Fatalf("%s: no error", c.frame)
		}
		if e.NoReply != c.noReply {
			t.Errorf("%s: NoReply = %v, want %v", c.frame, e.NoReply, c.noReply)
		}
	}
}
