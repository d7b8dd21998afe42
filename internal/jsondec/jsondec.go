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
