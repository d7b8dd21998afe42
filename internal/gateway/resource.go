package gateway

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/gateway/audit"
	"github.com/mcp-bastion/bastion/internal/gateway/auth"
	"github.com/mcp-bastion/bastion/internal/gateway/catalog"
	"github.com/mcp-bastion/bastion/internal/gateway/policy"
	"github.com/mcp-bastion/bastion/internal/gateway/upstream"
	"github.com/mcp-bastion/bastion/internal/jsonrpc"
	"github.com/mcp-bastion/bastion/internal/mcp"
)

// Lists of resources, for cursors.
const (
	listResources = "resources/list"
	listTemplates = "resources/templates/list"
)

// CodeResourceNotFound is the spec's -32002: no admitted resource or
// template serves the URI.
const CodeResourceNotFound = -32002

// ListResources renders the page of the admitted resources, as view sees
// them, that cursor points at, for version.
func (l *Lister) ListResources(version string, cursor *string, view View) ([]byte, *Error) {
	snap := l.g.catalog.Snapshot()
	visible := snap.Resources
	if view.AllowResource != nil {
		visible = slices.DeleteFunc(slices.Clone(visible), func(r *catalog.Resource) bool { return !view.AllowResource(r.Server, r.URI) })
	}
	start, end, next, err := l.page(listResources, snap.ResourceRevision, cursor, view.Owner, len(visible))
	if err != nil {
		return nil, err
	}
	out := make([]mcp.RawResource, 0, end-start)
	for _, r := range visible[start:end] {
		out = append(out, mcp.RawResource{URI: r.URI, Name: r.Name, Title: r.Title, Description: r.Description, MimeType: r.MimeType,
			Annotations: r.Annotations, Size: r.Size, Icons: r.Icons})
	}
	return l.enc.RelayedResourcesList(version, out, mcp.ListPage{NextCursor: next, CacheScope: "private"}), nil
}

// ListTemplates renders the page of the admitted resource templates that
// cursor points at, for version. Templates are not filtered by caller: a
// rule names the URIs read, which a template does not say, and every
// read is decided on its URI.
func (l *Lister) ListTemplates(version string, cursor *string, view View) ([]byte, *Error) {
	snap := l.g.catalog.Snapshot()
	start, end, next, err := l.page(listTemplates, snap.ResourceRevision, cursor, view.Owner, len(snap.Templates))
	if err != nil {
		return nil, err
	}
	out := make([]mcp.RawTemplate, 0, end-start)
	for _, t := range snap.Templates[start:end] {
		out = append(out, mcp.RawTemplate{URITemplate: t.URITemplate, Name: t.Name, Title: t.Title, Description: t.Description,
			MimeType: t.MimeType, Annotations: t.Annotations, Icons: t.Icons})
	}
	return l.enc.RelayedTemplatesList(version, out, mcp.ListPage{NextCursor: next, CacheScope: "private"}), nil
}

// ResourceRead is one resources/read as a front received it.
type ResourceRead struct {
	URI       string
	RequestID string
	Principal auth.Principal
}

// resourceNotFound answers a URI nothing admitted serves.
func resourceNotFound(uri string) *Error {
	data, _ := json.Marshal(map[string]string{"uri": uri})
	return &Error{Code: CodeResourceNotFound, Status: http.StatusOK, Message: "Resource not found", Data: data}
}

// uriNotNormal refuses a template-routed URI that is not in normal form,
// saying which rule it breaks but not the URI.
func uriNotNormal(why string) *Error {
	data, _ := json.Marshal(map[string]string{"reason": "uri_not_normal", "detail": why})
	return &Error{Code: jsonrpc.CodeInvalidParams, Status: http.StatusOK,
		Message: "Invalid params: the URI is not in normal form: " + why, Data: data}
}

// ReadResource runs a resources/read (decisions 19 and 20): the URI is
// routed to the admitted resource of exactly that URI, else to the first
// admitted template that matches it, and nowhere else (-32002 without
// asking any server); the caller is authorized by the rules' resource
// patterns on <server>:<uri read>; the read goes to the owner with the
// server's deadline, and the contents that come back are checked before
// they are relayed. Audited by the URI of an admitted resource, or by
// the template that routed a URI it expanded (which may hold a caller's
// values).
func (g *Gateway) ReadResource(ctx context.Context, c ResourceRead) ([]mcp.ResourceContents, error) {
	ev := audit.Event{RequestID: c.RequestID, Subject: c.Principal.Subject, Issuer: c.Principal.Issuer,
		Roles: c.Principal.Roles, Method: "resources/read"}
	server, err := g.routeRead(c.Principal, c.URI, &ev)
	if err != nil {
		return nil, err
	}
	contents, took, err := g.readResource(ctx, c, server)
	g.recordForwarded(ev, took, err)
	return contents, err
}

// decideRead decides p's read of uri at server. The URI is also decided
// as a server that reads only its path would read it, and a rule that
// refuses such a reading refuses the read, so that "salaries.md?v=1" or
// "salaries.md/" is not read under a broader rule than the one written
// for "salaries.md", nor the directory "private" under a broader rule
// than the one written for "private/*"; a reading no rule names refuses
// nothing (a directory "docs/" is not refused because no rule names
// "docs"). The readings are the URI's aliases (catalog.Aliases) for a
// URI of the caller's (or a downstream's) own spelling (spelled, not an
// exact admitted one), and for any URI without a trailing '/' the
// directory it may be. A rule that names the URI itself, with no
// wildcard, decides it alone. The first refusal is returned, else the
// decision on the URI itself.
func (g *Gateway) decideRead(p auth.Principal, server, uri string, spelled bool) policy.Decision {
	decide := func(u string) policy.Decision {
		// A read has no arguments for a condition to judge but its URI.
		return g.policy.Decide(p.Policy(), policy.Call{Kind: policy.KindResource, Qualified: server + ":" + u, Server: server, Name: u,
			Args: map[string]any{"uri": u}})
	}
	d := decide(uri)
	if !d.Allow || d.Literal {
		return d
	}
	var readings []string
	if spelled {
		readings = catalog.Aliases(uri)
	}
	bare := uri
	if i := strings.IndexAny(bare, "?#"); i >= 0 {
		bare = bare[:i]
	}
	if !strings.HasSuffix(bare, "/") && (spelled || bare == uri) {
		readings = append(readings, bare+"/") // the directory it may be
	}
	for _, u := range readings {
		if o := decide(u); !o.Allow && o.Reason != policy.ReasonNoRule {
			return o
		}
	}
	return d
}

// routeRead finds the server that serves a read of uri (an admitted
// resource of exactly that URI, else the first matching template) and
// decides the caller's read of it, on <server>:<uri>. ev gets the route
// and the rule; a refusal is audited and returned: -32002 when nothing
// admitted serves the URI, -32602 when a template routes it but it is not
// in normal form (catalog.NotNormal; an exact URI is the downstream's own
// spelling and is not judged), -32001 when the rule refuses.
func (g *Gateway) routeRead(p auth.Principal, uri string, ev *audit.Event) (string, error) {
	// A URI is a name, bounded as a listed one is: a caller's URI of
	// megabytes would cost its size in template matching before any rule
	// refused it, and be held for as long as a subscription lives.
	if len(uri) > catalog.MaxURI {
		ev.Outcome, ev.Reason, ev.Code = audit.Invalid, "uri_too_long", jsonrpc.CodeInvalidParams
		g.audit.Record(*ev)
		data, _ := json.Marshal(map[string]any{"reason": "uri_too_long", "max_uri_bytes": catalog.MaxURI})
		return "", &Error{Code: jsonrpc.CodeInvalidParams, Status: http.StatusOK,
			Message: fmt.Sprintf("Invalid params: the URI is longer than %d bytes", catalog.MaxURI), Data: data}
	}
	snap := g.catalog.Snapshot()
	r, t := snap.Route(uri)
	var server string
	if t != nil {
		ev.Resource, ev.Server = t.URITemplate, t.Server
	}
	switch {
	case r != nil:
		server, ev.Resource = r.Server, r.URI
	case t != nil || snap.Templated(uri):
		// A URI a template matches is the caller's spelling: it must be
		// in normal form, or one resource would have two names, one that
		// a rule or an exact URI knows and one that they do not. (One
		// that another server owns in another spelling routes nowhere,
		// and is told why as well.)
		if why := catalog.NotNormal(uri); why != "" {
			ev.Outcome, ev.Reason, ev.Code = audit.Invalid, "uri_not_normal", jsonrpc.CodeInvalidParams
			g.audit.Record(*ev)
			return "", uriNotNormal(why)
		}
		if t == nil {
			ev.Outcome, ev.Reason, ev.Code = audit.Invalid, "unknown_resource", CodeResourceNotFound
			g.audit.Record(*ev)
			return "", resourceNotFound(uri)
		}
		server = t.Server
	default:
		ev.Outcome, ev.Reason, ev.Code = audit.Invalid, "unknown_resource", CodeResourceNotFound
		g.audit.Record(*ev)
		return "", resourceNotFound(uri)
	}
	ev.Server = server
	d := g.decideRead(p, server, uri, r == nil)
	ev.Rule = d.Rule
	g.metrics.Decision(d.Rule, d.Allow)
	if !d.Allow {
		ev.Outcome, ev.Reason, ev.Code = audit.Deny, d.Reason, CodeUnauthorized
		g.audit.Record(*ev)
		e := unauthorized(ev.Resource, d, p.Roles)
		e.Message = "Unauthorized: the caller may not read this resource"
		e.Data, _ = json.Marshal(map[string]any{"server": server, "rule": d.Rule, "required_roles": orNone(d.Required), "roles": orNone(p.Roles)})
		return "", e
	}
	return server, nil
}

func orNone(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (g *Gateway) readResource(ctx context.Context, c ResourceRead, server string) ([]mcp.ResourceContents, time.Duration, error) {
	log := callLog{g.log, slog.String("request_id", c.RequestID)}
	d := g.servers[server]
	params, _ := jsontext.AppendQuote([]byte(`{"uri":`), c.URI)
	params = append(params, '}')
	dctx, cancel := context.WithTimeoutCause(ctx, d.cfg.Timeout.D(), errCallTimeout)
	defer cancel()
	release, err := d.slots.acquire(dctx, c.Principal)
	if err != nil {
		return nil, 0, g.callError(ctx, dctx, log, server, "resources/read", context.Cause(dctx))
	}
	defer release()
	start := time.Now()
	raw, err := d.conn.Call(dctx, "resources/read", params, upstream.CallOptions{
		Name:     c.URI,
		Identity: identityOf(c.Principal, c.RequestID),
		// Sent only while the URI still routes to the server it was
		// decided for (see Invoke): a server that came back as another
		// one is quarantined, and serves nothing.
		Current: func() error {
			if r, t := g.catalog.Snapshot().Route(c.URI); (r != nil && r.Server == server) || (r == nil && t != nil && t.Server == server) {
				return nil
			}
			return resourceNotFound(c.URI)
		},
	})
	took := time.Since(start)
	if err != nil {
		var rpcErr *upstream.RPCError
		if errors.As(err, &rpcErr) && rpcErr.Code == CodeResourceNotFound {
			return nil, took, resourceNotFound(c.URI)
		}
		return nil, took, g.callError(ctx, dctx, log, server, "resources/read", err)
	}
	if askedForInput(raw) {
		log.Warn("downstream answered resources/read with input_required, which the gateway carries only for tools/call", slog.String("server", server))
		return nil, took, badGateway(server, reasonNoInputRounds, false)
	}
	contents, perr := parseContents(raw)
	if perr != nil {
		log.Warn("downstream answered resources/read with a malformed result", slog.String("server", server), slog.String("error", perr.Error()))
		return nil, took, badGateway(server, "the server answered with a malformed result", false)
	}
	if perr := g.checkContents(c.Principal, server, c.URI, contents); perr != nil {
		// The error says which contents item, never its URI.
		log.Warn("downstream answered resources/read with contents of another resource", slog.String("server", server), slog.String("error", perr.Error()))
		return nil, took, badGateway(server, "the server answered with contents of a resource it does not serve or the caller may not read", false)
	}
	return contents, took, nil
}

// checkContents checks the contents a read of uri from server returned:
// an item labelled with another URI must be one that server serves, or
// that nothing admitted does (catalog Route), and one the caller may read
// from server by the rules; else the whole read is refused. An item
// labelled with the URI read needs nothing more: that read was decided.
// The error names the item by index, not by URI.
func (g *Gateway) checkContents(p auth.Principal, server, uri string, contents []mcp.ResourceContents) error {
	snap := g.catalog.Snapshot()
	for i, c := range contents {
		if c.URI == uri {
			continue
		}
		if len(c.URI) > catalog.MaxURI {
			// Bounded as a listed URI is, before any template is matched.
			return fmt.Errorf("contents[%d] is labelled with a URI longer than %d bytes", i, catalog.MaxURI)
		}
		_, exact := snap.LookupResource(c.URI)
		switch o := snap.Owner(c.URI); {
		case o != "" && o != server:
			// Another server's, whether it serves it now or not.
			return fmt.Errorf("contents[%d] is labelled with a URI another server serves", i)
		case !exact && catalog.NotNormal(c.URI) != "":
			// Another spelling of a URI would be judged, and routed, as
			// another resource.
			return fmt.Errorf("contents[%d] is labelled with a URI not in normal form: %s", i, catalog.NotNormal(c.URI))
		}
		d := g.decideRead(p, server, c.URI, !exact)
		if !d.Allow {
			return fmt.Errorf("contents[%d] is labelled with a URI the caller may not read (rule %q, %s)", i, d.Rule, d.Reason)
		}
	}
	return nil
}

// parseContents reads a ReadResourceResult: contents an array of
// objects, each with a uri and exactly one of text and blob (strings, a
// blob strict standard base64), mimeType absent or a string.
func parseContents(raw jsontext.Value) ([]mcp.ResourceContents, error) {
	var r struct {
		Contents []struct {
			URI      *string `json:"uri"`
			MimeType *string `json:"mimeType"`
			Text     *string `json:"text"`
			Blob     *string `json:"blob"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, err
	}
	if r.Contents == nil {
		return nil, errors.New("contents is missing")
	}
	out := make([]mcp.ResourceContents, 0, len(r.Contents))
	for i, c := range r.Contents {
		if c.URI == nil || (c.Text == nil) == (c.Blob == nil) {
			return nil, fmt.Errorf("contents[%d] lacks a uri, or does not hold exactly one of text and blob", i)
		}
		if c.Blob != nil && !strictBase64(*c.Blob) {
			return nil, fmt.Errorf("contents[%d]'s blob is not standard base64", i)
		}
		rc := mcp.ResourceContents{URI: *c.URI, Text: c.Text, Blob: c.Blob}
		if c.MimeType != nil {
			rc.MimeType = *c.MimeType
		}
		out = append(out, rc)
	}
	return out, nil
}

// strictBase64 reports whether s is standard base64 (RFC 4648 section 4)
// with its padding, zero pad bits and no line breaks, which the decoder
// would otherwise skip.
func strictBase64(s string) bool {
	if strings.ContainsAny(s, "\r\n") {
		return false
	}
	_, err := base64.StdEncoding.Strict().DecodeString(s)
	return err == nil
}
