// Package jsonrpc holds JSON-RPC 2.0 messages as MCP uses them: typed
// request ids, the strict envelope decoder and the response encoders.
//
// [DecodeFrame] is the one place where an input frame becomes messages. It
// reads the frame once with a strict JSON decoder (duplicate member names at
// any depth, invalid UTF-8, lone surrogate escapes, non-JSON literals,
// trailing data and excessive nesting are parse errors) and checks the
// envelope as it goes: "jsonrpc" exactly "2.0"; an id that is a string or an
// integer; "method" a string; "params" an object; no other members; member
// names matched exactly. What a frame's bytes do not say is never guessed.
//
// The package knows nothing of MCP methods; see package session.
package jsonrpc

import (
	"strconv"
)

// Version is the only JSON-RPC version accepted and sent.
const Version = "2.0"

// Standard JSON-RPC 2.0 error codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

type idKind uint8

const (
	idNone idKind = iota
	idInt
	idString
)

// ID is a request id: an integer or a string. The zero ID is "no id", which
// response encoders omit (MCP schemas admit no null id).
type ID struct {
	kind idKind
	num  int64
	str  string
}

// Int64ID returns an integer id.
func Int64ID(n int64) ID { return ID{kind: idInt, num: n} }

// StringID returns a string id.
func StringID(s string) ID { return ID{kind: idString, str: s} }

// IsValid reports whether id is an integer or a string id.
func (id ID) IsValid() bool { return id.kind != idNone }

// IsString reports whether id is a string id.
func (id ID) IsString() bool { return id.kind == idString }

// Int returns the integer value of an integer id.
func (id ID) Int() (int64, bool) { return id.num, id.kind == idInt }

// Str returns the value of a string id.
func (id ID) Str() (string, bool) { return id.str, id.kind == idString }

// AppendJSON appends id as JSON: a number for integer ids, a string for
// string ids, nothing for the zero ID.
func (id ID) AppendJSON(dst []byte) []byte {
	switch id.kind {
	case idInt:
		return strconv.AppendInt(dst, id.num, 10)
	case idString:
		return appendString(dst, id.str)
	}
	return dst
}

// String formats id for logs: integers bare, strings quoted and cut to 64
// bytes (ids are peer-supplied).
func (id ID) String() string {
	switch id.kind {
	case idInt:
		return strconv.FormatInt(id.num, 10)
	case idString:
		s := id.str
		if len(s) > 64 {
			s = s[:64] + "…"
		}
		return strconv.Quote(s)
	}
	return "none"
}

// Kind says what a decoded message is.
type Kind uint8

// Message kinds.
const (
	KindRequest      Kind = iota + 1 // has a method and an id
	KindNotification                 // has a method and no id
	KindResponse                     // has result or error and no method
)

// Message is one decoded, envelope-valid message.
type Message struct {
	Kind   Kind
	ID     ID
	Method string
	// Params is the raw params object, or nil when absent. It does not
	// alias the frame.
	Params []byte
	// Result and Error are the raw result value and error object of a
	// response (one of them is set); nil for requests and notifications.
	// They do not alias the frame. A server ignores responses; a client
	// (the gateway's upstream connectors) reads them.
	Result []byte
	Error  []byte
}

// Error is a JSON-RPC error response to send. ID is zero when the request id
// could not be read.
type Error struct {
	ID      ID
	Code    int
	Message string
	// Data is the JSON of error.data, or nil.
	Data []byte
	// NoReply marks the error of an invalid message that was a
	// notification (a method without an id member) or a response (a
	// result or error without a method): such messages are never
	// answered, so the error is for the log only.
	NoReply bool
	// RawID is the id member as the peer wrote it when it was present but
	// not a valid id (null, a fraction, a boolean, a structure). MCP
	// admits no such id in a response, so AppendError leaves it out; a
	// transport that echoes it byte for byte uses AppendErrorEchoingID.
	RawID []byte
}

func (e *Error) Error() string {
	return "jsonrpc: " + strconv.Itoa(e.Code) + ": " + e.Message
}

// NewError returns an error response for id.
func NewError(id ID, code int, msg string) *Error {
	return &Error{ID: id, Code: code, Message: msg}
}
