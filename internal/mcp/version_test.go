package mcp

import (
	"slices"
	"testing"
)

func TestNegotiate(t *testing.T) {
	tests := []struct {
		requested string
		want      string
	}{
		// Every legacy version is answered with itself.
		{V20241105, V20241105},
		{V20250326, V20250326},
		{V20250618, V20250618},
		{V20251125, V20251125},
		// The modern version is not negotiated through initialize.
		{V20260728, V20251125},
		// Unknown versions get the latest legacy version.
		{"", V20251125},
		{"2025-11-25 ", V20251125},
		{" 2025-11-25", V20251125},
		{"2025-11-25\x00", V20251125},
		{"2025-6-18", V20251125},
		{"2025-06-18T00:00:00Z", V20251125},
		{"2024-10-07", V20251125},
		{"2099-01-01", V20251125},
		{"2024-11-04", V20251125}, // older than anything supported: still not compared as a string
		{"DRAFT-2026-v1", V20251125},
		{"1.0", V20251125},
	}
	for _, tt := range tests {
		if got := Negotiate(tt.requested); got != tt.want {
			t.Errorf("Negotiate(%q) = %q, want %q", tt.requested, got, tt.want)
		}
	}
}

func TestVersionTables(t *testing.T) {
	if got, want := LegacyVersions(), []string{V20251125, V20250618, V20250326, V20241105}; !slices.Equal(got, want) {
		t.Errorf("LegacyVersions() = %q, want %q", got, want)
	}
	if got, want := ModernVersions(), []string{V20260728}; !slices.Equal(got, want) {
		t.Errorf("ModernVersions() = %q, want %q", got, want)
	}
	if got, want := AllVersions(), []string{V20260728, V20251125, V20250618, V20250326, V20241105}; !slices.Equal(got, want) {
		t.Errorf("AllVersions() = %q, want %q", got, want)
	}
	if LatestLegacy != V20251125 {
		t.Errorf("LatestLegacy = %q", LatestLegacy)
	}
	// The tables are copies: a caller cannot change what is supported.
	LegacyVersions()[0] = "x"
	ModernVersions()[0] = "x"
	AllVersions()[0] = "x"
	if !IsLegacy(V20251125) || !IsModern(V20260728) || Negotiate("x") != V20251125 {
		t.Error("changing a returned slice changed the version table")
	}
}

func TestIsLegacyIsModern(t *testing.T) {
	tests := []struct {
		v              string
		legacy, modern bool
	}{
		{V20241105, true, false},
		{V20250326, true, false},
		{V20250618, true, false},
		{V20251125, true, false},
		{V20260728, false, true},
		{"", false, false},
		{"2026-07-28 ", false, false},
		{"2025-11-25 ", false, false},
		{"2099-01-01", false, false},
	}
	for _, tt := range tests {
		if got := IsLegacy(tt.v); got != tt.legacy {
			t.Errorf("IsLegacy(%q) = %v, want %v", tt.v, got, tt.legacy)
		}
		if got := IsModern(tt.v); got != tt.modern {
			t.Errorf("IsModern(%q) = %v, want %v", tt.v, got, tt.modern)
		}
	}
}

func TestFeaturesOf(t *testing.T) {
	tests := []struct {
		v    string
		want Features
	}{
		{V20241105, Features{}},
		{V20250326, Features{Annotations: true, Batches: true, Audio: true}},
		{V20250618, Features{Annotations: true, Structured: true, Audio: true, ResourceLinks: true}},
		{V20251125, Features{Annotations: true, Structured: true, Audio: true, ResourceLinks: true, Icons: true}},
		{V20260728, Features{Annotations: true, Structured: true, Modern: true, Audio: true, ResourceLinks: true, Icons: true}},
		// Unknown versions have the features of the latest legacy version.
		{"", Features{Annotations: true, Structured: true, Audio: true, ResourceLinks: true, Icons: true}},
		{"2099-01-01", Features{Annotations: true, Structured: true, Audio: true, ResourceLinks: true, Icons: true}},
		{"2025-03-26 ", Features{Annotations: true, Structured: true, Audio: true, ResourceLinks: true, Icons: true}},
	}
	for _, tt := range tests {
		if got := FeaturesOf(tt.v); got != tt.want {
			t.Errorf("FeaturesOf(%q) = %+v, want %+v", tt.v, got, tt.want)
		}
	}
}

func TestProtocolConstants(t *testing.T) {
	if CodeUnsupportedProtocolVersion != -32022 {
		t.Errorf("CodeUnsupportedProtocolVersion = %d", CodeUnsupportedProtocolVersion)
	}
	if MetaProtocolVersion != "io.modelcontextprotocol/protocolVersion" || MetaServerInfo != "io.modelcontextprotocol/serverInfo" {
		t.Errorf("meta keys = %q, %q", MetaProtocolVersion, MetaServerInfo)
	}
}
