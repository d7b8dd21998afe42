package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// outcome is what a response amounts to: an answer, or a refusal (a tool
// result with isError, or a JSON-RPC error).
type outcome int

const (
	answered outcome = iota
	refused
)

func (o outcome) String() string {
	if o == refused {
		return "refused"
	}
	return "answered"
}

// rpcResponse is the part of a JSON-RPC response the formatter reads.
type rpcResponse struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// problemDoc is an RFC 9457 problem with the project's code extension, as
// bastion serve and the gateway send it in a tool error or in error.data.
type problemDoc struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Code   string `json:"code"`
}

type toolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
}

// fileLines is how many lines of a file read are shown; the transcript has
// the whole file.
const fileLines = 5

// describe renders the response to a request of method for a reader: a few
// lines, without indentation, and whether it answered or refused. It fails
// only on a response that is not a JSON-RPC response at all.
func describe(method string, raw []byte) (string, outcome, error) {
	var resp rpcResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		return "", answered, fmt.Errorf("not a JSON-RPC response: %w", err)
	}
	if resp.Error != nil {
		return describeRPCError(resp.Error), refused, nil
	}
	if resp.Result == nil {
		return "", answered, fmt.Errorf("a JSON-RPC response with neither result nor error")
	}
	switch method {
	case "initialize":
		return describeInitialize(resp.Result), answered, nil
	case "tools/list":
		return describeToolsList(resp.Result), answered, nil
	case "tools/call":
		return describeToolResult(resp.Result)
	}
	return fields(resp.Result), answered, nil
}

// describeRPCError renders a JSON-RPC error, with the problem it carries as
// data when there is one.
func describeRPCError(e *rpcError) string {
	var p problemDoc
	if json.Unmarshal(e.Data, &p) == nil && p.Code != "" {
		return fmt.Sprintf("refused: JSON-RPC %d, %s (%s): %s", e.Code, clean(p.Code), clean(p.Title), clean(p.Detail))
	}
	s := fmt.Sprintf("refused: JSON-RPC %d: %s", e.Code, clean(e.Message))
	if len(e.Data) > 0 && string(e.Data) != "null" {
		s += "\ndata: " + compact(e.Data)
	}
	return s
}

func describeInitialize(result json.RawMessage) string {
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
		ServerInfo      struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"serverInfo"`
		Capabilities json.RawMessage `json:"capabilities"`
		Instructions string          `json:"instructions"`
	}
	if json.Unmarshal(result, &r) != nil {
		return fields(result)
	}
	var caps []string
	for _, m := range members(r.Capabilities) {
		caps = append(caps, clean(m.Key))
	}
	s := fmt.Sprintf("%s %s agrees on protocol %s; capabilities: %s",
		clean(r.ServerInfo.Name), clean(r.ServerInfo.Version), clean(r.ProtocolVersion), orNone(strings.Join(caps, ", ")))
	if r.Instructions != "" {
		s += "\ninstructions: " + strconv.Quote(r.Instructions)
	}
	return s
}

// describeToolsList renders a tool list as one line per tool, its name and
// its arguments in the order of its input schema, "?" marking the optional.
func describeToolsList(result json.RawMessage) string {
	var r struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
		NextCursor *string `json:"nextCursor"`
	}
	if json.Unmarshal(result, &r) != nil {
		return fields(result)
	}
	lines := []string{plural(len(r.Tools), "tool", "tools") + ":"}
	for _, t := range r.Tools {
		lines = append(lines, clean(t.Name)+"("+arguments(t.InputSchema)+")")
	}
	if r.NextCursor != nil {
		lines = append(lines, "(more on the next page)")
	}
	return strings.Join(lines, "\n")
}

// arguments renders an input schema's properties as "name: type", the
// required ones first, then the optional ones as "name?: type", each in the
// schema's order (the gateway sends its properties sorted by name, bastion
// serve in the order it declares them).
func arguments(schema json.RawMessage) string {
	var s struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return "…"
	}
	required := make(map[string]bool, len(s.Required))
	for _, name := range s.Required {
		required[name] = true
	}
	var args, optional []string
	for _, p := range members(s.Properties) {
		if required[p.Key] {
			args = append(args, clean(p.Key)+": "+schemaType(p.Value))
		} else {
			optional = append(optional, clean(p.Key)+"?: "+schemaType(p.Value))
		}
	}
	return strings.Join(append(args, optional...), ", ")
}

// schemaType names a property's type: its enum's values when it has one,
// else its type or types.
func schemaType(prop json.RawMessage) string {
	var p struct {
		Type json.RawMessage   `json:"type"`
		Enum []json.RawMessage `json:"enum"`
	}
	if json.Unmarshal(prop, &p) != nil {
		return "any"
	}
	if len(p.Enum) > 0 {
		vals := make([]string, len(p.Enum))
		for i, v := range p.Enum {
			vals[i] = scalar(v)
		}
		return strings.Join(vals, "|")
	}
	var one string
	if json.Unmarshal(p.Type, &one) == nil {
		return clean(one)
	}
	var many []string
	if json.Unmarshal(p.Type, &many) == nil && len(many) > 0 {
		for i := range many {
			many[i] = clean(many[i])
		}
		return strings.Join(many, "|")
	}
	return "any"
}

// describeToolResult renders a tools/call result by its shape, so that the
// same formatting serves bastion serve's tools by their own names and
// behind the gateway's prefix.
func describeToolResult(result json.RawMessage) (string, outcome, error) {
	var r toolResult
	if err := json.Unmarshal(result, &r); err != nil {
		return "", answered, fmt.Errorf("not a tool result: %w", err)
	}
	if r.IsError {
		return "refused: " + toolError(r), refused, nil
	}
	if len(r.StructuredContent) > 0 && string(r.StructuredContent) != "null" {
		if s, ok := rowsTable(r.StructuredContent); ok {
			return s, answered, nil
		}
		if s, ok := fileRead(r.StructuredContent); ok {
			return s, answered, nil
		}
		if s, ok := schemaTables(r.StructuredContent); ok {
			return s, answered, nil
		}
		return fields(r.StructuredContent), answered, nil
	}
	var texts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			texts = append(texts, cleanLines(c.Text))
		} else {
			texts = append(texts, "("+clean(c.Type)+" content)")
		}
	}
	return orNone(strings.Join(texts, "\n")), answered, nil
}

// toolError renders a tool error: the problem in structuredContent, else
// the problem in the first text content, else that text as it is.
func toolError(r toolResult) string {
	var p problemDoc
	if json.Unmarshal(r.StructuredContent, &p) == nil && p.Code != "" {
		return problemLine(p)
	}
	for _, c := range r.Content {
		if c.Type != "text" {
			continue
		}
		if json.Unmarshal([]byte(c.Text), &p) == nil && p.Code != "" {
			return problemLine(p)
		}
		return cleanLines(c.Text)
	}
	return "(an error without text)"
}

func problemLine(p problemDoc) string {
	return fmt.Sprintf("%s (%s): %s", clean(p.Code), clean(p.Title), clean(p.Detail))
}

// rowsTable renders read_only_sql's result as an aligned table, numbers
// right-aligned, headed by the row count and whether rows were cut.
func rowsTable(sc json.RawMessage) (string, bool) {
	var r struct {
		Columns []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"columns"`
		Rows      [][]json.RawMessage `json:"rows"`
		RowCount  *int                `json:"row_count"`
		Truncated bool                `json:"truncated"`
	}
	if json.Unmarshal(sc, &r) != nil || r.Columns == nil || r.RowCount == nil {
		return "", false
	}
	head := plural(*r.RowCount, "row", "rows")
	if r.Truncated {
		head += ", truncated (the query has more)"
	}
	n := len(r.Columns)
	cells := make([][]string, 0, len(r.Rows)+1)
	header := make([]string, n)
	right := make([]bool, n)
	for i, c := range r.Columns {
		header[i] = clean(c.Name)
		right[i] = numericType(c.Type)
	}
	cells = append(cells, header)
	for _, row := range r.Rows {
		line := make([]string, n)
		for i := range line {
			if i < len(row) {
				line[i] = cell(row[i])
			}
		}
		cells = append(cells, line)
	}
	width := make([]int, n)
	for _, line := range cells {
		for i, c := range line {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	rule := make([]string, n)
	for i, wd := range width {
		rule[i] = strings.Repeat("-", wd)
	}
	// The rule goes under the header.
	cells = append(cells[:1], append([][]string{rule}, cells[1:]...)...)
	lines := []string{head + ":"}
	for _, line := range cells {
		var b strings.Builder
		for i, c := range line {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if right[i] {
				b.WriteString(pad + c)
			} else {
				b.WriteString(c + pad)
			}
		}
		lines = append(lines, strings.TrimRight(b.String(), " "))
	}
	return strings.Join(lines, "\n"), true
}

// numericType reports whether a PostgreSQL type name is a number's, whose
// column reads better right-aligned.
func numericType(t string) bool {
	switch t {
	case "int2", "int4", "int8", "numeric", "float4", "float8", "oid", "money":
		return true
	}
	return false
}

func cell(v json.RawMessage) string {
	if string(v) == "null" {
		return "NULL"
	}
	return scalar(v)
}

// fileRead renders sandbox_fs_read's result: the path, size and encoding,
// and the first lines of the text.
func fileRead(sc json.RawMessage) (string, bool) {
	var f struct {
		RelativePath *string `json:"relative_path"`
		SizeBytes    int64   `json:"size_bytes"`
		Encoding     string  `json:"encoding"`
		Content      *string `json:"content"`
	}
	if json.Unmarshal(sc, &f) != nil || f.RelativePath == nil || f.Content == nil {
		return "", false
	}
	lines := []string{fmt.Sprintf("%s, %s, %s:", clean(*f.RelativePath), plural(int(f.SizeBytes), "byte", "bytes"), clean(f.Encoding))}
	if f.Encoding == "base64" {
		s := *f.Content
		if len(s) > 64 {
			s = s[:64] + "…"
		}
		return strings.Join(append(lines, "| "+clean(s)), "\n"), true
	}
	text := strings.Split(strings.TrimSuffix(*f.Content, "\n"), "\n")
	shown := min(len(text), fileLines)
	for _, l := range text[:shown] {
		lines = append(lines, strings.TrimRight("| "+clean(l), " "))
	}
	if rest := len(text) - shown; rest > 0 {
		lines = append(lines, fmt.Sprintf("| … (%s more)", plural(rest, "line", "lines")))
	}
	return strings.Join(lines, "\n"), true
}

// schemaTables renders sql_schema's result: one line per table, its
// qualified name, kind and columns ("?" marking the nullable ones).
func schemaTables(sc json.RawMessage) (string, bool) {
	var r struct {
		Tables []struct {
			Schema  string `json:"schema"`
			Name    string `json:"name"`
			Kind    string `json:"kind"`
			Columns []struct {
				Name     string `json:"name"`
				Type     string `json:"type"`
				Nullable bool   `json:"nullable"`
			} `json:"columns"`
			ColumnsTruncated bool `json:"columns_truncated"`
		} `json:"tables"`
		NextCursor string `json:"next_cursor"`
	}
	if json.Unmarshal(sc, &r) != nil || r.Tables == nil {
		return "", false
	}
	lines := []string{plural(len(r.Tables), "table", "tables") + ` ("?" marks a nullable column):`}
	for _, t := range r.Tables {
		if t.Columns == nil {
			return "", false
		}
		cols := make([]string, len(t.Columns))
		for i, c := range t.Columns {
			mark := ""
			if c.Nullable {
				mark = "?"
			}
			cols[i] = clean(c.Name) + mark + ": " + clean(c.Type)
		}
		if t.ColumnsTruncated {
			cols = append(cols, "…")
		}
		lines = append(lines, fmt.Sprintf("%s.%s (%s):", clean(t.Schema), clean(t.Name), clean(t.Kind)))
		lines = append(lines, wrap(cols, "  ", wrapWidth)...)
	}
	if r.NextCursor != "" {
		lines = append(lines, "(more on the next page: next_cursor "+clean(r.NextCursor)+")")
	}
	return strings.Join(lines, "\n"), true
}

// wrapWidth is the width, in characters, that wrap keeps a list within:
// the output is indented by five more.
const wrapWidth = 95

// wrap joins items with ", " into lines of at most width characters (an
// item longer than that gets a line of its own), each prefixed by indent.
func wrap(items []string, indent string, width int) []string {
	var lines []string
	line := ""
	for i, item := range items {
		if i < len(items)-1 {
			item += ","
		}
		switch {
		case line == "":
			line = indent + item
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(item) > width:
			lines = append(lines, line)
			line = indent + item
		default:
			line += " " + item
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// fields renders a JSON object as "key: value" lines in the order sent: a
// nested object inline as "k=v, k=v", an array one element a line. Anything
// else is shown as compact JSON.
func fields(raw json.RawMessage) string {
	ms := members(raw)
	if ms == nil {
		return compact(raw)
	}
	var lines []string
	for _, m := range ms {
		if m.Key == "_meta" || m.Key == "resultType" {
			// The gateway's envelope, the same on every result; the
			// transcript keeps it.
			continue
		}
		key := clean(m.Key)
		var elems []json.RawMessage
		if json.Unmarshal(m.Value, &elems) == nil {
			if len(elems) == 0 {
				lines = append(lines, key+": (none)")
				continue
			}
			lines = append(lines, key+":")
			for _, e := range elems {
				lines = append(lines, "  - "+inline(e))
			}
			continue
		}
		lines = append(lines, key+": "+value(m.Key, m.Value))
	}
	return orNone(strings.Join(lines, "\n"))
}

// inline renders an object on one line as "k=v, k=v"; anything else as a
// scalar.
func inline(raw json.RawMessage) string {
	ms := members(raw)
	if ms == nil {
		return scalar(raw)
	}
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = clean(m.Key) + "=" + value(m.Key, m.Value)
	}
	return strings.Join(parts, ", ")
}

// value renders one member's value, a nested object inline; numbers named
// *_bytes or *_seconds get their size or duration beside them.
func value(key string, raw json.RawMessage) string {
	if members(raw) != nil {
		return inline(raw)
	}
	var n json.Number
	if json.Unmarshal(raw, &n) != nil {
		return scalar(raw)
	}
	i, err := n.Int64()
	switch {
	case err == nil && strings.HasSuffix(key, "_bytes"):
		return bytesSize(i)
	case err == nil && strings.HasSuffix(key, "_seconds"):
		return fmt.Sprintf("%d (%s)", i, time.Duration(i)*time.Second)
	}
	return scalar(raw)
}

// bytesSize renders a byte count in binary units.
func bytesSize(n int64) string {
	const unit = 1024
	if n < unit {
		return plural(int(n), "byte", "bytes")
	}
	f := float64(n)
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		f /= unit
		if f < unit || u == "TiB" {
			return strconv.FormatFloat(f, 'f', 1, 64) + " " + u
		}
	}
	panic("unreachable")
}

// scalar renders a JSON value on one line: a string as its text, a number
// with at most two decimals, anything else as compact JSON.
func scalar(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return clean(s)
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		if _, err := n.Int64(); err == nil {
			return n.String()
		}
		if f, err := n.Float64(); err == nil && !math.IsInf(f, 0) {
			return strconv.FormatFloat(math.Round(f*100)/100, 'f', -1, 64)
		}
		return n.String()
	}
	return compact(raw)
}

// member is one member of a JSON object, in the order it was sent.
type member struct {
	Key   string
	Value json.RawMessage
}

// members returns an object's members in the order sent (a map would sort
// them), or nil when raw is not an object. An empty object has a non-nil,
// empty slice.
func members(raw json.RawMessage) []member {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	ms := []member{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil
		}
		ms = append(ms, member{key, v})
	}
	return ms
}

// summarizeRequest renders a request on one line: its method, the tool's
// name and compact arguments for tools/call, else its params. The _meta
// that every 2026-07-28 request carries is left out, the same on each.
func summarizeRequest(raw []byte) string {
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(raw, &req) != nil {
		return compact(raw)
	}
	s := clean(req.Method)
	if req.Method == "tools/call" {
		var p struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if json.Unmarshal(req.Params, &p) == nil {
			s += " " + clean(p.Name)
			if len(p.Arguments) > 0 {
				s += " " + compact(p.Arguments)
			}
		}
	} else if params := withoutMeta(req.Params); params != "" {
		s += " " + params
	}
	if req.ID == nil {
		s += "   (a notification: no response is due)"
	}
	return s
}

// withoutMeta renders params as compact JSON without their _meta, or ""
// when nothing else is left.
func withoutMeta(params json.RawMessage) string {
	ms := members(params)
	if ms == nil {
		if len(params) == 0 {
			return ""
		}
		return compact(params)
	}
	var parts []string
	for _, m := range ms {
		if m.Key == "_meta" {
			continue
		}
		k, _ := json.Marshal(m.Key)
		parts = append(parts, string(k)+":"+compact(m.Value))
	}
	if len(parts) == 0 {
		return ""
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// compact renders JSON on one line, as sent; anything that is not JSON is
// shown cleaned.
func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return clean(string(raw))
	}
	return clean(b.String())
}

// clean makes text from a server safe to print on a terminal: control
// characters (an escape sequence could rewrite what the reader sees, a
// newline could fake a line of the demo) are shown escaped.
func clean(s string) string {
	if !strings.ContainsFunc(s, needsEscape) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if needsEscape(r) {
			fmt.Fprintf(&b, `\u%04x`, r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func needsEscape(r rune) bool {
	if r == '\t' {
		return false
	}
	return r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
}

// cleanLines is clean for text that may span lines: each line is cleaned,
// the line breaks kept.
func cleanLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = clean(strings.TrimSuffix(l, "\r"))
	}
	return strings.Join(lines, "\n")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
