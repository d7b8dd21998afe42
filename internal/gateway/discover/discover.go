// Package discover reads a downstream server's complete tools/list: the
// cursor loop of GATEWAY.md decision 5, with a trace of every page.
//
// A list is complete only when a page's nextCursor is absent or null. An
// empty-string cursor continues, and so does an empty page: emptiness is
// the server's choice. A list that cannot be completed — a repeated cursor
// (a cycle), more pages or tools than the limits, the time limit, an error,
// a result that does not match the schema — is a failure, and a failure
// yields no tools at all: a partial list is never a subset to admit.
//
// The package does no I/O of its own: it calls a [Lister].
package discover

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// Lister sends one request to the downstream and returns its result.
type Lister interface {
	List(ctx context.Context, params []byte) (jsontext.Value, error)
}

// ListerFunc adapts a function to Lister.
type ListerFunc func(ctx context.Context, params []byte) (jsontext.Value, error)

// List calls f.
func (f ListerFunc) List(ctx context.Context, params []byte) (jsontext.Value, error) {
	return f(ctx, params)
}

// Limits bound one walk.
type Limits struct {
	Pages   int
	Tools   int
	Timeout time.Duration
}

// Cursor kinds in a trace.
const (
	CursorAbsent = "absent"
	CursorNull   = "null"
	CursorValue  = "value"
)

// Page is one tools/list request of a walk, for the page trace. Cursor
// values are opaque server data: the trace records that one was sent and
// its length, never its value.
type Page struct {
	// Request is the 1-based number of the request in the walk.
	Request int `json:"request"`
	// CursorSent is CursorAbsent for the first request, else CursorValue.
	CursorSent string `json:"cursor_sent"`
	// CursorSentBytes is the length of the cursor sent.
	CursorSentBytes int `json:"cursor_sent_bytes"`
	// Tools is the number of tools on the page.
	Tools int `json:"tools"`
	// NextCursor is CursorAbsent, CursorNull or CursorValue.
	NextCursor string `json:"next_cursor,omitempty"`
	// Outcome is "ok" or why the walk ended here.
	Outcome string `json:"outcome"`
	// DurationMillis is the page's round trip.
	DurationMillis float64 `json:"duration_ms"`
}

// Result is one walk.
type Result struct {
	// Tools are the raw descriptors, in the order the pages gave them;
	// nil when Err is set.
	Tools []jsontext.Value
	// Trace has one entry per request sent.
	Trace []Page
	// Err is why the list could not be completed, or nil.
	Err error
}

// Failure reasons.
var (
	ErrCycle       = errors.New("discover: the server repeated a cursor it had handed out (a cycle)")
	ErrTooManyPage = errors.New("discover: the list has more pages than the limit")
	ErrTooMany     = errors.New("discover: the list has more tools than the limit")
	ErrMalformed   = errors.New("discover: the result does not match the tools/list schema")
)

// Walk reads the whole tools/list.
func Walk(ctx context.Context, l Lister, lim Limits) Result {
	return WalkList(ctx, l, "tools", lim)
}

// WalkList reads the whole of a paginated list whose pages hold their
// items in member ("tools" for tools/list, "prompts" for prompts/list),
// under the same rules and limits (Limits.Tools bounds the items).
func WalkList(ctx context.Context, l Lister, member string, lim Limits) Result {
	ctx, cancel := context.WithTimeoutCause(ctx, lim.Timeout, fmt.Errorf("discover: the list took longer than %s", lim.Timeout))
	defer cancel()
	var (
		res    Result
		cursor *string
		seen   = map[string]bool{}
	)
	for n := 1; ; n++ {
		if n > lim.Pages {
			res.Err = ErrTooManyPage
			return fail(res)
		}
		page := Page{Request: n, CursorSent: CursorAbsent}
		params := []byte("{}")
		if cursor != nil {
			page.CursorSent, page.CursorSentBytes = CursorValue, len(*cursor)
			params, _ = jsontext.AppendQuote([]byte(`{"cursor":`), *cursor)
			params = append(params, '}')
		}
		start := time.Now()
		raw, err := l.List(ctx, params)
		page.DurationMillis = float64(time.Since(start).Microseconds()) / 1000
		if err != nil {
			if ctx.Err() != nil {
				err = context.Cause(ctx)
			}
			page.Outcome = err.Error()
			res.Trace = append(res.Trace, page)
			res.Err = err
			return fail(res)
		}
		tools, next, err := parsePage(raw, member)
		if err != nil {
			page.Outcome = err.Error()
			res.Trace = append(res.Trace, page)
			res.Err = err
			return fail(res)
		}
		page.Tools = len(tools)
		res.Tools = append(res.Tools, tools...)
		switch {
		case next == nil:
			page.NextCursor = CursorAbsent
		case next.null:
			page.NextCursor = CursorNull
		default:
			page.NextCursor = CursorValue
		}
		if len(res.Tools) > lim.Tools {
			page.Outcome = ErrTooMany.Error()
			res.Trace = append(res.Trace, page)
			res.Err = ErrTooMany
			return fail(res)
		}
		if next == nil || next.null {
			page.Outcome = "ok"
			res.Trace = append(res.Trace, page)
			return res
		}
		if seen[next.value] {
			page.Outcome = ErrCycle.Error()
			res.Trace = append(res.Trace, page)
			res.Err = ErrCycle
			return fail(res)
		}
		seen[next.value] = true
		page.Outcome = "ok"
		res.Trace = append(res.Trace, page)
		c := next.value
		cursor = &c
	}
}

func fail(r Result) Result {
	r.Tools = nil
	return r
}

type nextCursor struct {
	null  bool
	value string
}

// parsePage reads a list result: member (tools, prompts) must be an
// array (each element kept raw, judged later one by one), nextCursor
// absent, null or a string. Other members are ignored.
func parsePage(raw jsontext.Value, member string) ([]jsontext.Value, *nextCursor, error) {
	// Repeated names are allowed while reading, so that a descriptor
	// with a repeated member reaches admission, which rejects it alone
	// (decision 1); the page's own members are kept unique here, and
	// everything but the descriptors is read strictly.
	d := jsontext.NewDecoder(bytes.NewReader(raw), jsontext.AllowDuplicateNames(true))
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, nil, ErrMalformed
	}
	var (
		tools    []jsontext.Value
		hasTools bool
		next     *nextCursor
		names    = map[string]bool{}
	)
	for d.PeekKind() != '}' {
		tok, err := d.ReadToken()
		if err != nil {
			return nil, nil, ErrMalformed
		}
		name := tok.String()
		if names[name] {
			return nil, nil, fmt.Errorf("%w: the member %q is repeated", ErrMalformed, truncateName(name))
		}
		names[name] = true
		switch name {
		case member:
			hasTools = true
			if d.PeekKind() != '[' {
				return nil, nil, fmt.Errorf("%w: %s is not an array", ErrMalformed, member)
			}
			d.ReadToken()
			for d.PeekKind() != ']' {
				v, err := d.ReadValue()
				if err != nil {
					return nil, nil, ErrMalformed
				}
				tools = append(tools, v.Clone())
			}
			d.ReadToken()
		case "nextCursor":
			v, err := d.ReadValue()
			if err != nil {
				return nil, nil, ErrMalformed
			}
			switch v.Kind() {
			case 'n':
				next = &nextCursor{null: true}
			case '"':
				var s string
				if err := jsonUnquote(v, &s); err != nil {
					return nil, nil, ErrMalformed
				}
				next = &nextCursor{value: s}
			default:
				return nil, nil, fmt.Errorf("%w: nextCursor is neither a string nor null", ErrMalformed)
			}
		default:
			v, err := d.ReadValue()
			if err != nil || !v.IsValid() {
				return nil, nil, ErrMalformed
			}
		}
	}
	if !hasTools {
		return nil, nil, fmt.Errorf("%w: no %s member", ErrMalformed, member)
	}
	return tools, next, nil
}

func truncateName(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// jsonUnquote decodes a JSON string value.
func jsonUnquote(v jsontext.Value, s *string) error {
	d := jsontext.NewDecoder(bytes.NewReader(v))
	tok, err := d.ReadToken()
	if err != nil || tok.Kind() != '"' {
		return ErrMalformed
	}
	*s = tok.String()
	return nil
}
