package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/gateway/admit"
	"github.com/mcp-bastion/bastion/internal/gateway/auth"
	"github.com/mcp-bastion/bastion/internal/jsonrpc"
	"github.com/mcp-bastion/bastion/internal/mcp"
	"github.com/mcp-bastion/bastion/internal/session"
	"github.com/mcp-bastion/bastion/internal/tool"
)

// SessionCatalog is the catalog as package session serves it: the stdio
// front (`bastion gateway --stdio`) is a session.Server over it.
// Its one client is p: every call is decided for p, and p's view is listed.
func (g *Gateway) SessionCatalog(enc *mcp.Encoder, cursorKey []byte, p auth.Principal) session.Catalog {
	return &sessionCatalog{g: g, lister: g.NewLister(enc, cursorKey), p: p, view: g.ViewOf(p)}
}

type sessionCatalog struct {
	g      *Gateway
	lister *Lister
	p      auth.Principal
	view   View
}

var _ session.Catalog = (*sessionCatalog)(nil)

func (c *sessionCatalog) List(version string, cursor *string) ([]byte, *jsonrpc.Error) {
	res, err := c.lister.List(version, cursor, c.view)
	if err != nil {
		return nil, err.RPC(jsonrpc.ID{})
	}
	return res, nil
}

func (c *sessionCatalog) Lookup(name string) (tool.Tool, bool) {
	t, ok := c.g.catalog.Snapshot().Lookup(name)
	if !ok {
		return nil, false
	}
	return &relayTool{g: c.g, p: c.p, desc: tool.Descriptor{Name: t.Public, InputSchema: t.InputSchema}}, true
}

// Watch signals a change of the tools the one client can see, and only
// those: a change it cannot see sends nothing (decision 26), as on the
// HTTP front's streams.
func (c *sessionCatalog) Watch() (<-chan struct{}, func()) {
	ch := c.g.catalog.Changed(admit.KindTool)
	out := make(chan struct{}, 1)
	stop := make(chan struct{})
	done := make(chan struct{})
	last := c.g.ViewDigest(ViewTools, c.view)
	go func() {
		defer close(done)
		for {
			select {
			case <-ch:
				if d := c.g.ViewDigest(ViewTools, c.view); d != last {
					last = d
					select {
					case out <- struct{}{}:
					default: // a signal is already pending
					}
				}
			case <-stop:
				return
			}
		}
	}()
	return out, func() {
		c.g.catalog.Unsubscribe(ch)
		close(stop)
		<-done
	}
}

// relayTool is one catalog tool as a session calls it.
type relayTool struct {
	g    *Gateway
	p    auth.Principal
	desc tool.Descriptor
}

func (t *relayTool) Descriptor() tool.Descriptor { return t.desc }

func (t *relayTool) Call(ctx context.Context, args jsontext.Value) (tool.Result, error) {
	c := Call{Name: t.desc.Name, Arguments: args, Principal: t.p, RequestID: NewRequestID()}
	if p := tool.ProgressOf(ctx); p != nil {
		c.ProgressToken, c.Progress = p.Token, p.Send
	}
	res, err := t.g.Invoke(ctx, c)
	var gwErr *Error
	if errors.As(err, &gwErr) {
		return tool.Result{}, &tool.ProtocolError{Code: gwErr.Code, Message: gwErr.Message, Data: gwErr.Data}
	}
	if err != nil {
		return tool.Result{}, err
	}
	return tool.Result{Relayed: &tool.Relayed{Content: res.Content, Structured: res.Structured,
		IsError: res.IsError}}, nil
}

// NewRequestID returns a fresh correlation id: the one a request carries
// in the log, the audit and an HTTP downstream's X-MCP-Gateway-Request-Id.
func NewRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
