package jsonrpc

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// TestPending: a request is sent compact under a minted id; only its
// owner's response with that id answers it, the first of two; a client's
// error comes back bounded and valid UTF-8; a request the caller stops
// waiting for is withdrawn from the client; an owner has at most the
// bound out at a time.
func TestPending(t *testing.T) {
	p := NewPending("ask-", 2)
	sent := make(chan []byte, 8)
	send := func(msg []byte) { sent <- msg }
	type answer struct {
		res jsontext.Value
		err *Error
	}
	ask := func(ctx context.Context, owner string) (string, <-chan answer) {
		t.Helper()
		ch := make(chan answer, 1)
		go func() {
			res, err := p.Ask(ctx, owner, "sampling/createMessage", jsontext.Value("{ \"a\" :\r 1 }"), send)
			ch <- answer{res, err}
		}()
		msg := <-sent
		var m struct {
			ID     string         `json:"id"`
			Params jsontext.Value `json:"params"`
		}
		if err := json.Unmarshal(msg, &m); err != nil || !strings.HasPrefix(m.ID, "ask-") || string(m.Params) != `{"a":1}` {
			t.Fatalf("sent %s", msg)
		}
		return m.ID, ch
	}
	response := func(id ID, body string) *Message {
		m := &Message{Kind: KindResponse, ID: id}
		if strings.HasPrefix(body, "error:") {
			m.Error = jsontext.Value(strings.TrimPrefix(body, "error:"))
		} else {
			m.Result = jsontext.Value(body)
		}
		return m
	}

	id, ch := ask(t.Context(), "s1")
	if p.Deliver("s2", response(StringID(id), `{"from":"s2"}`)) {
		t.Error("another owner's response answered the request")
	}
	if p.Deliver("s1", response(Int64ID(1), `{}`)) {
		t.Error("a numeric id answered the request")
	}
	if !p.Deliver("s1", response(StringID(id), `{"from":"s1"}`)) || !p.Deliver("s1", response(StringID(id), `{"again":true}`)) {
		t.Error("the owner's response did not answer the request")
	}
	if a := <-ch; string(a.res) != `{"from":"s1"}` || a.err != nil {
		t.Errorf("answer %s %v", a.res, a.err)
	}
	if p.Deliver("s1", response(StringID(id), `{}`)) {
		t.Error("a request already answered was answered again")
	}

	id, ch = ask(t.Context(), "s1")
	long := strings.Repeat("é", 200) // 400 bytes: cut in the middle of a rune
	p.Deliver("s1", response(StringID(id), `error:{"code":-1,"message":"`+long+`"}`))
	if a := <-ch; a.err == nil || a.err.Code != -1 || len(a.err.Message) > maxAskedErrorMessage || !utf8.ValidString(a.err.Message) {
		t.Errorf("the client's error: %+v", a.err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	id, ch = ask(ctx, "s1")
	_, ch2 := ask(t.Context(), "s1")
	if _, err := p.Ask(t.Context(), "s1", "roots/list", nil, send); err == nil || !strings.Contains(err.Message, "too many") {
		t.Errorf("past the bound: %v", err)
	}
	if _, other := ask(ctx, "s2"); other == nil {
		t.Error("another owner was refused for s1's requests")
	}
	cancel()
	if a := <-ch; a.err == nil {
		t.Error("a cancelled ask returned a result")
	}
	for withdrawn := false; !withdrawn; {
		select {
		case msg := <-sent:
			withdrawn = strings.Contains(string(msg), `"method":"notifications/cancelled"`) && strings.Contains(string(msg), `"requestId":"`+id+`"`)
		case <-time.After(10 * time.Second):
			t.Fatal("the client was not told the request is cancelled")
		}
	}
	_ = ch2 // answered by the end of the test, when its context ends

}

// TestPendingAbandon: what is out to an owner that can no longer answer
// ends at once, with an error, and nothing more is sent to it.
func TestPendingAbandon(t *testing.T) {
	p := NewPending("ask-", 2)
	sent := make(chan []byte, 4)
	done := make(chan *Error, 1)
	go func() {
		_, err := p.Ask(t.Context(), "s", "roots/list", nil, func(msg []byte) { sent <- msg })
		done <- err
	}()
	<-sent
	p.Abandon("s")
	if err := <-done; err == nil || !strings.Contains(err.Message, "no longer answer") {
		t.Errorf("an abandoned ask: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second) // a mutant waits for an answer
	defer cancel()
	if _, err := p.Ask(ctx, "s", "roots/list", nil, func([]byte) { t.Error("sent to an owner that can no longer answer") }); err == nil {
		t.Error("an ask of an abandoned owner was sent")
	}
}

func TestPlainText(t *testing.T) {
	for in, want := range map[string]string{
		"fine":                   "fine",
		"ok\u202eevil\u001b[31m": "okevil[31m",
		"\u200frtl\u2066":        "rtl",
		"tab\tand\nnewline":      "tabandnewline",
		strings.Repeat("é", 200): strings.Repeat("é", maxAskedErrorMessage/2),
	} {
		if got := plainText(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
