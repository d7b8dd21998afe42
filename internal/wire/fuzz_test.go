package wire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"testing/iotest"
)

// FuzzReader checks the framing against the naive reference: frames never
// hold a LF or exceed the cap, and the sequence of frames and refusals is
// exactly the non-blank lines of a plain split, whatever the read sizes.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"", "{}\n", "a\r\nb\n", "\n\n \t\r\n", "abcd\nabcde\nok", "x\ry\r", "\r\n\r", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n",
	} {
		f.Add([]byte(s), uint16(4))
	}
	f.Fuzz(func(t *testing.T, in []byte, capSeed uint16) {
		limit := int(capSeed)%70 + 1
		want := naiveFrames(in, limit)
		for _, r := range []*Reader{
			NewReader(bytes.NewReader(in), limit),
			NewReader(iotest.OneByteReader(bytes.NewReader(in)), limit),
		} {
			got := readAll(t, r, limit)
			for _, frame := range got {
				if frame == tooLarge {
					continue
				}
				if bytes.IndexByte([]byte(frame), '\n') >= 0 {
					t.Fatalf("frame %q holds a LF", frame)
				}
				if len(frame) > limit {
					t.Fatalf("frame of %d bytes exceeds the cap %d", len(frame), limit)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("cap %d, input %q:\n got %q\nwant %q", limit, in, got, want)
			}
		}
	})
}

// FuzzAppendASCII checks that the output is always ASCII and that JSON text
// decodes, after the pass, to exactly what it decoded to before.
func FuzzAppendASCII(f *testing.F) {
	for _, s := range []string{
		`"é"`, `{"k€y":"😀"}`, "\"\u2028\u2029\x7f\"", "\"\xff\xfe\"", `"\ud83d\ude00"`, `[1,"\u00e9",null]`, "\"\xed\xa0\x80\"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out := AppendASCII(nil, in)
		if !isASCII(out) {
			t.Fatalf("AppendASCII(%q) = %q is not ASCII", in, out)
		}
		if !json.Valid(in) {
			return
		}
		var want, got any
		if err := unmarshalNumbers(in, &want); err != nil {
			t.Fatal(err)
		}
		if err := unmarshalNumbers(out, &got); err != nil {
			t.Fatalf("AppendASCII(%q) = %q is not JSON: %v", in, out, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("AppendASCII changed the value:\n in %q: %#v\nout %q: %#v", in, want, out, got)
		}
	})
}

// unmarshalNumbers decodes b with numbers kept as written.
func unmarshalNumbers(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}
