package sqlquery

import (
	"strings"
	"testing"
)

// TestDSNErrorsNamePart: a DSN pgx cannot parse is refused naming the part
// at fault and the accepted forms, never quoting the DSN: its user, host,
// password and database stay out of the message.
func TestDSNErrorsNamePart(t *testing.T) {
	const private = "s3cr3t-Pw"
	tests := []struct{ dsn, part string }{
		{"postgres://reader:" + private + "@db-host-x:notaport/app_x", "a port is not a number"},
		{"host=db-host-x port=abc password=" + private, "a port is not a number"},
		{"postgres://reader@db-host-x/app_x?sslmode=bogus&password=" + private, "sslmode is not one of"},
		{"postgres://reader@db-host-x/app_x?connect_timeout=soon&password=" + private, "connect_timeout is not a whole number"},
		{"mysql://reader:" + private + "@db-host-x/app_x", "scheme is not postgres://"},
		{"reader " + private + " db-host-x", "neither a URL nor keyword=value pairs"},
		{"host='db-host-x password=" + private, "keyword=value pairs do not parse"},
		{"postgres://reader:%zz" + private + "@db-host-x/app_x", "the URL does not parse"},
		{"postgres://reader:" + private + "@db-host-x/app_x?pool_max_conns=many", "a pool_* parameter"},
		{"host=db-host-x,db-host-y port=1,2,3 password=" + private, "do not pair up"},
		{"postgres://reader:" + private + "@db-host-x/app_x?target_session_attrs=any-x", "target_session_attrs"},
		{"host=db-host-x sslmode=verify-full sslrootcert=/nonexistent/ca-x.pem password=" + private, "the TLS files"},
		{"host=db-host-x channel_binding=maybe password=" + private, "channel_binding"},
		// Read by pgx as keyword=value pairs, the URL's user, password
		// and host the name of a setting sent to the default server.
		{"POSTGRES://reader:" + private + "@db-host-x:5432/app_x?sslmode=require", "must be lower-case"},
		{"Postgresql://reader:" + private + "@db-host-x/app_x?sslmode=require", "must be lower-case"},
		{"reader:" + private + "@db-host-x/app_x?sslmode=require", "not a PostgreSQL parameter name"},
		{"host=db-host-x reader:" + private + "=1", "not a PostgreSQL parameter name"},
		// An unescaped "/" in the password: pgx would call it a port.
		{"postgres://reader:" + private + "/x@db-host-x/app_x", "must be percent-encoded"},
		{"postgres://reader:" + private + "?x@db-host-x/app_x", "must be percent-encoded"},
	}
	for _, tt := range tests {
		_, err := NewExecutor(tt.dsn, ExecOptions{MaxConns: 1, MaxResultBytes: 1024})
		if err == nil {
			t.Errorf("NewExecutor(%q) accepted it", tt.dsn)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "MCP_SQL_DSN: ") || !strings.Contains(msg, tt.part) || !strings.HasSuffix(msg, DSNForms) {
			t.Errorf("NewExecutor(%q) = %q; want MCP_SQL_DSN: %s…: %s", tt.dsn, msg, tt.part, DSNForms)
		}
		for _, s := range []string{private, "db-host-x", "app_x", "reader:"} {
			if strings.Contains(msg, s) {
				t.Errorf("NewExecutor(%q) error quotes %q: %s", tt.dsn, s, msg)
			}
		}
	}
}

// TestDSNAcceptedForms: the forms a user writes are still taken.
func TestDSNAcceptedForms(t *testing.T) {
	for _, dsn := range []string{
		"postgres://reader@localhost:5432/app?sslmode=disable",
		"postgresql://reader:p%40ss%2Fw@db.example/app?sslmode=verify-full&application_name=x",
		"postgres:///app?host=/run/postgresql",
		"host=/run/postgresql dbname=app user=reader",
		"host=localhost port=5432 dbname=app user=reader options='-c statement_timeout=5s' search_path=reporting",
		"host=h dbname=app app.custom_setting=on",
		"postgres://db.example/app?application_name=a@b",
		"postgres://reader@h1:5432,h2:5433/app?target_session_attrs=read-write",
		"postgres://[::1]:5432/app",
	} {
		e, err := NewExecutor(dsn, ExecOptions{MaxConns: 1, MaxResultBytes: 1024})
		if err != nil {
			t.Errorf("NewExecutor(%q) = %v", dsn, err)
			continue
		}
		e.Close()
	}
}
