package sqlquery

import (
	"regexp"
	"strings"
)

// DSNForms is what MCP_SQL_DSN accepts, for the last part of its errors.
const DSNForms = "a postgres:// or postgresql:// URL (postgres://reader@db.example:5432/app?sslmode=verify-full) " +
	"or keyword=value pairs (host=/run/postgresql dbname=app user=reader); keep the password out of it, in a " +
	"password file (~/.pgpass or PGPASSFILE)"

// dsnParts maps the messages of pgx's connection-string parser to the part
// of the DSN they are about. pgx's own error text quotes the connection
// string and its inner errors can repeat values from it, so only the part
// is ever shown. The first match wins: the more specific come first.
var dsnParts = []struct{ msg, part string }{
	{"failed to parse as URL", "the URL does not parse (a reserved character in the user name or password must be percent-encoded)"},
	{"failed to parse as keyword/value", "the keyword=value pairs do not parse (a value with spaces is single-quoted, a quote inside it backslash-escaped)"},
	{"not in ConnStringAllowedKeys", "a parameter name is not accepted"},
	{"failed to read service", "the service file or service name (service, PGSERVICEFILE) cannot be used"},
	{"invalid sslcertmode", "sslcertmode is not one of disable, allow, require"},
	{"invalid connect_timeout", "connect_timeout is not a whole number of seconds"},
	{"could not match", "the hosts and the ports do not pair up (one port, or one per host)"},
	{"invalid port", "a port is not a number in 1..65535"},
	{"sslmode is invalid", "sslmode is not one of disable, allow, prefer, require, verify-ca, verify-full"},
	{"failed to configure TLS", "sslmode or the TLS files (sslmode is one of disable, allow, prefer, require, verify-ca, verify-full; sslrootcert, sslcert and sslkey must be readable files)"},
	{"target_session_attrs", "target_session_attrs is not one of any, read-write, read-only, primary, standby, prefer-standby"},
	{"min_protocol_version", "min_protocol_version or max_protocol_version is not a protocol version"},
	{"max_protocol_version", "min_protocol_version or max_protocol_version is not a protocol version"},
	{"channel_binding", "channel_binding is not one of disable, prefer, require"},
	{"require_auth", "require_auth names an unknown method"},
	{"pool_", "a pool_* parameter is not a valid number or duration"},
}

// dsnFormProblem judges the form of dsn before pgx reads it, and returns
// what is wrong, or "". pgx takes a URL only with a lower-case postgres://
// or postgresql:// scheme and reads anything else that holds an "=" as
// keyword=value pairs, sending unknown keywords to the server as settings:
// "POSTGRES://u:pw@host/db?sslmode=require" would reach the default
// server, not host, with the user, password and host as the name of a
// setting, which lands in that server's log. So a URL with another
// spelling of the scheme, or with an "@" past its host (an unescaped "/"
// in the password), is refused here, and the settings pgx made are
// checked after it (settingsProblem).
func dsnFormProblem(dsn string) string {
	i := strings.Index(dsn, "://")
	if i < 0 || !schemeSyntax.MatchString(dsn[:i]) {
		return "" // keyword=value pairs, or nothing pgx will take
	}
	switch scheme := dsn[:i]; {
	case scheme == "postgres", scheme == "postgresql":
	case strings.EqualFold(scheme, "postgres"), strings.EqualFold(scheme, "postgresql"):
		return "the URL's scheme must be lower-case postgres:// or postgresql://"
	default:
		return "the URL's scheme is not postgres:// or postgresql://"
	}
	if atPastHost(dsn[i+3:]) {
		return misplacedAt
	}
	return ""
}

// misplacedAt is the part at fault when an "@" follows the host.
const misplacedAt = "an \"@\" follows the host: a reserved character (/ ? # @ :) in the user name or password must be percent-encoded"

// atPastHost reports whether rest, a URL after its "://", is a user name
// and password cut short by a reserved character: no "@" in the authority,
// and one later in the path, or anywhere after an authority whose "port"
// is not a number (pw?x@host puts "pw" in the port). An "@" in the query
// of a URL with a plain host is a setting's value and is left alone.
func atPastHost(rest string) bool {
	end := strings.IndexAny(rest, "/?#")
	if end < 0 || strings.Contains(rest[:end], "@") {
		return false
	}
	path := rest[end:]
	if q := strings.IndexAny(path, "?#"); q >= 0 {
		path = path[:q]
	}
	if strings.Contains(path, "@") {
		return true
	}
	authority := rest[:end]
	colon := strings.LastIndex(authority, ":")
	if colon < 0 || strings.HasSuffix(authority, "]") {
		return false
	}
	port := authority[colon+1:]
	return strings.Trim(port, "0123456789") != "" && strings.Contains(rest[end:], "@")
}

// schemeSyntax is RFC 3986's scheme: what comes before "://" in a URL.
var schemeSyntax = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)

// settingSyntax is the name of a PostgreSQL setting, custom ones
// ("ext.name") included.
var settingSyntax = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// settingsProblem returns what is wrong with the run-time settings pgx
// parsed from a DSN, or "": a keyword that is no setting name is a URL
// that lost its scheme ("u:pw@host/db?sslmode=require" reads as one
// keyword), or a typo, and must not be sent to a server.
func settingsProblem(params map[string]string) string {
	for k := range params {
		if !settingSyntax.MatchString(k) {
			return "a keyword is not a PostgreSQL parameter name (a URL needs its postgres:// scheme)"
		}
	}
	return ""
}

// describeDSNError says which part of dsn made the parse fail, never a
// value from it. The form is judged first: anything that is neither a
// postgres URL nor keyword=value pairs says so, whatever pgx said.
func describeDSNError(dsn string, err error) string {
	if p := dsnFormProblem(dsn); p != "" {
		return p
	}
	if !strings.Contains(dsn, "=") && !strings.Contains(dsn, "://") {
		return "it is neither a URL nor keyword=value pairs"
	}
	msg := err.Error()
	for _, p := range dsnParts {
		if strings.Contains(msg, p.msg) {
			return p.part
		}
	}
	return "a parameter's value is not accepted"
}
