// Package config reads the MCP_* environment of `bastion serve` (and of the
// servers built on the same core): one table of variables drives parsing,
// defaults, range checks and the --help text, so what is documented is what
// is enforced.
//
// Configuration is strict where it can be without breaking the ecosystem:
// a malformed or out-of-range value or an empty value of a known variable
// stops start-up with an error naming the variable, and so does an MCP_*
// variable that looks like a misspelling of a known one. Nothing is
// silently replaced by a default. The MCP_ prefix is shared, though: MCP
// clients set variables of their own (MCP_TIMEOUT, MCP_TOOL_TIMEOUT, …)
// and their children inherit them, so any other MCP_* variable is only
// reported, in Config.Unrelated, for one warning.
package config

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Prefix is the prefix of every variable this package owns.
const Prefix = "MCP_"

// Config is the validated configuration.
type Config struct {
	SafeDataDir         string // "" when unset
	SQLDSN              Secret // empty when unset
	MetricsEnabled      bool
	MetricsDiskPath     string
	MaxConcurrency      int64
	QueueTimeout        time.Duration
	CallTimeout         time.Duration
	DrainGrace          time.Duration
	MaxFrameBytes       int
	SQLMaxRows          int64
	SQLStatementTimeout time.Duration
	SQLPoolMaxSize      int32
	SQLMaxResultBytes   int
	SQLAllowFunctions   string // "" when unset; read_only_sql parses it
	FSMaxBytes          int64
	LogLevel            slog.Level
	LogFormat           string // "json" or "text"

	// Unrelated lists, sorted, the MCP_* variables of the environment
	// that are not in the table and resemble none of its names: another
	// program's, ignored here. The caller warns about them once.
	Unrelated []string
}

// Secret is a string that never prints: its String, Format, GoString and
// LogValue are "[redacted]". Use Reveal where the value is really needed.
type Secret struct{ v string }

// Reveal returns the secret value.
func (s Secret) Reveal() string { return s.v }

// IsSet reports whether a value was given.
func (s Secret) IsSet() bool { return s.v != "" }

func (s Secret) String() string { return "[redacted]" }

// GoString implements fmt.GoStringer so %#v does not leak the value.
func (s Secret) GoString() string { return "config.Secret{[redacted]}" }

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// Format implements fmt.Formatter: %#v is GoString and every other verb
// "[redacted]". Without it, verbs a Stringer does not serve (%d, %t, …)
// print the struct's field, also when the Secret sits inside a Config.
// (%p never reaches a Formatter; go vet reports it for a non-pointer.)
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		io.WriteString(f, s.GoString())
		return
	}
	io.WriteString(f, "[redacted]")
}

// Error is a configuration error naming the variable at fault. Its text
// has the one shape of every start-up message: "VARIABLE: what is wrong:
// what is accepted". It never quotes a value that could be a secret.
type Error struct {
	Var      string
	Msg      string // what is wrong
	Accepted string // what would be accepted instead
}

func (e *Error) Error() string { return e.Var + ": " + e.Msg + ": " + e.Accepted }

type kind int

const (
	kindPath kind = iota
	kindSecret
	kindBool
	kindInt
	kindMillis
	kindEnum
	kindList
)

// variable is one row of the table.
type variable struct {
	name     string
	kind     kind
	def      string // "" = unset
	min, max int64
	enum     []string
	help     string
	set      func(c *Config, v string, n int64)
}

var table = []variable{
	{name: "MCP_SAFE_DATA_DIR", kind: kindPath, help: "directory sandbox_fs_read serves; unset disables the tool",
		set: func(c *Config, v string, _ int64) { c.SafeDataDir = v }},
	{name: "MCP_SQL_DSN", kind: kindSecret, help: "PostgreSQL DSN for read_only_sql; unset disables the tool (never logged)",
		set: func(c *Config, v string, _ int64) { c.SQLDSN = Secret{v} }},
	{name: "MCP_METRICS_ENABLED", kind: kindBool, def: "true", help: "false removes system_metrics",
		set: func(c *Config, v string, _ int64) { c.MetricsEnabled = v == "true" }},
	{name: "MCP_METRICS_DISK_PATH", kind: kindPath, def: "/", help: "disk measured by system_metrics; never echoed",
		set: func(c *Config, v string, _ int64) { c.MetricsDiskPath = v }},
	{name: "MCP_MAX_CONCURRENCY", kind: kindInt, def: "16", min: 1, max: 1024, help: "tool-call slots",
		set: func(c *Config, _ string, n int64) { c.MaxConcurrency = n }},
	{name: "MCP_QUEUE_TIMEOUT_MS", kind: kindMillis, def: "5000", min: 1, max: 600_000, help: "bounded FIFO wait for a slot",
		set: func(c *Config, _ string, n int64) { c.QueueTimeout = ms(n) }},
	{name: "MCP_CALL_TIMEOUT_MS", kind: kindMillis, def: "30000", min: 1, max: 3_600_000, help: "execution deadline per tool call",
		set: func(c *Config, _ string, n int64) { c.CallTimeout = ms(n) }},
	{name: "MCP_DRAIN_GRACE_MS", kind: kindMillis, def: "5000", min: 1, max: 600_000, help: "graceful drain on EOF, SIGTERM or SIGINT",
		set: func(c *Config, _ string, n int64) { c.DrainGrace = ms(n) }},
	{name: "MCP_MAX_FRAME_BYTES", kind: kindInt, def: "1048576", min: 1024, max: 64 << 20, help: "largest stdin line",
		set: func(c *Config, _ string, n int64) { c.MaxFrameBytes = int(n) }},
	{name: "MCP_SQL_MAX_ROWS", kind: kindInt, def: "1000", min: 1, max: 100_000, help: "most rows read_only_sql returns (default and ceiling of max_rows)",
		set: func(c *Config, _ string, n int64) { c.SQLMaxRows = n }},
	{name: "MCP_SQL_STATEMENT_TIMEOUT_MS", kind: kindMillis, def: "10000", min: 1, max: 3_600_000, help: "transaction-local statement_timeout",
		set: func(c *Config, _ string, n int64) { c.SQLStatementTimeout = ms(n) }},
	{name: "MCP_SQL_POOL_MAX_SIZE", kind: kindInt, def: "4", min: 1, max: 64, help: "PostgreSQL connection pool size",
		set: func(c *Config, _ string, n int64) { c.SQLPoolMaxSize = int32(n) }},
	{name: "MCP_SQL_MAX_RESULT_BYTES", kind: kindInt, def: "1048576", min: 1024, max: 64 << 20, help: "largest read_only_sql result, its values counted as JSON strings",
		set: func(c *Config, _ string, n int64) { c.SQLMaxResultBytes = int(n) }},
	{name: "MCP_SQL_ALLOW_FUNCTIONS", kind: kindList, help: "VOLATILE functions of the database read_only_sql may call, comma-separated, each schema.function",
		set: func(c *Config, v string, _ int64) { c.SQLAllowFunctions = v }},
	{name: "MCP_FS_MAX_BYTES", kind: kindInt, def: "1048576", min: 1, max: 64 << 20, help: "largest file sandbox_fs_read returns",
		set: func(c *Config, _ string, n int64) { c.FSMaxBytes = n }},
	{name: "MCP_LOG_LEVEL", kind: kindEnum, def: "info", enum: []string{"debug", "info", "warn", "error"}, help: "log level (stderr only)",
		set: func(c *Config, v string, _ int64) { c.LogLevel = levels[v] }},
	{name: "MCP_LOG_FORMAT", kind: kindEnum, def: "json", enum: []string{"json", "text"}, help: "log format (stderr only)",
		set: func(c *Config, v string, _ int64) { c.LogFormat = v }},
}

var levels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// Names returns the names of all variables, in table order.
func Names() []string {
	names := make([]string, len(table))
	for i, v := range table {
		names[i] = v.name
	}
	return names
}

// Load reads the configuration from environ (KEY=value entries, as from
// os.Environ). It returns every problem found, joined, each an *Error.
func Load(environ []string) (*Config, error) {
	env := map[string]string{}
	var errs []error
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		if !hasPrefix(k) {
			continue
		}
		env[k] = v
	}
	var unknown []string
	for k := range env {
		if _, ok := lookup(k); !ok {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	var unrelated []string
	for _, k := range unknown {
		if near := resembles(k); near != "" {
			errs = append(errs, &Error{Var: k, Msg: "unknown variable, close to " + near,
				Accepted: "the names bastion serve --help lists (did you mean " + near + "?)"})
			continue
		}
		unrelated = append(unrelated, k)
	}
	// Outside the prefix only a spelling that differs from a known name
	// in separators ("MCPSQLDSN", "MCP.SQL.DSN") is ours.
	var other []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if !hasPrefix(k) && sameLetters(k) != "" {
			other = append(other, k)
		}
	}
	sort.Strings(other)
	for _, k := range other {
		near := sameLetters(k)
		errs = append(errs, &Error{Var: k, Msg: "not a variable, but spelled like " + near,
			Accepted: "the exact names bastion serve --help lists (did you mean " + near + "?)"})
	}

	c := &Config{}
	for _, v := range table {
		raw, present := env[v.name]
		if !present {
			if v.def == "" {
				continue
			}
			raw = v.def
		}
		n, err := v.parse(raw)
		if err != nil {
			err.Var = v.name
			errs = append(errs, err)
			continue
		}
		v.set(c, raw, n)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	c.Unrelated = unrelated
	return c, nil
}

// hasPrefix reports whether name starts with MCP_ in any case: mcp_sql_dns
// is judged like MCP_SQL_DNS, a misspelling of ours.
func hasPrefix(name string) bool {
	return len(name) >= len(Prefix) && strings.EqualFold(name[:len(Prefix)], Prefix)
}

// lookup returns the table's row for name.
func lookup(name string) (variable, bool) {
	for _, v := range table {
		if v.name == name {
			return v, true
		}
	}
	return variable{}, false
}

// parse checks raw against the row's kind and range. The error's Var is
// left for the caller to fill.
func (v variable) parse(raw string) (int64, *Error) {
	bad := func(msg string) (int64, *Error) { return 0, &Error{Msg: msg, Accepted: v.accepted()} }
	if raw == "" {
		return bad("is empty")
	}
	if raw != strings.TrimSpace(raw) {
		return bad("has leading or trailing space")
	}
	switch v.kind {
	case kindPath:
		if strings.ContainsRune(raw, 0) {
			return bad("contains a NUL byte")
		}
		if !filepath.IsAbs(raw) {
			return bad("is a relative path")
		}
	case kindBool:
		if raw != "true" && raw != "false" {
			return bad("is not a boolean")
		}
	case kindInt, kindMillis:
		n, err := strconv.ParseInt(raw, 10, 64)
		// Only the canonical spelling: "+16" and "016" are typos or
		// tricks, not sixteen.
		if err != nil || strconv.FormatInt(n, 10) != raw {
			return bad("is not an integer")
		}
		if n < v.min || n > v.max {
			return bad(fmt.Sprintf("%d is out of range", n))
		}
		return n, nil
	case kindEnum:
		if !slices.Contains(v.enum, raw) {
			return bad("is not one of the choices")
		}
	}
	return 0, nil
}

// accepted says what the row accepts, for the last part of its errors.
func (v variable) accepted() string {
	switch v.kind {
	case kindPath:
		return "an absolute path, or unset the variable"
	case kindSecret:
		return "a PostgreSQL DSN, or unset the variable"
	case kindBool:
		return `"true" or "false"`
	case kindInt:
		return fmt.Sprintf("an integer in [%d, %d]", v.min, v.max)
	case kindMillis:
		return fmt.Sprintf("an integer number of milliseconds in [%d, %d]", v.min, v.max)
	case kindEnum:
		return "one of " + strings.Join(v.enum, ", ")
	case kindList:
		return "schema.function names separated by commas, or unset the variable"
	}
	return "see bastion serve --help"
}

// WriteHelp writes the table of variables with defaults and ranges.
func WriteHelp(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tRANGE\tMEANING")
	for _, v := range table {
		def := v.def
		if def == "" {
			def = "(unset)"
		}
		var rng string
		switch v.kind {
		case kindPath:
			rng = "absolute path"
		case kindSecret:
			rng = "DSN"
		case kindBool:
			rng = "true|false"
		case kindInt:
			rng = fmt.Sprintf("%d..%d", v.min, v.max)
		case kindMillis:
			rng = fmt.Sprintf("%d..%d ms", v.min, v.max)
		case kindEnum:
			rng = strings.Join(v.enum, "|")
		case kindList:
			rng = "schema.fn,…"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", v.name, def, rng, v.help)
	}
	return tw.Flush()
}

// LogAttrs returns the effective non-secret settings, for one log line at
// start-up. Paths are reported as set or unset, never by value.
func (c *Config) LogAttrs() []slog.Attr {
	return []slog.Attr{
		slog.Bool("sandbox_fs_read", c.SafeDataDir != ""),
		slog.Bool("read_only_sql", c.SQLDSN.IsSet()),
		slog.Bool("system_metrics", c.MetricsEnabled),
		slog.Int64("max_concurrency", c.MaxConcurrency),
		slog.Duration("queue_timeout", c.QueueTimeout),
		slog.Duration("call_timeout", c.CallTimeout),
		slog.Duration("drain_grace", c.DrainGrace),
		slog.Int("max_frame_bytes", c.MaxFrameBytes),
		slog.Int64("sql_max_rows", c.SQLMaxRows),
		slog.Duration("sql_statement_timeout", c.SQLStatementTimeout),
		slog.Int("sql_pool_max_size", int(c.SQLPoolMaxSize)),
		slog.Int("sql_max_result_bytes", c.SQLMaxResultBytes),
		slog.Bool("sql_allow_functions", c.SQLAllowFunctions != ""),
		slog.Int64("fs_max_bytes", c.FSMaxBytes),
	}
}

// WarnUnrelated logs one warning for each MCP_* variable of another
// program that Load ignored, so a misspelling that no rule caught can
// still be found in the log. The name is logged, never the value.
func (c *Config) WarnUnrelated(ctx context.Context, log *slog.Logger) {
	for _, name := range c.Unrelated {
		log.LogAttrs(ctx, slog.LevelWarn, "ignoring an MCP_* variable this server does not know (see --help for the ones it does)",
			slog.String("variable", name))
	}
}

// NewLogger returns the structured stderr logger the configuration asks for.
func (c *Config) NewLogger(w io.Writer) *slog.Logger {
	return NewLogger(w, c.LogLevel, c.LogFormat)
}

// NewLogger returns a stderr logger at level in format ("json" or
// "text"). In JSON, durations are milliseconds (see MillisDurations).
func NewLogger(w io.Writer, level slog.Level, format string) *slog.Logger {
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: MillisDurations}))
}

// MillisDurations is a slog ReplaceAttr that writes a duration attribute
// "d" as "d_ms", a number of milliseconds: slog's JSON handler would
// write integer nanoseconds, which nobody reads at a glance and every log
// pipeline must be told about. The text handler's "1.5ms" needs no help.
func MillisDurations(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() != slog.KindDuration {
		return a
	}
	ms := float64(a.Value.Duration().Microseconds()) / 1000
	return slog.Float64(a.Key+"_ms", ms)
}
