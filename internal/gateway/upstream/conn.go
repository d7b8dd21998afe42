package upstream

import (
	"context"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// conn is what both transports keep of their connection: the client of
// the live connection, the restart count and the dropped-message
// counters. Its mutex also guards the fields of the transport that embeds
// it.
type conn struct {
	mu       sync.Mutex
	client   *Client // nil unless connected
	restarts int
	stats    Stats
	onState  func(State, *Client)
	// onConnect hears of a new connection before any call can use it.
	onConnect func(*Client)
}

// Client returns the connected client, or ErrUnavailable.
func (s *conn) Client() (*Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client == nil {
		return nil, ErrUnavailable
	}
	return s.client, nil
}

// Connected reports whether a handshaken connection is up.
func (s *conn) Connected() bool {
	_, err := s.Client()
	return err == nil
}

// Stats returns the counters of what the server sent that was dropped.
func (s *conn) Stats() *Stats { return &s.stats }

// Restarts returns how many times the connection was made again (the
// child restarted, or the HTTP session initialized anew).
func (s *conn) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

// Call sends a request on the connected client.
func (s *conn) Call(ctx context.Context, method string, params []byte, opts CallOptions) (jsontext.Value, error) {
	c, err := s.Client()
	if err != nil {
		return nil, err
	}
	if opts.Current != nil {
		if err := opts.Current(); err != nil {
			return nil, err
		}
	}
	return c.Call(ctx, method, params, opts)
}

// setState records a change of state and tells the owner. A new
// connection is first handed to onConnect, and only then made the one
// calls go to: what its owner must judge of the server it now is (its
// identity) is judged before any call reaches it.
func (s *conn) setState(st State, c *Client) {
	if st == Connected && s.onConnect != nil {
		s.onConnect(c)
	}
	s.mu.Lock()
	if st == Connected {
		s.client = c
	} else {
		s.client = nil
	}
	s.mu.Unlock()
	if s.onState != nil {
		s.onState(st, c)
	}
}
