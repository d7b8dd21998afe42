package config

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Admission configures the admission gate (GATEWAY.md decisions 5–9).
type Admission struct {
	// FirstUse is what becomes of a descriptor never seen before:
	// "review" (default: it waits for a reviewer) or "pin" (trusted on
	// first use unless the scanner found something in it).
	FirstUse string `yaml:"first_use"`
	// Ledger is where pins are kept.
	Ledger Ledger `yaml:"ledger"`
	// HeaderMirroring is where x-mcp-header is legal: "strict" (default;
	// direct members of inputSchema.properties) or "spec" (the
	// 2026-07-28 properties-chain rule).
	HeaderMirroring string `yaml:"header_mirroring"`
	// SensitiveNames are names a mirrored property or header may neither
	// equal nor end with (compared without case, "-" and "_").
	SensitiveNames []string `yaml:"sensitive_names"`
}

// Ledger is the ledger's location: a bbolt file (the default), or a
// PostgreSQL database that several replicas share.
type Ledger struct {
	// File is a bbolt file; relative to StateDir. Default ledger.db.
	File string `yaml:"file"`
	// PostgresDSNEnv names the environment variable holding the
	// PostgreSQL connection string (never written in the file: it may
	// hold a password).
	PostgresDSNEnv string `yaml:"postgres_dsn_env"`
}

// Shared reports whether the ledger is PostgreSQL, shared by replicas.
func (l Ledger) Shared() bool { return l.PostgresDSNEnv != "" }

// LedgerPath is the ledger file's path.
func (c *Config) LedgerPath() string { return c.statePath(c.Admission.Ledger.File) }

// EvidenceDir is where a running gateway keeps the evidence bundle.
func (c *Config) EvidenceDir() string { return c.statePath("evidence") }

// ReviewSocket is the Unix socket a running gateway serves review on.
func (c *Config) ReviewSocket() string { return c.statePath("review.sock") }

func (c *Config) statePath(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(c.StateDir, p)
}

// DefaultStateDir is the state directory when none is configured.
const DefaultStateDir = "state"

func (c *Config) admissionDefaults() {
	if c.StateDir == "" {
		c.StateDir = DefaultStateDir
	}
	a := &c.Admission
	if a.FirstUse == "" {
		a.FirstUse = "review"
	}
	if a.HeaderMirroring == "" {
		a.HeaderMirroring = "strict"
	}
	if a.Ledger.File == "" && a.Ledger.PostgresDSNEnv == "" {
		a.Ledger.File = "ledger.db"
	}
	if a.SensitiveNames == nil {
		a.SensitiveNames = []string{"password", "secret", "token", "api_key", "authorization"}
	}
}

// publisherName is a reverse-DNS namespace, as io.github.acme/refund.
var publisherName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.-]{0,126}(/[A-Za-z0-9][A-Za-z0-9._-]{0,126})?$`)

func (v *validator) admission(c *Config) {
	a := &c.Admission
	if a.FirstUse != "review" && a.FirstUse != "pin" {
		v.fail("admission.first_use", `must be "review" or "pin"`)
	}
	if a.HeaderMirroring != "strict" && a.HeaderMirroring != "spec" {
		v.fail("admission.header_mirroring", `must be "strict" or "spec"`)
	}
	for i, n := range a.SensitiveNames {
		if strings.NewReplacer("-", "", "_", "").Replace(n) == "" {
			v.fail("admission.sensitive_names", "entry %d is empty", i)
		}
	}
	if strings.ContainsRune(c.StateDir, 0) {
		v.fail("state_dir", "is not a path")
	}
	switch l := a.Ledger; {
	case l.File != "" && l.PostgresDSNEnv != "":
		v.fail("admission.ledger", "file and postgres_dsn_env exclude each other")
	case l.PostgresDSNEnv != "" && !envName.MatchString(l.PostgresDSNEnv):
		v.fail("admission.ledger.postgres_dsn_env", "must be an environment variable name")
	case l.PostgresDSNEnv != "" && !v.offline:
		if dsn, ok := v.getenv(l.PostgresDSNEnv); !ok || dsn == "" {
			v.fail("admission.ledger.postgres_dsn_env", "%s is not set in the environment", l.PostgresDSNEnv)
		}
	case strings.ContainsRune(l.File, 0) || strings.HasSuffix(l.File, "/"):
		v.fail("admission.ledger.file", "must be a file path")
	}
	for i, s := range c.Servers {
		if s.Publisher != "" && !publisherName.MatchString(s.Publisher) {
			v.fail(fmt.Sprintf("servers[%d].publisher", i), "must be a namespace such as io.github.acme/refund")
		}
	}
}

// RefreshEvery is the refresh interval, 0 for none.
func (d Discovery) RefreshEvery() time.Duration {
	if d.Refresh == nil {
		return 0
	}
	return d.Refresh.D()
}
