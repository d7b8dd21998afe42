package mcp

import (
	"bytes"
	"strconv"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/jsondec"
)

// Relayed content: descriptors and results another server produced, which
// a gateway passes on. They are re-encoded here, never copied, and shaped
// for the version of the client they go to: what that version cannot
// carry is left out (titles, output schemas, annotations, icons, content
// block kinds it does not know), and an output schema whose root is not an
// object, which no legacy version admits, is left out for legacy clients
// with the structuredContent it describes.

// RawTool is a relayed tool descriptor, its members as the other server
// sent them.
type RawTool struct {
	// Name is the name the gateway lists it under.
	Name               string
	Title, Description string
	// InputSchema, OutputSchema, Annotations and Icons are raw JSON, nil
	// when absent.
	InputSchema, OutputSchema, Annotations, Icons jsontext.Value
}

// ListPage is the paging and caching of one list result.
type ListPage struct {
	// NextCursor is the cursor of the next page, "" on the last.
	NextCursor string
	// CacheScope and TTLMillis go on modern results: "private" with 0 for
	// a list that depends on who asks or can change at any time.
	CacheScope string
	TTLMillis  int
}

// RelayedToolsList renders a tools/list result of relayed tools for
// version.
func (e *Encoder) RelayedToolsList(version string, tools []RawTool, page ListPage) []byte {
	f := FeaturesOf(version)
	b := []byte(`{"tools":[`)
	for i, t := range tools {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b, _ = jsontext.AppendQuote(b, t.Name)
		b = appendTitleDescription(b, f, t.Title, t.Description)
		b = append(b, `,"inputSchema":`...)
		b = appendCompact(b, t.InputSchema)
		if f.Structured && len(t.OutputSchema) > 0 && (f.Modern || objectRoot(t.OutputSchema)) {
			b = append(b, `,"outputSchema":`...)
			b = appendCompact(b, t.OutputSchema)
		}
		if f.Annotations && len(t.Annotations) > 0 && t.Annotations.Kind() == '{' {
			b = append(b, `,"annotations":`...)
			b = appendCompact(b, t.Annotations)
		}
		if f.Icons && len(t.Icons) > 0 && t.Icons.Kind() == '[' {
			b = append(b, `,"icons":`...)
			b = appendCompact(b, t.Icons)
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	return e.finishPage(b, f, version, page)
}

// AppendRelayedResult appends a relayed tools/call result for version:
// the content blocks the version knows, structuredContent where it has
// it (a legacy version's structuredContent is an object, so any other
// value is dropped for it), and isError.
func (e *Encoder) AppendRelayedResult(dst []byte, version string, content, structured jsontext.Value, isError bool) []byte {
	f := FeaturesOf(version)
	dst = append(dst, `{"content":[`...)
	n := 0
	for _, block := range arrayElements(content) {
		if !blockKnown(f, block) {
			continue
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = appendCompact(dst, block)
		n++
	}
	dst = append(dst, ']')
	if f.Structured && len(structured) > 0 && (f.Modern || structured.Kind() == '{') {
		dst = append(dst, `,"structuredContent":`...)
		dst = appendCompact(dst, structured)
	}
	if isError {
		dst = append(dst, `,"isError":true`...)
	} else {
		dst = append(dst, `,"isError":false`...)
	}
	if f.Modern {
		dst = append(dst, e.modernMeta...)
	}
	return append(dst, '}')
}

// blockKnown reports whether version f has the content block's type.
func blockKnown(f Features, block jsontext.Value) bool {
	var b struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(block, &b) != nil {
		return false
	}
	switch b.Type {
	case "text", "image", "resource":
		return true
	case "audio":
		return f.Audio
	case "resource_link":
		return f.ResourceLinks
	}
	return false
}

// objectRoot reports whether schema's root says "type": "object".
func objectRoot(schema jsontext.Value) bool {
	var root struct {
		Type jsontext.Value `json:"type"`
	}
	return schema.Kind() == '{' && json.Unmarshal(schema, &root) == nil &&
		bytes.Equal(bytes.TrimSpace(root.Type), []byte(`"object"`))
}

// arrayElements splits a JSON array into its elements; anything else is
// none.
func arrayElements(v jsontext.Value) []jsontext.Value {
	if v.Kind() != '[' {
		return nil
	}
	d := jsondec.Borrow(v)
	defer jsondec.Return(d)
	d.ReadToken()
	var out []jsontext.Value
	for d.PeekKind() != ']' {
		e, err := d.ReadValue()
		if err != nil {
			return nil
		}
		out = append(out, e.Clone())
	}
	return out
}

// appendCompact appends v re-encoded without insignificant whitespace,
// or null when v is not one JSON value.
func appendCompact(dst []byte, v jsontext.Value) []byte {
	// As Value.Compact, but appended in place rather than into a copy.
	out, err := jsontext.AppendFormat(dst, v, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true), jsontext.PreserveRawStrings(true))
	if err != nil {
		// AppendFormat copied v whole past dst: none of it may stay
		// behind in the spare capacity of what is returned.
		clear(out[len(dst):])
		return append(out[:len(dst)], "null"...)
	}
	return out
}

// ProgressToken reads a request's _meta.progressToken: a string or an
// integer within int64, as the spec allows; anything else (absent, null,
// fractional, an object) is nil, and the request then gets no progress.
func ProgressToken(meta jsontext.Value) jsontext.Value {
	if meta == nil {
		return nil
	}
	var m struct {
		Token jsontext.Value `json:"progressToken"`
	}
	if json.Unmarshal(meta, &m) != nil {
		return nil
	}
	switch m.Token.Kind() {
	case '"':
		return m.Token
	case '0':
		if _, err := strconv.ParseInt(string(m.Token), 10, 64); err == nil {
			return m.Token
		}
	}
	return nil
}

// ClientCapabilities reads a 2026-07-28 request's
// _meta["io.modelcontextprotocol/clientCapabilities"]: the object, or nil
// when it is absent or not an object (the client then declares nothing).
func ClientCapabilities(meta jsontext.Value) jsontext.Value {
	if meta == nil {
		return nil
	}
	var m struct {
		Caps jsontext.Value `json:"io.modelcontextprotocol/clientCapabilities"`
	}
	if json.Unmarshal(meta, &m) != nil || m.Caps.Kind() != '{' {
		return nil
	}
	return m.Caps
}

// AppendInputRequired appends a 2026-07-28 input_required result: the
// requests the client is to answer (an object, or nil for none) and the
// state it is to send back with the answers.
func (e *Encoder) AppendInputRequired(dst []byte, requests jsontext.Value, state string) []byte {
	dst = append(dst, '{')
	if requests != nil {
		dst = append(dst, `"inputRequests":`...)
		dst = appendCompact(dst, requests)
		dst = append(dst, ',')
	}
	dst = append(dst, `"requestState":`...)
	dst, _ = jsontext.AppendQuote(dst, state)
	dst = append(dst, e.modernInfo...)
	return append(dst, `,"resultType":"input_required"}`...)
}

// RawPrompt is a relayed prompt descriptor, its members as the other
// server sent them (arguments already read, so that what is listed is
// what calls are checked against).
type RawPrompt struct {
	// Name is the name the gateway lists it under.
	Name               string
	Title, Description string
	Arguments          []RawPromptArgument
	// Icons is raw JSON, nil when absent.
	Icons jsontext.Value
}

// RawPromptArgument is one declared argument of a relayed prompt.
type RawPromptArgument struct {
	Name, Title, Description string
	Required                 bool
}

// RelayedPromptsList renders a prompts/list result of relayed prompts
// for version.
func (e *Encoder) RelayedPromptsList(version string, prompts []RawPrompt, page ListPage) []byte {
	f := FeaturesOf(version)
	b := []byte(`{"prompts":[`)
	for i, p := range prompts {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b, _ = jsontext.AppendQuote(b, p.Name)
		b = appendTitleDescription(b, f, p.Title, p.Description)
		if len(p.Arguments) > 0 {
			b = append(b, `,"arguments":[`...)
			for j, a := range p.Arguments {
				if j > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"name":`...)
				b, _ = jsontext.AppendQuote(b, a.Name)
				b = appendTitleDescription(b, f, a.Title, a.Description)
				if a.Required {
					b = append(b, `,"required":true`...)
				}
				b = append(b, '}')
			}
			b = append(b, ']')
		}
		if f.Icons && len(p.Icons) > 0 && p.Icons.Kind() == '[' {
			b = append(b, `,"icons":`...)
			b = appendCompact(b, p.Icons)
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	return e.finishPage(b, f, version, page)
}

// appendTitleDescription appends the title (when version f has titles)
// and the description, each only when set.
func appendTitleDescription(b []byte, f Features, title, description string) []byte {
	if f.Structured && title != "" {
		b = append(b, `,"title":`...)
		b, _ = jsontext.AppendQuote(b, title)
	}
	if description != "" {
		b = append(b, `,"description":`...)
		b, _ = jsontext.AppendQuote(b, description)
	}
	return b
}

// finishPage closes a list result: its cursor, the modern caching
// members and result members.
func (e *Encoder) finishPage(b []byte, f Features, version string, page ListPage) []byte {
	if page.NextCursor != "" {
		b = append(b, `,"nextCursor":`...)
		b, _ = jsontext.AppendQuote(b, page.NextCursor)
	}
	if f.Modern {
		scope := page.CacheScope
		if scope == "" {
			scope = "private"
		}
		b = append(b, `,"ttlMs":`...)
		b = strconv.AppendInt(b, int64(page.TTLMillis), 10)
		b = append(b, `,"cacheScope":`...)
		b, _ = jsontext.AppendQuote(b, scope)
	}
	return e.decorate(append(b, '}'), version)
}

// PromptMessage is one message of a relayed prompts/get result.
type PromptMessage struct {
	// Role is "user" or "assistant".
	Role string
	// Content is one content block, raw.
	Content jsontext.Value
}

// AppendRelayedPrompt appends a relayed prompts/get result for version:
// the description, and each message whose content block the version
// knows (a message the version could not read is left out, as a content
// block is from a tool's result).
func (e *Encoder) AppendRelayedPrompt(dst []byte, version, description string, messages []PromptMessage) []byte {
	f := FeaturesOf(version)
	dst = append(dst, '{')
	if description != "" {
		dst = append(dst, `"description":`...)
		dst, _ = jsontext.AppendQuote(dst, description)
		dst = append(dst, ',')
	}
	dst = append(dst, `"messages":[`...)
	n := 0
	for _, m := range messages {
		if !blockKnown(f, m.Content) {
			continue
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"role":`...)
		dst, _ = jsontext.AppendQuote(dst, m.Role)
		dst = append(dst, `,"content":`...)
		dst = appendCompact(dst, m.Content)
		dst = append(dst, '}')
		n++
	}
	dst = append(dst, ']')
	if f.Modern {
		dst = append(dst, e.modernMeta...)
	}
	return append(dst, '}')
}

// RawResource is a relayed resource descriptor, read.
type RawResource struct {
	URI, Name, Title, Description, MimeType string
	// Annotations, Size and Icons are raw JSON, nil when absent.
	Annotations, Size, Icons jsontext.Value
}

// RawTemplate is a relayed resource template descriptor, read.
type RawTemplate struct {
	URITemplate, Name, Title, Description, MimeType string
	// Annotations and Icons are raw JSON, nil when absent.
	Annotations, Icons jsontext.Value
}

// appendResourceCommon appends what resources and templates share after
// their locator: name, title, description, mimeType, annotations, icons.
func appendResourceCommon(b []byte, f Features, name, title, description, mimeType string, annotations, icons jsontext.Value) []byte {
	b = append(b, `,"name":`...)
	b, _ = jsontext.AppendQuote(b, name)
	b = appendTitleDescription(b, f, title, description)
	if mimeType != "" {
		b = append(b, `,"mimeType":`...)
		b, _ = jsontext.AppendQuote(b, mimeType)
	}
	if len(annotations) > 0 && annotations.Kind() == '{' {
		b = append(b, `,"annotations":`...)
		b = appendCompact(b, annotations)
	}
	if f.Icons && len(icons) > 0 && icons.Kind() == '[' {
		b = append(b, `,"icons":`...)
		b = appendCompact(b, icons)
	}
	return b
}

// RelayedResourcesList renders a resources/list result for version.
func (e *Encoder) RelayedResourcesList(version string, resources []RawResource, page ListPage) []byte {
	f := FeaturesOf(version)
	b := []byte(`{"resources":[`)
	for i, r := range resources {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"uri":`...)
		b, _ = jsontext.AppendQuote(b, r.URI)
		b = appendResourceCommon(b, f, r.Name, r.Title, r.Description, r.MimeType, r.Annotations, r.Icons)
		if f.Annotations && len(r.Size) > 0 && r.Size.Kind() == '0' {
			b = append(b, `,"size":`...)
			b = appendCompact(b, r.Size)
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	return e.finishPage(b, f, version, page)
}

// RelayedTemplatesList renders a resources/templates/list result for
// version.
func (e *Encoder) RelayedTemplatesList(version string, templates []RawTemplate, page ListPage) []byte {
	f := FeaturesOf(version)
	b := []byte(`{"resourceTemplates":[`)
	for i, t := range templates {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"uriTemplate":`...)
		b, _ = jsontext.AppendQuote(b, t.URITemplate)
		b = appendResourceCommon(b, f, t.Name, t.Title, t.Description, t.MimeType, t.Annotations, t.Icons)
		b = append(b, '}')
	}
	b = append(b, ']')
	return e.finishPage(b, f, version, page)
}

// ResourceContents is one checked element of a resources/read result.
type ResourceContents struct {
	URI, MimeType string
	// Text or Blob (base64) is set, never both.
	Text, Blob *string
}

// AppendRelayedContents appends a relayed resources/read result for
// version, re-encoded from its checked contents.
func (e *Encoder) AppendRelayedContents(dst []byte, version string, contents []ResourceContents) []byte {
	f := FeaturesOf(version)
	dst = append(dst, `{"contents":[`...)
	for i, c := range contents {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"uri":`...)
		dst, _ = jsontext.AppendQuote(dst, c.URI)
		if c.MimeType != "" {
			dst = append(dst, `,"mimeType":`...)
			dst, _ = jsontext.AppendQuote(dst, c.MimeType)
		}
		if c.Text != nil {
			dst = append(dst, `,"text":`...)
			dst, _ = jsontext.AppendQuote(dst, *c.Text)
		} else if c.Blob != nil {
			dst = append(dst, `,"blob":`...)
			dst, _ = jsontext.AppendQuote(dst, *c.Blob)
		}
		dst = append(dst, '}')
	}
	dst = append(dst, ']')
	if f.Modern {
		dst = append(dst, e.modernMeta...)
	}
	return append(dst, '}')
}

// Completion is a checked completion/complete result.
type Completion struct {
	Values  []string
	Total   *int64
	HasMore bool
}

// AppendCompletion appends a completion/complete result for version;
// none is the empty completion.
func (e *Encoder) AppendCompletion(dst []byte, version string, c []Completion) []byte {
	f := FeaturesOf(version)
	dst = append(dst, `{"completion":{"values":[`...)
	var one Completion
	if len(c) > 0 {
		one = c[0]
	}
	for i, v := range one.Values {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst, _ = jsontext.AppendQuote(dst, v)
	}
	dst = append(dst, ']')
	if one.Total != nil {
		dst = append(dst, `,"total":`...)
		dst = strconv.AppendInt(dst, *one.Total, 10)
	}
	if one.HasMore {
		dst = append(dst, `,"hasMore":true`...)
	} else {
		dst = append(dst, `,"hasMore":false`...)
	}
	dst = append(dst, '}')
	if f.Modern {
		dst = append(dst, e.modernMeta...)
	}
	return append(dst, '}')
}
