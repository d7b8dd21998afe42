package gateway

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"net/http"

	"github.com/mcp-bastion/bastion/internal/gateway/auth"
	"github.com/mcp-bastion/bastion/internal/gateway/catalog"
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
}

// ViewOf returns p's view: under filter_tools_list, the tools some rule
// may allow p to call.
func (g *Gateway) ViewOf(p auth.Principal) View {
	v := View{Owner: p.Issuer + "\x00" + p.Subject}
	if g.filter {
		pp := p.Policy()
		v.Allow = func(q string) bool { return g.policy.Listable(pp, q) }
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
	start := 0
	if cursor != nil {
		rev, pos, ok := l.open(*cursor, view.Owner)
		switch {
		case !ok:
			return nil, &Error{Code: jsonrpc.CodeInvalidParams, Status: http.StatusOK, Message: "Invalid params: unknown cursor"}
		case rev != snap.Revision || pos > uint64(len(visible)):
			return nil, &Error{Code: jsonrpc.CodeInvalidParams, Status: http.StatusOK,
				Message: "Invalid params: the list changed since this cursor was issued; list again from the start"}
		}
		start = int(pos)
	}
	end := min(start+PageSize, len(visible))
	tools := make([]mcp.RawTool, 0, end-start)
	for _, t := range visible[start:end] {
		tools = append(tools, mcp.RawTool{Name: t.Qualified, Title: t.Title, Description: t.Description,
			InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Annotations: t.Annotations, Icons: t.Icons})
	}
	page := mcp.ListPage{CacheScope: "private", TTLMillis: 0}
	if end < len(visible) {
		page.NextCursor = l.seal(snap.Revision, uint64(end), view.Owner)
	}
	return l.enc.RelayedToolsList(version, tools, page), nil
}

// seal makes a cursor of a revision and a position in owner's view.
func (l *Lister) seal(rev, pos uint64, owner string) string {
	var b [16 + 16]byte
	binary.BigEndian.PutUint64(b[0:], rev)
	binary.BigEndian.PutUint64(b[8:], pos)
	copy(b[16:], l.mac(b[:16], owner))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (l *Lister) mac(body []byte, owner string) []byte {
	m := hmac.New(sha256.New, l.key)
	m.Write([]byte("mcp-bastion tools/list cursor\x00"))
	m.Write(body)
	m.Write([]byte(owner))
	return m.Sum(nil)[:16]
}

// open reads a cursor seal made for owner.
func (l *Lister) open(c, owner string) (rev, pos uint64, ok bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) != 32 {
		return 0, 0, false
	}
	if !hmac.Equal(l.mac(b[:16], owner), b[16:]) {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(b[0:]), binary.BigEndian.Uint64(b[8:]), true
}
