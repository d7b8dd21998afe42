package gateway

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"net/http"

	"github.com/mcp-bastion/bastion/internal/gateway/auth"
	"github.com/mcp-bastion/bastion/internal/gateway/catalog"
	"github.com/mcp-bastion/bastion/internal/gateway/policy"
	"github.com/mcp-bastion/bastion/internal/jsonrpc"
	"github.com/mcp-bastion/bastion/internal/mcp"
)

// PageSize is how many tools one page of the gateway's tools/list holds.
const PageSize = 100

// Lister renders the gateway's own tools/list, paginated with opaque
// cursors sealed with an HMAC over the catalog revision and the position,
// so that a cursor cannot be forged, and one from before a change of the
// catalog is refused rather than read against another list.
type Lister struct {
	g   *Gateway
	enc *mcp.Encoder
	key []byte
}

// NewLister returns a lister for g that renders with enc and seals
// cursors with key (at least 32 bytes).
func (g *Gateway) NewLister(enc *mcp.Encoder, key []byte) *Lister {
	return &Lister{g: g, enc: enc, key: key}
}

// View is what one caller may list: Owner binds the cursors issued to
// it (a cursor is refused in any other view), Allow says which tools it
// sees (nil: every tool).
type View struct {
	Owner string
	Allow func(qualified string) bool
	// AllowPrompt says which prompts it sees (nil: every prompt).
	AllowPrompt func(qualified string) bool
	// AllowResource says which resources it sees (nil: every one).
	AllowResource func(server, uri string) bool
}

// ViewOf returns p's view: under filter_tools_list, the tools some rule
// may allow p to call.
func (g *Gateway) ViewOf(p auth.Principal) View {
	v := View{Owner: p.Issuer + "\x00" + p.Subject}
	if g.filter {
		pp := p.Policy()
		v.Allow = func(q string) bool { return g.policy.Listable(pp, q) }
		v.AllowPrompt = func(q string) bool { return g.policy.ListableKind(pp, policy.KindPrompt, q) }
		v.AllowResource = func(server, uri string) bool {
			return g.policy.ListableKind(pp, policy.KindResource, server+":"+uri)
		}
	}
	return v
}

// List renders the page of the catalog, as view sees it, that cursor (nil
// for the first) points at, for version. A cursor it cannot read, one of
// another view, or one of an older catalog, is -32602.
func (l *Lister) List(version string, cursor *string, view View) ([]byte, *Error) {
	snap := l.g.catalog.Snapshot()
	visible := snap.Tools
	if view.Allow != nil {
		visible = make([]*catalog.Tool, 0, len(snap.Tools))
		for _, t := range snap.Tools {
			if view.Allow(t.Qualified) {
				visible = append(visible, t)
			}
		}
	}
	start, end, next, err := l.page(listTools, snap.Revision, cursor, view.Owner, len(visible))
	if err != nil {
		return nil, err
	}
	tools := make([]mcp.RawTool, 0, end-start)
	for _, t := range visible[start:end] {
		tools = append(tools, mcp.RawTool{Name: t.Public, Title: t.Title, Description: t.Description,
			InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Annotations: t.Annotations, Icons: t.Icons})
	}
	return l.enc.RelayedToolsList(version, tools, mcp.ListPage{NextCursor: next, CacheScope: "private"}), nil
}

// Lists a cursor can belong to: the name is sealed into it.
const (
	listTools   = "tools/list"
	listPrompts = "prompts/list"
)

// page reads cursor (nil for the first page) of list at revision rev in
// owner's view of n items: the page is [start, end), next the cursor of
// the one after it ("" on the last).
func (l *Lister) page(list string, rev uint64, cursor *string, owner string, n int) (start, end int, next string, _ *Error) {
	if cursor != nil {
		crev, pos, ok := l.open(list, *cursor, owner)
		switch {
		case !ok:
			return 0, 0, "", &Error{Code: jsonrpc.CodeInvalidParams, Status: http.StatusOK, Message: "Invalid params: unknown cursor"}
		case crev != rev || pos > uint64(n):
			return 0, 0, "", &Error{Code: jsonrpc.CodeInvalidParams, Status: http.StatusOK,
				Message: "Invalid params: the list changed since this cursor was issued; list again from the start"}
		}
		start = int(pos)
	}
	end = min(start+PageSize, n)
	if end < n {
		next = l.seal(list, rev, uint64(end), owner)
	}
	return start, end, next, nil
}

// seal makes a cursor of list at a revision and a position in owner's
// view.
func (l *Lister) seal(list string, rev, pos uint64, owner string) string {
	var b [16 + 16]byte
	binary.BigEndian.PutUint64(b[0:], rev)
	binary.BigEndian.PutUint64(b[8:], pos)
	copy(b[16:], l.mac(list, b[:16], owner))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (l *Lister) mac(list string, body []byte, owner string) []byte {
	m := hmac.New(sha256.New, l.key)
	m.Write([]byte("mcp-bastion " + list + " cursor\x00"))
	m.Write(body)
	m.Write([]byte(owner))
	return m.Sum(nil)[:16]
}

// open reads a cursor of list sealed for owner.
func (l *Lister) open(list, c, owner string) (rev, pos uint64, ok bool) {
	b, err := DecodeSealed(c)
	if err != nil || len(b) != 32 {
		return 0, 0, false
	}
	if !hmac.Equal(l.mac(list, b[:16], owner), b[16:]) {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(b[0:]), binary.BigEndian.Uint64(b[8:]), true
}

// Lists a notification stream hears of, for ViewDigest.
const (
	ViewTools = iota
	ViewPrompts
	ViewResources // the resources and the templates
)

// ViewDigest is a digest of one list as view sees it: what each visible
// entry is (its name, its descriptor's digest, its owner). It changes
// exactly when that list changes for the caller, so that a notification
// stream says a list changed only to callers who can see the change
// (docs/gateway-surface.md decision 26).
func (g *Gateway) ViewDigest(list int, view View) [sha256.Size]byte {
	snap := g.catalog.Snapshot()
	h := sha256.New()
	put := func(parts ...string) {
		for _, p := range parts {
			var n [8]byte
			binary.BigEndian.PutUint64(n[:], uint64(len(p)))
			h.Write(n[:])
			h.Write([]byte(p))
		}
	}
	switch list {
	case ViewTools:
		for _, t := range snap.Tools {
			if view.Allow == nil || view.Allow(t.Qualified) {
				put(t.Qualified, t.Digest)
			}
		}
	case ViewPrompts:
		for _, p := range snap.Prompts {
			if view.AllowPrompt == nil || view.AllowPrompt(p.Qualified) {
				put(p.Qualified, p.Digest)
			}
		}
	case ViewResources:
		for _, r := range snap.Resources {
			if view.AllowResource == nil || view.AllowResource(r.Server, r.URI) {
				put("r", r.Server, r.URI, r.Digest)
			}
		}
		for _, t := range snap.Templates { // listed to everyone
			put("t", t.Server, t.URITemplate, t.Digest)
		}
	}
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}
