package front

import (
	"bytes"
	"context"
	"strconv"
	"sync"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/gateway"
	"github.com/mcp-bastion/bastion/internal/jsonrpc"
)

// maxAsksPerSession bounds the requests the gateway has out to one
// client at a time.
const maxAsksPerSession = 16

// asks are the requests the gateway sent to its clients on their calls'
// event streams (a downstream's sampling, elicitation or roots request,
// decision 24), waiting for the client to POST the response. Their ids
// are the gateway's own, so a downstream's id never reaches a client and
// a client cannot answer another session's request: a response counts
// only on the session it was asked on.
type asks struct {
	mu   sync.Mutex
	next int64
	m    map[askKey]chan *jsonrpc.Message
	n    map[string]int // session → asks out
}

type askKey struct {
	session, id string
}

func newAsks() *asks {
	return &asks{m: map[askKey]chan *jsonrpc.Message{}, n: map[string]int{}}
}

// open mints an id for a request to session; ok is false past the bound.
func (a *asks) open(session string) (id string, ch chan *jsonrpc.Message, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n[session] >= maxAsksPerSession {
		return "", nil, false
	}
	a.next++
	id = "gw-ask-" + strconv.FormatInt(a.next, 10)
	ch = make(chan *jsonrpc.Message, 1)
	a.m[askKey{session, id}] = ch
	a.n[session]++
	return id, ch, true
}

func (a *asks) close(session, id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.m[askKey{session, id}]; ok {
		delete(a.m, askKey{session, id})
		if a.n[session]--; a.n[session] <= 0 {
			delete(a.n, session)
		}
	}
}

// deliver hands a client's response to the request it answers on its
// session; a response to nothing asked is dropped.
func (a *asks) deliver(session string, m *jsonrpc.Message) bool {
	id, ok := m.ID.Str()
	if !ok {
		return false
	}
	a.mu.Lock()
	ch := a.m[askKey{session, id}]
	a.mu.Unlock()
	if ch == nil {
		return false
	}
	select {
	case ch <- m:
	default: // answered twice: the first answer stands
	}
	return true
}

// ask sends a request to the client on the call's event stream and waits
// for the response the client POSTs on its session, or for ctx (the
// call) to end, when the client is told the request was cancelled.
func (x *exchange) ask(ctx context.Context, method string, params jsontext.Value) (jsontext.Value, *jsonrpc.Error) {
	id, ch, ok := x.s.asks.open(x.sess.nonce)
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Internal error: too many requests are out to the client"}
	}
	defer x.s.asks.close(x.sess.nonce, id)
	msg := []byte(`{"jsonrpc":"2.0","id":`)
	msg, _ = jsontext.AppendQuote(msg, id)
	msg = append(msg, `,"method":`...)
	msg, _ = jsontext.AppendQuote(msg, method)
	if len(params) > 0 {
		// The downstream's params, compact: nothing of a peer's
		// whitespace reaches the client's event stream.
		p := jsontext.Value(bytes.Clone(params))
		if p.Compact() != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Invalid params: params are not valid JSON"}
		}
		msg = append(append(msg, `,"params":`...), p...)
	}
	x.push(append(msg, '}'))
	select {
	case m := <-ch:
		if m.Error != nil {
			var e struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}
			if json.Unmarshal(m.Error, &e) != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Internal error: the client's error is malformed"}
			}
			return nil, &jsonrpc.Error{Code: e.Code, Message: truncate(e.Message, 256)}
		}
		return m.Result, nil
	case <-ctx.Done():
		cancelled, _ := jsontext.AppendQuote([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`), id)
		x.push(append(cancelled, `,"reason":"the call ended"}}`...))
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Internal error: the call ended before the client answered"}
	}
}

// relayTo sets what lets a downstream ask the client during c: a client
// on an event stream of a legacy session, with the capabilities it
// declared, and its log messages relayed on the same stream.
func (x *exchange) relayTo(c *gateway.Call) {
	if x.push == nil || x.sess.nonce == "" {
		return
	}
	c.ClientCapabilities = x.sess.caps.relayable()
	c.ClientRequests = x.ask
	c.Messages = func(params jsontext.Value) {
		x.push(append(append([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":`), params...), '}'))
	}
}
