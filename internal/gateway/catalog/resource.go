package catalog

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/yosida95/uritemplate/v3"

	"github.com/mcp-bastion/bastion/internal/gateway/admit"
)

// Resource is one admitted resource (docs/gateway-surface.md decision
// 19): offered under its own URI, by the one server that owns it.
type Resource struct {
	// URI is the resource's URI, public and downstream alike.
	URI string
	// Server is the configured server that offers it.
	Server string
	// Name, Title, Description and MimeType are the descriptor's strings.
	Name, Title, Description, MimeType string
	// Annotations, Size and Icons are raw members (nil when absent).
	Annotations, Size, Icons jsontext.Value
	// Digest pins the descriptor; Canonical is its RFC 8785 form.
	Digest    string
	Canonical jsontext.Value
	// Findings are the scanner's evidence on the descriptor.
	Findings []admit.Finding
}

// Template is one admitted resource template (decision 20): it routes
// the reads of URIs no admitted resource has.
type Template struct {
	// URITemplate is the RFC 6570 template, as listed.
	URITemplate string
	// Server is the configured server that offers it.
	Server string
	// Name, Title, Description and MimeType are the descriptor's strings.
	Name, Title, Description, MimeType string
	// Annotations and Icons are raw members (nil when absent).
	Annotations, Icons jsontext.Value
	// Digest pins the descriptor; Canonical is its RFC 8785 form.
	Digest    string
	Canonical jsontext.Value
	// Findings are the scanner's evidence on the descriptor.
	Findings []admit.Finding

	compiled *uritemplate.Template
}

// Matches reports whether uri is an expansion of the template.
func (t *Template) Matches(uri string) bool { return t.compiled.Match(uri) != nil }

// Varnames are the template's variables, in order.
func (t *Template) Varnames() []string { return t.compiled.Varnames() }

// Expand is the URI the template makes of vars (RFC 6570): a variable
// vars does not hold expands to nothing.
func (t *Template) Expand(vars map[string]string) (string, error) {
	values := make(uritemplate.Values, len(vars))
	for k, v := range vars {
		values.Set(k, uritemplate.String(v))
	}
	return t.compiled.Expand(values)
}

// Shadowed is a resource or template an admitted server offers under a
// URI (or template) that a server listed before it in the configuration
// owns: it is not offered, and the evidence says so.
type Shadowed struct {
	Kind admit.Kind `json:"kind"`
	// URI is the resource's URI or the template string.
	URI string `json:"uri"`
	// Owner is the server that offers it; Server the one shadowed.
	Owner  string `json:"owner"`
	Server string `json:"server"`
}

// MaxURI bounds a resource URI or template: a URI is a name here, read
// by people and matched by rules, not a payload.
const MaxURI = 2048

type serverResources struct {
	resources []*Resource
	templates []*Template
	rejected  []Rejected
	held      []admit.Record
}

// SetBare makes the public names of tools and prompts the downstream's
// own (names: bare, allowed with one server only); call it before the
// first update.
func (c *Catalog) SetBare(bare bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bare = bare
}

// SetOrder gives the catalog the configured servers in configuration
// order: the order that decides which server owns a resource URI two of
// them offer (decision 19). Call it before the first update.
func (c *Catalog) SetOrder(servers []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.order = slices.Clone(servers)
}

// UpdateResources replaces the server's resources and templates with
// what its complete resources/list and resources/templates/list hold,
// each descriptor checked on its own and judged against the ledger. When
// the judge fails, none of the server's resources or templates is
// offered and the error is returned; its tools and prompts are not
// touched.
func (c *Catalog) UpdateResources(srv Server, resources, templates []jsontext.Value) error {
	sr := checkResources(srv.Name, resources, templates, srv.Others)
	entries := make([]Entry, len(sr.resources))
	for i, r := range sr.resources {
		entries[i] = Entry{Qualified: srv.Name + "." + r.URI, Name: r.URI, Digest: r.Digest, Canonical: r.Canonical, Findings: r.Findings}
	}
	recs, err := c.judge.Judge(srv, admit.KindResource, entries)
	if err != nil {
		c.RemoveResources(srv.Name)
		return err
	}
	tentries := make([]Entry, len(sr.templates))
	for i, t := range sr.templates {
		tentries[i] = Entry{Qualified: srv.Name + "." + t.URITemplate, Name: t.URITemplate, Digest: t.Digest, Canonical: t.Canonical, Findings: t.Findings}
	}
	trecs, err := c.judge.Judge(srv, admit.KindTemplate, tentries)
	if err != nil {
		c.RemoveResources(srv.Name)
		return err
	}
	okR, heldR := judged(recs)
	okT, heldT := judged(trecs)
	// What the server listed, admitted or held, is what it claims: a URI
	// waiting for review is still its own, and no server listed after it
	// serves it meanwhile.
	cl := claim{uris: make([]string, len(sr.resources))}
	for i, r := range sr.resources {
		cl.uris[i] = r.URI
	}
	for _, t := range sr.templates {
		cl.templates = append(cl.templates, claimedTemplate{text: t.URITemplate, compiled: t.compiled})
	}
	sr.resources = slices.DeleteFunc(sr.resources, func(r *Resource) bool { return okR[r.URI] != r.Digest })
	sr.templates = slices.DeleteFunc(sr.templates, func(t *Template) bool { return okT[t.URITemplate] != t.Digest })
	sr.held = append(heldR, heldT...)
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.servers[srv.Name]
	st.resources = &sr
	c.servers[srv.Name] = st
	c.claims[srv.Name] = cl
	c.publish()
	return nil
}

// claim is what a server claims of the URI space: the URIs and the
// templates of its last complete resource lists, admitted or held (not
// those rejected), or — before it was listed in this run — those the
// ledger holds for it (Claim). A claim outlives the server's connection:
// a server that is down, failed closed or quarantined keeps what it
// claims from every server listed after it, so that no resource is ever
// served by whichever server is up (decision 19).
type claim struct {
	uris      []string
	templates []claimedTemplate
}

type claimedTemplate struct {
	text     string
	compiled *uritemplate.Template
}

// Claim gives server the URIs and templates the ledger holds for it, for
// as long as it has not been listed in this run: a server that is down
// at start keeps them from the servers listed after it. A template that
// does not compile is not claimed.
func (c *Catalog) Claim(server string, uris, templates []string) {
	cl := claim{uris: slices.Clone(uris)}
	for _, t := range templates {
		if compiled, err := uritemplate.New(t); err == nil {
			cl.templates = append(cl.templates, claimedTemplate{text: t, compiled: compiled})
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, listed := c.claims[server]; listed {
		return
	}
	c.claims[server] = cl
	c.publish()
}

// RemoveResources offers none of server's resources and templates.
func (c *Catalog) RemoveResources(server string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.servers[server]
	if !ok || st.resources == nil {
		return
	}
	st.resources = nil
	c.servers[server] = st
	c.publish()
}

// publishResources fills next's resources and templates: the servers in
// configuration order (then any not configured, by name), the first to
// claim a URI or template owning it, whether it offers it now or not;
// c.mu is held.
func (c *Catalog) publishResources(next *Snapshot, names []string) {
	order := slices.Clone(c.order)
	for _, n := range append(slices.Collect(maps.Keys(c.claims)), names...) {
		if !slices.Contains(order, n) {
			order = append(order, n)
		}
	}
	slices.Sort(order[len(c.order):])
	owner := map[string]string{}
	towner := map[string]string{}
	next.claimed, next.held = map[string]string{}, map[string]bool{}
	for _, name := range order {
		cl := c.claims[name]
		for _, u := range cl.uris {
			keys := resourceKeys(u)
			if keyOwner(next.sameAs, keys, name) == "" {
				for _, k := range keys {
					next.sameAs[k] = name
				}
				owner[u] = name
			}
		}
		for _, t := range cl.templates {
			if _, taken := towner[t.text]; !taken {
				towner[t.text] = name
			}
		}
		offered, offeredT := map[string]bool{}, map[string]bool{}
		if st, ok := c.servers[name]; ok && st.resources != nil {
			sr := st.resources
			for _, r := range sr.resources {
				keys := resourceKeys(r.URI)
				if o := keyOwner(next.sameAs, keys, name); o != "" {
					next.Shadowed = append(next.Shadowed, Shadowed{Kind: admit.KindResource, URI: r.URI, Owner: o, Server: name})
					continue
				}
				for _, k := range keys {
					next.sameAs[k] = name
				}
				owner[r.URI], offered[r.URI] = name, true
				next.Resources = append(next.Resources, r)
			}
			for _, t := range sr.templates {
				if o, taken := towner[t.URITemplate]; taken && o != name {
					next.Shadowed = append(next.Shadowed, Shadowed{Kind: admit.KindTemplate, URI: t.URITemplate, Owner: o, Server: name})
					continue
				}
				towner[t.URITemplate], offeredT[t.URITemplate] = name, true
				next.Templates = append(next.Templates, t)
				next.routes = append(next.routes, route{server: name, t: t, compiled: t.compiled})
			}
			next.Rejected = append(next.Rejected, sr.rejected...)
			next.Held = append(next.Held, sr.held...)
		}
		// What the server claims and does not offer now stays its own.
		for _, u := range cl.uris {
			if owner[u] == name && !offered[u] {
				next.claimed[u] = name
				for _, k := range resourceKeys(u) {
					next.held[k] = true
				}
			}
		}
		for _, t := range cl.templates {
			if towner[t.text] == name && !offeredT[t.text] {
				next.routes = append(next.routes, route{server: name, compiled: t.compiled})
				offeredT[t.text] = true // a template claimed twice routes once
			}
		}
	}
	slices.SortFunc(next.Resources, func(a, b *Resource) int { return strings.Compare(a.URI, b.URI) })
	for _, r := range next.Resources {
		next.byURI[r.URI] = r
	}
}

// sameResources reports whether two snapshots offer the same resources
// and templates, by the same servers.
func sameResources(a, b *Snapshot) bool {
	return slices.EqualFunc(a.Resources, b.Resources, func(x, y *Resource) bool {
		return x.URI == y.URI && x.Server == y.Server && x.Digest == y.Digest
	}) && slices.EqualFunc(a.Templates, b.Templates, func(x, y *Template) bool {
		return x.URITemplate == y.URITemplate && x.Server == y.Server && x.Digest == y.Digest
	})
}

// checkResources checks every resource and template descriptor of one
// server, each on its own; a URI (or template) two descriptors of the
// server share is given to neither.
func checkResources(server string, resources, templates []jsontext.Value, others []string) serverResources {
	var sr serverResources
	type verdict struct {
		key string
		r   *Resource
		t   *Template
		rej *Rejected
	}
	judge := func(kind admit.Kind, descs []jsontext.Value) []verdict {
		out := make([]verdict, len(descs))
		counts := map[string]int{}
		for i, raw := range descs {
			if kind == admit.KindResource {
				out[i].r, out[i].rej = checkResource(server, i, raw, others)
				if out[i].r != nil {
					out[i].key = out[i].r.URI
				}
			} else {
				out[i].t, out[i].rej = checkTemplate(server, i, raw, others)
				if out[i].t != nil {
					out[i].key = out[i].t.URITemplate
				}
			}
			if out[i].rej != nil {
				out[i].key = out[i].rej.Name
			}
			if out[i].key != "" {
				counts[out[i].key]++
			}
		}
		for i := range out {
			if out[i].rej == nil && counts[out[i].key] > 1 {
				out[i].r, out[i].t = nil, nil
				out[i].rej = &Rejected{Kind: kind, Server: server, Index: i, Name: out[i].key, Qualified: server + "." + out[i].key,
					Category: admit.RejectDuplicateName, Detail: fmt.Sprintf("%d descriptors of this server share the URI", counts[out[i].key]), Raw: descs[i]}
			}
		}
		return out
	}
	for _, v := range judge(admit.KindResource, resources) {
		if v.rej != nil {
			sr.rejected = append(sr.rejected, *v.rej)
		} else {
			sr.resources = append(sr.resources, v.r)
		}
	}
	for _, v := range judge(admit.KindTemplate, templates) {
		if v.rej != nil {
			sr.rejected = append(sr.rejected, *v.rej)
		} else {
			sr.templates = append(sr.templates, v.t)
		}
	}
	return sr
}

type resourceMembers struct {
	URI         jsontext.Value `json:"uri"`
	URITemplate jsontext.Value `json:"uriTemplate"`
	Name        jsontext.Value `json:"name"`
	Title       jsontext.Value `json:"title"`
	Description jsontext.Value `json:"description"`
	MimeType    jsontext.Value `json:"mimeType"`
	Annotations jsontext.Value `json:"annotations"`
	Size        jsontext.Value `json:"size"`
	Icons       jsontext.Value `json:"icons"`
}

// readResourceMembers is what resource and template descriptors share:
// a strict object whose canonical form is what is read, with a name and
// optional strings, annotations and icons. The locator member (uri or
// uriTemplate) is read from the raw form first, so that a rejection can
// name it.
func readResourceMembers(kind admit.Kind, server string, i int, raw jsontext.Value, locator string) (resourceMembers, string, jsontext.Value, string, *Rejected) {
	reject := func(name, category, detail string) (resourceMembers, string, jsontext.Value, string, *Rejected) {
		r := &Rejected{Kind: kind, Server: server, Index: i, Category: category, Detail: detail, Raw: raw}
		if name != "" {
			r.Name, r.Qualified = name, server+"."+name
		}
		return resourceMembers{}, "", nil, "", r
	}
	if raw.Kind() != '{' {
		return reject("", admit.RejectNotObject, "the descriptor is not a JSON object")
	}
	var d resourceMembers
	if err := json.Unmarshal(raw, &d); err != nil {
		return reject("", admit.RejectMalformed, "the descriptor is not valid strict JSON (a repeated member name, or invalid UTF-8)")
	}
	v := d.URI
	if kind == admit.KindTemplate {
		v = d.URITemplate
	}
	loc, ok := jsonString(v)
	if !ok || loc == "" || len(loc) > MaxURI || strings.ContainsFunc(loc, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return reject("", admit.RejectName, fmt.Sprintf("%s is missing, not a string, longer than %d bytes, or holds a space or control character", locator, MaxURI))
	}
	if name, ok := jsonString(d.Name); !ok || name == "" {
		return reject(loc, admit.RejectName, "name is missing or not a non-empty string")
	}
	digest, canon, err := admit.Digest(raw)
	if err != nil {
		return reject(loc, admit.RejectMalformed, "the descriptor has no RFC 8785 canonical form (a number beyond an IEEE 754 double)")
	}
	d = resourceMembers{}
	if err := json.Unmarshal(canon, &d); err != nil {
		return reject(loc, admit.RejectDigest, "the descriptor's canonical form does not parse")
	}
	for _, f := range []struct {
		name string
		v    jsontext.Value
	}{{"title", d.Title}, {"description", d.Description}, {"mimeType", d.MimeType}} {
		if _, ok := optionalString(f.v); !ok {
			return reject(loc, admit.RejectMalformed, f.name+" is not a string")
		}
	}
	switch {
	case len(d.Annotations) > 0 && d.Annotations.Kind() != '{':
		return reject(loc, admit.RejectMalformed, "annotations is not an object")
	case len(d.Icons) > 0 && d.Icons.Kind() != '[':
		return reject(loc, admit.RejectMalformed, "icons is not an array")
	case len(d.Size) > 0 && d.Size.Kind() != '0':
		return reject(loc, admit.RejectMalformed, "size is not a number")
	}
	return d, digest, canon, loc, nil
}

// checkResource checks the resource descriptor at index i: an absolute
// URI, the members of the schema, a canonical form; then every string is
// scanned.
func checkResource(server string, i int, raw jsontext.Value, others []string) (*Resource, *Rejected) {
	d, digest, canon, uri, rej := readResourceMembers(admit.KindResource, server, i, raw, "uri")
	if rej != nil {
		return nil, rej
	}
	if u, err := url.Parse(uri); err != nil || u.Scheme == "" {
		return nil, &Rejected{Kind: admit.KindResource, Server: server, Index: i, Name: uri, Qualified: server + "." + uri,
			Category: admit.RejectName, Detail: "uri is not an absolute URI", Raw: raw}
	}
	r := &Resource{URI: uri, Server: server, Digest: digest, Canonical: canon, Annotations: d.Annotations, Size: d.Size, Icons: d.Icons}
	r.Name, _ = jsonString(d.Name)
	r.Title, _ = optionalString(d.Title)
	r.Description, _ = optionalString(d.Description)
	r.MimeType, _ = optionalString(d.MimeType)
	r.Findings = admit.Scan(canon, others)
	return r, nil
}

// checkTemplate checks the template descriptor at index i: an RFC 6570
// template whose literal start is a URI scheme, the members of the
// schema, a canonical form; then every string is scanned.
func checkTemplate(server string, i int, raw jsontext.Value, others []string) (*Template, *Rejected) {
	d, digest, canon, tmpl, rej := readResourceMembers(admit.KindTemplate, server, i, raw, "uriTemplate")
	if rej != nil {
		return nil, rej
	}
	compiled, err := uritemplate.New(tmpl)
	scheme, _, _ := strings.Cut(tmpl, ":")
	if err != nil || strings.ContainsAny(scheme, "{}/") || scheme == tmpl || scheme == "" {
		return nil, &Rejected{Kind: admit.KindTemplate, Server: server, Index: i, Name: tmpl, Qualified: server + "." + tmpl,
			Category: admit.RejectName, Detail: "uriTemplate is not an RFC 6570 template of an absolute URI (a literal scheme first)", Raw: raw}
	}
	t := &Template{URITemplate: tmpl, Server: server, Digest: digest, Canonical: canon, Annotations: d.Annotations, Icons: d.Icons, compiled: compiled}
	t.Name, _ = jsonString(d.Name)
	t.Title, _ = optionalString(d.Title)
	t.Description, _ = optionalString(d.Description)
	t.MimeType, _ = optionalString(d.MimeType)
	t.Findings = admit.Scan(canon, others)
	return t, nil
}

// Why a URI is not in normal form (NotNormal): each names the rule it
// breaks, never the URI.
const (
	NotNormalScheme       = "the scheme is missing or not in lower case"
	NotNormalSpace        = "the URI holds a space or a control character"
	NotNormalPercent      = "a '%' is not followed by two hex digits"
	NotNormalHexCase      = "a percent-encoding has a lower-case hex digit"
	NotNormalUnreserved   = "a percent-encoding encodes an unreserved character (ALPHA DIGIT - . _ ~)"
	NotNormalEncoded      = "a percent-encoding encodes '/', '\\', a control character, another percent-encoding, or in the path '?' or '#'"
	NotNormalBackslash    = "a backslash comes before the query"
	NotNormalDotSegment   = "the URI holds a '.' or '..' segment"
	NotNormalNonASCII     = "the URI holds a character outside ASCII (percent-encode its UTF-8)"
	NotNormalEmptySegment = "the path holds an empty segment ('//')"
	NotNormalAuthority    = "the authority holds an upper-case letter, or a file URI names a host or none (write file:///path)"
)

// NotNormal says which rule of normal form uri breaks, "" when it breaks
// none (docs/gateway-surface.md decision 20). A URI a template routes
// must be in normal form, since the rules that authorize it and the exact
// URIs that shadow the template are matched on its spelling: one
// resource spelled two ways would be two names to the policy and one to
// the server. Normal form is: the scheme in lower case; no raw space or
// control character; every '%' followed by two upper-case hex digits that
// encode neither an unreserved character, nor '/', '\', a control
// character or another percent-encoding (%25 and two hex digits), nor in
// the path '?' or '#'; no backslash before the first '?' or '#'; and in
// the path (before the first '?' or '#', after the authority when there
// is one) no '.' or '..' segment and no empty segment, a trailing '/'
// excepted. NotNormal is pure and never rewrites: a URI is refused, not
// repaired.
func NotNormal(uri string) string {
	scheme, rest, ok := strings.Cut(uri, ":")
	if !ok || !lowerScheme(scheme) {
		return NotNormalScheme
	}
	pathEnd := strings.IndexAny(uri, "?#")
	if pathEnd < 0 {
		pathEnd = len(uri)
	}
	for i := 0; i < len(uri); i++ {
		switch c := uri[i]; {
		case c <= ' ' || c == 0x7f:
			return NotNormalSpace
		case c >= 0x80:
			// é and %C3%A9 name one file to a server that decodes: one
			// spelling only, the one RFC 6570 expansion writes.
			return NotNormalNonASCII
		case c == '%':
			if i+2 >= len(uri) || !isHex(uri[i+1]) || !isHex(uri[i+2]) {
				return NotNormalPercent
			}
			if isLowerHex(uri[i+1]) || isLowerHex(uri[i+2]) {
				return NotNormalHexCase
			}
			b := unhex(uri[i+1])<<4 | unhex(uri[i+2])
			switch {
			case isUnreserved(b):
				return NotNormalUnreserved
			case b == '/' || b == '\\' || b < 0x20 || b == 0x7f,
				// A server that decodes before it parses cuts the path
				// there; one that decodes twice reads the second one.
				(b == '?' || b == '#') && i < pathEnd,
				b == '%' && i+4 < len(uri) && isHex(uri[i+3]) && isHex(uri[i+4]):
				return NotNormalEncoded
			}
			i += 2
		}
	}
	path := rest
	if end := strings.IndexAny(path, "?#"); end >= 0 {
		path = path[:end]
	}
	// A backslash that some readers take for a '/' is refused in the
	// authority too.
	if strings.IndexByte(path, '\\') >= 0 {
		return NotNormalBackslash
	}
	if scheme == "file" && !strings.HasPrefix(path, "//") {
		// file:/p is file:///p (RFC 8089): one spelling only.
		return NotNormalAuthority
	}
	if strings.HasPrefix(path, "//") {
		// The authority runs to the next '/'; the path is what follows.
		authority := path[2:]
		if slash := strings.IndexByte(path[2:], '/'); slash >= 0 {
			authority, path = path[2:2+slash], path[2+slash:]
		} else {
			path = ""
		}
		// A host is named without case, and file://localhost/p (or any
		// host a server ignores) is the file /p: one spelling only.
		if strings.ToLower(authority) != authority || scheme == "file" && authority != "" {
			return NotNormalAuthority
		}
	}
	segs := strings.Split(path, "/")
	for i, seg := range segs {
		switch {
		case seg == "." || seg == "..":
			return NotNormalDotSegment
		case seg == "" && i > 0 && i < len(segs)-1:
			return NotNormalEmptySegment
		}
	}
	// A server that reads a path out of the query or the fragment must
	// not be handed a traversal there either.
	if end := strings.IndexAny(rest, "?#"); end >= 0 {
		for _, seg := range strings.FieldsFunc(rest[end+1:], func(r rune) bool { return r == '/' || r == '?' || r == '#' || r == '=' || r == '&' }) {
			if seg == "." || seg == ".." {
				return NotNormalDotSegment
			}
		}
	}
	return ""
}

// lowerScheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ), ALPHA in
// lower case.
func lowerScheme(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func isHex(c byte) bool      { return c >= '0' && c <= '9' || c >= 'A' && c <= 'F' || isLowerHex(c) }
func isLowerHex(c byte) bool { return c >= 'a' && c <= 'f' }

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

func isUnreserved(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}
