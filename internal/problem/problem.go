// Package problem holds the RFC 9457 problem taxonomy of mcp-bastion.
//
// One table ([lookup]) fixes, for every [Code], the problem type URN, the
// title, the HTTP-style status and the JSON-RPC error code used when the
// problem travels as error.data. A code can therefore never be emitted with
// conflicting semantics: callers choose a code and a detail, never a title or
// a status.
//
// A Problem is what the peer sees. Its Cause, if any, is for the log only and
// is never serialised. Details must not carry absolute host paths, DSNs,
// passwords or stack traces; caller input echoed in a detail goes through
// [Quote], which caps it at [MaxEcho] characters.
package problem

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Code is a machine-readable problem code such as MCP_VALIDATION_ERROR.
type Code string

// The problem codes. Their semantics are fixed by the table in this package.
const (
	Validation       Code = "MCP_VALIDATION_ERROR"
	QueryViolation   Code = "MCP_QUERY_VIOLATION"
	AccessDenied     Code = "MCP_ACCESS_DENIED"
	NotFound         Code = "MCP_NOT_FOUND"
	PayloadTooLarge  Code = "MCP_PAYLOAD_TOO_LARGE"
	ConcurrencyLimit Code = "MCP_CONCURRENCY_LIMIT"
	ExecutionTimeout Code = "MCP_EXECUTION_TIMEOUT"
	Internal         Code = "MCP_INTERNAL_ERROR"
)

// JSON-RPC 2.0 error codes used alongside problems.
const (
	RPCInvalidParams = -32602
	RPCInternalError = -32603
)

// TypePrefix prefixes every problem type URN.
const TypePrefix = "urn:mcp-bastion:problem:"

// MaxEcho is the largest number of characters of caller input a problem
// detail may repeat.
const MaxEcho = 256

type entry struct {
	slug    string
	title   string
	status  int
	rpcCode int
}

// lookup is the one table. Unknown codes fall back to Internal in [entryFor].
var lookup = map[Code]entry{
	Validation:       {"validation-error", "Invalid tool arguments", 422, RPCInvalidParams},
	QueryViolation:   {"query-violation", "Query refused by policy", 403, RPCInvalidParams},
	AccessDenied:     {"access-denied", "Access to the requested resource is denied", 403, RPCInvalidParams},
	NotFound:         {"not-found", "Resource not found", 404, RPCInvalidParams},
	PayloadTooLarge:  {"payload-too-large", "Payload too large", 413, RPCInvalidParams},
	ConcurrencyLimit: {"concurrency-limit", "Too many concurrent tool calls", 429, RPCInternalError},
	ExecutionTimeout: {"execution-timeout", "Tool execution timed out", 504, RPCInternalError},
	Internal:         {"internal-error", "Internal error", 500, RPCInternalError},
}

func entryFor(c Code) entry {
	if e, ok := lookup[c]; ok {
		return e
	}
	return lookup[Internal]
}

// Codes returns every known code, in a stable order.
func Codes() []Code {
	return []Code{Validation, QueryViolation, AccessDenied, NotFound, PayloadTooLarge, ConcurrencyLimit, ExecutionTimeout, Internal}
}

// Problem is an RFC 9457 problem document with the project's extension
// members. Build one with [New]; the zero value is not useful.
type Problem struct {
	Type          string         `json:"type"`
	Title         string         `json:"title"`
	Status        int            `json:"status"`
	Detail        string         `json:"detail"`
	Code          Code           `json:"code"`
	InvalidParams []string       `json:"invalid_params"`
	Metadata      map[string]any `json:"metadata"`

	// Cause is the underlying error, for logs only.
	Cause error `json:"-"`
}

// New returns a problem of the given code. invalidParams names the
// arguments at fault (names only, never values).
func New(code Code, detail string, invalidParams ...string) *Problem {
	e := entryFor(code)
	if _, ok := lookup[code]; !ok {
		code = Internal
	}
	if invalidParams == nil {
		invalidParams = []string{}
	}
	return &Problem{
		Type:          TypePrefix + e.slug,
		Title:         e.title,
		Status:        e.status,
		Detail:        detail,
		Code:          code,
		InvalidParams: invalidParams,
		Metadata:      map[string]any{},
	}
}

// Newf is [New] with a formatted detail. Caller input in args must already
// have passed through [Quote].
func Newf(code Code, invalidParams []string, format string, args ...any) *Problem {
	return New(code, fmt.Sprintf(format, args...), invalidParams...)
}

// WithCause records err for the log and returns p.
func (p *Problem) WithCause(err error) *Problem {
	p.Cause = err
	return p
}

// WithMetadata sets metadata key k to v and returns p. Values must be safe
// to show to the peer.
func (p *Problem) WithMetadata(k string, v any) *Problem {
	if p.Metadata == nil {
		p.Metadata = map[string]any{}
	}
	p.Metadata[k] = v
	return p
}

// Error implements error with the code and the public detail.
func (p *Problem) Error() string { return string(p.Code) + ": " + p.Detail }

// Unwrap returns the cause.
func (p *Problem) Unwrap() error { return p.Cause }

// RPCCode returns the JSON-RPC error code used when p travels as error.data.
func (p *Problem) RPCCode() int { return entryFor(p.Code).rpcCode }

// Cap returns s cut to at most [MaxEcho] characters (an ellipsis marks the
// cut). Use it for details that embed text which may repeat caller input,
// such as a database's error message.
func Cap(s string) string {
	if utf8.RuneCountInString(s) <= MaxEcho {
		return s
	}
	n := 0
	for i := range s {
		if n == MaxEcho {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

// Quote returns s as a Go-quoted string, cut to at most [MaxEcho]
// characters first. Use it for every piece of caller input that a detail
// repeats, so control characters are escaped and the length is bounded.
func Quote(s string) string {
	return strconv.Quote(Cap(s))
}
