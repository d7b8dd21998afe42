package sqlquery

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// Classes of database failure, as logs and `bastion serve --check` name
// them. A class says what went wrong without the DSN, host, port, user or
// database name, which pgx's own messages carry.
const (
	FailRefused        = "refused"            // nothing accepts connections at the address
	FailUnknownHost    = "unknown host"       // the host name does not resolve
	FailNoSocket       = "no socket"          // no Unix socket at the path
	FailTimeout        = "timeout"            // connecting or a round trip took too long
	FailTLS            = "tls"                // the TLS handshake or the certificate failed
	FailAuthentication = "authentication"     // unknown role, wrong password, no pg_hba.conf entry
	FailNoDatabase     = "no such database"   // the database does not exist
	FailNoPrivilege    = "no privilege"       // the role may not connect to the database
	FailUnavailable    = "server unavailable" // starting up, shutting down, too many connections
	FailNotReadOnly    = "not read-only"      // the session did not start read-only
	FailConnection     = "connection"         // any other failure to reach or keep the server
)

// errNotReadOnly is the pool's refusal of a connection whose session did
// not start read-only.
var errNotReadOnly = errors.New("sqlquery: connection did not start read-only")

// FailureClass names the class of a database failure err (one of the
// Fail* constants). When pgx tried several ways to connect (each address
// of a host, TLS then plain text for sslmode=prefer), the last attempt's
// failure is the one that decided.
func FailureClass(err error) string {
	if attempts := joined(err); len(attempts) > 0 {
		return FailureClass(attempts[len(attempts)-1])
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "28P01" || pgErr.Code == "28000":
			return FailAuthentication
		case pgErr.Code == "3D000":
			return FailNoDatabase
		case pgErr.Code == "42501":
			return FailNoPrivilege
		case pgErr.Code == "53300" || pgErr.Code == "57P03" || strings.HasPrefix(pgErr.Code, "57P"):
			return FailUnavailable
		}
		return FailConnection
	}
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var recordErr tls.RecordHeaderError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalidCert x509.CertificateInvalidError
	switch {
	case errors.Is(err, errNotReadOnly):
		return FailNotReadOnly
	case errors.As(err, &dnsErr):
		return FailUnknownHost
	case errors.As(err, &certErr), errors.As(err, &recordErr), errors.As(err, &unknownCA),
		errors.As(err, &hostErr), errors.As(err, &invalidCert), tlsMessage(err):
		return FailTLS
	case errors.Is(err, syscall.ECONNREFUSED):
		return FailRefused
	case errors.Is(err, syscall.ENOENT):
		return FailNoSocket
	case pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return FailTimeout
	}
	return FailConnection
}

// joined returns the errors of the first errors.Join in err's chain.
func joined(err error) []error {
	for err != nil {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			return j.Unwrap()
		}
		err = errors.Unwrap(err)
	}
	return nil
}

// tlsMessage recognises pgx's TLS refusals that have no type of their own
// ("server refused TLS connection", "tls: …").
func tlsMessage(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "refused TLS") || strings.Contains(msg, "tls: ")
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// UnavailableError is what callers see of a database that cannot be used:
// its class, never the details. It matches errDatabase with errors.Is.
type UnavailableError struct {
	// Class is one of the Fail* constants.
	Class string
}

func (e *UnavailableError) Error() string {
	return "sqlquery: database unavailable (" + e.Class + ")"
}

// Is makes every UnavailableError an errDatabase.
func (e *UnavailableError) Is(target error) bool { return target == errDatabase }

// Explain says in a sentence what a failure class means for the operator.
func Explain(class string) string {
	switch class {
	case FailRefused:
		return "the connection was refused: is PostgreSQL running and listening on the configured host and port?"
	case FailUnknownHost:
		return "the host name does not resolve"
	case FailNoSocket:
		return "there is no Unix socket at the configured path: is PostgreSQL running, and is the socket directory right?"
	case FailTimeout:
		return "the database did not answer in time"
	case FailTLS:
		return "the TLS handshake failed: check sslmode and the certificates"
	case FailAuthentication:
		return "authentication failed: the role does not exist, or its password or pg_hba.conf entry does not admit it"
	case FailNoDatabase:
		return "the database does not exist"
	case FailNoPrivilege:
		return "the role may not connect to the database (CONNECT privilege)"
	case FailUnavailable:
		return "the server is starting up, shutting down or has too many connections"
	case FailNotReadOnly:
		return "the session did not start read-only: does a pooler between here and PostgreSQL drop startup parameters?"
	}
	return "the connection failed"
}
