// Package audit writes the gateway's decision log: one JSON Lines event
// per decision, to a file or stderr. An Event has no field that could
// hold an argument value, a header value, a token or a result, so a
// writer cannot put one there by mistake: what a caller sent is audited
// by name (method, tool, rule), never by content.
package audit

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// Outcomes of a decision.
const (
	Allow           = "allow"
	Deny            = "deny"
	Unauthenticated = "unauthenticated"
	RateLimited     = "rate_limited"
	Invalid         = "invalid"
)

// Kinds of event besides a call's decision (which has no kind).
const (
	KindAdmission = "admission" // a descriptor's verdict: admitted, held or rejected
	KindApproval  = "approval"  // a reviewer approved or rejected a digest
)

// Event is one decision.
type Event struct {
	Time time.Time `json:"time"`
	// Kind is "" for a call's decision, else one of the Kind* constants.
	Kind string `json:"event,omitempty"`
	// RequestID correlates the event with the log lines and the
	// X-MCP-Gateway-Request-Id a downstream received.
	RequestID string   `json:"request_id,omitempty"`
	Subject   string   `json:"subject,omitempty"`
	Issuer    string   `json:"issuer,omitempty"`
	Roles     []string `json:"roles,omitempty"`
	Method    string   `json:"method,omitempty"`
	// Tool is the qualified tool name of a tools/call, as the catalog
	// knows it ("" when the call named no tool the catalog has).
	Tool string `json:"tool,omitempty"`
	// Prompt is the qualified prompt name of a prompts/get, or of a
	// prompt's admission event.
	Prompt string `json:"prompt,omitempty"`
	// Resource is the URI of a resources/read routed to an admitted
	// resource, the template of one routed by a template (the URI read
	// may carry a caller's values), or the URI or template of an
	// admission event.
	Resource string `json:"resource,omitempty"`
	// Arguments are the names of a prompts/get's arguments, or the
	// declared name a completion/complete completes — names only, as a
	// tools/call's arguments are not audited at all.
	Arguments []string `json:"arguments,omitempty"`
	// Level is the level a logging/setLevel asked for: one of the spec's
	// eight words, never the caller's own text.
	Level   string `json:"level,omitempty"`
	Rule    string `json:"rule,omitempty"`
	Outcome string `json:"outcome,omitempty"`
	// Reason is a fixed word of why a call was refused, or of why it is
	// not over (input_required: a round of input was handed to the
	// caller, handed_to_caller on each request of that round).
	Reason string `json:"reason,omitempty"`
	// Code is the JSON-RPC error code answered, 0 for a result.
	Code int `json:"code,omitempty"`
	// DownstreamMS is the downstream call's latency, for a forwarded call.
	DownstreamMS *float64 `json:"downstream_ms,omitempty"`
	// Headers are the Mcp-Param-* headers a call sent, by name, with how
	// each value was encoded — never the value.
	Headers []Header `json:"headers,omitempty"`

	// Admission events: the server, the descriptor's digest, its status
	// (admitted, pending_review, quarantined, rejected, removed) or
	// rejection category, and the first-use mode or approval mode.
	Server   string `json:"server,omitempty"`
	Digest   string `json:"digest,omitempty"`
	Status   string `json:"status,omitempty"`
	Category string `json:"category,omitempty"`
	Mode     string `json:"mode,omitempty"`
}

// Name sets the field of e that names a descriptor of kind: Tool or
// Prompt to its qualified name, Resource to a resource's URI or a
// template (name, the downstream's own).
func Name(e *Event, kind, qualified, name string) {
	switch kind {
	case "prompt":
		e.Prompt = qualified
	case "resource", "template":
		e.Resource = name
	default:
		e.Tool = qualified
	}
}

// Header is one mirrored header of a call: its name and the encoding
// decision of decision 8 — "plain", "base64", or "omitted" (the argument
// was absent or null).
type Header struct {
	Name     string `json:"name"`
	Encoding string `json:"encoding"`
}

// Sink receives events. It is safe for concurrent use.
type Sink struct {
	mu     sync.Mutex
	w      io.Writer
	closer io.Closer
}

// Open opens the sink: "stderr", or a file appended to (created 0600).
func Open(file string) (*Sink, error) {
	if file == "stderr" {
		return &Sink{w: os.Stderr}, nil
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	return &Sink{w: f, closer: f}, nil
}

// New returns a sink writing to w (tests).
func New(w io.Writer) *Sink { return &Sink{w: w} }

// Record writes e, stamped with the time when it has none. A write error
// is not the caller's to handle; it is counted by the writer's owner.
func (s *Sink) Record(e Event) {
	if s == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	b := e.appendJSON(make([]byte, 0, 512))
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = s.w.Write(append(b, '\n'))
}

// appendJSON appends e as encoding/json writes it from its tags — the
// same members, in the same order, the same values
// (TestAppendJSONAsMarshal) — without reflection: every call is audited
// before it is answered. Strings are written by appendQuoted.
func (e *Event) appendJSON(b []byte) []byte {
	b = append(b, `{"time":"`...)
	b = e.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	b = appendString(b, "event", e.Kind)
	b = appendString(b, "request_id", e.RequestID)
	b = appendString(b, "subject", e.Subject)
	b = appendString(b, "issuer", e.Issuer)
	b = appendStrings(b, "roles", e.Roles)
	b = appendString(b, "method", e.Method)
	b = appendString(b, "tool", e.Tool)
	b = appendString(b, "prompt", e.Prompt)
	b = appendString(b, "resource", e.Resource)
	b = appendStrings(b, "arguments", e.Arguments)
	b = appendString(b, "level", e.Level)
	b = appendString(b, "rule", e.Rule)
	b = appendString(b, "outcome", e.Outcome)
	b = appendString(b, "reason", e.Reason)
	if e.Code != 0 {
		b = append(b, `,"code":`...)
		b = strconv.AppendInt(b, int64(e.Code), 10)
	}
	if e.DownstreamMS != nil {
		b = append(b, `,"downstream_ms":`...)
		b = jsontext.AppendFloat(b, *e.DownstreamMS, 64)
	}
	if len(e.Headers) > 0 {
		b = append(b, `,"headers":[`...)
		for i, h := range e.Headers {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"name":`...)
			b = appendQuoted(b, h.Name)
			b = append(b, `,"encoding":`...)
			b = appendQuoted(b, h.Encoding)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = appendString(b, "server", e.Server)
	b = appendString(b, "digest", e.Digest)
	b = appendString(b, "status", e.Status)
	b = appendString(b, "category", e.Category)
	b = appendString(b, "mode", e.Mode)
	return append(b, '}')
}

// appendString appends the member name: v, unless v is empty
// (omitempty).
func appendString(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendQuoted(b, v)
}

// appendStrings appends the member name: vs, unless vs is empty.
func appendStrings(b []byte, name string, vs []string) []byte {
	if len(vs) == 0 {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':', '[')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendQuoted(b, v)
	}
	return append(b, ']')
}

// appendQuoted appends v as a JSON string: RFC 8785's minimal escapes,
// an invalid UTF-8 byte as U+FFFD, and — as encoding/json writes them —
// U+2028 and U+2029 escaped, so that a reader splitting on Unicode line
// separators still sees one event per line.
func appendQuoted(b []byte, v string) []byte {
	start := len(b)
	b, _ = jsontext.AppendQuote(b, v) // invalid UTF-8 is replaced, and reported, here
	if !strings.ContainsAny(v, "\u2028\u2029") {
		return b
	}
	q := bytes.ReplaceAll(b[start:], []byte("\u2028"), []byte(`\u2028`))
	q = bytes.ReplaceAll(q, []byte("\u2029"), []byte(`\u2029`))
	return append(b[:start], q...)
}

// Close closes the file of a file sink.
func (s *Sink) Close() error {
	if s == nil || s.closer == nil {
		return nil
	}
	return s.closer.Close()
}
