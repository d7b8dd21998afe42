package sqlquery

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
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
	// AllowFunctions are VOLATILE functions of the database that queries
	// may call nonetheless, each schema-qualified as [ParseFunctionList]
	// returns them (the catalog check, vet.go).
	AllowFunctions []string
	// Logger receives operational logs; nil discards them. It never
	// receives the DSN, host or user names, or SQL text.
	Logger *slog.Logger
}

// Executor runs prepared queries in read-only transactions on a pool of
// connections that default to read-only. It is safe for concurrent use.
type Executor struct {
	pool   *pgxpool.Pool
	opts   ExecOptions
	log    *slog.Logger
	allow  map[qualifiedName]struct{}
	vetted vetCache
	// conns maps each pooled *pgconn.PgConn to its *connState; an entry
	// goes when its connection is closed.
	conns sync.Map
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
	allow := make(map[qualifiedName]struct{}, len(opts.AllowFunctions))
	for _, s := range opts.AllowFunctions {
		parts, err := parseQualified(s)
		if err != nil {
			return nil, fmt.Errorf("MCP_SQL_ALLOW_FUNCTIONS: %w", err)
		}
		allow[qualifiedName{parts[0], parts[1]}] = struct{}{}
	}
	if p := dsnFormProblem(dsn); p != "" {
		return nil, fmt.Errorf("MCP_SQL_DSN: %s: %s", p, DSNForms)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's parse errors quote the connection string: only the
		// part at fault is named.
		return nil, fmt.Errorf("MCP_SQL_DSN: %s: %s", describeDSNError(dsn, err), DSNForms)
	}
	if p := settingsProblem(cfg.ConnConfig.RuntimeParams); p != "" {
		return nil, fmt.Errorf("MCP_SQL_DSN: %s: %s", p, DSNForms)
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
			return errNotReadOnly
		}
		// pgx reads a whole data row into memory before the result
		// loop can count it; this bounds that row.
		c.PgConn().Frontend().SetMaxBodyLen(opts.MaxResultBytes + messageSlack)
		return nil
	}
	e := &Executor{opts: opts, log: log, allow: allow}
	cfg.BeforeClose = func(c *pgx.Conn) { e.conns.Delete(c.PgConn()) }
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, errors.New("MCP_SQL_DSN: cannot build a connection pool")
	}
	e.pool = pool
	return e, nil
}

// Close closes the pool.
func (e *Executor) Close() error {
	e.pool.Close()
	return nil
}

// Check runs the start-up checks `bastion serve` runs, and --check with
// it: a connection can be made, and its session starts read-only. It
// also reports the allowed functions (ExecOptions.AllowFunctions) that
// match no function of the database, which the operator likely misspelt.
// A failure is an *UnavailableError naming its class, never connection
// details.
func (e *Executor) Check(ctx context.Context) (unknownAllowed []string, err error) {
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		e.logFailure("connect", err)
		return nil, &UnavailableError{Class: FailureClass(err)}
	}
	defer conn.Release()
	for qn := range e.allow {
		var n int
		err := conn.QueryRow(ctx, `SELECT pg_catalog.count(*) FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace
WHERE n.nspname OPERATOR(pg_catalog.=) $1 AND p.proname OPERATOR(pg_catalog.=) $2`, execMode, qn.schema, qn.name).Scan(&n)
		if err != nil {
			e.logFailure("check", err)
			return nil, &UnavailableError{Class: FailureClass(err)}
		}
		if n == 0 {
			unknownAllowed = append(unknownAllowed, sqlIdent(qn.schema)+"."+sqlIdent(qn.name))
		}
	}
	slices.Sort(unknownAllowed)
	return unknownAllowed, nil
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

// cursorName is the cursor every query runs in. The session-effect check
// closes it before counting the session's cursors.
const cursorName = "bastion_rows"

// Run executes prep in a new read-only transaction that is always rolled
// back. The query runs as a cursor; the executor fetches Limit of its rows
// and moves past one more to learn whether rows were cut: the bound
// applies from outside, so the query itself, its
// LIMIT, OFFSET or WITH TIES included, is never changed and the rows
// returned are a prefix of what it returns. Before the rows are handed
// back, the session-effect check (effects.go) looks for anything the
// query left on the session; an effect, or any other anomaly, refuses the
// call or closes the connection instead of returning it to the pool.
// Errors are *problem.Problem for what the caller caused and plain errors
// (without connection details) otherwise.
func (e *Executor) Run(ctx context.Context, prep *Prepared) (*ResultSet, error) {
	return e.runArgs(ctx, prep, nil)
}

// runArgs is Run with args bound to the parameters of prep.SQL. Only the
// fixed catalog queries of this package (schema.go) have parameters:
// user SQL never does (the policy refuses them), and Run binds none.
func (e *Executor) runArgs(ctx context.Context, prep *Prepared, args [][]byte) (*ResultSet, error) {
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		e.logFailure("acquire", err)
		return nil, &UnavailableError{Class: FailureClass(err)}
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

	q := &query{e: e, conn: conn.Conn(), pc: conn.Conn().PgConn(), prep: prep, args: args}
	raws, err := q.runAndEnd(ctx, &healthy)
	if err != nil {
		return nil, err
	}
	return q.result(ctx, raws)
}

// runAndEnd runs the query and ends its transaction, and sets healthy to
// whether the connection may go back to the pool. It returns the rows as
// PostgreSQL sent them.
func (q *query) runAndEnd(ctx context.Context, healthy *bool) ([][][]byte, error) {
	raws, runErr := q.run(ctx)
	// Always roll back, even after success: nothing a query does may
	// outlive it. The end must run even if ctx is already done.
	endCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	clean, endErr := q.end(endCtx)
	*healthy = clean && cleanError(runErr)
	// An effect the query left outranks whatever else it did.
	if endErr != nil {
		return nil, endErr
	}
	return raws, runErr
}

// connState is what a pooled connection's session looks like inside the
// executor's transaction, read once per connection.
type connState struct {
	settings string // settingsExpr
	schemas  string // current_schemas(true), as text
}

// query is one run of a prepared query on one connection.
type query struct {
	e    *Executor
	conn *pgx.Conn
	pc   *pgconn.PgConn
	prep *Prepared
	args [][]byte // values of prep.SQL's parameters, in text form; nil for user SQL

	settings string // the session's settings when the transaction began
	declared bool   // the cursor exists
	fds      []pgconn.FieldDescription
	seen     int64 // rows fetched, plus one when a row is left after them
	cut      bool  // the result bound stopped the fetch
}

// run begins the transaction, vets the query's functions, declares the
// cursor and fetches the rows, kept as PostgreSQL sent them.
func (q *query) run(ctx context.Context) ([][][]byte, error) {
	e := q.e
	// A connection's first transaction also reads what its session looks
	// like inside a transaction: the settings, to compare with at the end
	// of every call, and the search_path the catalog check resolves
	// names in. Every call proves at its end that the session is as it
	// was, so later transactions begin alike, and reading it again
	// (reading pg_settings costs about half a millisecond of server
	// time) would find the same.
	st, known := e.conns.Load(q.pc)
	begin := e.begin()
	if !known {
		begin += "; SELECT " + settingsExpr + ", pg_catalog.current_schemas(true)::pg_catalog.text"
	}
	res, err := q.pc.Exec(ctx, begin).ReadAll()
	if err != nil {
		return nil, e.classify(ctx, "begin", err)
	}
	if !known {
		last := res[len(res)-1]
		if len(last.Rows) != 1 || len(last.Rows[0]) != 2 {
			e.log.Error("database failure", slog.String("step", "begin"), slog.String("cause", "unexpected reply"))
			return nil, errDatabase
		}
		st, _ = e.conns.LoadOrStore(q.pc, &connState{settings: string(last.Rows[0][0]), schemas: string(last.Rows[0][1])})
	}
	q.settings = st.(*connState).settings
	if len(q.prep.Functions) > 0 {
		if err := e.vet(ctx, q.conn, st.(*connState).schemas, q.prep.Functions); err != nil {
			return nil, err
		}
	}
	// The extended protocol carries exactly one statement, whatever the
	// text holds, and DECLARE takes only a query.
	if err := execOne(ctx, q.pc, "DECLARE "+cursorName+" NO SCROLL CURSOR FOR "+q.prep.SQL, q.args...); err != nil {
		return nil, e.classify(ctx, "declare", err)
	}
	q.declared = true
	return q.fetch(ctx)
}

// begin is BEGIN and the transaction-local settings: fixed, trusted text.
// Five fix the text forms the value mapping reads; cursor_tuple_fraction
// 1 makes PostgreSQL plan the cursor as it would plan the query alone, so
// the rows fetched are the first rows the query itself returns.
func (e *Executor) begin() string {
	return fmt.Sprintf("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; "+
		"SET LOCAL statement_timeout = %d; SET LOCAL lock_timeout = %d; "+
		"SET LOCAL idle_in_transaction_session_timeout = %d; "+
		"SET LOCAL TimeZone = 'UTC'; SET LOCAL DateStyle = 'ISO, YMD'; SET LOCAL IntervalStyle = 'iso_8601'; "+
		"SET LOCAL extra_float_digits = 1; SET LOCAL bytea_output = 'hex'; SET LOCAL cursor_tuple_fraction = 1; "+
		"SELECT pg_catalog.setseed(%s)",
		e.opts.StatementTimeout.Milliseconds(), e.opts.LockTimeout.Milliseconds(),
		(e.opts.StatementTimeout + 5*time.Second).Milliseconds(), freshSeed())
}

// freshSeed is a seed for the session's random(), new for every call: the
// state of the generator is not transactional and no check can read it,
// so code hidden in one query (a STABLE function calling setseed) could
// otherwise fix what random() gives the next call on the connection.
func freshSeed() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	f := float64(binary.BigEndian.Uint64(b[:])>>11)/(1<<53)*2 - 1 // [-1, 1)
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// execOne runs one statement with the extended protocol and reads its
// result to the end, with args, if any, bound to its parameters in text
// form (their types inferred from the statement's casts).
func execOne(ctx context.Context, pc *pgconn.PgConn, sql string, args ...[]byte) error {
	if len(args) > 0 {
		_, err := pc.ExecParams(ctx, sql, args, nil, nil, nil).Close()
		return err
	}
	_, err := pc.ExecParams(ctx, sql, nil, nil, nil, nil).Close()
	return err
}

// fetch reads at most Limit rows of the cursor, then moves past one more
// to learn whether rows were cut, and stops at the result bound: once the rows read exceed MaxResultBytes, the fetch is cancelled
// on the server and the rest of what it already sent is read and
// dropped, within a second, after which the connection is closed instead.
func (q *query) fetch(ctx context.Context) ([][][]byte, error) {
	e := q.e
	fctx, cancelFetch := context.WithCancel(ctx)
	defer cancelFetch()
	rr := q.pc.ExecParams(fctx, fmt.Sprintf("FETCH FORWARD %d FROM %s", q.prep.Limit, cursorName), nil, nil, nil, nil)
	var raws [][][]byte
	size := 0
	for rr.NextRow() {
		if q.cut {
			continue // dropping what was sent before the cancel arrived
		}
		q.seen++
		raw := rr.Values()
		size += len("[],")
		for _, v := range raw {
			size += jsonCost(v)
		}
		if size > e.opts.MaxResultBytes {
			q.cut = true
			q.stopFetch(fctx, cancelFetch)
			continue
		}
		raws = append(raws, copyRow(raw))
	}
	q.fds = slices.Clone(rr.FieldDescriptions())
	_, err := rr.Close()
	switch {
	case q.cut && len(raws) == 0:
		return nil, tooLarge(e.opts.MaxResultBytes, "a row")
	case q.cut:
		// The fetch ended by our cancel (57014), or on its own before
		// the cancel arrived; either way the rows read are the result.
		return raws, nil
	case err != nil:
		return nil, e.classify(ctx, "fetch", err)
	}
	if q.seen == q.prep.Limit {
		// Is there one more row? MOVE computes it without sending it,
		// so a large row past the bound cannot fail the call.
		tag, err := q.pc.ExecParams(ctx, "MOVE FORWARD 1 FROM "+cursorName, nil, nil, nil, nil).Close()
		if err != nil {
			return nil, e.classify(ctx, "fetch", err)
		}
		if tag.RowsAffected() > 0 {
			q.seen++ // the probe: it proves rows were cut
		}
	}
	return raws, nil
}

// stopFetch asks the server to cancel the running fetch and arms a second
// bound: if the fetch has not ended within a second, cancelling its
// context makes pgx cancel again and then close the connection.
func (q *query) stopFetch(ctx context.Context, cancelFetch context.CancelFunc) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_ = q.pc.CancelRequest(cctx) // best effort; the timer below is the bound
	time.AfterFunc(time.Second, cancelFetch)
}

// end finishes the transaction: the session-effect check, the rollback and
// the check after it, in one round trip. clean reports whether the
// connection may go back to the pool; err refuses the call when the query
// left an effect on the session, or when the check inside the transaction
// could not run. A connection that is gone took its session, and whatever
// the query did to it, with it.
//
// After a fetch cut by the result bound the transaction is aborted, or may
// be by a cancel still on its way, so only the check after the rollback
// runs: what a query changes only for its transaction (settings, LISTEN)
// the rollback undoes, and what outlives it (locks, prepared statements)
// that check sees. If it fails, the connection is closed and the rows
// read stand.
func (q *query) end(ctx context.Context) (clean bool, err error) {
	pc, e := q.pc, q.e
	if pc.IsClosed() {
		return false, nil
	}
	inTx := pc.TxStatus() == 'T' && !q.cut
	var sql string
	switch {
	case inTx:
		if q.declared {
			sql = "CLOSE " + cursorName + "; "
		}
		// Whatever outlives a rollback is visible inside the
		// transaction too, so after it only the canary is read.
		sql += inTxCheck + "; ROLLBACK; " + readOnlyCanary
	case pc.TxStatus() == 'I':
		sql = afterRollbackCheck
	default:
		// A failed transaction runs nothing but its end; what it may
		// have left that a rollback does not undo is seen after it.
		sql = "ROLLBACK; " + afterRollbackCheck
	}
	res, err := pc.Exec(ctx, sql).ReadAll()
	if err != nil {
		var pgErr *pgconn.PgError
		switch {
		case q.cut:
			e.logFailure("session check", err)
			return false, nil
		case errors.As(err, &pgErr):
			// The check failed inside the transaction, e.g. on a
			// statement_timeout the query lowered: fail closed.
			e.log.Warn("connection discarded: the session check failed", slog.String("sqlstate", pgErr.Code))
			return false, violation("the query's effect on the database session could not be checked").WithCause(err)
		}
		e.logFailure("rollback", err)
		return false, errDatabase
	}
	// The checks are the results with the check's columns (not CLOSE,
	// ROLLBACK or the canary); the last result is read after the rollback.
	var checks []*pgconn.Result
	for _, r := range res {
		if len(r.FieldDescriptions) == effectColumns {
			checks = append(checks, r)
		}
	}
	last := res[len(res)-1]
	if len(checks) != 1 || pc.TxStatus() != 'I' || last.Err != nil || len(last.Rows) != 1 || len(last.Rows[0]) == 0 {
		e.log.Error("database failure", slog.String("step", "session check"), slog.String("cause", "unexpected reply"))
		return false, errDatabase
	}
	fx, err := readEffects(checks[0])
	if err != nil {
		e.logFailure("session check", err)
		return false, errDatabase
	}
	what := fx.found(q.settings, !inTx)
	readOnly := string(last.Rows[0][len(last.Rows[0])-1]) == "on"
	if len(what) > 0 {
		slices.Sort(what)
		what = slices.Compact(what)
		e.log.Warn("connection discarded: the query changed the database session", slog.Any("effects", what))
		return false, effectProblem(what)
	}
	if !readOnly {
		e.log.Warn("connection discarded: the session no longer starts transactions read-only")
		return false, nil
	}
	return true, nil
}

// cleanError reports whether err leaves the connection fit for reuse: no
// error, an ordinary SQL error the server reported in an intact session,
// or a refusal decided here before the query ran.
func cleanError(err error) bool {
	if err == nil {
		return true
	}
	var pr *problem.Problem
	if !errors.As(err, &pr) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code != "57014"
	}
	return pr.Cause == nil
}

// result maps the rows once the transaction is over: an array of one of
// the database's own types can only be mapped after a catalog lookup,
// which runs on the same connection when it is still open.
func (q *query) result(ctx context.Context, raws [][][]byte) (*ResultSet, error) {
	e, fds := q.e, q.fds
	tm := q.conn.TypeMap()
	rs := &ResultSet{Columns: make([]Column, len(fds)), Rows: make([][]any, 0, len(raws))}
	for i, fd := range fds {
		rs.Columns[i] = Column{Name: fd.Name, Type: typeName(tm, fd.DataTypeOID)}
	}
	var at arrayTypes
	if oids := unknownOIDs(tm, fds); len(raws) > 0 && len(oids) > 0 {
		if q.pc.IsClosed() {
			at = e.lookupArraysFresh(ctx, oids)
		} else {
			at = e.lookupArrays(ctx, q.conn, oids)
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
	rs.Truncated = q.cut || q.prep.Truncated(q.seen)
	return rs, nil
}

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

// logFailure logs an infrastructure failure by its class and SQLSTATE
// only: pgx's messages name hosts and users. It is info, the level a
// server runs at: a database that is down or refuses the role is the
// operator's to fix, not a fault of this program, and it must be in the
// log at the default level.
func (e *Executor) logFailure(step string, err error) {
	attrs := []slog.Attr{slog.String("step", step), slog.String("class", FailureClass(err))}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		attrs = append(attrs, slog.String("sqlstate", pgErr.Code))
	}
	e.log.LogAttrs(context.Background(), slog.LevelInfo, "database failure", attrs...)
}

// typeName names a column type: pgx's name for built-in types, else the
// OID.
func typeName(tm *pgtype.Map, oid uint32) string {
	if t, ok := tm.TypeForOID(oid); ok {
		return t.Name
	}
	return "oid:" + strconv.FormatUint(uint64(oid), 10)
}
