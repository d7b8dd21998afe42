package catalog

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/gateway/admit"
)

// Prompt is one admitted prompt (docs/gateway-surface.md decisions 16
// and 17): named like a tool, pinned and scanned like one.
type Prompt struct {
	// Qualified is <server>.<prompt>, what rules, the ledger and the
	// audit name it by; Public the name callers list and get it by (the
	// downstream's own under names: bare).
	Qualified, Public string
	// Server is the configured server name; Name the downstream's own.
	Server, Name string
	// Title and Description are the descriptor's strings, for listing.
	Title, Description string
	// Arguments are the declared arguments, in the listed order; a
	// prompts/get is checked against them.
	Arguments []PromptArgument
	// Icons is the raw icons member (nil when absent).
	Icons jsontext.Value
	// Digest pins the descriptor; Canonical is its RFC 8785 form.
	Digest    string
	Canonical jsontext.Value
	// Findings are the scanner's evidence on the descriptor.
	Findings []admit.Finding
}

// PromptArgument is one declared argument of a prompt.
type PromptArgument struct {
	Name, Title, Description string
	Required                 bool
}

// Argument returns the declared argument called name.
func (p *Prompt) Argument(name string) (PromptArgument, bool) {
	i := slices.IndexFunc(p.Arguments, func(a PromptArgument) bool { return a.Name == name })
	if i < 0 {
		return PromptArgument{}, false
	}
	return p.Arguments[i], true
}

// MaxArgumentName bounds the name of a prompt argument: a name is shown
// to people and sent back as a member name, so it is short and printable.
const MaxArgumentName = 128

type serverPrompts struct {
	prompts  []*Prompt
	rejected []Rejected
	held     []admit.Record
}

// UpdatePrompts replaces the server's prompts with what its complete
// prompts/list holds, each descriptor checked on its own and then judged
// against the ledger, as [Catalog.Update] does for tools. When the judge
// fails, none of the server's prompts is offered and the error is
// returned; its tools are not touched.
func (c *Catalog) UpdatePrompts(srv Server, descriptors []jsontext.Value) error {
	c.mu.Lock()
	bare := c.bare
	c.mu.Unlock()
	sp := checkPrompts(srv.Name, descriptors, srv.Others)
	for _, p := range sp.prompts {
		if bare {
			p.Public = p.Name
		}
	}
	entries := make([]Entry, len(sp.prompts))
	for i, p := range sp.prompts {
		entries[i] = Entry{Qualified: p.Qualified, Name: p.Name, Digest: p.Digest, Canonical: p.Canonical, Findings: p.Findings}
	}
	recs, err := c.judge.Judge(srv, admit.KindPrompt, entries)
	if err != nil {
		c.RemovePrompts(srv.Name)
		return err
	}
	admitted, held := judged(recs)
	sp.prompts = slices.DeleteFunc(sp.prompts, func(p *Prompt) bool { return admitted[p.Name] != p.Digest })
	sp.held = held
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.servers[srv.Name]
	st.prompts = &sp
	c.servers[srv.Name] = st
	c.publish()
	return nil
}

// RemovePrompts offers none of server's prompts: its prompt list failed,
// or it offers none. Its tools are not touched.
func (c *Catalog) RemovePrompts(server string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.servers[server]
	if !ok || st.prompts == nil {
		return
	}
	st.prompts = nil
	c.servers[server] = st
	c.publish()
}

// samePrompts reports whether two sorted prompt lists offer the same
// descriptors under the same names.
func samePrompts(a, b []*Prompt) bool {
	return slices.EqualFunc(a, b, func(x, y *Prompt) bool {
		return x.Qualified == y.Qualified && x.Digest == y.Digest
	})
}

// checkPrompts checks every descriptor of one server's prompt list, each
// on its own; a name two descriptors share, exactly or differing only in
// case (see [nameKey]), is given to neither.
func checkPrompts(server string, descriptors []jsontext.Value, others []string) serverPrompts {
	var sp serverPrompts
	checked := make([]*Prompt, len(descriptors))
	rejected := make([]*Rejected, len(descriptors))
	counts := nameCounts{}
	for i, raw := range descriptors {
		checked[i], rejected[i] = checkPrompt(server, i, raw, others)
		switch {
		case checked[i] != nil:
			counts.add(checked[i].Name)
		case rejected[i].Name != "":
			counts.add(rejected[i].Name)
		}
	}
	for i, p := range checked {
		if p == nil {
			sp.rejected = append(sp.rejected, *rejected[i])
			continue
		}
		if detail := counts.shared(p.Name, "prompts"); detail != "" {
			sp.rejected = append(sp.rejected, Rejected{Kind: admit.KindPrompt, Server: server, Index: i, Name: p.Name,
				Qualified: p.Qualified, Category: admit.RejectDuplicateName, Detail: detail, Raw: descriptors[i]})
			continue
		}
		sp.prompts = append(sp.prompts, p)
	}
	return sp
}

type promptMembers struct {
	Name        jsontext.Value `json:"name"`
	Title       jsontext.Value `json:"title"`
	Description jsontext.Value `json:"description"`
	Arguments   jsontext.Value `json:"arguments"`
	Icons       jsontext.Value `json:"icons"`
}

type argumentMembers struct {
	Name        jsontext.Value `json:"name"`
	Title       jsontext.Value `json:"title"`
	Description jsontext.Value `json:"description"`
	Required    jsontext.Value `json:"required"`
}

// checkPrompt checks the prompt descriptor at index i of server's list:
// the name rules of tools, a canonical form, strings where the schema
// has strings, arguments with unique names; then every string of it is
// scanned, argument names and descriptions included.
func checkPrompt(server string, i int, raw jsontext.Value, others []string) (*Prompt, *Rejected) {
	reject := func(name, category, detail string) (*Prompt, *Rejected) {
		r := &Rejected{Kind: admit.KindPrompt, Server: server, Index: i, Category: category, Detail: detail, Raw: raw}
		if name != "" {
			r.Name, r.Qualified = name, server+"."+name
		}
		return nil, r
	}
	if raw.Kind() != '{' {
		return reject("", admit.RejectNotObject, "the descriptor is not a JSON object")
	}
	var d promptMembers
	if err := json.Unmarshal(raw, &d); err != nil {
		return reject("", admit.RejectMalformed, "the descriptor is not valid strict JSON (a repeated member name, or invalid UTF-8)")
	}
	name, ok := jsonString(d.Name)
	switch {
	case !ok:
		return reject("", admit.RejectName, "name is missing or not a string")
	case !toolName.MatchString(name):
		return reject("", admit.RejectName, "name is not 1-128 characters of A-Z, a-z, 0-9, _, - and .")
	case len(server)+1+len(name) > MaxQualified:
		return reject(name, admit.RejectName, fmt.Sprintf("the qualified name is longer than %d characters", MaxQualified))
	}
	digest, canon, err := admit.Digest(raw)
	if err != nil {
		return reject(name, admit.RejectMalformed, "the descriptor has no RFC 8785 canonical form (a number beyond an IEEE 754 double)")
	}
	// As for tools, what is pinned is what is read from here on.
	d = promptMembers{}
	if err := json.Unmarshal(canon, &d); err != nil {
		return reject(name, admit.RejectDigest, "the descriptor's canonical form does not parse")
	}
	p := &Prompt{Qualified: server + "." + name, Public: server + "." + name, Server: server, Name: name, Digest: digest, Canonical: canon, Icons: d.Icons}
	if p.Title, ok = optionalString(d.Title); !ok {
		return reject(name, admit.RejectMalformed, "title is not a string")
	}
	if p.Description, ok = optionalString(d.Description); !ok {
		return reject(name, admit.RejectMalformed, "description is not a string")
	}
	if len(d.Icons) > 0 && d.Icons.Kind() != '[' {
		return reject(name, admit.RejectMalformed, "icons is not an array")
	}
	args, detail := promptArguments(d.Arguments)
	if detail != "" {
		return reject(name, admit.RejectArguments, detail)
	}
	p.Arguments = args
	p.Findings = admit.Scan(canon, others)
	return p, nil
}

// promptArguments reads a prompt's arguments member; it returns why it
// is refused, or "".
func promptArguments(v jsontext.Value) ([]PromptArgument, string) {
	if len(v) == 0 || v.Kind() == 'n' {
		return nil, ""
	}
	var elems []jsontext.Value
	if v.Kind() != '[' || json.Unmarshal(v, &elems) != nil {
		return nil, "arguments is not an array"
	}
	out := make([]PromptArgument, 0, len(elems))
	seen := map[string]bool{}
	for i, e := range elems {
		var m argumentMembers
		if e.Kind() != '{' || json.Unmarshal(e, &m) != nil {
			return nil, fmt.Sprintf("arguments[%d] is not an object", i)
		}
		a := PromptArgument{}
		var ok bool
		if a.Name, ok = jsonString(m.Name); !ok || !argumentName(a.Name) {
			return nil, fmt.Sprintf("arguments[%d].name is not 1-%d printable characters", i, MaxArgumentName)
		}
		if seen[a.Name] {
			return nil, fmt.Sprintf("arguments[%d].name repeats an earlier argument's", i)
		}
		seen[a.Name] = true
		if a.Title, ok = optionalString(m.Title); !ok {
			return nil, fmt.Sprintf("arguments[%d].title is not a string", i)
		}
		if a.Description, ok = optionalString(m.Description); !ok {
			return nil, fmt.Sprintf("arguments[%d].description is not a string", i)
		}
		switch {
		case len(m.Required) == 0:
		case string(m.Required) == "true":
			a.Required = true
		case string(m.Required) != "false":
			return nil, fmt.Sprintf("arguments[%d].required is not a boolean", i)
		}
		out = append(out, a)
	}
	return out, ""
}

// argumentName: 1-MaxArgumentName characters, none a control character.
func argumentName(s string) bool {
	if s == "" || utf8.RuneCountInString(s) > MaxArgumentName {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || (r >= 0x7f && r < 0xa0) })
}

// optionalString reads a member that is absent or a string.
func optionalString(v jsontext.Value) (string, bool) {
	if len(v) == 0 {
		return "", true
	}
	return jsonString(v)
}
