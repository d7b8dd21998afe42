// Package wire owns the bytes of the stdio transport: newline framing with a
// byte cap on the way in, and ASCII-only, one-message-per-line output on the
// way out.
//
// Input frames are read with [Reader], which never holds more than the frame
// cap of one line in memory: a longer line is discarded while it streams in
// and reported as a [*FrameTooLargeError], after which reading continues with
// the next line. [Conn] joins a Reader with a single writer goroutine so that
// any number of goroutines may send messages without interleaving them.
//
// Package wire knows nothing of JSON-RPC; see package jsonrpc for messages.
package wire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxFrameBytes is the default cap on one input line (1 MiB).
const DefaultMaxFrameBytes = 1 << 20

// chunkSize is the read buffer of a Reader. It bounds how much of an
// oversized line is held at once while it is being discarded.
const chunkSize = 64 << 10

// FrameTooLargeError reports an input line longer than the cap. The line
// has been discarded whole; the next read starts with the following line.
type FrameTooLargeError struct {
	Limit int // the cap, in bytes
}

func (e *FrameTooLargeError) Error() string {
	return fmt.Sprintf("wire: frame exceeds %d bytes", e.Limit)
}

// Reader splits a byte stream into newline-delimited frames. It is not safe
// for concurrent use.
type Reader struct {
	br    *bufio.Reader
	max   int
	frame []byte
}

// NewReader returns a Reader of r whose frames are capped at maxFrame bytes
// (excluding the line terminator).
func NewReader(r io.Reader, maxFrame int) *Reader {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrameBytes
	}
	return &Reader{br: bufio.NewReaderSize(r, chunkSize), max: maxFrame}
}

// Next returns the next non-blank frame with its "\n" or "\r\n" terminator
// removed. The returned slice is only valid until the next call. A final
// line without a terminator is still a frame. At the end of input Next
// returns io.EOF; an oversized line yields *FrameTooLargeError and reading
// may continue.
func (r *Reader) Next() ([]byte, error) {
	for {
		line, err := r.line()
		if err != nil {
			return nil, err
		}
		if !isBlank(line) {
			return line, nil
		}
	}
}

// line reads one line, enforcing the cap as bytes arrive.
func (r *Reader) line() ([]byte, error) {
	r.frame = r.frame[:0]
	oversized := false
	for {
		chunk, err := r.br.ReadSlice('\n')
		if !oversized {
			if len(r.frame)+len(chunk) > r.max+2 { // +2: room for "\r\n"
				oversized = true
				r.frame = r.frame[:0]
			} else {
				r.frame = append(r.frame, chunk...)
			}
		}
		switch {
		case err == nil:
			// A complete line.
			if oversized {
				return nil, &FrameTooLargeError{Limit: r.max}
			}
			line := trimEOL(r.frame)
			if len(line) > r.max {
				return nil, &FrameTooLargeError{Limit: r.max}
			}
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if oversized {
				return nil, &FrameTooLargeError{Limit: r.max}
			}
			if len(r.frame) == 0 {
				return nil, io.EOF
			}
			line := trimEOL(r.frame)
			if len(line) > r.max {
				return nil, &FrameTooLargeError{Limit: r.max}
			}
			return line, nil
		default:
			return nil, err
		}
	}
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte{'\n'})
	return bytes.TrimSuffix(b, []byte{'\r'})
}

// isBlank reports whether a line holds only JSON whitespace.
func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}
