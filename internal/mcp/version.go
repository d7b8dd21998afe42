// Package mcp holds the Model Context Protocol as this server speaks it: the
// table of supported protocol versions and what each one may carry,
// version negotiation, and the encoding of every MCP result the server
// sends, shaped for the version in force.
//
// Two eras share one stream. The legacy era (2024-11-05 to 2025-11-25)
// begins with initialize; the modern era (2026-07-28) is stateless: every
// request names its version in _meta, and server/discover advertises what
// the server supports. Package session decides which era a stream is in;
// this package only knows what each version looks like on the wire.
package mcp

import "slices"

// Protocol versions.
const (
	V20241105 = "2024-11-05"
	V20250326 = "2025-03-26"
	V20250618 = "2025-06-18"
	V20251125 = "2025-11-25"
	V20260728 = "2026-07-28"
)

// LatestLegacy is offered to a legacy client that asks for a version this
// server does not know.
const LatestLegacy = V20251125

// Meta keys of the modern era.
const (
	MetaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	MetaServerInfo      = "io.modelcontextprotocol/serverInfo"
	// MetaClientCapabilities is what the client can answer, declared on
	// each request.
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
)

// CodeUnsupportedProtocolVersion is the 2026-07-28 error for a request whose
// version the server does not serve.
const CodeUnsupportedProtocolVersion = -32022

// legacyVersions are served through initialize, newest first.
var legacyVersions = []string{V20251125, V20250618, V20250326, V20241105}

// modernVersions are served statelessly, newest first.
var modernVersions = []string{V20260728}

// LegacyVersions returns the versions negotiated through initialize, newest
// first.
func LegacyVersions() []string { return slices.Clone(legacyVersions) }

// ModernVersions returns the stateless versions, newest first.
func ModernVersions() []string { return slices.Clone(modernVersions) }

// AllVersions returns every supported version, newest first.
func AllVersions() []string { return append(ModernVersions(), legacyVersions...) }

// IsLegacy reports whether v is a supported handshake-era version.
func IsLegacy(v string) bool { return slices.Contains(legacyVersions, v) }

// IsModern reports whether v is a supported stateless version.
func IsModern(v string) bool { return slices.Contains(modernVersions, v) }

// Negotiate answers an initialize request for version requested: the same
// version when it is supported, else [LatestLegacy]. Versions are matched
// against the table, never compared as strings.
func Negotiate(requested string) string {
	if IsLegacy(requested) {
		return requested
	}
	return LatestLegacy
}

// Features says what a protocol version may carry on the wire.
type Features struct {
	// Annotations: tool annotations (2025-03-26+).
	Annotations bool
	// Structured: tool title, outputSchema and structuredContent, and
	// Implementation.title (2025-06-18+).
	Structured bool
	// Batches: JSON-RPC batches must be accepted (2025-03-26 only).
	Batches bool
	// Modern: stateless era: resultType on every result, ttlMs and
	// cacheScope on list results, serverInfo in result _meta.
	Modern bool
	// Audio: audio content blocks (2025-03-26+).
	Audio bool
	// ResourceLinks: resource_link content blocks (2025-06-18+).
	ResourceLinks bool
	// Icons: icons on tools and implementations (2025-11-25+).
	Icons bool
}

// FeaturesOf returns the features of version v.
func FeaturesOf(v string) Features {
	switch v {
	case V20241105:
		return Features{}
	case V20250326:
		return Features{Annotations: true, Batches: true, Audio: true}
	case V20250618:
		return Features{Annotations: true, Structured: true, Audio: true, ResourceLinks: true}
	case V20251125:
		return Features{Annotations: true, Structured: true, Audio: true, ResourceLinks: true, Icons: true}
	case V20260728:
		return Features{Annotations: true, Structured: true, Modern: true, Audio: true, ResourceLinks: true, Icons: true}
	}
	return FeaturesOf(LatestLegacy)
}
