package gateway

import (
	"encoding/base64"
	"errors"
)

// errNotSealed: a value the gateway would never have written.
var errNotSealed = errors.New("not unpadded base64url")

// DecodeSealed decodes a value the gateway sealed and handed out — a
// session id, a list cursor, a requestState — as unpadded base64url with
// one spelling only. encoding/base64 skips CR and LF anywhere in its input
// and, unless strict, ignores the unused bits of the last character, so
// one sealed value would have many spellings that all open; a caller
// could then present an "altered" id that still works, and anything keyed
// by the text would see several values.
func DecodeSealed(s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return nil, errNotSealed
		}
	}
	return base64.RawURLEncoding.Strict().DecodeString(s)
}
