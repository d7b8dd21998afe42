// Package catalog holds the gateway's tools: every downstream tool that was
// admitted, under its qualified name <server>.<tool>, with the backend
// mapping (server, downstream name) kept apart from the public name, and
// the descriptors that were rejected, one by one, with their reason.
//
// The merged list is sorted by qualified name, so that discovery order
// never decides anything. Each change publishes a new immutable
// [Snapshot] with a higher revision; readers never lock.
//
// Each descriptor is checked by package admit (structure, schemas, header
// mirroring, digest, scanner); a [Judge] then decides, against the
// ledger, whether it is offered or held.
package catalog

import (
	"crypto/sha256"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/yosida95/uritemplate/v3"

	"github.com/mcp-bastion/bastion/internal/gateway/admit"
)

// Tool is one admitted tool.
type Tool struct {
	// Qualified is <server>.<tool>: what rules, the ledger and the audit
	// name it by.
	Qualified string
	// Public is the name callers list and call it by: Qualified, or
	// under names: bare the downstream's own name.
	Public string
	// Server is the configured server name; Name the downstream's own.
	Server, Name string
	// Raw is the descriptor exactly as the downstream sent it.
	Raw jsontext.Value
	// Title and Description are the descriptor's strings, for listing.
	Title, Description string
	// InputSchema, OutputSchema, Annotations and Icons are raw members
	// (nil when absent).
	InputSchema, OutputSchema, Annotations, Icons jsontext.Value
	// Input is the compiled InputSchema, which every call's arguments
	// must satisfy; Output the compiled OutputSchema (nil without one),
	// which every structuredContent must satisfy.
	Input, Output *jsonschema.Schema
	// Mirrors are the arguments the descriptor mirrors into headers.
	Mirrors []admit.Mirror
	// Digest pins the descriptor (decision 6); Canonical is its RFC
	// 8785 form.
	Digest    string
	Canonical jsontext.Value
	// Findings are the scanner's evidence on the descriptor.
	Findings []admit.Finding
}

// Rejected is a descriptor that was not admitted.
type Rejected struct {
	// Kind is what the descriptor described; "" is a tool.
	Kind   admit.Kind `json:"kind,omitempty"`
	Server string     `json:"server"`
	// Index is the descriptor's position in the server's list.
	Index int `json:"index"`
	// Name is the downstream name, when the descriptor has a usable one.
	Name string `json:"name,omitempty"`
	// Qualified is the name it would have had, when Name is set.
	Qualified string `json:"qualified,omitempty"`
	// Category is a stable identifier of the rule (admit.Reject*).
	Category string `json:"category"`
	// Detail says which field broke the rule, never a value.
	Detail string `json:"detail"`
	// Raw is the descriptor as received, for the reviewer's evidence.
	Raw jsontext.Value `json:"descriptor,omitempty"`
}

// Server is what discovery learned of a server besides its list.
type Server struct {
	Name     string
	Identity admit.Identity
	// Others are the other configured servers: a descriptor that names
	// one of their tools is scanner evidence.
	Others []string
}

// Entry is one well-formed descriptor as a [Judge] sees it: a tool's or
// a prompt's.
type Entry struct {
	// Qualified is the public name, Name the downstream's own.
	Qualified, Name string
	// Digest pins the descriptor; Canonical is its RFC 8785 form.
	Digest    string
	Canonical jsontext.Value
	// Findings are the scanner's evidence on it.
	Findings []admit.Finding
}

// Judge decides the lifecycle of a server's well-formed, checked
// descriptors of one kind against what was pinned before (the ledger),
// and returns the record of each, plus a record for every name of that
// kind that disappeared. An error offers nothing of the server's list:
// a ledger that cannot be read or written fails closed.
type Judge interface {
	Judge(srv Server, kind admit.Kind, entries []Entry) ([]admit.Record, error)
}

// AdmitAll admits every well-formed descriptor without a ledger. It is
// for tests of what lies around admission.
type AdmitAll struct{}

// Judge admits every entry.
func (AdmitAll) Judge(srv Server, kind admit.Kind, entries []Entry) ([]admit.Record, error) {
	out := make([]admit.Record, len(entries))
	for i, e := range entries {
		out[i] = admit.Record{Kind: kind, Qualified: e.Qualified, Server: srv.Name, Name: e.Name, Status: admit.Admitted, Digest: e.Digest}
	}
	return out, nil
}

func (t *Tool) entry() Entry {
	return Entry{Qualified: t.Qualified, Name: t.Name, Digest: t.Digest, Canonical: t.Canonical, Findings: t.Findings}
}

// Snapshot is the catalog at one revision. It is immutable.
type Snapshot struct {
	// Revision increases with every change of the tools offered;
	// PromptRevision with every change of the prompts offered;
	// ResourceRevision with every change of the resources or templates.
	Revision, PromptRevision, ResourceRevision uint64
	// Tools are the admitted tools, sorted by qualified name.
	Tools []*Tool
	// Prompts are the admitted prompts, sorted by qualified name.
	Prompts []*Prompt
	// Resources are the admitted resources each URI's owner offers,
	// sorted by URI; Templates the admitted templates, in routing order
	// (servers in configuration order, each server's in its listed
	// order). Shadowed are those another server owns.
	Resources []*Resource
	Templates []*Template
	Shadowed  []Shadowed
	// Rejected are the descriptors refused, by server, then kind, then
	// index.
	Rejected []Rejected
	// Held are the records of tools and prompts not offered — pending
	// review, quarantined, rejected by a reviewer, removed — by server,
	// then kind, then qualified name.
	Held     []admit.Record
	byName   map[string]*Tool
	byPrompt map[string]*Prompt
	byURI    map[string]*Resource
	// claimed are the URIs whose owner does not offer them now (it is
	// down, or holds them for review): no other server may serve them.
	// routes are the templates in routing order, those an owner claims
	// but does not offer now among them.
	claimed map[string]string
	routes  []route
	// sameAs are the owners of the URIs listed or claimed exactly, by
	// each of their resourceKeys: the first server to list or claim one spelling of a
	// resource owns every spelling of it.
	sameAs map[string]string
	// held are the keys of the URIs in claimed: no template, not even
	// their owner's, routes a spelling of one.
	held map[string]bool
}

// route is a template in routing order: one offered (t set), or one its
// owner claims but does not offer now.
type route struct {
	server   string
	t        *Template
	compiled *uritemplate.Template
}

// LookupResource returns the admitted resource of uri.
func (s *Snapshot) LookupResource(uri string) (*Resource, bool) {
	r, ok := s.byURI[uri]
	return r, ok
}

// Route finds what serves a read of uri: the resource of exactly that
// URI, else the first template that matches it (decision 20). A URI, or
// a first matching template, that its owner claims but does not offer
// now (it is down, or holds it for review) routes nowhere, in any
// spelling: it is never served by a server listed after its owner
// meanwhile, nor by its owner's template. Nor does a URI a
// template matches when another spelling of it is another server's: one
// listed or claimed exactly (resourceKeys), or one of its aliases
// (Aliases: the same resource to a server that reads only its path)
// another server's template matches. Another spelling of a URI one
// server owns is never another server's resource.
func (s *Snapshot) Route(uri string) (*Resource, *Template) {
	if r, ok := s.byURI[uri]; ok {
		return r, nil
	}
	keys := resourceKeys(uri)
	if slices.ContainsFunc(keys, func(k string) bool { return s.held[k] }) {
		// Its owner holds it, in this spelling or another: its own
		// template does not serve what waits for review either.
		return nil, nil
	}
	rt, ok := s.firstRoute(uri)
	if !ok || rt.t == nil {
		return nil, nil
	}
	if o := keyOwner(s.sameAs, keys, rt.server); o != "" {
		return nil, nil
	}
	for _, a := range Aliases(uri) {
		if o := s.owner(a); o != "" && o != rt.server {
			return nil, nil
		}
	}
	return nil, rt.t
}

// Owner is the server that owns uri, whether it offers it now or not:
// the owner of exactly that URI, else the owner of another spelling of
// it when another server owns one (as Route decides), else of the first
// template that matches it; "" for no one.
func (s *Snapshot) Owner(uri string) string {
	if r, ok := s.byURI[uri]; ok {
		return r.Server
	}
	if o, ok := s.claimed[uri]; ok {
		return o
	}
	o := ""
	if rt, ok := s.firstRoute(uri); ok {
		o = rt.server
	}
	if so := keyOwner(s.sameAs, resourceKeys(uri), o); so != "" {
		return so
	}
	for _, a := range Aliases(uri) {
		if ao := s.owner(a); ao != "" && ao != o {
			return ao
		}
	}
	return o
}

// Templated reports whether a template, offered or claimed, matches
// uri, whether or not it routes it.
func (s *Snapshot) Templated(uri string) bool {
	_, ok := s.firstRoute(uri)
	return ok
}

// owner is Owner without aliases.
func (s *Snapshot) owner(uri string) string {
	if r, ok := s.byURI[uri]; ok {
		return r.Server
	}
	if o, ok := s.claimed[uri]; ok {
		return o
	}
	if rt, ok := s.firstRoute(uri); ok {
		return rt.server
	}
	return ""
}

// firstRoute is the first template, in routing order, that matches uri.
func (s *Snapshot) firstRoute(uri string) (route, bool) {
	for _, rt := range s.routes {
		if rt.compiled.Match(uri) != nil {
			return rt, true
		}
	}
	return route{}, false
}

// Aliases are the other URIs that name uri's resource to a server that
// reads only a URI's path: uri without its query and fragment, and that
// without its trailing '/' (never down to a bare scheme).
func Aliases(uri string) []string {
	bare := uri
	if i := strings.IndexAny(bare, "?#"); i >= 0 {
		bare = bare[:i]
	}
	var out []string
	if bare != uri {
		out = append(out, bare)
	}
	if trimmed := strings.TrimRight(bare, "/"); trimmed != bare && !strings.HasSuffix(trimmed, ":") && !strings.HasSuffix(trimmed, ":/") {
		out = append(out, trimmed)
	}
	return out
}

// resourceKeys are what names uri's resource to the most lenient servers
// that read a URI's path: the URI with its scheme in lower case, its
// percent-encodings decoded (up to maxDecodes times, as a server that
// decodes twice reads them), then without its query and fragment, '\\'
// read as '/', without '.', '..' and empty segments and without a
// trailing '/'. A file URI's host is dropped (file:/p, file://host/p and
// file:///p are one file) — found in the decoded spelling by a server
// that decodes first and in the raw one by a server that parses first,
// hence two keys when the two differ (file:/%2Fdir/p). Any other
// scheme's authority is read as the first segment of its path, without
// user information, an empty or default port or a trailing '.', in
// lower case (db://prod/t, db:///prod/t and db:prod/t are one table to a
// server that joins them; https://u@h.:443/p is https://h/p). Two URIs
// that share a key are one resource to some server, so two servers never
// own them: the first to list or claim one owns both. It over-approximates
// on purpose — two resources a strict server keeps apart may share a key,
// and then the later server's is shadowed — and is used only to compare,
// never sent: a downstream reads its own spelling.
func resourceKeys(uri string) []string {
	scheme, rest, ok := strings.Cut(uri, ":")
	if !ok {
		return []string{uri}
	}
	scheme = strings.ToLower(scheme)
	if scheme != "file" {
		return []string{pathKey(scheme, foldAuthority(scheme, decodedPath(rest)))}
	}
	decodedFirst := pathKey(scheme, dropHost(decodedPath(rest)))
	parsedFirst := pathKey(scheme, decodedPath(dropHost(rest)))
	if parsedFirst == decodedFirst {
		return []string{decodedFirst}
	}
	return []string{decodedFirst, parsedFirst}
}

// keyOwner is the server other than except that owns one of keys in
// owners, "" for none.
func keyOwner(owners map[string]string, keys []string, except string) string {
	for _, k := range keys {
		if o := owners[k]; o != "" && o != except {
			return o
		}
	}
	return ""
}

// decodedPath is rest percent-decoded, up to maxDecodes times, with '\\'
// read as '/' and without the query and fragment: a server that decodes
// before it parses reads p%3Fq as p?q.
func decodedPath(rest string) string {
	for range maxDecodes {
		decoded := percentDecode(rest)
		if decoded == rest {
			break
		}
		rest = decoded
	}
	rest = strings.ReplaceAll(rest, "\\", "/")
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// dropHost is rest without the authority it begins with, if any.
func dropHost(rest string) string {
	after, ok := strings.CutPrefix(rest, "//")
	if !ok {
		return rest
	}
	if i := strings.IndexByte(after, '/'); i >= 0 {
		return after[i:]
	}
	return ""
}

// defaultPort is the port a scheme's URI means when it names none.
func defaultPort(scheme string) string {
	switch scheme {
	case "http", "ws":
		return "80"
	case "https", "wss":
		return "443"
	}
	return ""
}

// foldAuthority is path with the authority it begins with, if any, made
// its first segment: without user information, an empty or default port
// or a trailing '.'. (pathKey puts the segment in lower case.)
func foldAuthority(scheme, path string) string {
	after, ok := strings.CutPrefix(path, "//")
	if !ok {
		return path
	}
	authority, rest := after, ""
	if i := strings.IndexByte(after, '/'); i >= 0 {
		authority, rest = after[:i], after[i:]
	}
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		authority = authority[i+1:]
	}
	if i := strings.LastIndexByte(authority, ':'); i >= 0 && !strings.Contains(authority[i:], "]") {
		if port := authority[i+1:]; port == "" || port == defaultPort(scheme) {
			authority = authority[:i]
		}
	}
	return "/" + strings.TrimSuffix(authority, ".") + rest
}

// pathKey is scheme and path's segments, without '.', '..' and empty
// ones, the first in lower case for a scheme other than file.
func pathKey(scheme, path string) string {
	var segs []string
	for seg := range strings.SplitSeq(path, "/") {
		switch seg {
		case "", ".":
		case "..":
			if len(segs) > 0 {
				segs = segs[:len(segs)-1]
			}
		default:
			segs = append(segs, seg)
		}
	}
	if scheme != "file" && len(segs) > 0 {
		segs[0] = strings.ToLower(segs[0])
	}
	return scheme + ":/" + strings.Join(segs, "/")
}

// maxDecodes bounds how many times a URI is decoded for its keys: more
// than a server is likely to, and few enough that a URI of nested %25s
// costs little.
const maxDecodes = 3

// percentDecode decodes every well-formed percent-encoding in s and
// leaves any other '%' as it is.
func percentDecode(s string) string {
	if strings.IndexByte(s, '%') < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Lookup returns the tool with public name q.
func (s *Snapshot) Lookup(q string) (*Tool, bool) {
	t, ok := s.byName[q]
	return t, ok
}

// LookupPrompt returns the prompt with public name q.
func (s *Snapshot) LookupPrompt(q string) (*Prompt, bool) {
	p, ok := s.byPrompt[q]
	return p, ok
}

// Catalog is the mutable holder of snapshots. It is safe for concurrent
// use.
type Catalog struct {
	judge Judge
	opts  admit.Options

	mu      sync.Mutex
	bare    bool     // public names are the downstream's own
	order   []string // configured servers, in configuration order
	servers map[string]serverTools
	subs    map[admit.Kind][]chan struct{}
	// claims are what each server claims of the URI space (claim); they
	// outlive its connection.
	claims map[string]claim

	current atomic.Pointer[Snapshot]
}

type serverTools struct {
	tools    []*Tool
	rejected []Rejected
	held     []admit.Record
	// byRaw holds the well-formed tools by the SHA-256 of their raw
	// bytes, for the next check to reuse.
	byRaw map[[32]byte]*Tool
	// prompts is the server's prompt list as last judged (nil before
	// one, or after it failed); resources its resources and templates.
	prompts   *serverPrompts
	resources *serverResources
}

// New returns an empty catalog that checks descriptors with opts and
// decides their lifecycle with judge.
func New(judge Judge, opts admit.Options) *Catalog {
	if opts.Schemas == nil {
		opts.Schemas = &admit.SchemaCache{}
	}
	c := &Catalog{judge: judge, opts: opts, servers: map[string]serverTools{}, subs: map[admit.Kind][]chan struct{}{}, claims: map[string]claim{}}
	c.current.Store(&Snapshot{byName: map[string]*Tool{}, byPrompt: map[string]*Prompt{}, byURI: map[string]*Resource{}, sameAs: map[string]string{}})
	return c
}

// Snapshot returns the current snapshot.
func (c *Catalog) Snapshot() *Snapshot { return c.current.Load() }

// Changed returns a channel that receives a value (without blocking the
// catalog; one pending value at most) after every change of what is
// offered of kind.
func (c *Catalog) Changed(kind admit.Kind) <-chan struct{} {
	ch := make(chan struct{}, 1)
	c.mu.Lock()
	c.subs[kind] = append(c.subs[kind], ch)
	c.mu.Unlock()
	return ch
}

// Unsubscribe stops notifications on a channel Changed returned.
func (c *Catalog) Unsubscribe(ch <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, subs := range c.subs {
		c.subs[k] = slices.DeleteFunc(subs, func(s chan struct{}) bool { return s == ch })
	}
}

// Update replaces the server's tools with what its complete list holds:
// each descriptor checked on its own, so one bad descriptor never blocks
// the valid ones beside it, then judged against the ledger. When the
// judge fails, nothing of the server is offered and the error is
// returned.
func (c *Catalog) Update(srv Server, descriptors []jsontext.Value) error {
	st := c.check(srv.Name, descriptors, srv.Others)
	entries := make([]Entry, len(st.tools))
	for i, t := range st.tools {
		entries[i] = t.entry()
	}
	recs, err := c.judge.Judge(srv, admit.KindTool, entries)
	if err != nil {
		c.Remove(srv.Name)
		return err
	}
	admitted, held := judged(recs)
	st.tools = slices.DeleteFunc(st.tools, func(t *Tool) bool { return admitted[t.Name] != t.Digest })
	st.held = append(st.held, held...)
	c.mu.Lock()
	defer c.mu.Unlock()
	st.prompts, st.resources = c.servers[srv.Name].prompts, c.servers[srv.Name].resources
	c.servers[srv.Name] = st
	c.publish()
	return nil
}

// judged reads a judge's records of one server and kind: the digest
// each admitted name may be offered with (a descriptor is offered only
// when its digest is the one admitted), and the records it holds,
// sorted by reference.
func judged(recs []admit.Record) (admitted map[string]string, held []admit.Record) {
	admitted = make(map[string]string, len(recs))
	for _, r := range recs {
		if r.Status == admit.Admitted {
			admitted[r.Name] = r.Digest
			continue
		}
		held = append(held, r)
	}
	slices.SortFunc(held, func(a, b admit.Record) int { return strings.Compare(a.Ref(), b.Ref()) })
	return admitted, held
}

// Remove exposes nothing of server: its list failed, or it is gone.
func (c *Catalog) Remove(server string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.servers[server]; !ok {
		return
	}
	delete(c.servers, server)
	c.publish()
}

// publish builds and stores the next snapshot; c.mu is held.
func (c *Catalog) publish() {
	prev := c.current.Load()
	next := &Snapshot{Revision: prev.Revision + 1, PromptRevision: prev.PromptRevision + 1, ResourceRevision: prev.ResourceRevision + 1,
		byName: map[string]*Tool{}, byPrompt: map[string]*Prompt{}, byURI: map[string]*Resource{}, sameAs: map[string]string{}}
	names := make([]string, 0, len(c.servers))
	for name := range c.servers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		st := c.servers[name]
		next.Tools = append(next.Tools, st.tools...)
		next.Rejected = append(next.Rejected, st.rejected...)
		next.Held = append(next.Held, st.held...)
		if p := st.prompts; p != nil {
			next.Prompts = append(next.Prompts, p.prompts...)
			next.Rejected = append(next.Rejected, p.rejected...)
			next.Held = append(next.Held, p.held...)
		}
	}
	slices.SortFunc(next.Prompts, func(a, b *Prompt) int { return strings.Compare(a.Qualified, b.Qualified) })
	for _, p := range next.Prompts {
		next.byPrompt[p.Public] = p
	}
	c.publishResources(next, names)
	changed := map[admit.Kind]bool{admit.KindTool: true, admit.KindPrompt: true, admit.KindResource: true}
	if samePrompts(prev.Prompts, next.Prompts) {
		next.PromptRevision = prev.PromptRevision
		changed[admit.KindPrompt] = false
	}
	if sameResources(prev, next) {
		next.ResourceRevision = prev.ResourceRevision
		changed[admit.KindResource] = false
	}
	slices.SortFunc(next.Tools, func(a, b *Tool) int {
		switch {
		case a.Qualified < b.Qualified:
			return -1
		case a.Qualified > b.Qualified:
			return 1
		}
		return 0
	})
	for _, t := range next.Tools {
		next.byName[t.Public] = t
	}
	if sameTools(prev.Tools, next.Tools) {
		// A refresh that found what was there is no change: cursors
		// stay valid and no client is told to list again.
		next.Revision = prev.Revision
		changed[admit.KindTool] = false
	}
	c.current.Store(next)
	for kind, subs := range c.subs {
		if !changed[kind] {
			continue
		}
		for _, ch := range subs {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// sameTools reports whether two sorted tool lists offer the same
// descriptors (the same canonical forms) under the same names.
func sameTools(a, b []*Tool) bool {
	return slices.EqualFunc(a, b, func(x, y *Tool) bool {
		return x.Qualified == y.Qualified && x.Digest == y.Digest
	})
}

// toolName is the 2025-11-25 tool-name rule (SEP-986): 1-128 characters
// of A-Z a-z 0-9 _ - and dot.
var toolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// MaxQualified is the longest qualified name.
const MaxQualified = 128

// check parses and checks every descriptor of one server's list; the
// tools it returns are well formed, with compiled schemas, a digest and
// the scanner's findings. Descriptors are checked in parallel — each on
// its own, so the verdicts cannot depend on the order — and one found
// unchanged (byte for byte) in the server's previous list is reused as it
// was checked then: a re-discovery of a 10,000-tool list costs a hash per
// descriptor, not a schema compile.
func (c *Catalog) check(server string, descriptors []jsontext.Value, others []string) serverTools {
	c.mu.Lock()
	prev, bare := c.servers[server].byRaw, c.bare
	c.mu.Unlock()
	type verdict struct {
		tool *Tool
		rej  *Rejected
		key  [32]byte
	}
	out := make([]verdict, len(descriptors))
	workers := min(runtime.GOMAXPROCS(0), max(1, len(descriptors)/64))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(descriptors); i += workers {
				raw := descriptors[i]
				out[i].key = sha256.Sum256(raw)
				if t, ok := prev[out[i].key]; ok {
					out[i].tool = t
					continue
				}
				out[i].tool, out[i].rej = c.checkOne(server, i, raw, others)
				if out[i].tool != nil && bare {
					out[i].tool.Public = out[i].tool.Name
				}
			}
		})
	}
	wg.Wait()
	st := serverTools{byRaw: make(map[[32]byte]*Tool, len(descriptors))}
	counts := nameCounts{}
	for _, v := range out {
		switch {
		case v.tool != nil:
			counts.add(v.tool.Name)
		case v.rej.Name != "":
			// A copy rejected for another reason still shares the name:
			// the valid copy must not win by its rival's fault.
			counts.add(v.rej.Name)
		}
	}
	for i, v := range out {
		if v.rej != nil {
			st.rejected = append(st.rejected, *v.rej)
			continue
		}
		if detail := counts.shared(v.tool.Name, "descriptors"); detail != "" {
			// None of the copies wins: which one would is discovery order.
			st.rejected = append(st.rejected, Rejected{Server: server, Index: i, Name: v.tool.Name, Qualified: v.tool.Qualified,
				Category: admit.RejectDuplicateName, Detail: detail, Raw: descriptors[i]})
			continue
		}
		st.tools = append(st.tools, v.tool)
		st.byRaw[v.key] = v.tool
	}
	return st
}

// nameKey is what two names of one server must differ in to be two
// names: policy matches tool and prompt names folded by strings.ToLower
// (policy.go), so a rule for s.read_report also matches s.READ_REPORT.
// Were both offered, the second spelling would take over a grant meant
// for the first; folded alike, they are one name, and neither is offered.
func nameKey(name string) string {
	return strings.ToLower(name)
}

// nameCounts counts the descriptors of one server under each [nameKey].
type nameCounts map[string]*nameCount

type nameCount struct {
	n     int
	first string // the spelling counted first
	cased bool   // another spelling differs from first, only in case
}

func (c nameCounts) add(name string) {
	key := nameKey(name)
	nc := c[key]
	if nc == nil {
		nc = &nameCount{first: name}
		c[key] = nc
	}
	nc.n++
	nc.cased = nc.cased || name != nc.first
}

// shared returns why name is given to none of the descriptors (what
// they are: "descriptors", "prompts") counted under its [nameKey], or ""
// when only one is.
func (c nameCounts) shared(name, what string) string {
	nc := c[nameKey(name)]
	switch {
	case nc == nil || nc.n < 2:
		return ""
	case nc.cased:
		return fmt.Sprintf("%d %s of this server share the name, differing only in case (rules match names without regard to case)", nc.n, what)
	default:
		return fmt.Sprintf("%d %s of this server share the name", nc.n, what)
	}
}

// descriptorMembers are the members of a descriptor the catalog reads;
// the rest stays in the raw and canonical forms.
type descriptorMembers struct {
	Name         jsontext.Value `json:"name"`
	Title        jsontext.Value `json:"title"`
	Description  jsontext.Value `json:"description"`
	InputSchema  jsontext.Value `json:"inputSchema"`
	OutputSchema jsontext.Value `json:"outputSchema"`
	Annotations  jsontext.Value `json:"annotations"`
	Icons        jsontext.Value `json:"icons"`
}

// checkOne checks the descriptor at index i of server's list.
func (c *Catalog) checkOne(server string, i int, raw jsontext.Value, others []string) (*Tool, *Rejected) {
	reject := func(name, category, detail string) (*Tool, *Rejected) {
		r := &Rejected{Server: server, Index: i, Category: category, Detail: detail, Raw: raw}
		if name != "" {
			r.Name, r.Qualified = name, server+"."+name
		}
		return nil, r
	}
	if raw.Kind() != '{' {
		return reject("", admit.RejectNotObject, "the descriptor is not a JSON object")
	}
	var d descriptorMembers
	if err := json.Unmarshal(raw, &d); err != nil {
		// Strict: two readers of a descriptor with a repeated member
		// name could see different members.
		return reject("", admit.RejectMalformed, "the descriptor is not valid strict JSON (a repeated member name, or invalid UTF-8)")
	}
	name, ok := jsonString(d.Name)
	if !ok {
		return reject("", admit.RejectName, "name is missing or not a string")
	}
	if !toolName.MatchString(name) {
		return reject("", admit.RejectName, "name is not 1-128 characters of A-Z, a-z, 0-9, _, - and .")
	}
	if len(server)+1+len(name) > MaxQualified {
		return reject(name, admit.RejectName, fmt.Sprintf("the qualified name is longer than %d characters", MaxQualified))
	}
	// From here on the descriptor is its canonical form: what the digest
	// pins is what is checked, compiled, scanned, shown to the reviewer
	// and listed to callers. Two spellings of one number (1e-400 and 0)
	// can share a digest; they must then share a meaning too.
	digest, canon, err := admit.Digest(raw)
	if err != nil {
		return reject(name, admit.RejectMalformed, "the descriptor has no RFC 8785 canonical form (a number beyond an IEEE 754 double)")
	}
	d = descriptorMembers{}
	if err := json.Unmarshal(canon, &d); err != nil {
		return reject(name, admit.RejectDigest, "the descriptor's canonical form does not parse")
	}
	t := &Tool{Qualified: server + "." + name, Public: server + "." + name, Server: server, Name: name, Raw: raw, Digest: digest, Canonical: canon,
		InputSchema: d.InputSchema, OutputSchema: d.OutputSchema, Annotations: d.Annotations, Icons: d.Icons}
	t.Title, _ = jsonString(d.Title)
	t.Description, _ = jsonString(d.Description)
	schemas, findings, rej := admit.Check(canon, d.InputSchema, d.OutputSchema, c.opts, others)
	if rej != nil {
		return reject(name, rej.Category, rej.Detail)
	}
	t.Input, t.Output, t.Mirrors = schemas.Input, schemas.Output, schemas.Mirrors
	t.Findings = findings
	return t, nil
}

func jsonString(v jsontext.Value) (string, bool) {
	if len(v) == 0 || v.Kind() != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}
