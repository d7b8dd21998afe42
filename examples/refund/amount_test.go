package main

import "testing"

func TestExactAmount(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"10", 10, true},
		{"0.1", 0.1, true},
		{"1.50", 1.5, true},
		{"100.25", 100.25, true},
		{"1e2", 100, true},
		{"0.001", 0.001, true},
		{"1E-3", 0.001, true},
		{"1e308", 1e308, true},
		{"123456789012345", 123456789012345, true},
		{"9007199254740992", 9007199254740992, true}, // 2^53 is a float64
		{"9007199254740993", 0, false},               // 2^53 + 1 is not
		{"1.0000000000000000001", 0, false},
		{"100.000000000000001", 0, false},
		{"1e-400", 0, false},
		{"1e-999999999", 0, false},
		{"1e99999999999", 0, false},
		{"1e400", 0, false},
		{"0", 0, false},
		{"0.0", 0, false},
		{"-1", 0, false},
		{"", 0, false},
	} {
		got, ok := exactAmount(tt.in)
		if ok != tt.ok || (ok && got != tt.want) {
			t.Errorf("exactAmount(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}
