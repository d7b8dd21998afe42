package mcp

import (
	"bytes"
	"fmt"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/problem"
	"github.com/mcp-bastion/bastion/internal/tool"
)

// Implementation identifies the server (serverInfo).
type Implementation struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
}

// ListTTLMillis is the caching hint on modern list and discover results.
// The tool set is fixed for the life of the process, so a minute is safe.
const ListTTLMillis = 60_000

// Encoder renders the results of one server for every protocol version.
// What never changes (initialize, discover and tools/list results) is
// rendered once, at construction. An Encoder is safe for concurrent use.
type Encoder struct {
	info         Implementation
	instructions string
	// modernMeta is `,"_meta":{serverInfo},"resultType":"complete"`,
	// appended to every modern result; modernInfo is its _meta alone.
	modernMeta []byte
	modernInfo []byte
	initialize map[string][]byte
	toolsList  map[string][]byte
	discover   []byte
	// listChanged and offered are the options the results were rendered
	// with; with offered set, initialize and discover are rendered per
	// call.
	listChanged bool
	offered     func() Offered
}

// EncoderOption configures an Encoder.
type EncoderOption func(*encoderOptions)

type encoderOptions struct {
	listChanged bool
	offered     func() Offered
}

// ToolsListChanged advertises tools.listChanged: the server's tools can
// change while it runs, and it says so with notifications/tools/list_changed.
func ToolsListChanged() EncoderOption { return func(o *encoderOptions) { o.listChanged = true } }

// Offered are the capabilities besides tools that a relaying server
// offers at a moment: what it relays and some server behind it offers.
type Offered struct {
	// Prompts and Resources are declared with listChanged; Subscribe
	// adds resources.subscribe.
	Prompts, Resources, Subscribe bool
	Completions, Logging          bool
}

// OfferedBy makes the encoder declare, in every initialize and
// server/discover result, the capabilities fn reports at that moment
// (rendered per call, since they change as servers come and go).
func OfferedBy(fn func() Offered) EncoderOption {
	return func(o *encoderOptions) { o.offered = fn }
}

// NewEncoder renders the fixed results for a server with the given identity,
// instructions and tools.
func NewEncoder(info Implementation, instructions string, tools []tool.Descriptor, opts ...EncoderOption) (*Encoder, error) {
	var o encoderOptions
	for _, opt := range opts {
		opt(&o)
	}
	e := &Encoder{
		info:         info,
		instructions: instructions,
		initialize:   map[string][]byte{},
		toolsList:    map[string][]byte{},
		listChanged:  o.listChanged,
		offered:      o.offered,
	}
	infoJSON, err := json.Marshal(info, json.Deterministic(true))
	if err != nil {
		return nil, fmt.Errorf("mcp: server info: %w", err)
	}
	e.modernInfo = fmt.Appendf(nil, `,"_meta":{%q:%s}`, MetaServerInfo, infoJSON)
	e.modernMeta = fmt.Appendf(nil, `%s,"resultType":"complete"`, e.modernInfo)

	caps := e.capabilities(Offered{})
	for _, v := range AllVersions() {
		f := FeaturesOf(v)
		list, err := renderTools(f, tools)
		if err != nil {
			return nil, err
		}
		if f.Modern {
			list = fmt.Appendf(list[:len(list)-1], `,"ttlMs":%d,"cacheScope":"public"}`, ListTTLMillis)
			e.toolsList[v] = e.decorate(list, v)
			continue
		}
		e.toolsList[v] = list
		if e.initialize[v], err = e.renderInitialize(v, caps); err != nil {
			return nil, err
		}
	}
	if e.discover, err = e.renderDiscover(caps); err != nil {
		return nil, err
	}
	return e, nil
}

// capabilities is the capabilities object: tools, and what off offers.
func (e *Encoder) capabilities(off Offered) map[string]any {
	caps := map[string]any{"tools": map[string]any{"listChanged": e.listChanged}}
	if off.Prompts {
		caps["prompts"] = map[string]any{"listChanged": true}
	}
	if off.Resources {
		r := map[string]any{"listChanged": true}
		if off.Subscribe {
			r["subscribe"] = true
		}
		caps["resources"] = r
	}
	if off.Completions {
		caps["completions"] = map[string]any{}
	}
	if off.Logging {
		caps["logging"] = map[string]any{}
	}
	return caps
}

func (e *Encoder) renderInitialize(v string, caps map[string]any) ([]byte, error) {
	si := e.info
	if !FeaturesOf(v).Structured {
		si.Title = "" // Implementation.title arrived in 2025-06-18
	}
	init := struct {
		ProtocolVersion string         `json:"protocolVersion"`
		Capabilities    map[string]any `json:"capabilities"`
		ServerInfo      Implementation `json:"serverInfo"`
		Instructions    string         `json:"instructions,omitempty"`
	}{v, caps, si, e.instructions}
	b, err := json.Marshal(init, json.Deterministic(true))
	if err != nil {
		return nil, fmt.Errorf("mcp: initialize result: %w", err)
	}
	return b, nil
}

func (e *Encoder) renderDiscover(caps map[string]any) ([]byte, error) {
	disc := struct {
		SupportedVersions []string       `json:"supportedVersions"`
		Capabilities      map[string]any `json:"capabilities"`
		Instructions      string         `json:"instructions,omitempty"`
		TTLMs             int            `json:"ttlMs"`
		CacheScope        string         `json:"cacheScope"`
	}{ModernVersions(), caps, e.instructions, ListTTLMillis, "public"}
	if e.offered != nil {
		// What is offered changes as servers come and go: not cached.
		disc.TTLMs, disc.CacheScope = 0, "private"
	}
	d, err := json.Marshal(disc, json.Deterministic(true))
	if err != nil {
		return nil, fmt.Errorf("mcp: discover result: %w", err)
	}
	return e.decorate(d, V20260728), nil
}

// decorate adds the modern result members to a rendered result object.
func (e *Encoder) decorate(obj []byte, version string) []byte {
	if !FeaturesOf(version).Modern {
		return obj
	}
	meta := e.modernMeta
	if len(bytes.TrimSpace(obj[1:len(obj)-1])) == 0 {
		meta = meta[1:] // an empty object: no member before ours, so no comma
	}
	out := make([]byte, 0, len(obj)+len(meta))
	out = append(out, obj[:len(obj)-1]...)
	out = append(out, meta...)
	return append(out, '}')
}

type wireTool struct {
	Name         string            `json:"name"`
	Title        string            `json:"title,omitempty"`
	Description  string            `json:"description,omitempty"`
	InputSchema  jsontext.Value    `json:"inputSchema"`
	OutputSchema jsontext.Value    `json:"outputSchema,omitempty"`
	Annotations  *tool.Annotations `json:"annotations,omitempty"`
}

// renderTools renders a tools/list result with what version f may carry.
func renderTools(f Features, tools []tool.Descriptor) ([]byte, error) {
	list := make([]wireTool, 0, len(tools))
	for _, d := range tools {
		w := wireTool{Name: d.Name, Description: d.Description, InputSchema: d.InputSchema}
		if f.Annotations {
			a := d.Annotations
			if a.Title == "" {
				a.Title = d.Title
			}
			w.Annotations = &a
		}
		if f.Structured {
			w.Title = d.Title
			w.OutputSchema = d.OutputSchema
		}
		list = append(list, w)
	}
	b, err := json.Marshal(struct {
		Tools []wireTool `json:"tools"`
	}{list}, json.Deterministic(true))
	if err != nil {
		return nil, fmt.Errorf("mcp: tools/list result: %w", err)
	}
	return b, nil
}

// Initialize returns the initialize result for a negotiated legacy version.
func (e *Encoder) Initialize(version string) []byte {
	if e.offered != nil {
		if b, err := e.renderInitialize(version, e.capabilities(e.offered())); err == nil {
			return b
		}
	}
	return e.initialize[version]
}

// Discover returns the server/discover result.
func (e *Encoder) Discover() []byte {
	if e.offered != nil {
		if b, err := e.renderDiscover(e.capabilities(e.offered())); err == nil {
			return b
		}
	}
	return e.discover
}

// ToolsList returns the tools/list result for version.
func (e *Encoder) ToolsList(version string) []byte { return e.toolsList[version] }

// Empty returns an empty result ({} or its modern form) for version.
func (e *Encoder) Empty(version string) []byte { return e.decorate([]byte("{}"), version) }

// AppendCallResult appends a successful tools/call result: structured (a
// JSON object) as one text block and, where the version has it, as
// structuredContent.
func (e *Encoder) AppendCallResult(dst []byte, version string, structured []byte) []byte {
	f := FeaturesOf(version)
	dst = append(dst, `{"content":[{"type":"text","text":`...)
	dst, _ = jsontext.AppendQuote(dst, structured)
	dst = append(dst, `}]`...)
	if f.Structured {
		dst = append(dst, `,"structuredContent":`...)
		dst = append(dst, structured...)
	}
	dst = append(dst, `,"isError":false`...)
	if f.Modern {
		dst = append(dst, e.modernMeta...)
	}
	return append(dst, '}')
}

// AppendCallProblem appends an in-band tool error: one text block holding
// the problem document, isError true, no structuredContent.
func (e *Encoder) AppendCallProblem(dst []byte, version string, p *problem.Problem) []byte {
	doc, err := json.Marshal(p, json.Deterministic(true), jsontext.AllowInvalidUTF8(true))
	if err != nil {
		// A Problem holds only strings, ints and a metadata map built
		// by this program (invalid UTF-8 in its strings becomes U+FFFD);
		// failing to marshal it is a programming error.
		panic(fmt.Sprintf("mcp: marshal problem: %v", err))
	}
	dst = append(dst, `{"content":[{"type":"text","text":`...)
	dst, _ = jsontext.AppendQuote(dst, doc)
	dst = append(dst, `}],"isError":true`...)
	if FeaturesOf(version).Modern {
		dst = append(dst, e.modernMeta...)
	}
	return append(dst, '}')
}

// ProblemData returns p as JSON for error.data. Invalid UTF-8 in its
// strings becomes U+FFFD.
func ProblemData(p *problem.Problem) []byte {
	doc, err := json.Marshal(p, json.Deterministic(true), jsontext.AllowInvalidUTF8(true))
	if err != nil {
		panic(fmt.Sprintf("mcp: marshal problem: %v", err))
	}
	return doc
}

// UnsupportedVersionData returns error.data for -32022. requested is peer
// input: invalid UTF-8 in it (say, from cutting it to a byte length)
// becomes U+FFFD.
func UnsupportedVersionData(requested string) []byte {
	b, err := json.Marshal(struct {
		Supported []string `json:"supported"`
		Requested string   `json:"requested"`
	}{ModernVersions(), requested}, json.Deterministic(true), jsontext.AllowInvalidUTF8(true))
	if err != nil {
		panic(fmt.Sprintf("mcp: marshal version data: %v", err))
	}
	return b
}
