package jsonrpc

import "testing"

// TestDecodeFrameResults: a repeated name is tolerated only inside a
// response's result, which is kept raw for its strict reader; anywhere
// else it is the parse error DecodeFrame reports.
func TestDecodeFrameResults(t *testing.T) {
	for _, tc := range []struct {
		frame string
		ok    bool
	}{
		{`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a","name":"a"}]}}`, true},
		{`[{"jsonrpc":"2.0","id":1,"result":{"a":1,"a":2}}]`, true},
		{`{"jsonrpc":"2.0","id":1,"id":2,"result":{}}`, false},
		{`{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"result":{}}`, false},
		{`{"jsonrpc":"2.0","id":1,"result":{},"result":{}}`, false},
		{`{"jsonrpc":"2.0","method":"notifications/progress","params":{"a":1,"a":2}}`, false},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":1,"code":2,"message":"m"}}`, false},
		{`[{"jsonrpc":"2.0","id":1,"id":1,"result":{}}]`, false},
	} {
		f := DecodeFrameResults([]byte(tc.frame))
		it := f.Items[0]
		if got := it.Err == nil && it.Msg != nil; got != tc.ok {
			t.Errorf("%s: ok=%v (%+v), want %v", tc.frame, got, it.Err, tc.ok)
		}
		if tc.ok && it.Msg != nil && string(it.Msg.Result) == "" {
			t.Errorf("%s: no raw result", tc.frame)
		}
		// DecodeFrame stays strict about all of them.
		if s := DecodeFrame([]byte(tc.frame)).Items[0]; s.Err == nil && tc.ok {
			t.Errorf("%s: DecodeFrame accepted a repeated name", tc.frame)
		}
	}
}
