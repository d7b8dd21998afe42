package sqlquery

import (
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

// describeDSNError says which part of dsn made the parse fail, never a
// value from it. The form is judged first: anything that is neither a
// postgres URL nor keyword=value pairs says so, whatever pgx said.
func describeDSNError(dsn string, err error) string {
	lower := strings.ToLower(dsn)
	switch {
	case strings.HasPrefix(lower, "postgres://"), strings.HasPrefix(lower, "postgresql://"):
	case strings.Contains(dsn, "://"):
		return "the URL's scheme is not postgres:// or postgresql://"
	case !strings.Contains(dsn, "="):
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
