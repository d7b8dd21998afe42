package upstream

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/jsonrpc"
)

// errNoStream: the server offers no notification stream (a legacy GET
// answered 405, or subscriptions/listen is not a method it knows), so
// there is nothing to listen to.
var errNoStream = errors.New("upstream: the downstream offers no notification stream")

// offersListChanged reports whether the server declared
// capabilities.tools.listChanged: only then is a stream worth holding
// open, since the tool list is all the gateway listens for.
func offersListChanged(caps jsontext.Value) bool {
	var c struct {
		Tools *struct {
			ListChanged bool `json:"listChanged"`
		} `json:"tools"`
	}
	return json.Unmarshal(caps, &c) == nil && c.Tools != nil && c.Tools.ListChanged
}

// subscribe is a 2026-07-28 subscriptions/listen for the tool list. The
// era keeps no session, so a server can only tell its clients that a list
// changed on a stream they hold open; over stdio the request simply stays
// pending, over HTTP its response is an event stream.
func (c *Client) subscribe(ctx context.Context) error {
	c.subscribed.Add(1)
	defer c.subscribed.Add(-1)
	_, err := c.Call(ctx, "subscriptions/listen", []byte(`{"notifications":{"toolsListChanged":true}}`), CallOptions{})
	var rpcErr *RPCError
	if errors.As(err, &rpcErr) && rpcErr.Code == jsonrpc.CodeMethodNotFound {
		return errNoStream
	}
	return err
}

// subscribeWait bounds how long a new connection waits for its
// notification stream to open before the server is discovered anyway.
const subscribeWait = 5 * time.Second

// startListening holds the connection's notification stream open in the
// background (see listen) and returns once it is open, or it will not be,
// or subscribeWait or stop has passed: the stream is opened before the
// list is read, so that no change between the two goes unheard. The
// returned func ends the stream and waits for it; call it after c has
// failed, so that a subscription is not cancelled as a call would be.
func startListening(c *Client, log *slog.Logger, open func(context.Context) error, stop <-chan struct{}) (end func()) {
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan struct{})
	go func() {
		defer close(listening)
		listen(ctx, c, log, open)
	}()
	select {
	case <-c.streaming:
	case <-listening:
	case <-stop:
	case <-time.After(subscribeWait):
		log.Warn("downstream notification stream did not open in time; discovering without it", slog.Duration("waited", subscribeWait))
	}
	return func() {
		cancel()
		<-listening
	}
}

// streamOpen records that the connection's notification stream is open:
// a subscription was acknowledged, or the legacy GET stream answered.
func (c *Client) streamOpen() {
	c.streamOnce.Do(func() { close(c.streaming) })
}

// listen holds a notification stream open for as long as ctx lives,
// opening it again with backoff when it ends. open holds one stream until
// it ends; errNoStream ends listening for good. A server that did not
// declare tools.listChanged is not listened to: the refresh interval is
// then the only re-discovery.
func listen(ctx context.Context, c *Client, log *slog.Logger, open func(context.Context) error) {
	if info, ok := c.Info(); !ok || !offersListChanged(info.Capabilities) {
		return
	}
	backoff := minBackoff
	for {
		started := time.Now()
		err := open(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, errNoStream):
			log.Info("downstream offers no notification stream; its tool list is re-read at the refresh interval only")
			return
		case c.isDead(), errors.Is(err, errSessionGone):
			return // the connection is gone; its successor listens anew
		case err != nil:
			log.Debug("downstream notification stream ended", slog.String("error", err.Error()))
		}
		if time.Since(started) >= healthyAfter {
			backoff = minBackoff
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// isDead reports whether the client's connection was failed.
func (c *Client) isDead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead != nil
}
