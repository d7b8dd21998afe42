package jsonrpc

import (
	"math"
	"strings"
	"testing"
)

func TestID(t *testing.T) {
	long := strings.Repeat("x", 100)
	tests := []struct {
		name     string
		id       ID
		valid    bool
		isString bool
		json     string
		str      string
	}{
		{"zero", ID{}, false, false, ``, `none`},
		{"int", Int64ID(42), true, false, `42`, `42`},
		{"int zero", Int64ID(0), true, false, `0`, `0`},
		{"int negative", Int64ID(-1), true, false, `-1`, `-1`},
		{"int max", Int64ID(math.MaxInt64), true, false, `9223372036854775807`, `9223372036854775807`},
		{"int min", Int64ID(math.MinInt64), true, false, `-9223372036854775808`, `-9223372036854775808`},
		{"string", StringID("abc"), true, true, `"abc"`, `"abc"`},
		{"empty string", StringID(""), true, true, `""`, `""`},
		{"string with controls", StringID("a\nb\x00"), true, true, `"a\nb\u0000"`, `"a\nb\x00"`},
		{"numeric string is a string", StringID("1"), true, true, `"1"`, `"1"`},
		{"exactly 64 bytes", StringID(long[:64]), true, true, `"` + long[:64] + `"`, `"` + long[:64] + `"`},
		{"65 bytes cut", StringID(long[:65]), true, true, `"` + long[:65] + `"`, `"` + long[:64] + `…"`},
		{"long cut", StringID(long), true, true, `"` + long + `"`, `"` + long[:64] + `…"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.id.IsValid(); got != tt.valid {
				t.Errorf("IsValid = %v", got)
			}
			if got := tt.id.IsString(); got != tt.isString {
				t.Errorf("IsString = %v", got)
			}
			if got := string(tt.id.AppendJSON([]byte("x"))); got != "x"+tt.json {
				t.Errorf("AppendJSON = %s, want x%s", got, tt.json)
			}
			if got := tt.id.String(); got != tt.str {
				t.Errorf("String = %s, want %s", got, tt.str)
			}
		})
	}
}

func TestIDAccessors(t *testing.T) {
	if n, ok := Int64ID(5).Int(); !ok || n != 5 {
		t.Errorf("Int64ID(5).Int() = %d, %v", n, ok)
	}
	if _, ok := StringID("5").Int(); ok {
		t.Error("StringID(\"5\").Int() reports an integer")
	}
	if s, ok := StringID("5").Str(); !ok || s != "5" {
		t.Errorf("StringID(\"5\").Str() = %q, %v", s, ok)
	}
	if _, ok := Int64ID(5).Str(); ok {
		t.Error("Int64ID(5).Str() reports a string")
	}
	if _, ok := (ID{}).Int(); ok {
		t.Error("zero ID reports an integer")
	}
	if _, ok := (ID{}).Str(); ok {
		t.Error("zero ID reports a string")
	}
	// Ids are comparable values: a string id never equals an int id.
	if StringID("1") == Int64ID(1) || Int64ID(0) == (ID{}) || StringID("") == (ID{}) {
		t.Error("ids of different kinds compare equal")
	}
}

// TestIDStringLongMultibyte checks that String stays bounded for a long id
// of multi-byte characters.
func TestIDStringLongMultibyte(t *testing.T) {
	s := StringID(strings.Repeat("é", 1000)).String()
	if len(s) > 64+len(`""…`)+3*4 {
		t.Errorf("String of a 2000-byte id is %d bytes", len(s))
	}
}
