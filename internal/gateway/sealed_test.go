package gateway

import (
	"bytes"
	"encoding/base64"
	"testing"
)

// TestDecodeSealed: a sealed value opens in the one spelling the gateway
// wrote, and in no other: not with CR or LF inside, not with padding, not
// with other bits in the unused low bits of its last character.
func TestDecodeSealed(t *testing.T) {
	raw := []byte{0x01, 0xfe, 0x42, 0x00, 0xff}
	good := base64.RawURLEncoding.EncodeToString(raw) // 7 characters: the last carries 2 unused bits
	if got, err := DecodeSealed(good); err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("DecodeSealed(%q) = %x, %v", good, got, err)
	}
	last := good[len(good)-1]
	other := byte('A')
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") {
		if c != last {
			if b, err := base64.RawURLEncoding.DecodeString(good[:len(good)-1] + string(c)); err == nil && bytes.Equal(b, raw) {
				other = c
				break
			}
		}
	}
	for _, bad := range []string{
		good + "\n", "\n" + good, good[:3] + "\r\n" + good[3:], good + "=", good + " ",
		good[:len(good)-1] + string(other), // the same bytes, other unused bits
		base64.URLEncoding.EncodeToString(raw), base64.StdEncoding.EncodeToString([]byte{0xfb, 0xff}),
	} {
		if got, err := DecodeSealed(bad); err == nil {
			t.Errorf("DecodeSealed(%q) = %x, want it refused", bad, got)
		}
	}
}
