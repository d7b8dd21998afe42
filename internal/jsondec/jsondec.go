// Package jsondec lends jsontext decoders that read a value in place.
//
// A relayed call is read several times over on its way through the
// gateway (the case-folding check of its result, the validation of its
// arguments and structured result, the finite-number check), and a
// decoder made afresh allocates its buffers and state stacks every time;
// a borrowed one keeps them.
package jsondec

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// decoders is a sync.Pool, the standard library's own way (fmt, encoding/json)
// to reuse such state across goroutines; it holds nothing between uses.
var decoders = sync.Pool{New: func() any { return new(jsontext.Decoder) }}

// Borrow returns a decoder reading v, in place, with opts and nothing of
// any earlier use. The caller must Return it, and keep nothing it read
// past that (values read alias v; strings from tokens are copies).
func Borrow(v []byte, opts ...jsontext.Options) *jsontext.Decoder {
	d := decoders.Get().(*jsontext.Decoder)
	d.Reset(bytes.NewBuffer(v), opts...)
	return d
}

// Return gives d back. It first lets go of the value d read, so that a
// pooled decoder never keeps a message (up to a whole result) alive.
func Return(d *jsontext.Decoder) {
	d.Reset(bytes.NewReader(nil))
	decoders.Put(d)
}

// Portable reports whether any reader takes v as it is: every number in it
// a finite IEEE 754 double (a reader of doubles takes 1e999 for infinity,
// and it has no canonical form), and no value nested deeper than maxDepth
// levels (a reader's recursion, or a bound on a whole message the value
// sits inside); maxDepth 0 bounds nothing. Names may repeat: that is for
// a strict read of v to judge.
func Portable(v []byte, maxDepth int) bool {
	d := Borrow(v, jsontext.AllowDuplicateNames(true))
	defer Return(d)
	for {
		tok, err := d.ReadToken()
		if err != nil {
			return errors.Is(err, io.EOF)
		}
		switch tok.Kind() {
		case '0':
			if _, err := strconv.ParseFloat(tok.String(), 64); err != nil {
				return false
			}
		case '{', '[':
			if maxDepth > 0 && d.StackDepth() > maxDepth {
				return false
			}
		}
	}
}
