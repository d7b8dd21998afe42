// Package config reads the configuration of `bastion gateway`: one YAML
// file, decoded strictly (unknown or duplicate keys, aliases and values of
// the wrong kind are errors), defaulted and validated in one pass, with
// every error naming the key path at fault. `bastion gateway --check` runs
// exactly this path.
//
// Secrets are never inline: a value that carries a credential (a
// downstream's Authorization header, an environment variable whose name
// says token, secret, password or key) must be a ${NAME} reference, which
// is resolved from the gateway's environment at start-up; an unset NAME
// stops start-up.
package config

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-bastion/bastion/internal/gateway/auth"
)

// Config is the validated gateway configuration.
type Config struct {
	// Listen is the HTTP front's address (host:port).
	Listen string `yaml:"listen"`
	// PublicURL is the one canonical URI of the MCP endpoint: allowed
	// Host and Origin come from it.
	PublicURL string `yaml:"public_url"`
	// Path is the MCP endpoint's path; it is PublicURL's path.
	Path string `yaml:"path"`
	// Servers are the downstream MCP servers, in the order given.
	Servers []Server `yaml:"servers"`
	// Auth is how callers authenticate.
	Auth Auth `yaml:"auth"`
	// Discovery bounds how downstream lists are read.
	Discovery Discovery `yaml:"discovery"`
	// Limits bound what any caller or downstream can make the gateway hold.
	Limits Limits `yaml:"limits"`
	// Sessions configures the signed session ids of legacy HTTP clients.
	Sessions Sessions `yaml:"sessions"`
	// ArgumentErrors says how arguments that fail a tool's input schema
	// are reported: "in_band" (isError, default) or "protocol" (-32602).
	ArgumentErrors string `yaml:"argument_errors"`
	// Names says how tools and prompts are named to callers:
	// "qualified" (<server>.<name>, the default) or "bare" (the
	// downstream's own names, allowed with exactly one server: there is
	// nothing to collide with). Rules, the ledger and the audit use the
	// qualified name either way.
	Names string `yaml:"names"`
	// Metrics, when set, serves Prometheus metrics on its own address.
	Metrics *Metrics `yaml:"metrics"`
	// Log configures the structured log on stderr.
	Log Log `yaml:"log"`
	// Policy says who may call what.
	Policy Policy `yaml:"policy"`
	// Audit is where decisions are recorded.
	Audit Audit `yaml:"audit"`
	// StateDir holds the ledger, the evidence and the review socket;
	// relative paths are the working directory's. Default "state".
	StateDir string `yaml:"state_dir"`
	// Admission configures the admission gate.
	Admission Admission `yaml:"admission"`
}

// FilterToolsList reports whether each caller lists only what it may call.
func (c *Config) FilterToolsList() bool {
	return c.Policy.FilterToolsList == nil || *c.Policy.FilterToolsList
}

// Anonymous reports whether callers are not authenticated (auth mode none).
func (c *Config) Anonymous() bool { return c.Auth.Mode == "none" }

// Server is one downstream MCP server: a stdio child (Command) or a
// Streamable HTTP endpoint (URL).
type Server struct {
	// Name is the server's part of every qualified tool name.
	Name string `yaml:"name"`
	// Command is the child's argv; the first element is the program.
	Command []string `yaml:"command"`
	// Env is the child's whole environment besides PATH: the gateway's
	// own environment is not passed on.
	Env map[string]string `yaml:"env"`
	// Dir is the child's working directory; default the gateway's.
	Dir string `yaml:"dir"`
	// URL is a Streamable HTTP endpoint.
	URL string `yaml:"url"`
	// Headers are sent with every request to URL: the gateway's own
	// credentials for that server, never a caller's.
	Headers map[string]string `yaml:"headers"`
	// InsecureHTTP allows an http:// URL to a host other than a loopback
	// literal.
	InsecureHTTP bool `yaml:"insecure_http"`
	// Timeout bounds one call to this server; default Limits.Call.
	Timeout Duration `yaml:"timeout"`
	// Publisher is the server's expected publisher namespace, pinned
	// with its live identity: a change quarantines its tools.
	Publisher string `yaml:"publisher"`
	// Protocol is "auto" (the default: 2026-07-28 when the server
	// speaks it) or "legacy" (initialize, the session era, in which a
	// server can send sampling and elicitation requests and log
	// messages during a call, which the gateway relays to the caller).
	Protocol string `yaml:"protocol"`
}

// Stdio reports whether s is a child process.
func (s *Server) Stdio() bool { return len(s.Command) > 0 }

// Auth configures authentication. At least one method — static tokens,
// tokens from the environment, JWTs — is required unless Mode is "none",
// which must be written out and binds loopback only.
type Auth struct {
	// Mode "none" runs without authentication: every caller is the
	// anonymous principal.
	Mode string `yaml:"mode"`
	// Tokens are static bearer tokens, each as the SHA-256 of the token.
	Tokens []Token `yaml:"tokens"`
	// TokensEnv names an environment variable holding tokens in seed
	// 002's JSON form; it must be set and parse.
	TokensEnv string `yaml:"tokens_env"`
	// JWT configures signed tokens.
	JWT *JWT `yaml:"jwt"`
	// ResourceMetadata, when set, serves RFC 9728 protected resource
	// metadata and points every 401 at it.
	ResourceMetadata *ResourceMetadata `yaml:"resource_metadata"`
	// StdioPrincipal is who the --stdio front's one client is.
	StdioPrincipal *Identity `yaml:"stdio_principal"`

	// Static is Tokens and TokensEnv, resolved.
	Static []auth.StaticToken `yaml:"-"`
}

// Token is one configured static token.
type Token struct {
	SHA256  string   `yaml:"sha256"`
	Subject string   `yaml:"subject"`
	Roles   []string `yaml:"roles"`
}

// Identity is a subject and its roles.
type Identity struct {
	Subject string   `yaml:"subject"`
	Roles   []string `yaml:"roles"`
}

// JWT configures JWT verification; the audience is the public URL.
type JWT struct {
	Issuer     string   `yaml:"issuer"`
	JWKSURL    string   `yaml:"jwks_url"`
	RolesClaim string   `yaml:"roles_claim"`
	Algorithms []string `yaml:"algorithms"`
	// Leeway is the clock skew allowed on exp and nbf (at most 5m).
	Leeway Duration `yaml:"leeway"`
	// JWKSRefresh is how often keys are fetched again; JWKSMinRefresh
	// the least time between fetches (an unknown kid fetches at most
	// that often).
	JWKSRefresh    Duration `yaml:"jwks_refresh"`
	JWKSMinRefresh Duration `yaml:"jwks_min_refresh"`
	// InsecureHTTP allows an http:// JWKS URL to a non-loopback host.
	InsecureHTTP bool `yaml:"insecure_http"`
}

// ResourceMetadata is what RFC 9728 metadata says besides the resource.
type ResourceMetadata struct {
	AuthorizationServers []string `yaml:"authorization_servers"`
	ScopesSupported      []string `yaml:"scopes_supported"`
}

// Policy configures authorization.
type Policy struct {
	// Rules are decided in order; the first whose pattern matches decides.
	Rules []Rule `yaml:"rules"`
	// FilterToolsList lists to each caller only what some rule may allow
	// it; default true.
	FilterToolsList *bool `yaml:"filter_tools_list"`
	// Rate limits each principal's requests: default 50/s with a burst of
	// 100 when callers authenticate, off under auth mode none;
	// per_principal "off" turns it off.
	Rate *Rate `yaml:"rate"`
}

// Rule is one authorization rule (see package policy).
type Rule struct {
	ID    string   `yaml:"id"`
	Tools []string `yaml:"tools"`
	// Prompts are patterns over qualified prompt names; a rule that
	// names only tools grants no prompt, and the reverse.
	Prompts []string `yaml:"prompts"`
	// Resources are patterns over <server>:<uri> (a read is decided on
	// the URI read, not on the template that routed it).
	Resources []string `yaml:"resources"`
	Roles     []string `yaml:"roles"`
	When      string   `yaml:"when"`
}

// Rate is a token bucket per principal.
type Rate struct {
	// PerPrincipal is requests per unit: "50/s", "600/m", "10000/h".
	PerPrincipal string `yaml:"per_principal"`
	// Burst is the bucket's size; default the per-second rate, at least 1.
	Burst int `yaml:"burst"`
	// Every is PerPrincipal as the interval between two requests.
	Every time.Duration `yaml:"-"`
}

// Audit configures the decision log.
type Audit struct {
	// File is a JSON Lines file, appended to; "stderr" (the default)
	// writes the events to stderr beside the log.
	File string `yaml:"file"`
}

// Discovery bounds the reading of one server's tools/list.
type Discovery struct {
	// Pages is the most pages one list may take.
	Pages int `yaml:"pages"`
	// Tools is the most tools one server may list.
	Tools int `yaml:"tools"`
	// ListTimeout bounds the whole walk of one list.
	ListTimeout Duration `yaml:"list_timeout"`
	// Refresh is how often every server is listed again (default 5m):
	// the safety net that re-checks every pin of a server that never says
	// its list changed; 0s turns it off (list_changed notifications still
	// trigger a walk).
	Refresh *Duration `yaml:"refresh"`
}

// Limits bound requests, downstream messages and calls.
type Limits struct {
	// Body is the largest HTTP request body.
	Body ByteSize `yaml:"body"`
	// Batch is the most members of a 2025-03-26 batch.
	Batch int `yaml:"batch"`
	// DownstreamMessage is the largest message read from a downstream.
	DownstreamMessage ByteSize `yaml:"downstream_message"`
	// Call is the deadline of one tools/call.
	Call Duration `yaml:"call"`
	// InflightPerDownstream is the most calls in flight to one server.
	InflightPerDownstream int `yaml:"inflight_per_downstream"`
	// AuthFailures bounds failed authentications per client address.
	AuthFailures AuthFailures `yaml:"auth_failures"`
}

// AuthFailures is a token bucket per client address, spent by each
// failed authentication; an empty bucket refuses the address's requests.
type AuthFailures struct {
	// PerAddress is failures per unit: "30/m"; "off" turns it off.
	PerAddress string `yaml:"per_address"`
	// Burst is the bucket's size; default 30.
	Burst int `yaml:"burst"`
	// Every is PerAddress as the interval between two failures.
	Every time.Duration `yaml:"-"`
}

// Sessions configures legacy session ids, HMAC-sealed so that any replica
// holding the key serves any session.
type Sessions struct {
	// KeyEnv names the environment variable that holds the key: at least
	// 32 bytes, hex or base64 encoded, or raw.
	KeyEnv string `yaml:"key_env"`
	// TTL is how long a session id stays valid.
	TTL Duration `yaml:"ttl"`
}

// Metrics is the opt-in Prometheus endpoint.
type Metrics struct {
	Listen string `yaml:"listen"`
}

// Log configures logging.
type Log struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

// Defaults.
const (
	DefaultListen                = "127.0.0.1:8080"
	DefaultPath                  = "/mcp"
	DefaultPages                 = 1000
	DefaultTools                 = 100_000
	DefaultListTimeout           = 10 * time.Second
	DefaultRefresh               = 5 * time.Minute
	DefaultBody                  = 4 << 20
	DefaultBatch                 = 64
	DefaultDownstreamMessage     = 16 << 20
	DefaultCall                  = 30 * time.Second
	DefaultInflightPerDownstream = 64
	DefaultSessionKeyEnv         = "MCP_GATEWAY_SESSION_KEY"
	DefaultSessionTTL            = 24 * time.Hour
	DefaultRate                  = "50/s"
	DefaultRateBurst             = 100
)

// MaxFileBytes is the largest configuration file read.
const MaxFileBytes = 1 << 20

// Error is one configuration error: the key path and what is wrong.
type Error struct {
	Path string
	Line int // 0 when unknown
	Msg  string
}

func (e *Error) Error() string {
	where := e.Path
	if where == "" {
		where = "(file)"
	}
	if e.Line > 0 {
		where += fmt.Sprintf(" (line %d)", e.Line)
	}
	return where + ": " + e.Msg
}

// Load reads, decodes, defaults and validates the file at path. getenv
// resolves ${NAME} references. The error, when not nil, joins one *Error
// per problem.
func Load(path string, getenv func(string) (string, bool)) (*Config, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, getenv)
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if len(data) > MaxFileBytes {
		return nil, &Error{Msg: fmt.Sprintf("the file is larger than %d bytes", MaxFileBytes)}
	}
	return data, nil
}

// Parse is Load of data already read.
func Parse(data []byte, getenv func(string) (string, bool)) (*Config, error) {
	return parse(data, getenv, false)
}

// LoadOffline is Load for a command that starts no downstream server and
// authenticates no caller (bastion admit review): ${NAME} references and
// auth.tokens_env that are not set are left unresolved instead of
// stopping it, so a reviewer needs none of the credentials the file
// refers to. Everything else is validated as Load does.
func LoadOffline(path string, getenv func(string) (string, bool)) (*Config, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return parse(data, getenv, true)
}

// LoadWithoutCallers is Load for a command that starts the downstream
// servers but authenticates no HTTP caller (gateway --stdio, whose one
// client is auth.stdio_principal; admit --evidence): auth.tokens_env need
// not be set, so a desktop client's configuration need not carry the
// HTTP callers' tokens. Everything else is resolved and validated as
// Load does.
func LoadWithoutCallers(path string, getenv func(string) (string, bool)) (*Config, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	c, err := parseWith(data, &validator{getenv: getenv, noCallers: true})
	return c, err
}

func parse(data []byte, getenv func(string) (string, bool), offline bool) (*Config, error) {
	return parseWith(data, &validator{getenv: getenv, offline: offline})
}

func parseWith(data []byte, v *validator) (*Config, error) {
	c := &Config{}
	lines, err := parseYAML(data, c)
	if err != nil {
		return nil, err
	}
	v.lines = lines
	c.defaults()
	v.check(c)
	if len(v.errs) > 0 {
		return nil, errors.Join(v.errs...)
	}
	return c, nil
}

func (c *Config) defaults() {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Path == "" {
		c.Path = DefaultPath
	}
	if c.PublicURL == "" {
		c.PublicURL = "http://" + c.Listen + c.Path
	}
	d := &c.Discovery
	if d.Pages == 0 {
		d.Pages = DefaultPages
	}
	if d.Tools == 0 {
		d.Tools = DefaultTools
	}
	if d.ListTimeout == 0 {
		d.ListTimeout = Duration(DefaultListTimeout)
	}
	if d.Refresh == nil {
		r := Duration(DefaultRefresh)
		d.Refresh = &r
	}
	l := &c.Limits
	if l.Body == 0 {
		l.Body = DefaultBody
	}
	if l.Batch == 0 {
		l.Batch = DefaultBatch
	}
	if l.DownstreamMessage == 0 {
		l.DownstreamMessage = DefaultDownstreamMessage
	}
	if l.Call == 0 {
		l.Call = Duration(DefaultCall)
	}
	if l.InflightPerDownstream == 0 {
		l.InflightPerDownstream = DefaultInflightPerDownstream
	}
	if l.AuthFailures.PerAddress == "" {
		l.AuthFailures.PerAddress = "30/m"
	}
	if l.AuthFailures.Burst == 0 {
		l.AuthFailures.Burst = 30
	}
	if c.Sessions.KeyEnv == "" {
		c.Sessions.KeyEnv = DefaultSessionKeyEnv
	}
	if c.Sessions.TTL == 0 {
		c.Sessions.TTL = Duration(DefaultSessionTTL)
	}
	if c.Names == "" {
		c.Names = "qualified"
	}
	if c.ArgumentErrors == "" {
		c.ArgumentErrors = "in_band"
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Log.Format == "" {
		c.Log.Format = "json"
	}
	if c.Audit.File == "" {
		c.Audit.File = "stderr"
	}
	// Every authenticated principal has a token bucket unless the file
	// says otherwise (decision 14). Under auth mode none every caller is
	// the one anonymous principal, so a default bucket would throttle the
	// whole loopback gateway as one caller: there it is opt-in.
	if c.Policy.Rate == nil && c.Auth.Mode != "none" {
		c.Policy.Rate = &Rate{PerPrincipal: DefaultRate, Burst: DefaultRateBurst}
	}
	if j := c.Auth.JWT; j != nil {
		if j.RolesClaim == "" {
			j.RolesClaim = "roles"
		}
		if j.Leeway == 0 {
			j.Leeway = Duration(30 * time.Second)
		}
		if j.JWKSRefresh == 0 {
			j.JWKSRefresh = Duration(5 * time.Minute)
		}
		if j.JWKSMinRefresh == 0 {
			j.JWKSMinRefresh = Duration(30 * time.Second)
		}
	}
	c.admissionDefaults()
	for i := range c.Servers {
		if c.Servers[i].Timeout == 0 {
			c.Servers[i].Timeout = c.Limits.Call
		}
	}
}

// validator collects errors.
type validator struct {
	// noCallers validates for a command that authenticates no HTTP
	// caller: the tokens of auth.tokens_env are not read.
	noCallers bool
	// offline validates for a command that starts no downstream and
	// authenticates no caller: the credentials the file refers to need
	// not be in the environment.
	offline bool
	getenv  func(string) (string, bool)
	errs    []error
	// lines are the file's line of each key path (parseYAML).
	lines map[string]int
}

func (v *validator) fail(path, format string, args ...any) {
	v.errs = append(v.errs, &Error{Path: path, Line: lineOf(v.lines, path), Msg: fmt.Sprintf(format, args...)})
}

// serverName is the syntax of a server name: no dots, so that a
// qualified name <server>.<tool> splits at its first dot.
var serverName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// envName is the syntax of an environment variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// headerName is an RFC 9110 token.
var headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

func (v *validator) check(c *Config) {
	v.listen("listen", c.Listen)
	if !strings.HasPrefix(c.Path, "/") || strings.ContainsAny(c.Path, "?#") {
		v.fail("path", "must be an absolute URL path without query or fragment, as /mcp")
	}
	if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		v.fail("public_url", "must be an absolute http or https URL without user, query or fragment")
	} else if u.Path != c.Path {
		v.fail("public_url", "its path %s is not the configured path %s", strconv.Quote(u.Path), strconv.Quote(c.Path))
	}
	v.auth(c)
	v.policy(c)
	v.admission(c)
	if len(c.Servers) == 0 {
		v.fail("servers", "at least one server is required")
	}
	names := map[string]bool{}
	for i := range c.Servers {
		s := &c.Servers[i]
		p := fmt.Sprintf("servers[%d]", i)
		switch {
		case s.Name == "":
			v.fail(p+".name", "is required")
		case !serverName.MatchString(s.Name):
			v.fail(p+".name", "must be 1-63 characters of a-z, 0-9, _ and -, starting with a letter or digit (no dots: qualified names split at the first)")
		case names[s.Name]:
			v.fail(p+".name", "another server has the name %s", s.Name)
		}
		names[s.Name] = true
		v.server(p, s)
	}
	v.positive("discovery.pages", c.Discovery.Pages, 1_000_000)
	v.positive("discovery.tools", c.Discovery.Tools, 10_000_000)
	v.duration("discovery.list_timeout", c.Discovery.ListTimeout, time.Millisecond, time.Hour)
	if r := c.Discovery.Refresh; r != nil && *r != 0 {
		v.duration("discovery.refresh", *r, time.Second, 24*time.Hour)
	}
	v.size("limits.body", c.Limits.Body, 1<<10, 1<<30)
	v.positive("limits.batch", c.Limits.Batch, 10_000)
	v.size("limits.downstream_message", c.Limits.DownstreamMessage, 1<<10, 1<<30)
	v.duration("limits.call", c.Limits.Call, time.Millisecond, 24*time.Hour)
	v.positive("limits.inflight_per_downstream", c.Limits.InflightPerDownstream, 100_000)
	if f := &c.Limits.AuthFailures; f.PerAddress != "off" {
		f.Every = v.rate("limits.auth_failures.per_address", f.PerAddress)
		v.positive("limits.auth_failures.burst", f.Burst, 1_000_000)
	}
	if !envName.MatchString(c.Sessions.KeyEnv) {
		v.fail("sessions.key_env", "must be an environment variable name")
	}
	v.duration("sessions.ttl", c.Sessions.TTL, time.Minute, 30*24*time.Hour)
	if c.ArgumentErrors != "in_band" && c.ArgumentErrors != "protocol" {
		v.fail("argument_errors", `must be "in_band" or "protocol"`)
	}
	switch {
	case c.Names != "qualified" && c.Names != "bare":
		v.fail("names", `must be "qualified" or "bare"`)
	case c.Names == "bare" && len(c.Servers) != 1:
		v.fail("names", `"bare" needs exactly one server (with two, their names could collide); use "qualified"`)
	}
	if c.Metrics != nil {
		if c.Metrics.Listen == "" {
			v.fail("metrics.listen", "is required when metrics is set")
		} else {
			v.listen("metrics.listen", c.Metrics.Listen)
			if c.Metrics.Listen == c.Listen {
				v.fail("metrics.listen", "must differ from listen")
			}
		}
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.Log.Level) {
		v.fail("log.level", "must be one of debug, info, warn, error")
	}
	if c.Log.Format != "json" && c.Log.Format != "text" {
		v.fail("log.format", "must be json or text")
	}
}

func (v *validator) server(p string, s *Server) {
	if s.Protocol == "" {
		s.Protocol = "auto"
	}
	if s.Protocol != "auto" && s.Protocol != "legacy" {
		v.fail(p+".protocol", `must be "auto" or "legacy"`)
	}
	switch {
	case s.Stdio() && s.URL != "":
		v.fail(p, "has both command and url; a server is one or the other")
	case !s.Stdio() && s.URL == "":
		v.fail(p, "needs a command (a stdio child) or a url (Streamable HTTP)")
	case s.Stdio():
		if s.Command[0] == "" {
			v.fail(p+".command[0]", "must name the program")
		}
		for i, a := range s.Command {
			if strings.ContainsRune(a, 0) {
				v.fail(fmt.Sprintf("%s.command[%d]", p, i), "contains a NUL byte")
			}
		}
		if len(s.Headers) > 0 || s.InsecureHTTP {
			v.fail(p, "headers and insecure_http are for url servers")
		}
	default:
		u, err := url.Parse(s.URL)
		switch {
		case err != nil || u.Host == "" || u.User != nil || u.Fragment != "":
			v.fail(p+".url", "must be an absolute URL without user or fragment")
		case u.Scheme == "https":
		case u.Scheme == "http" && (loopbackHost(u.Hostname()) || s.InsecureHTTP):
		case u.Scheme == "http":
			v.fail(p+".url", "http is allowed only to a loopback address; use https, or set insecure_http: true")
		default:
			v.fail(p+".url", "must be http or https")
		}
		if len(s.Env) > 0 || s.Dir != "" {
			v.fail(p, "env and dir are for command servers")
		}
	}
	v.timeout(p+".timeout", s.Timeout)
	for _, k := range sortedKeys(s.Env) {
		kp := p + ".env." + k
		switch {
		case !envName.MatchString(k):
			v.fail(kp, "is not an environment variable name")
		case k == "PATH":
			v.fail(kp, "PATH is passed on from the gateway and cannot be set")
		}
		s.Env[k] = v.value(kp, s.Env[k], sensitiveName(k))
	}
	lower := map[string]bool{}
	for _, k := range sortedKeys(s.Headers) {
		kp := p + ".headers." + k
		l := strings.ToLower(k)
		switch {
		case !headerName.MatchString(k):
			v.fail(kp, "is not a header name")
		case lower[l]:
			v.fail(kp, "another header has the same name in another case")
		case reservedHeader(l):
			v.fail(kp, "is set by the gateway and cannot be configured")
		}
		lower[l] = true
		s.Headers[k] = v.value(kp, s.Headers[k], sensitiveName(k) || l == "authorization" || l == "proxy-authorization" || l == "cookie")
	}
}

// reservedHeader reports whether a downstream header is the gateway's to
// set: the MCP transport headers and the identity headers.
func reservedHeader(l string) bool {
	switch l {
	case "host", "content-type", "content-length", "accept", "connection", "transfer-encoding",
		"mcp-session-id", "mcp-protocol-version", "mcp-method", "mcp-name", "last-event-id":
		return true
	}
	return strings.HasPrefix(l, "mcp-param-") || strings.HasPrefix(l, "x-mcp-gateway-")
}

// sensitiveName reports whether a variable or header name says it holds a
// credential.
func sensitiveName(k string) bool {
	l := strings.NewReplacer("-", "", "_", "").Replace(strings.ToLower(k))
	for _, s := range []string{"token", "secret", "password", "passwd", "apikey", "credential", "privatekey", "auth"} {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// reference is a ${NAME} reference to the gateway's environment.
var reference = regexp.MustCompile(`\$\{([^}]*)\}`)

// value resolves the ${NAME} references of a configured value. A secret
// must be references only (plus fixed text such as "Bearer "): a value
// with no reference at all is refused.
func (v *validator) value(path, s string, secret bool) string {
	refs := reference.FindAllStringSubmatchIndex(s, -1)
	if secret && len(refs) == 0 {
		v.fail(path, "holds a credential, which must come from the environment: write ${NAME}")
		return s
	}
	var b strings.Builder
	last := 0
	for _, r := range refs {
		b.WriteString(s[last:r[0]])
		name := s[r[2]:r[3]]
		last = r[1]
		if !envName.MatchString(name) {
			v.fail(path, "%s is not a valid reference; write ${NAME}", strconv.Quote(s[r[0]:r[1]]))
			continue
		}
		val, ok := v.getenv(name)
		if !ok && v.offline {
			val, ok = "${"+name+"}", true // not resolved: nothing is started
		}
		if !ok {
			v.fail(path, "refers to %s, which is not set in the environment", name)
			continue
		}
		b.WriteString(val)
	}
	b.WriteString(s[last:])
	if strings.ContainsAny(b.String(), "\x00\r\n") {
		v.fail(path, "contains a NUL or line break")
	}
	return b.String()
}

func (v *validator) listen(path, addr string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		v.fail(path, "must be host:port, as 127.0.0.1:8080")
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		v.fail(path, "the port must be a number from 0 to 65535")
	}
	_ = host
}

func (v *validator) positive(path string, n, max int) {
	if n < 1 || n > max {
		v.fail(path, "must be from 1 to %d", max)
	}
}

func (v *validator) duration(path string, d Duration, lo, hi time.Duration) {
	if time.Duration(d) < lo || time.Duration(d) > hi {
		v.fail(path, "must be from %s to %s", lo, hi)
	}
}

func (v *validator) timeout(path string, d Duration) {
	v.duration(path, d, time.Millisecond, 24*time.Hour)
}

func (v *validator) size(path string, n ByteSize, lo, hi int64) {
	if int64(n) < lo || int64(n) > hi {
		v.fail(path, "must be from %s to %s", ByteSize(lo), ByteSize(hi))
	}
}

// Loopback reports whether addr (host:port) binds a loopback address
// only: a listener there is reached by this machine alone, and a browser
// page on it through a rebound DNS name.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && loopbackHost(host)
}

// loopbackHost reports whether host is a loopback literal or localhost.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && ip.IsLoopback()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
