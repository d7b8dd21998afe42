package jsonrpc

import (
	"strconv"
	"unicode/utf8"
)

// AppendResult appends a success response carrying result, which must be a
// JSON object. The id member is omitted when id is zero.
func AppendResult(dst []byte, id ID, result []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0",`...)
	if id.IsValid() {
		dst = append(dst, `"id":`...)
		dst = id.AppendJSON(dst)
		dst = append(dst, ',')
	}
	dst = append(dst, `"result":`...)
	dst = append(dst, result...)
	return append(dst, '}')
}

// AppendError appends an error response. The id member is omitted when
// e.ID is zero.
func AppendError(dst []byte, e *Error) []byte {
	return appendError(dst, e, false)
}

// AppendErrorEchoingID is AppendError, except that an invalid id the peer
// sent (e.RawID) is echoed as it was written. Seed 002's gateway does so
// for "awkward ids"; it is not a valid MCP response.
func AppendErrorEchoingID(dst []byte, e *Error) []byte {
	return appendError(dst, e, true)
}

func appendError(dst []byte, e *Error, echoRaw bool) []byte {
	dst = append(dst, `{"jsonrpc":"2.0",`...)
	switch {
	case e.ID.IsValid():
		dst = append(dst, `"id":`...)
		dst = e.ID.AppendJSON(dst)
		dst = append(dst, ',')
	case echoRaw && e.RawID != nil:
		dst = append(dst, `"id":`...)
		dst = append(dst, e.RawID...)
		dst = append(dst, ',')
	}
	dst = append(dst, `"error":{"code":`...)
	dst = strconv.AppendInt(dst, int64(e.Code), 10)
	dst = append(dst, `,"message":`...)
	dst = appendString(dst, e.Message)
	if e.Data != nil {
		dst = append(dst, `,"data":`...)
		dst = append(dst, e.Data...)
	}
	return append(dst, "}}"...)
}

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD;
// control characters, quote and backslash are escaped. Non-ASCII is left
// to the transport's ASCII pass.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\ufffd`...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, `\n`...)
		case '\r':
			dst = append(dst, `\r`...)
		case '\t':
			dst = append(dst, `\t`...)
		default:
			dst = append(dst, `\u00`...)
			dst = append(dst, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
