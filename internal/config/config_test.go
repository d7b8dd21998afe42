package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// defaults is the configuration of DESIGN.md when nothing is set.
var defaults = Config{
	MetricsEnabled:      true,
	MetricsDiskPath:     "/",
	MaxConcurrency:      16,
	QueueTimeout:        5 * time.Second,
	CallTimeout:         30 * time.Second,
	DrainGrace:          5 * time.Second,
	MaxFrameBytes:       1 << 20,
	SQLMaxRows:          1000,
	SQLStatementTimeout: 10 * time.Second,
	SQLPoolMaxSize:      4,
	SQLMaxResultBytes:   1 << 20,
	FSMaxBytes:          1 << 20,
	LogLevel:            slog.LevelInfo,
	LogFormat:           "json",
}

func mustLoad(t *testing.T, environ ...string) *Config {
	t.Helper()
	c, err := Load(environ)
	if err != nil {
		t.Fatalf("Load(%q): %v", environ, err)
	}
	return c
}

// configErrors returns the *Errors joined in err, in order.
func configErrors(t *testing.T, err error) []*Error {
	t.Helper()
	if err == nil {
		return nil
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	var out []*Error
	for _, e := range errs {
		var ce *Error
		if !errors.As(e, &ce) {
			t.Fatalf("error %v (%T) is not a *config.Error", e, e)
		}
		out = append(out, ce)
	}
	return out
}

func TestDefaults(t *testing.T) {
	for _, environ := range [][]string{
		nil,
		{},
		// Variables without the prefix are not ours.
		{"PATH=/usr/bin", "HOME=/root", "MCP=1", "XMCP_FOO=1", "MCPX_FOO=1", "=MCP_FOO", "GOFLAGS=-race"},
	} {
		c := mustLoad(t, environ...)
		if !reflect.DeepEqual(*c, defaults) {
			t.Errorf("Load(%q) =\n %+v\nwant\n %+v", environ, *c, defaults)
		}
		if c.SQLDSN.IsSet() || c.SQLDSN.Reveal() != "" || c.SafeDataDir != "" {
			t.Errorf("Load(%q): unset variables are set", environ)
		}
	}
}

func TestValidValues(t *testing.T) {
	tests := []struct {
		env   string
		check func(c *Config) bool
	}{
		{"MCP_SAFE_DATA_DIR=/srv/data", func(c *Config) bool { return c.SafeDataDir == "/srv/data" }},
		{"MCP_SQL_DSN=postgres://u:p@h/db?sslmode=disable&x=1", func(c *Config) bool {
			return c.SQLDSN.IsSet() && c.SQLDSN.Reveal() == "postgres://u:p@h/db?sslmode=disable&x=1"
		}},
		{"MCP_METRICS_ENABLED=false", func(c *Config) bool { return !c.MetricsEnabled }},
		{"MCP_METRICS_ENABLED=true", func(c *Config) bool { return c.MetricsEnabled }},
		{"MCP_METRICS_DISK_PATH=/var", func(c *Config) bool { return c.MetricsDiskPath == "/var" }},
		{"MCP_MAX_CONCURRENCY=1", func(c *Config) bool { return c.MaxConcurrency == 1 }},
		{"MCP_MAX_CONCURRENCY=1024", func(c *Config) bool { return c.MaxConcurrency == 1024 }},
		{"MCP_QUEUE_TIMEOUT_MS=1", func(c *Config) bool { return c.QueueTimeout == time.Millisecond }},
		{"MCP_QUEUE_TIMEOUT_MS=600000", func(c *Config) bool { return c.QueueTimeout == 10*time.Minute }},
		{"MCP_CALL_TIMEOUT_MS=3600000", func(c *Config) bool { return c.CallTimeout == time.Hour }},
		{"MCP_DRAIN_GRACE_MS=250", func(c *Config) bool { return c.DrainGrace == 250*time.Millisecond }},
		{"MCP_MAX_FRAME_BYTES=1024", func(c *Config) bool { return c.MaxFrameBytes == 1024 }},
		{"MCP_MAX_FRAME_BYTES=67108864", func(c *Config) bool { return c.MaxFrameBytes == 64<<20 }},
		{"MCP_SQL_MAX_ROWS=100000", func(c *Config) bool { return c.SQLMaxRows == 100000 }},
		{"MCP_SQL_STATEMENT_TIMEOUT_MS=1", func(c *Config) bool { return c.SQLStatementTimeout == time.Millisecond }},
		{"MCP_SQL_POOL_MAX_SIZE=64", func(c *Config) bool { return c.SQLPoolMaxSize == 64 }},
		{"MCP_SQL_MAX_RESULT_BYTES=1024", func(c *Config) bool { return c.SQLMaxResultBytes == 1024 }},
		{"MCP_SQL_ALLOW_FUNCTIONS=app.f,\"App\".g", func(c *Config) bool { return c.SQLAllowFunctions == `app.f,"App".g` }},
		{"MCP_FS_MAX_BYTES=1", func(c *Config) bool { return c.FSMaxBytes == 1 }},
		{"MCP_LOG_LEVEL=debug", func(c *Config) bool { return c.LogLevel == slog.LevelDebug }},
		{"MCP_LOG_LEVEL=warn", func(c *Config) bool { return c.LogLevel == slog.LevelWarn }},
		{"MCP_LOG_LEVEL=error", func(c *Config) bool { return c.LogLevel == slog.LevelError }},
		{"MCP_LOG_FORMAT=text", func(c *Config) bool { return c.LogFormat == "text" }},
	}
	for _, tt := range tests {
		c := mustLoad(t, tt.env)
		if !tt.check(c) {
			t.Errorf("Load(%q) = %+v", tt.env, *c)
		}
	}
}

// TestInvalidValues sets each variable to bad values and checks that Load
// refuses with one *Error naming the variable.
func TestInvalidValues(t *testing.T) {
	common := []string{"", " ", " x", "x ", "\t"}
	ints := []string{"abc", "1.5", "0x10", "1e3", "1_000", "--1", "99999999999999999999", " 16", "16 ", "16\n", "\t16", "١٦"}
	paths := []string{"relative", "./x", "~/x", " /srv", "/srv ", "/a\x00b"}
	bools := []string{"TRUE", "True", "1", "0", "yes", "no", "on", " true", "false "}
	bad := map[string][]string{
		"MCP_SAFE_DATA_DIR":            paths,
		"MCP_SQL_DSN":                  {" postgres://h/db", "postgres://h/db "},
		"MCP_METRICS_ENABLED":          bools,
		"MCP_METRICS_DISK_PATH":        paths,
		"MCP_MAX_CONCURRENCY":          append([]string{"0", "-1", "1025", "-9223372036854775808"}, ints...),
		"MCP_QUEUE_TIMEOUT_MS":         append([]string{"0", "-5", "600001", "5s", "5000ms"}, ints...),
		"MCP_CALL_TIMEOUT_MS":          append([]string{"0", "3600001", "30s"}, ints...),
		"MCP_DRAIN_GRACE_MS":           append([]string{"0", "600001"}, ints...),
		"MCP_MAX_FRAME_BYTES":          append([]string{"1023", "0", "67108865", "1MiB"}, ints...),
		"MCP_SQL_MAX_ROWS":             append([]string{"0", "100001"}, ints...),
		"MCP_SQL_STATEMENT_TIMEOUT_MS": append([]string{"0", "3600001"}, ints...),
		"MCP_SQL_POOL_MAX_SIZE":        append([]string{"0", "65", "4294967297"}, ints...),
		"MCP_SQL_MAX_RESULT_BYTES":     append([]string{"1023", "0", "67108865", "1MiB"}, ints...),
		// The list's own syntax is read_only_sql's to check (sqlquery.ParseFunctionList).
		"MCP_SQL_ALLOW_FUNCTIONS": {" app.f", "app.f "},
		"MCP_FS_MAX_BYTES":        append([]string{"0", "67108865"}, ints...),
		"MCP_LOG_LEVEL":           {"INFO", "Info", "verbose", "trace", "warning", "info ", "0"},
		"MCP_LOG_FORMAT":          {"JSON", "logfmt", "text ", "console"},
	}
	for _, name := range Names() {
		values, ok := bad[name]
		if !ok {
			t.Errorf("no bad values for %s", name)
			continue
		}
		for _, v := range append(slices.Clone(common), values...) {
			c, err := Load([]string{name + "=" + v})
			errs := configErrors(t, err)
			if c != nil || len(errs) != 1 || errs[0].Var != name {
				t.Errorf("Load(%s=%q) = %v, %v; want one error naming %s", name, v, c, err, name)
				continue
			}
			if !strings.HasPrefix(err.Error(), name+": ") {
				t.Errorf("Load(%s=%q) error %q does not start with the variable", name, v, err)
			}
		}
	}
}

// TestErrorTexts pins the messages, which tell the operator the range.
func TestErrorTexts(t *testing.T) {
	tests := []struct {
		env  string
		want string
	}{
		{"MCP_MAX_CONCURRENCY=0", "MCP_MAX_CONCURRENCY: 0 is out of range: an integer in [1, 1024]"},
		{"MCP_MAX_CONCURRENCY=abc", "MCP_MAX_CONCURRENCY: is not an integer: an integer in [1, 1024]"},
		{"MCP_MAX_FRAME_BYTES=99999999999", "MCP_MAX_FRAME_BYTES: 99999999999 is out of range: an integer in [1024, 67108864]"},
		{"MCP_QUEUE_TIMEOUT_MS=", "MCP_QUEUE_TIMEOUT_MS: is empty: an integer number of milliseconds in [1, 600000]"},
		{"MCP_QUEUE_TIMEOUT_MS", "MCP_QUEUE_TIMEOUT_MS: is empty: an integer number of milliseconds in [1, 600000]"},
		{"MCP_CALL_TIMEOUT_MS= 5", "MCP_CALL_TIMEOUT_MS: has leading or trailing space: an integer number of milliseconds in [1, 3600000]"},
		{"MCP_METRICS_ENABLED=yes", `MCP_METRICS_ENABLED: is not a boolean: "true" or "false"`},
		{"MCP_SAFE_DATA_DIR=data", "MCP_SAFE_DATA_DIR: is a relative path: an absolute path, or unset the variable"},
		{"MCP_SAFE_DATA_DIR=/a\x00", "MCP_SAFE_DATA_DIR: contains a NUL byte: an absolute path, or unset the variable"},
		{"MCP_SQL_DSN=", "MCP_SQL_DSN: is empty: a PostgreSQL DSN, or unset the variable"},
		{"MCP_LOG_LEVEL=trace", "MCP_LOG_LEVEL: is not one of the choices: one of debug, info, warn, error"},
		{"MCP_LOG_FORMAT=yaml", "MCP_LOG_FORMAT: is not one of the choices: one of json, text"},
		{"MCP_SQL_DNS=x", "MCP_SQL_DNS: unknown variable, close to MCP_SQL_DSN: the names bastion serve --help lists (did you mean MCP_SQL_DSN?)"},
		{"mcp_sql_dsn=x", "mcp_sql_dsn: unknown variable, close to MCP_SQL_DSN: the names bastion serve --help lists (did you mean MCP_SQL_DSN?)"},
		{"MCP.SQL.DSN=x", "MCP.SQL.DSN: not a variable, but spelled like MCP_SQL_DSN: the exact names bastion serve --help lists (did you mean MCP_SQL_DSN?)"},
	}
	for _, tt := range tests {
		_, err := Load([]string{tt.env})
		if err == nil || err.Error() != tt.want {
			t.Errorf("Load(%q) error = %v, want %q", tt.env, err, tt.want)
		}
	}
}

// TestUnknownVariables: an MCP_* variable that resembles a known one is
// refused, naming the one it resembles; any other is another program's
// (MCP clients set their own and children inherit them) and is only
// reported for a warning.
func TestUnknownVariables(t *testing.T) {
	refused := []struct{ name, near string }{
		{"MCP_max_concurrency", "MCP_MAX_CONCURRENCY"},
		{"MCP_MAX_CONCURRENCY_", "MCP_MAX_CONCURRENCY"},
		{"MCP_MAX-CONCURRENCY", "MCP_MAX_CONCURRENCY"},
		{"MCP_LOGLEVEL", "MCP_LOG_LEVEL"},
		{"MCP_LOG_LEVL", "MCP_LOG_LEVEL"},
		{"MCP_SQL_DNS", "MCP_SQL_DSN"},
		{"MCP_SQL_DS", "MCP_SQL_DSN"},
		{"MCP_SAFE_DIR_DATA", ""}, // too far: reported, not refused
		{"MCP_SAVE_DATA_DIR", "MCP_SAFE_DATA_DIR"},
		{"MCP_SAFE_DATADIRS", "MCP_SAFE_DATA_DIR"},
		{"MCP_QUEUE_TIMEOUT", "MCP_QUEUE_TIMEOUT_MS"},
		{"MCP_CALL_TIMEOUT", "MCP_CALL_TIMEOUT_MS"},
		{"MCP_FS_MAX_BYTE", "MCP_FS_MAX_BYTES"},
		{"mcp_safe_data_dir", "MCP_SAFE_DATA_DIR"},
		{"Mcp_Sql_Dsn", "MCP_SQL_DSN"},
		{"MCPSQLDSN", "MCP_SQL_DSN"},
		{"mcp_sql_dns", "MCP_SQL_DSN"},
		{"Mcp_Log_Levl", "MCP_LOG_LEVEL"},
		{"MCP_MAX_BYTES", ""}, // two edits from MCP_FS_MAX_BYTES, a short name: another program's
	}
	for _, tt := range refused {
		c, err := Load([]string{tt.name + "=1"})
		if tt.near == "" {
			if err != nil || !slices.Equal(c.Unrelated, []string{tt.name}) {
				t.Errorf("Load(%s=1) = %v, %v; want it reported as unrelated", tt.name, c, err)
			}
			continue
		}
		errs := configErrors(t, err)
		if c != nil || len(errs) != 1 || errs[0].Var != tt.name || !strings.Contains(errs[0].Error(), "did you mean "+tt.near+"?") {
			t.Errorf("Load(%s=1) = %v, %v; want it refused as a misspelling of %s", tt.name, c, err, tt.near)
		}
	}
	// The names MCP clients and SDKs set for themselves, and others.
	unrelated := []string{"MCP_TIMEOUT", "MCP_TOOL_TIMEOUT", "MCP_BEARER_TOKEN", "MCP_SERVER_URL", "MCP_FOO", "MCP_",
		"MCP_SQL_DSN_FILE", "MCP_GATEWAY_TOKENS", "mcp_foo", "Mcp_Server_Name", "MCP_GATEWAY_SESSION_KEY", "MCP_LOG", "MCP_DEBUG", "MCP_PROXY_AUTH_TOKEN"}
	var environ []string
	for _, name := range unrelated {
		environ = append(environ, name+"=1")
	}
	c := mustLoad(t, environ...)
	want := slices.Sorted(slices.Values(unrelated))
	if !slices.Equal(c.Unrelated, want) {
		t.Errorf("Unrelated = %q, want %q", c.Unrelated, want)
	}
	if c.MaxConcurrency != defaults.MaxConcurrency {
		t.Errorf("unrelated variables changed the configuration: %+v", c)
	}
}

func TestEditDistance(t *testing.T) {
	tests := []struct {
		a, b  string
		limit int
		want  int
	}{
		{"", "", 2, 0},
		{"SQLDSN", "SQLDSN", 2, 0},
		{"SQLDNS", "SQLDSN", 2, 1}, // one transposition
		{"SQLDS", "SQLDSN", 2, 1},
		{"SQLDSNX", "SQLDSN", 2, 1},
		{"SQXDSN", "SQLDSN", 2, 1},
		{"LOGLEVL", "LOGLEVEL", 2, 1},
		{"TIMEOUT", "CALLTIMEOUTMS", 2, 3}, // past the limit: limit+1
		{"ABCDEF", "UVWXYZ", 9, 6},
		{"CA", "ABC", 9, 3},
	}
	for _, tt := range tests {
		if got := editDistance(tt.a, tt.b, tt.limit); got != tt.want {
			t.Errorf("editDistance(%q, %q, %d) = %d, want %d", tt.a, tt.b, tt.limit, got, tt.want)
		}
	}
}

// TestSeveralErrors checks that every problem is reported at once: unknown
// variables first (sorted), then the table's in table order.
func TestSeveralErrors(t *testing.T) {
	c, err := Load([]string{
		"MCP_LOG_LEVEL=loud",
		"MCP_ZZZ=1",
		"MCP_LOG_LEVL=1",
		"PATH=/bin",
		"MCP_MAX_CONCURRENCY=0",
		"MCP_MAX_CONCURENCY=1",
		"MCP_SAFE_DATA_DIR=rel",
		"MCP_SQL_POOL_MAX_SIZE=4", // fine
	})
	if c != nil {
		t.Errorf("Load returned a config with errors: %+v", c)
	}
	var vars []string
	for _, e := range configErrors(t, err) {
		vars = append(vars, e.Var)
	}
	want := []string{"MCP_LOG_LEVL", "MCP_MAX_CONCURENCY", "MCP_SAFE_DATA_DIR", "MCP_MAX_CONCURRENCY", "MCP_LOG_LEVEL"}
	if !slices.Equal(vars, want) {
		t.Errorf("errors name %q, want %q", vars, want)
	}
	if got := strings.Count(err.Error(), "\n") + 1; got != len(want) {
		t.Errorf("error text has %d lines, want one per problem:\n%s", got, err)
	}
}

func TestLastAssignmentWins(t *testing.T) {
	c := mustLoad(t, "MCP_MAX_CONCURRENCY=0", "MCP_MAX_CONCURRENCY=8")
	if c.MaxConcurrency != 8 {
		t.Errorf("MaxConcurrency = %d, want the last value 8", c.MaxConcurrency)
	}
}

const dsn = "postgres://bastion:hunter2@db.internal:5432/app"

// TestSecretNeverPrints formats a Secret, and a Config holding one, every
// way a program might, and checks the value never appears.
func TestSecretNeverPrints(t *testing.T) {
	c := mustLoad(t, "MCP_SQL_DSN="+dsn)
	if c.SQLDSN.Reveal() != dsn {
		t.Fatalf("Reveal() = %q", c.SQLDSN.Reveal())
	}
	leaks := func(what, out string) {
		t.Helper()
		if strings.Contains(out, "hunter2") || strings.Contains(out, "db.internal") {
			t.Errorf("%s leaks the secret: %s", what, out)
		}
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10s", "%-40v", "%.3s", "%t", "%e", "%o", "%U"} {
		leaks("Secret with "+verb, fmt.Sprintf(verb, c.SQLDSN))
		leaks("Config with "+verb, fmt.Sprintf(verb, *c))
		leaks("*Config with "+verb, fmt.Sprintf(verb, c))
		leaks("[]Secret with "+verb, fmt.Sprintf(verb, []Secret{c.SQLDSN}))
	}
	if got := fmt.Sprint(c.SQLDSN); got != "[redacted]" {
		t.Errorf("Sprint = %q, want [redacted]", got)
	}
	if got := fmt.Sprintf("%#v", c.SQLDSN); got != "config.Secret{[redacted]}" {
		t.Errorf("%%#v = %q", got)
	}
	if got := fmt.Sprintf("%#v", *c); !strings.Contains(got, "SQLDSN:config.Secret{[redacted]}") {
		t.Errorf("%%#v of a Config = %s", got)
	}
	leaks("Error", (&Error{Var: "MCP_SQL_DSN", Msg: "has leading or trailing space", Accepted: "a PostgreSQL DSN"}).Error())
	if _, err := Load([]string{"MCP_SQL_DSN= " + dsn}); err != nil {
		leaks("Load error", err.Error())
	}

	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	leaks("encoding/json", string(b))

	for name, newHandler := range map[string]func(*bytes.Buffer) slog.Handler{
		"JSON": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
		"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
	} {
		var buf bytes.Buffer
		log := slog.New(newHandler(&buf))
		log.Info("start", "dsn", c.SQLDSN, "config", c, slog.Any("secret", c.SQLDSN), slog.Group("g", "dsn", c.SQLDSN))
		log.LogAttrs(t.Context(), slog.LevelInfo, "settings", c.LogAttrs()...)
		leaks("slog "+name, buf.String())
		if !strings.Contains(buf.String(), "[redacted]") {
			t.Errorf("slog %s output does not show [redacted]: %s", name, buf.String())
		}
	}
}

// TestLogAttrs checks that the start-up line reports settings and whether
// the tools are enabled, never paths or the DSN.
func TestLogAttrs(t *testing.T) {
	c := mustLoad(t, "MCP_SQL_DSN="+dsn, "MCP_SAFE_DATA_DIR=/srv/secret-data", "MCP_METRICS_DISK_PATH=/mnt/private")
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).LogAttrs(t.Context(), slog.LevelInfo, "starting", c.LogAttrs()...)
	out := buf.String()
	for _, s := range []string{"hunter2", "secret-data", "/mnt/private"} {
		if strings.Contains(out, s) {
			t.Errorf("LogAttrs shows %q: %s", s, out)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"sandbox_fs_read": true, "read_only_sql": true, "system_metrics": true, "max_concurrency": 16.0, "max_frame_bytes": 1048576.0} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
}

func TestNewLogger(t *testing.T) {
	tests := []struct {
		env      []string
		wantJSON bool
		debug    bool
		info     bool
	}{
		{nil, true, false, true},
		{[]string{"MCP_LOG_FORMAT=text"}, false, false, true},
		{[]string{"MCP_LOG_LEVEL=debug"}, true, true, true},
		{[]string{"MCP_LOG_LEVEL=error", "MCP_LOG_FORMAT=text"}, false, false, false},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		log := mustLoad(t, tt.env...).NewLogger(&buf)
		log.Debug("dbg")
		log.Info("inf")
		out := buf.String()
		if got := strings.Contains(out, "dbg"); got != tt.debug {
			t.Errorf("%q: debug logged = %v", tt.env, got)
		}
		if got := strings.Contains(out, "inf"); got != tt.info {
			t.Errorf("%q: info logged = %v", tt.env, got)
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if tt.info && json.Valid([]byte(line)) != tt.wantJSON {
				t.Errorf("%q: JSON line = %v, want %v: %s", tt.env, !tt.wantJSON, tt.wantJSON, line)
			}
		}
	}
}

func TestNames(t *testing.T) {
	want := []string{
		"MCP_SAFE_DATA_DIR", "MCP_SQL_DSN", "MCP_METRICS_ENABLED", "MCP_METRICS_DISK_PATH", "MCP_MAX_CONCURRENCY",
		"MCP_QUEUE_TIMEOUT_MS", "MCP_CALL_TIMEOUT_MS", "MCP_DRAIN_GRACE_MS", "MCP_MAX_FRAME_BYTES", "MCP_SQL_MAX_ROWS",
		"MCP_SQL_STATEMENT_TIMEOUT_MS", "MCP_SQL_POOL_MAX_SIZE", "MCP_SQL_MAX_RESULT_BYTES", "MCP_SQL_ALLOW_FUNCTIONS", "MCP_FS_MAX_BYTES",
		"MCP_LOG_LEVEL", "MCP_LOG_FORMAT",
	}
	if got := Names(); !slices.Equal(got, want) {
		t.Errorf("Names() = %q, want %q", got, want)
	}
	for _, n := range Names() {
		if !strings.HasPrefix(n, Prefix) {
			t.Errorf("%s lacks the prefix", n)
		}
	}
}

// TestWriteHelp checks that --help lists every variable with its default
// and range, and that what it says is what Load enforces.
func TestWriteHelp(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteHelp(&buf); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{ // default, range
		"MCP_SAFE_DATA_DIR":            {"(unset)", "absolute path"},
		"MCP_SQL_DSN":                  {"(unset)", "DSN"},
		"MCP_METRICS_ENABLED":          {"true", "true|false"},
		"MCP_METRICS_DISK_PATH":        {"/", "absolute path"},
		"MCP_MAX_CONCURRENCY":          {"16", "1..1024"},
		"MCP_QUEUE_TIMEOUT_MS":         {"5000", "1..600000 ms"},
		"MCP_CALL_TIMEOUT_MS":          {"30000", "1..3600000 ms"},
		"MCP_DRAIN_GRACE_MS":           {"5000", "1..600000 ms"},
		"MCP_MAX_FRAME_BYTES":          {"1048576", "1024..67108864"},
		"MCP_SQL_MAX_ROWS":             {"1000", "1..100000"},
		"MCP_SQL_STATEMENT_TIMEOUT_MS": {"10000", "1..3600000 ms"},
		"MCP_SQL_POOL_MAX_SIZE":        {"4", "1..64"},
		"MCP_SQL_MAX_RESULT_BYTES":     {"1048576", "1024..67108864"},
		"MCP_SQL_ALLOW_FUNCTIONS":      {"(unset)", "schema.fn,…"},
		"MCP_FS_MAX_BYTES":             {"1048576", "1..67108864"},
		"MCP_LOG_LEVEL":                {"info", "debug|info|warn|error"},
		"MCP_LOG_FORMAT":               {"json", "json|text"},
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 1+len(Names()) {
		t.Fatalf("help has %d lines, want a header and %d variables:\n%s", len(lines), len(Names()), buf.String())
	}
	if f := strings.Fields(lines[0]); !slices.Equal(f, []string{"VARIABLE", "DEFAULT", "RANGE", "MEANING"}) {
		t.Errorf("header = %q", lines[0])
	}
	// Columns are separated by at least two spaces.
	for i, name := range Names() {
		cols := splitColumns(lines[i+1])
		if len(cols) != 4 || cols[0] != name {
			t.Errorf("line for %s = %q", name, lines[i+1])
			continue
		}
		if w := want[name]; cols[1] != w[0] || cols[2] != w[1] {
			t.Errorf("%s: default %q range %q, want %q %q", name, cols[1], cols[2], w[0], w[1])
		}
		if cols[3] == "" {
			t.Errorf("%s has no meaning", name)
		}
	}
	// The advertised bounds are enforced: min and max load, one beyond
	// either does not.
	for name, w := range want {
		lo, hi, ok := strings.Cut(strings.TrimSuffix(w[1], " ms"), "..")
		if !ok {
			continue
		}
		mustLoad(t, name+"="+lo)
		mustLoad(t, name+"="+hi)
		for _, v := range []string{decimal(lo, -1), decimal(hi, +1)} {
			if _, err := Load([]string{name + "=" + v}); err == nil {
				t.Errorf("%s=%s is outside the advertised range %s but loads", name, v, w[1])
			}
		}
	}
}

func splitColumns(line string) []string {
	var cols []string
	for _, c := range strings.Split(line, "  ") {
		if c = strings.TrimSpace(c); c != "" {
			cols = append(cols, c)
		}
	}
	return cols
}

func decimal(s string, delta int64) string {
	var n int64
	fmt.Sscan(s, &n)
	return fmt.Sprint(n + delta)
}

func TestErrorType(t *testing.T) {
	e := &Error{Var: "MCP_X", Msg: "is bad", Accepted: "something good"}
	if e.Error() != "MCP_X: is bad: something good" {
		t.Errorf("Error() = %q", e.Error())
	}
}
