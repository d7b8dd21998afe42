package sqlquery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcp-bastion/bastion/internal/problem"
)

// execMode is the one protocol mode user SQL ever runs in. It is passed to
// every Query call as an explicit argument, which outranks the pool's
// default and anything a DSN says (default_query_exec_mode=simple_protocol
// would otherwise let "SELECT 1; DROP …" run as two statements). The
// extended protocol carries exactly one statement per Parse.
const execMode = pgx.QueryExecModeDescribeExec

// ExecOptions configure an [Executor].
type ExecOptions struct {
	// StatementTimeout is the transaction-local statement_timeout.
	StatementTimeout time.Duration
	// LockTimeout is the transaction-local lock_timeout (default 1 s,
	// at most StatementTimeout).
	LockTimeout time.Duration
	// MaxConns is the pool size.
	MaxConns int32
	// MaxResultBytes bounds the values of one result, counted as
	// PostgreSQL sends them (default [DefaultMaxResultBytes]). Rows past
	// it are not read and the result is marked truncated; a first row
	// larger than it is refused with MCP_PAYLOAD_TOO_LARGE, and no single
	// protocol message may exceed it by more than [messageSlack].
	MaxResultBytes int
	// Logger receives operational logs; nil discards them. It never
	// receives the DSN, host or user names, or SQL text.
	Logger *slog.Logger
}

// Executor runs prepared queries in read-only transactions on a pool of
// connections that default to read-only. It is safe for concurrent use.
type Executor struct {
	pool *pgxpool.Pool
	opts ExecOptions
	log  *slog.Logger
}

// DefaultMaxResultBytes is the result size bound unless
// [ExecOptions.MaxResultBytes] says otherwise.
const DefaultMaxResultBytes = 1 << 20

// messageSlack is what a protocol message may carry beyond
// MaxResultBytes: a data row's framing, or a row description of up to
// 1,664 columns with long names.
const messageSlack = 256 << 10

// errDatabase is what callers see of any connection or server failure: the
// detail may name hosts, users or the DSN, so it stays out of the error.
var errDatabase = errors.New("sqlquery: database unavailable")

// NewExecutor builds the pool for dsn. It does not connect; the first query
// does. Errors never contain the DSN.
func NewExecutor(dsn string, opts ExecOptions) (*Executor, error) {
	if opts.StatementTimeout <= 0 {
		opts.StatementTimeout = 10 * time.Second
	}
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = time.Second
	}
	opts.LockTimeout = min(opts.LockTimeout, opts.StatementTimeout)
	if opts.MaxConns <= 0 {
		opts.MaxConns = 4
	}
	if opts.MaxResultBytes <= 0 {
		opts.MaxResultBytes = DefaultMaxResultBytes
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's parse errors quote the connection string.
		return nil, errors.New("MCP_SQL_DSN: not a valid PostgreSQL connection string")
	}
	cfg.MaxConns = opts.MaxConns
	cfg.MinConns = 0
	cfg.MaxConnIdleTime = 5 * time.Minute
	cfg.ConnConfig.DefaultQueryExecMode = execMode
	cfg.ConnConfig.StatementCacheCapacity = 0
	cfg.ConnConfig.DescriptionCacheCapacity = 0
	// Every connection starts read-only, whatever the DSN or the role
	// says; a transaction that forgot READ ONLY would still be read-only.
	cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	cfg.ConnConfig.RuntimeParams["application_name"] = "mcp-bastion"
	// Cancellation must stop the query on the server, not just abandon
	// the socket: send a cancel request at once, and close the connection
	// if the server has not answered within a second.
	cfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: time.Second}
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		var ro string
		if err := c.QueryRow(ctx, "SHOW default_transaction_read_only", execMode).Scan(&ro); err != nil {
			return err
		}
		if ro != "on" {
			return errors.New("sqlquery: connection did not start read-only")
		}
		// pgx reads a whole data row into memory before the result
		// loop can count it; this bounds that row.
		c.PgConn().Frontend().SetMaxBodyLen(opts.MaxResultBytes + messageSlack)
		return nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, errors.New("MCP_SQL_DSN: cannot build a connection pool")
	}
	return &Executor{pool: pool, opts: opts, log: log}, nil
}

// Close closes the pool.
func (e *Executor) Close() error {
	e.pool.Close()
	return nil
}

// Ping checks that a connection can be made, for start-up checks. The
// error never carries connection details.
func (e *Executor) Ping(ctx context.Context) error {
	if err := e.pool.Ping(ctx); err != nil {
		e.logFailure("ping", err)
		return errDatabase
	}
	return nil
}

// Column describes a result column.
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// ResultSet is a query result mapped to JSON values.
type ResultSet struct {
	Columns  []Column `json:"columns"`
	Rows     [][]any  `json:"rows"`
	RowCount int      `json:"row_count"`
	// Truncated reports that rows were cut: by the row clamp (see
	// [Prepared.Truncated]) or by [ExecOptions.MaxResultBytes].
	Truncated bool `json:"truncated"`
}

// Run executes prep in a new read-only transaction that is always rolled
// back. A connection that showed any anomaly is closed instead of being
// returned to the pool. Errors are *problem.Problem for what the caller
// caused and plain errors (without connection details) otherwise.
func (e *Executor) Run(ctx context.Context, prep *Prepared) (*ResultSet, error) {
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		e.logFailure("acquire", err)
		return nil, errDatabase
	}
	healthy := false
	defer func() {
		if !healthy {
			// Closing before Release makes the pool destroy it.
			closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
			conn.Conn().Close(closeCtx)
			cancel()
		}
		conn.Release()
	}()

	rs, runErr := e.run(ctx, conn.Conn(), prep)

	// Always roll back, even after success: nothing a query does may
	// outlive it. The rollback must run even if ctx is already done.
	rbCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	pc := conn.Conn().PgConn()
	// A closed connection has no transaction left: PostgreSQL rolled it
	// back when the connection went away.
	if !pc.IsClosed() && pc.TxStatus() != 'I' {
		if _, err := pc.Exec(rbCtx, "ROLLBACK").ReadAll(); err != nil {
			e.logFailure("rollback", err)
			return nil, firstErr(runErr, errDatabase)
		}
	}
	healthy = !pc.IsClosed() && pc.TxStatus() == 'I' && cleanError(runErr) && e.sessionClean(rbCtx, pc)
	return rs, runErr
}

// sessionClean checks, after the rollback, for what a rollback does not
// undo: session-level advisory locks, and the read-only default. The policy
// refuses every way to cause either; finding one is an anomaly, and the
// connection is closed rather than reused.
func (e *Executor) sessionClean(ctx context.Context, pc *pgconn.PgConn) bool {
	res, err := pc.Exec(ctx, "SELECT count(*) FROM pg_catalog.pg_locks WHERE pid = pg_catalog.pg_backend_pid() AND locktype = 'advisory'; "+
		"SELECT count(*) FROM pg_catalog.pg_prepared_statements; "+
		"SHOW default_transaction_read_only").ReadAll()
	if err != nil || len(res) != 3 || len(res[0].Rows) != 1 || len(res[1].Rows) != 1 || len(res[2].Rows) != 1 {
		e.logFailure("session check", err)
		return false
	}
	// The pool only ever uses the unnamed statement, so any named
	// prepared statement was made by a query.
	locks, prepared, ro := string(res[0].Rows[0][0]), string(res[1].Rows[0][0]), string(res[2].Rows[0][0])
	if locks != "0" || prepared != "0" || ro != "on" {
		e.log.Warn("connection discarded: session state survived the rollback",
			slog.Bool("advisory_locks", locks != "0"), slog.Bool("prepared_statements", prepared != "0"),
			slog.Bool("read_only_default", ro == "on"))
		return false
	}
	return true
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// cleanError reports whether err leaves the connection fit for reuse: no
// error, or an ordinary SQL error the server reported in an intact session.
func cleanError(err error) bool {
	if err == nil {
		return true
	}
	var pgErr *pgconn.PgError
	var pr *problem.Problem
	return errors.As(err, &pr) && errors.As(err, &pgErr) && pgErr.Code != "57014"
}

func (e *Executor) run(ctx context.Context, conn *pgx.Conn, prep *Prepared) (*ResultSet, error) {
	pc := conn.PgConn()
	// BEGIN and the transaction-local settings are fixed, trusted text.
	// The last five fix the text forms the value mapping reads.
	begin := fmt.Sprintf("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; "+
		"SET LOCAL statement_timeout = %d; SET LOCAL lock_timeout = %d; "+
		"SET LOCAL idle_in_transaction_session_timeout = %d; "+
		"SET LOCAL TimeZone = 'UTC'; SET LOCAL DateStyle = 'ISO, YMD'; SET LOCAL IntervalStyle = 'iso_8601'; "+
		"SET LOCAL extra_float_digits = 1; SET LOCAL bytea_output = 'hex'",
		e.opts.StatementTimeout.Milliseconds(), e.opts.LockTimeout.Milliseconds(),
		(e.opts.StatementTimeout + 5*time.Second).Milliseconds())
	if _, err := pc.Exec(ctx, begin).ReadAll(); err != nil {
		return nil, e.classify(ctx, "begin", err)
	}
	rows, err := conn.Query(ctx, prep.SQL, execMode, allText)
	if err != nil {
		return nil, e.classify(ctx, "query", err)
	}
	defer rows.Close()
	// pgx reuses the descriptions for the next query on the connection,
	// and the type lookup below is one.
	fds := slices.Clone(rows.FieldDescriptions())
	rs := &ResultSet{Columns: make([]Column, len(fds)), Rows: [][]any{}}
	tm := conn.TypeMap()
	for i, fd := range fds {
		rs.Columns[i] = Column{Name: fd.Name, Type: typeName(tm, fd.DataTypeOID)}
	}
	// The rows are kept as PostgreSQL sent them and mapped once the
	// result is complete: an array of one of the database's own types
	// can only be mapped after a catalog lookup on this connection.
	var raws [][][]byte
	var seen int64
	size, cut := 0, false
	for rows.Next() {
		seen++
		if seen > prep.Limit {
			// The probe row: it proves the clamp cut the result.
			break
		}
		raw := rows.RawValues()
		size += len("[],")
		for _, v := range raw {
			size += jsonCost(v)
		}
		if size > e.opts.MaxResultBytes {
			// Closing rows would read and discard every row left;
			// stop the query instead. PostgreSQL rolls back the
			// transaction of a connection that goes away, and Run
			// discards it.
			abandon(ctx, pc)
			if len(raws) == 0 {
				return nil, tooLarge(e.opts.MaxResultBytes, "a row")
			}
			cut = true
			break
		}
		raws = append(raws, copyRow(raw))
	}
	rows.Close()
	if err := rows.Err(); err != nil && !cut {
		return nil, e.classify(ctx, "query", err)
	}
	var at arrayTypes
	if oids := unknownOIDs(tm, fds); len(raws) > 0 && len(oids) > 0 {
		if cut {
			// This connection is gone with the query; the catalog is
			// the same from any other.
			at = e.lookupArraysFresh(ctx, oids)
		} else {
			at = e.lookupArrays(ctx, conn, oids)
		}
	}
	for _, raw := range raws {
		row := make([]any, len(raw))
		for i := range raw {
			jv, err := columnJSON(tm, at, fds[i].DataTypeOID, raw[i])
			if err != nil {
				return nil, fmt.Errorf("sqlquery: column %d (%s): %w", i+1, rs.Columns[i].Type, err)
			}
			row[i] = jv
		}
		rs.Rows = append(rs.Rows, row)
	}
	rs.RowCount = len(rs.Rows)
	rs.Truncated = cut || prep.Truncated(seen)
	return rs, nil
}

// allText fetches every column in PostgreSQL's text format (a type
// missing from the map gets format 0, text): it is the exact value of
// every type, and the value mapping reads it.
var allText = pgx.QueryResultFormatsByOID{}

// copyRow copies the values of a row out of pgx's read buffer, which the
// next row overwrites, into one allocation.
func copyRow(raw [][]byte) [][]byte {
	n := 0
	for _, v := range raw {
		n += len(v)
	}
	buf := make([]byte, 0, n)
	row := make([][]byte, len(raw))
	for i, v := range raw {
		if v == nil {
			continue // NULL stays nil
		}
		buf = append(buf, v...)
		row[i] = buf[len(buf)-len(v) : len(buf) : len(buf)]
	}
	return row
}

// arrayLookup finds which of the given types are arrays, with their
// element type (domains resolved, through any number of levels, to their
// base type) and delimiter. It is fixed, trusted SQL with the OIDs bound
// as a parameter, and names every operator and type by schema, as pg_dump
// does, so that nothing the database defines on its search_path can stand
// in for them.
const arrayLookup = `WITH RECURSIVE arrays AS (
  SELECT a.oid AS arr, a.typelem AS elem, e.typdelim AS delim
  FROM pg_catalog.pg_type a JOIN pg_catalog.pg_type e ON e.oid OPERATOR(pg_catalog.=) a.typelem
  WHERE a.oid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[]) AND a.typcategory OPERATOR(pg_catalog.=) 'A'
), base (arr, t, depth) AS (
  SELECT arr, elem, 0 FROM arrays
  UNION ALL
  SELECT b.arr, d.typbasetype, b.depth OPERATOR(pg_catalog.+) 1
  FROM base b JOIN pg_catalog.pg_type d ON d.oid OPERATOR(pg_catalog.=) b.t
  WHERE d.typtype OPERATOR(pg_catalog.=) 'd' AND b.depth OPERATOR(pg_catalog.<) 32
)
SELECT DISTINCT ON (a.arr) a.arr::pg_catalog.int8, b.t::pg_catalog.int8, a.delim::pg_catalog.text
FROM arrays a JOIN base b ON b.arr OPERATOR(pg_catalog.=) a.arr
ORDER BY a.arr, b.depth DESC`

// unknownOIDs lists the column types the mapping cannot settle without the
// catalog.
func unknownOIDs(tm *pgtype.Map, fds []pgconn.FieldDescription) []uint32 {
	var oids []uint32
	for _, fd := range fds {
		if !known(tm, fd.DataTypeOID) && !slices.Contains(oids, fd.DataTypeOID) {
			oids = append(oids, fd.DataTypeOID)
		}
	}
	return oids
}

// lookupArrays asks the catalog, on conn (in the query's own transaction),
// about oids: arrays of the database's enums, domains and composites. A
// failure is logged and leaves those columns as text.
func (e *Executor) lookupArrays(ctx context.Context, conn *pgx.Conn, oids []uint32) arrayTypes {
	at := arrayTypes{}
	// An element type can itself be an array the mapping does not know
	// (a domain over mood[]): ask again for those, a few levels deep.
	for range 4 {
		rows, err := conn.Query(ctx, arrayLookup, execMode, oids)
		if err != nil {
			e.logFailure("type lookup", err)
			return nil
		}
		var next []uint32
		for rows.Next() {
			var oid, elem int64
			var delim string
			if err := rows.Scan(&oid, &elem, &delim); err != nil || len(delim) != 1 {
				continue
			}
			at[uint32(oid)] = arrayInfo{elem: uint32(elem), delim: delim[0]}
			if _, seen := at[uint32(elem)]; !seen && !known(conn.TypeMap(), uint32(elem)) && !slices.Contains(next, uint32(elem)) {
				next = append(next, uint32(elem))
			}
		}
		if err := rows.Err(); err != nil {
			e.logFailure("type lookup", err)
			return nil
		}
		if len(next) == 0 {
			break
		}
		oids = next
	}
	return at
}

// lookupArraysFresh is lookupArrays on a connection of its own, for a
// result whose connection was closed to stop its query. The connection
// has the pool's settings (read-only by default, pinned exec mode) and is
// closed at once.
func (e *Executor) lookupArraysFresh(ctx context.Context, oids []uint32) arrayTypes {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	c, err := pgx.ConnectConfig(ctx, e.pool.Config().ConnConfig.Copy())
	if err != nil {
		e.logFailure("type lookup", err)
		return nil
	}
	defer c.Close(ctx)
	return e.lookupArrays(ctx, c, oids)
}

// abandon stops the running query on the server and closes the
// connection without reading the rest of its result.
func abandon(ctx context.Context, pc *pgconn.PgConn) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_ = pc.CancelRequest(ctx) // best effort: closing ends the query too, once it next sends
	_ = pc.Close(ctx)
}

// tooLarge refuses a result when what (a row, or any message the database
// sent) alone exceeds limit bytes.
func tooLarge(limit int, what string) *problem.Problem {
	return problem.Newf(problem.PayloadTooLarge, []string{"query"},
		"%s is larger than the result limit of %d bytes; select fewer or narrower columns", what, limit).
		WithMetadata("max_result_bytes", limit)
}

// jsonCost is what a value adds to a result counted against
// MaxResultBytes: its text as a JSON string with a separator, so that
// NULLs and empty strings count, and characters JSON escapes count as
// their escapes (a control character is six bytes). What is emitted stays
// within 3× of the count: booleans inside arrays grow most (f, to false,),
// numerics in arrays gain quotes, base64 of bytea a third.
func jsonCost(v []byte) int {
	if v == nil {
		return len("null,")
	}
	n := len(v) + len(`"",`)
	for _, c := range v {
		switch {
		case c < 0x20:
			n += 5
		case c == '"' || c == '\\':
			n++
		}
	}
	return n
}

// classify maps a failure to what the caller may see. SQL errors caused by
// the query are in-band problems; anything else is an internal error whose
// detail stays in the log, without connection details.
func (e *Executor) classify(ctx context.Context, step string, err error) error {
	if ctx.Err() != nil {
		// Deadline or cancellation: the session reports it.
		return fmt.Errorf("sqlquery: %s: %w", step, context.Cause(ctx))
	}
	var tooBig *pgproto3.ExceededMaxBodyLenErr
	if errors.As(err, &tooBig) {
		// The connection is unusable after this and is discarded. The
		// message may have been a row or an error echoing a huge value.
		return tooLarge(e.opts.MaxResultBytes, "a row or message from the database").WithCause(err)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		e.logFailure(step, err)
		return errDatabase
	}
	var code problem.Code
	switch {
	case pgErr.Code == "57014":
		code = problem.ExecutionTimeout
	case pgErr.Code == "25006":
		code = problem.QueryViolation
	case pgErr.Code == "42501":
		code = problem.AccessDenied
	default:
		switch pgErr.Code[:2] {
		case "21", "22", "42", "0A", "54":
			code = problem.Validation
		case "3F": // invalid schema name: the query named a schema that does not exist
			code = problem.Validation
		case "55":
			// 55000 object not in prerequisite state, e.g. currval()
			// before nextval() in this session: the query's fault.
			if pgErr.Code == "55000" {
				code = problem.Validation
			}
		}
	}
	if code == "" {
		e.log.Warn("database error", slog.String("step", step), slog.String("sqlstate", pgErr.Code))
		return errDatabase
	}
	detail := "SQLSTATE " + pgErr.Code + ": " + pgErr.Message
	if code == problem.ExecutionTimeout {
		detail = "the query exceeded the statement timeout of " + e.opts.StatementTimeout.String()
	}
	return problem.New(code, problem.Cap(detail), "query").
		WithMetadata("sqlstate", pgErr.Code).WithCause(err)
}

// logFailure logs an infrastructure failure by category and SQLSTATE only:
// pgx's messages name hosts and users.
func (e *Executor) logFailure(step string, err error) {
	attrs := []any{slog.String("step", step)}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		attrs = append(attrs, slog.String("sqlstate", pgErr.Code))
	} else if pgconn.Timeout(err) {
		attrs = append(attrs, slog.String("cause", "timeout"))
	} else {
		attrs = append(attrs, slog.String("cause", "connection"))
	}
	e.log.Error("database failure", attrs...)
}

// typeName names a column type: pgx's name for built-in types, else the
// OID.
func typeName(tm *pgtype.Map, oid uint32) string {
	if t, ok := tm.TypeForOID(oid); ok {
		return t.Name
	}
	return "oid:" + strconv.FormatUint(uint64(oid), 10)
}
