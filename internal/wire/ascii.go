package wire

import (
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// AppendASCII appends src to dst with every non-ASCII character written as
// a JSON \uXXXX escape (a surrogate pair above U+FFFF), and U+007F as \u007f.
//
// src must be JSON text whose strings are valid UTF-8, as produced by a JSON
// encoder. In such text non-ASCII bytes occur only inside strings, so
// escaping them anywhere is correct and needs no tokenising. ASCII-only
// output cannot be mangled by a peer or terminal that guesses encodings and
// makes invisible or bidi characters visible as escapes. Invalid UTF-8 is
// written as \ufffd.
func AppendASCII(dst, src []byte) []byte {
	start := 0
	for i := 0; i < len(src); {
		c := src[i]
		if c < utf8.RuneSelf && c != 0x7f {
			i++
			continue
		}
		dst = append(dst, src[start:i]...)
		if c == 0x7f {
			dst = appendEscape(dst, 0x7f)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(src[i:])
		if r >= 0x10000 {
			r1, r2 := surrogates(r)
			dst = appendEscape(dst, r1)
			dst = appendEscape(dst, r2)
		} else {
			dst = appendEscape(dst, r)
		}
		i += size
		start = i
	}
	return append(dst, src[start:]...)
}

func surrogates(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}

func appendEscape(dst []byte, r rune) []byte {
	return append(dst, '\\', 'u',
		hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
}

// IsASCIILine reports whether b is printable-ASCII JSON text without a
// raw line break: what every output line must be.
func IsASCIILine(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf || c == '\n' || c == '\r' || c == 0x7f {
			return false
		}
	}
	return true
}
