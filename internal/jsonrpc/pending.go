package jsonrpc

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Pending are the requests a server has out to its clients, each waiting
// for the response: how a gateway relays a downstream's request (sampling,
// elicitation, roots) to the client whose call caused it. The ids are
// minted here, so no peer's id reaches a client, and each request belongs
// to an owner (a client's session), so a response counts only from the
// owner it was asked of. A Pending is safe for concurrent use.
type Pending struct {
	prefix   string
	perOwner int

	mu   sync.Mutex
	next int64
	m    map[pendingKey]chan *Message
	n    map[string]int  // owner → requests out
	gone map[string]bool // owners that can no longer answer
}

type pendingKey struct {
	owner, id string
}

// NewPending returns an empty table whose ids start with prefix, with at
// most perOwner requests out to one owner at a time.
func NewPending(prefix string, perOwner int) *Pending {
	return &Pending{prefix: prefix, perOwner: perOwner, m: map[pendingKey]chan *Message{}, n: map[string]int{}, gone: map[string]bool{}}
}

// abandoned is the answer of every request to an owner that can no
// longer answer.
var abandoned = &Message{Kind: KindResponse, Error: jsontext.Value(`{"code":-32603,"message":"Internal error: the client can no longer answer"}`)}

// Abandon ends every request out to owner with an error, and refuses
// new ones: nothing owner sends will be read any more (its session is
// ending).
func (p *Pending) Abandon(owner string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gone[owner] = true
	for k, ch := range p.m {
		if k.owner == owner {
			select {
			case ch <- abandoned:
			default: // answered already
			}
		}
	}
}

// open mints an id for a request to owner; ok is false past the bound.
func (p *Pending) open(owner string) (id string, ch chan *Message, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n[owner] >= p.perOwner || p.gone[owner] {
		return "", nil, false
	}
	p.next++
	id = p.prefix + strconv.FormatInt(p.next, 10)
	ch = make(chan *Message, 1)
	p.m[pendingKey{owner, id}] = ch
	p.n[owner]++
	return id, ch, true
}

func (p *Pending) close(owner, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.m[pendingKey{owner, id}]; ok {
		delete(p.m, pendingKey{owner, id})
		if p.n[owner]--; p.n[owner] <= 0 {
			delete(p.n, owner)
		}
	}
}

// Deliver hands a response from owner to the request it answers, and
// reports whether it answered one; a response to nothing asked of owner
// is dropped, and of two answers to one request the first stands.
func (p *Pending) Deliver(owner string, m *Message) bool {
	id, ok := m.ID.Str()
	if !ok {
		return false
	}
	p.mu.Lock()
	ch := p.m[pendingKey{owner, id}]
	p.mu.Unlock()
	if ch == nil {
		return false
	}
	select {
	case ch <- m:
	default: // answered twice: the first answer stands
	}
	return true
}

// maxAskedErrorMessage bounds the text of a client's error that is passed
// on.
const maxAskedErrorMessage = 256

// Ask sends a request to owner with send and waits for the response that
// Deliver hands over: its result, or the client's error (code and message
// only, the message bounded). When ctx ends first, the client is told the
// request is cancelled. params are re-encoded compact, so that nothing of
// another peer's whitespace (a raw CR ends an SSE data line) reaches the
// client.
func (p *Pending) Ask(ctx context.Context, owner, method string, params jsontext.Value, send func(msg []byte)) (jsontext.Value, *Error) {
	id, ch, ok := p.open(owner)
	if !ok {
		return nil, &Error{Code: CodeInternalError, Message: "Internal error: too many requests are out to the client, or it can no longer answer"}
	}
	defer p.close(owner, id)
	msg := []byte(`{"jsonrpc":"2.0","id":`)
	msg, _ = jsontext.AppendQuote(msg, id)
	msg = append(msg, `,"method":`...)
	msg, _ = jsontext.AppendQuote(msg, method)
	if len(params) > 0 {
		v := jsontext.Value(bytes.Clone(params))
		if v.Compact() != nil {
			return nil, &Error{Code: CodeInvalidParams, Message: "Invalid params: params are not valid JSON"}
		}
		msg = append(append(msg, `,"params":`...), v...)
	}
	send(append(msg, '}'))
	select {
	case m := <-ch:
		if m.Error != nil {
			var e struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}
			if json.Unmarshal(m.Error, &e) != nil {
				return nil, &Error{Code: CodeInternalError, Message: "Internal error: the client's error is malformed"}
			}
			return nil, &Error{Code: e.Code, Message: plainText(e.Message)}
		}
		return m.Result, nil
	case <-ctx.Done():
		cancelled, _ := jsontext.AppendQuote([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`), id)
		send(append(cancelled, `,"reason":"the call ended"}}`...))
		return nil, &Error{Code: CodeInternalError, Message: "Internal error: the call ended before the client answered"}
	}
}

// plainText is a peer's error message as it may be passed on: bounded
// (cut on a byte count, what is left of a split rune dropped), without
// control characters or the bidirectional controls that could reorder
// what a reader sees.
func plainText(s string) string {
	s = strings.ToValidUTF8(truncate(s, maxAskedErrorMessage), "")
	return strings.Map(func(r rune) rune {
		switch {
		case unicode.IsControl(r), r == 0x061C, r == 0x200E, r == 0x200F,
			0x202A <= r && r <= 0x202E, 0x2066 <= r && r <= 0x2069:
			return -1
		}
		return r
	}, s)
}
