// Package catalog holds the gateway's tools: every downstream tool that was
// admitted, under its qualified name <server>.<tool>, with the backend
// mapping (server, downstream name) kept apart from the public name, and
// the descriptors that were rejected, one by one, with their reason.
//
// The merged list is sorted by qualified name, so that discovery order
// never decides anything. Each change publishes a new immutable
// [Snapshot] with a higher revision; readers never lock.
//
// Admission is a seam: [Admitter] decides each well-formed descriptor.
// Until the admission gate exists, [AdmitAll] admits them all.
package catalog

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mcp-bastion/bastion/internal/tool"
)

// Tool is one admitted tool.
type Tool struct {
	// Qualified is the public name: <server>.<tool>.
	Qualified string
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
	// must satisfy.
	Input *jsonschema.Schema
}

// Rejected is a descriptor that was not admitted.
type Rejected struct {
	Server string `json:"server"`
	// Index is the descriptor's position in the server's list.
	Index int `json:"index"`
	// Name is the downstream name, when the descriptor has a usable one.
	Name string `json:"name,omitempty"`
	// Qualified is the name it would have had, when Name is set.
	Qualified string `json:"qualified,omitempty"`
	// Category is a stable identifier of the rule (see the Reject*
	// constants).
	Category string `json:"category"`
	// Detail says which field broke the rule, never a value.
	Detail string `json:"detail"`
}

// Rejection categories.
const (
	RejectNotObject     = "not_an_object"
	RejectName          = "invalid_name"
	RejectDuplicateName = "duplicate_name"
	RejectInputSchema   = "invalid_input_schema"
	RejectAdmission     = "admission"
)

// Verdict is an Admitter's decision on one descriptor.
type Verdict struct {
	Admit bool
	// Category and Detail explain a refusal.
	Category, Detail string
}

// Admitter decides each well-formed descriptor of a server. It must be
// pure: no I/O.
type Admitter interface {
	Admit(server string, t *Tool) Verdict
}

// AdmitAll admits every well-formed descriptor.
type AdmitAll struct{}

// Admit admits t.
func (AdmitAll) Admit(string, *Tool) Verdict { return Verdict{Admit: true} }

// Snapshot is the catalog at one revision. It is immutable.
type Snapshot struct {
	// Revision increases with every change.
	Revision uint64
	// Tools are the admitted tools, sorted by qualified name.
	Tools []*Tool
	// Rejected are the descriptors refused, by server, then index.
	Rejected []Rejected
	byName   map[string]*Tool
}

// Lookup returns the tool with qualified name q.
func (s *Snapshot) Lookup(q string) (*Tool, bool) {
	t, ok := s.byName[q]
	return t, ok
}

// Catalog is the mutable holder of snapshots. It is safe for concurrent
// use.
type Catalog struct {
	admit Admitter

	mu      sync.Mutex
	servers map[string]serverTools
	subs    []chan struct{}

	current atomic.Pointer[Snapshot]
}

type serverTools struct {
	tools    []*Tool
	rejected []Rejected
}

// New returns an empty catalog that decides descriptors with admit.
func New(admit Admitter) *Catalog {
	c := &Catalog{admit: admit, servers: map[string]serverTools{}}
	c.current.Store(&Snapshot{byName: map[string]*Tool{}})
	return c
}

// Snapshot returns the current snapshot.
func (c *Catalog) Snapshot() *Snapshot { return c.current.Load() }

// Changed returns a channel that receives a value (without blocking the
// catalog; one pending value at most) after every change.
func (c *Catalog) Changed() <-chan struct{} {
	ch := make(chan struct{}, 1)
	c.mu.Lock()
	c.subs = append(c.subs, ch)
	c.mu.Unlock()
	return ch
}

// Unsubscribe stops notifications on a channel Changed returned.
func (c *Catalog) Unsubscribe(ch <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.subs = slices.DeleteFunc(c.subs, func(s chan struct{}) bool { return s == ch })
}

// Update replaces server's tools with what its complete list holds: each
// descriptor judged on its own, so one bad descriptor never blocks the
// valid ones beside it.
func (c *Catalog) Update(server string, descriptors []jsontext.Value) {
	st := c.judge(server, descriptors)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.servers[server] = st
	c.publish()
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
	next := &Snapshot{Revision: prev.Revision + 1, byName: map[string]*Tool{}}
	names := make([]string, 0, len(c.servers))
	for name := range c.servers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		st := c.servers[name]
		next.Tools = append(next.Tools, st.tools...)
		next.Rejected = append(next.Rejected, st.rejected...)
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
		next.byName[t.Qualified] = t
	}
	if sameTools(prev.Tools, next.Tools) {
		// A refresh that found what was there is no change: cursors
		// stay valid and no client is told to list again.
		next.Revision = prev.Revision
		c.current.Store(next)
		return
	}
	c.current.Store(next)
	for _, ch := range c.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// sameTools reports whether two sorted tool lists offer the same
// descriptors under the same names.
func sameTools(a, b []*Tool) bool {
	return slices.EqualFunc(a, b, func(x, y *Tool) bool {
		return x.Qualified == y.Qualified && bytes.Equal(x.Raw, y.Raw)
	})
}

// toolName is the 2025-11-25 tool-name rule (SEP-986): 1-128 characters
// of A-Z a-z 0-9 _ - and dot.
var toolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// MaxQualified is the longest qualified name.
const MaxQualified = 128

type descriptor struct {
	Name         *string        `json:"name"`
	Title        jsontext.Value `json:"title"`
	Description  jsontext.Value `json:"description"`
	InputSchema  jsontext.Value `json:"inputSchema"`
	OutputSchema jsontext.Value `json:"outputSchema"`
	Annotations  jsontext.Value `json:"annotations"`
	Icons        jsontext.Value `json:"icons"`
}

// judge decides every descriptor of one server's list.
func (c *Catalog) judge(server string, descriptors []jsontext.Value) serverTools {
	var (
		st     serverTools
		parsed = make([]*Tool, len(descriptors))
		counts = map[string]int{}
	)
	reject := func(i int, name, category, detail string) {
		r := Rejected{Server: server, Index: i, Category: category, Detail: detail}
		if name != "" {
			r.Name, r.Qualified = name, server+"."+name
		}
		st.rejected = append(st.rejected, r)
	}
	for i, raw := range descriptors {
		if raw.Kind() != '{' {
			reject(i, "", RejectNotObject, "the descriptor is not a JSON object")
			continue
		}
		var d descriptor
		if err := json.Unmarshal(raw, &d); err != nil || d.Name == nil {
			reject(i, "", RejectName, "name is missing or not a string")
			continue
		}
		name := *d.Name
		if !toolName.MatchString(name) {
			reject(i, "", RejectName, "name is not 1-128 characters of A-Z, a-z, 0-9, _, - and .")
			continue
		}
		if len(server)+1+len(name) > MaxQualified {
			reject(i, name, RejectName, fmt.Sprintf("the qualified name is longer than %d characters", MaxQualified))
			continue
		}
		counts[name]++
		t := &Tool{Qualified: server + "." + name, Server: server, Name: name, Raw: raw,
			InputSchema: d.InputSchema, OutputSchema: d.OutputSchema, Annotations: d.Annotations, Icons: d.Icons}
		t.Title, _ = jsonString(d.Title)
		t.Description, _ = jsonString(d.Description)
		if detail := checkInputSchema(d.InputSchema); detail != "" {
			reject(i, name, RejectInputSchema, detail)
			continue
		}
		s, err := tool.CompileSchema(t.Qualified+"/input", d.InputSchema)
		if err != nil {
			reject(i, name, RejectInputSchema, "inputSchema does not compile as JSON Schema 2020-12 without remote references")
			continue
		}
		t.Input = s
		parsed[i] = t
	}
	for i, t := range parsed {
		if t == nil {
			continue
		}
		if counts[t.Name] > 1 {
			// None of the copies wins: which one would is discovery order.
			reject(i, t.Name, RejectDuplicateName, fmt.Sprintf("%d descriptors of this server share the name", counts[t.Name]))
			continue
		}
		if v := c.admit.Admit(server, t); !v.Admit {
			cat := v.Category
			if cat == "" {
				cat = RejectAdmission
			}
			reject(i, t.Name, cat, v.Detail)
			continue
		}
		st.tools = append(st.tools, t)
	}
	slices.SortFunc(st.rejected, func(a, b Rejected) int { return a.Index - b.Index })
	return st
}

// checkInputSchema requires an object schema: a JSON object whose root
// "type" is "object". Missing, null, an array, a string, {} and untyped
// schemas would accept anything.
func checkInputSchema(s jsontext.Value) string {
	if len(s) == 0 {
		return "inputSchema is missing"
	}
	if s.Kind() != '{' {
		return "inputSchema is not a JSON object"
	}
	var root struct {
		Type jsontext.Value `json:"type"`
	}
	if err := json.Unmarshal(s, &root); err != nil {
		return "inputSchema is not a JSON object"
	}
	if !bytes.Equal(bytes.TrimSpace(root.Type), []byte(`"object"`)) {
		return `inputSchema has no "type": "object" at its root`
	}
	return ""
}

func jsonString(v jsontext.Value) (string, bool) {
	if len(v) == 0 {
		return "", false
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}
