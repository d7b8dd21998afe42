package sqlquery

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	pg "github.com/pganalyze/pg_query_go/v6"
	pgparser "github.com/pganalyze/pg_query_go/v6/parser"

	"github.com/mcp-bastion/bastion/internal/problem"
)

// Limits of the policy.
const (
	// DefaultMaxQueryBytes is the longest query accepted unless
	// [WithMaxQueryBytes] says otherwise. It is checked before parsing.
	DefaultMaxQueryBytes = 64 << 10

	// MaxQueryBytesCeiling is the largest value [WithMaxQueryBytes] takes.
	MaxQueryBytesCeiling = 1 << 20

	// MaxRowsCeiling is the largest max_rows [Policy.Prepare] takes. The
	// executor's FETCH of max_rows rows then fits the 32-bit
	// count PostgreSQL's grammar takes, and nobody wants two billion
	// rows through an MCP tool.
	MaxRowsCeiling = math.MaxInt32 - 1

	// MaxDepth is the deepest nesting of parse-tree messages accepted
	// (an operand of a + b sits two levels below the +: the Node wrapper
	// and the A_Expr). It is checked before the tree goes back to the C
	// deparser, whose recursion is unguarded and costs up to about 1 KiB
	// of thread stack per level. Real queries stay far below it: the
	// ten-join benchmark query is 27 levels deep, and each term of a
	// chain like a || b || c adds two.
	MaxDepth = 1000

	// maxStructuralTokens bounds the tokens that can open a nesting level
	// (operators, keywords, brackets) before the query reaches the C
	// parser. libpg_query's output step recurses without a stack check
	// (pganalyze/pg_query#339) and a SIGSEGV in cgo kills the whole
	// process, so nesting must be bounded from tokens alone, before
	// parsing. Names, literals, commas and closing brackets cannot open a
	// level, so long IN lists and wide select lists do not count. A
	// level costs the parser at most about 1 KiB of stack, so the
	// worst case stays near 2 MiB, a quarter of glibc's default thread
	// stack.
	maxStructuralTokens = 2048
)

// Policy checks queries against the read_only_sql rules and rewrites the
// ones it accepts. Build one with [NewPolicy]. A Policy is immutable and
// safe for concurrent use.
type Policy struct {
	maxQueryBytes int
	deny          []denyRule
	// allow, when not nil, is the function allowlist: every function the
	// query names must be in it (and still not denied).
	allow map[string]struct{}
}

// Option configures a [Policy].
type Option func(*Policy) error

// WithMaxQueryBytes sets the longest query accepted, in bytes, between 1
// and [MaxQueryBytesCeiling]. The default is [DefaultMaxQueryBytes].
func WithMaxQueryBytes(n int) Option {
	return func(p *Policy) error {
		if n < 1 || n > MaxQueryBytesCeiling {
			return fmt.Errorf("sqlquery: max query bytes %d is outside [1, %d]", n, MaxQueryBytesCeiling)
		}
		p.maxQueryBytes = n
		return nil
	}
}

// WithDeniedFunctions adds function names to the built-in denylist. Names
// are matched like the built-in patterns: against the last component of
// the resolved name, exactly (unquoted identifiers are lower case after
// the parser's folding), with '*' matching any run of characters.
func WithDeniedFunctions(patterns ...string) Option {
	return func(p *Policy) error {
		for _, s := range patterns {
			if !validFunctionName(s) {
				return fmt.Errorf("sqlquery: denied function %q is not a valid name", s)
			}
			p.deny = append(p.deny, denyRule{Pattern: s, Class: "operator-configured"})
		}
		return nil
	}
}

// WithAllowedFunctions switches the policy to allowlist mode: a query may
// only call functions whose resolved name (last component, exact) is one
// of names, and the denylist still applies on top. Functions the SQL
// grammar calls for special syntax must be listed too: EXTRACT is
// pg_catalog.extract, SUBSTRING(x FROM y) is substring, TRIM is btrim,
// AT TIME ZONE is timezone, SIMILAR TO is similar_to_escape, OVERLAPS is
// overlaps, and TABLESAMPLE methods (bernoulli, system) count as functions.
// Calling it with no names allows no function at all.
func WithAllowedFunctions(names ...string) Option {
	return func(p *Policy) error {
		if p.allow == nil {
			p.allow = make(map[string]struct{}, len(names))
		}
		for _, s := range names {
			if !validFunctionName(s) || strings.Contains(s, "*") {
				return fmt.Errorf("sqlquery: allowed function %q is not a valid name", s)
			}
			p.allow[s] = struct{}{}
		}
		return nil
	}
}

// NewPolicy returns a policy with the built-in denylist and the given
// options. It returns an error, rather than a silently corrected policy,
// when an option is invalid or allows a function the denylist refuses.
func NewPolicy(opts ...Option) (*Policy, error) {
	p := &Policy{
		maxQueryBytes: DefaultMaxQueryBytes,
		deny:          append([]denyRule(nil), denyRules...),
	}
	for _, opt := range opts {
		if err := opt(p); err != nil {
			return nil, err
		}
	}
	for name := range p.allow {
		if r, denied := p.denied(name); denied {
			return nil, fmt.Errorf("sqlquery: allowed function %q is denied by the rule %q", name, r.Pattern)
		}
	}
	return p, nil
}

// Prepared is a query the policy accepted, regenerated for execution.
//
// The executor must run SQL as it is (never the caller's text), hand the
// caller at most Limit of its rows, and try to read one more: if that row
// exists the result was cut and the tool reports truncated: true (see
// [Prepared.Truncated]). The SQL keeps the query's own LIMIT, OFFSET and
// FETCH … WITH TIES as written: the bound is applied from outside, by the
// number of rows the executor fetches, so the rows returned are always a
// prefix of what the query itself returns.
type Prepared struct {
	// SQL is the statement to execute: deparsed from the checked tree,
	// without comments.
	SQL string
	// Limit is the largest number of rows the caller may receive.
	Limit int64
	// Functions are the functions SQL may call by a name the catalog
	// could resolve outside pg_catalog and information_schema, for the
	// executor to vet against the database's catalog (see [FuncRef]).
	Functions []FuncRef
}

// FuncRef is a function a query names, as the parser read the name:
// unquoted identifiers folded to lower case, quoted ones as written. The
// catalog check tells PostgreSQL's own functions (created by initdb) from
// those of the database or its extensions, wherever they live.
type FuncRef struct {
	// Schema is the schema the call names, "" when unqualified (the
	// database then searches its search_path).
	Schema string
	// Name is the function's name.
	Name string
	// Attribute marks a name that is not written as a call but can be
	// one: the last name of a column reference (c.f) or field selection
	// ((c).f), which PostgreSQL resolves to f(c) when c has no column f.
	Attribute bool
	// Refused, set only with Attribute, says why the policy refuses the
	// function the name would call ("is not allowed", "is not on the
	// allowlist"). The tree cannot tell the column from the call, so the
	// catalog check refuses the query when any function of that name
	// could be called this way, PostgreSQL's own included.
	Refused string
}

// Truncated reports whether a result of which the executor saw rowsSeen
// rows (at most Limit, plus one when it found a row after them) was cut:
// only the row past Limit proves it.
func (p *Prepared) Truncated(rowsSeen int64) bool {
	return rowsSeen > p.Limit
}

// Prepare checks query against the policy and returns the SQL to run with
// at most maxRows rows, or a *problem.Problem: MCP_VALIDATION_ERROR for
// arguments that are not a query (empty, too long, NUL bytes, invalid
// UTF-8, a syntax error, maxRows out of range), MCP_QUERY_VIOLATION for a
// query the policy refuses.
func (p *Policy) Prepare(query string, maxRows int64) (*Prepared, error) {
	if maxRows < 1 || maxRows > MaxRowsCeiling {
		return nil, problem.Newf(problem.Validation, []string{"max_rows"},
			"max_rows must be between 1 and %d", int64(MaxRowsCeiling))
	}
	if prob := p.checkText(query); prob != nil {
		return nil, prob
	}
	if structuralUpperBound(query) > maxStructuralTokens {
		if prob := checkComplexity(query); prob != nil {
			return nil, prob
		}
	}
	tree, funcs, prob := p.parseOne(query)
	if prob != nil {
		return nil, prob
	}
	checked, err := encode(tree)
	if err != nil {
		return nil, violation("query could not be regenerated from its parse tree").
			WithCause(fmt.Errorf("sqlquery: encode: %w", err))
	}
	out, err := pgparser.DeparseFromProtobuf(checked)
	if err != nil {
		return nil, violation("query could not be regenerated from its parse tree").
			WithCause(fmt.Errorf("sqlquery: deparse: %w", err))
	}
	prep := &Prepared{Limit: maxRows, Functions: funcs}
	prep.SQL = out
	if prob := p.recheck(prep, checked); prob != nil {
		return nil, prob
	}
	return prep, nil
}

// checkText refuses what is not a query before any parsing: the C parser
// reads a NUL as the end of the text and must not see unbounded input.
func (p *Policy) checkText(query string) *problem.Problem {
	switch {
	case len(query) > p.maxQueryBytes:
		return problem.Newf(problem.Validation, []string{"query"},
			"query is %d bytes long; the limit is %d", len(query), p.maxQueryBytes)
	case strings.IndexByte(query, 0) >= 0:
		return problem.New(problem.Validation, "query contains a NUL byte", "query")
	case !utf8.ValidString(query):
		return problem.New(problem.Validation, "query is not valid UTF-8", "query")
	case strings.TrimSpace(query) == "":
		return problem.New(problem.Validation, "query is empty", "query")
	}
	return nil
}

// structuralUpperBound is a cheap upper bound on the tokens
// checkComplexity counts: every such token holds an operator or opening
// bracket character, or starts with a letter (a keyword), so counting
// those characters and the starts of letter runs can only overcount. Most
// queries are far below the limit and skip the lexer pass.
func structuralUpperBound(query string) int {
	n, inWord := 0, false
	for i := 0; i < len(query); i++ {
		c := query[i]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80
		if letter && !inWord {
			n++
		}
		inWord = letter
		if strings.IndexByte("([+-*/<>=~!@#%^&|`?:\\", c) >= 0 {
			n++
		}
	}
	return n
}

// checkComplexity refuses a query with more than maxStructuralTokens
// tokens that can open a nesting level, before the recursive parser sees
// it.
func checkComplexity(query string) *problem.Problem {
	n, err := structuralTokens(query)
	if err != nil {
		return syntaxProblem(err)
	}
	if n > maxStructuralTokens {
		return problem.Newf(problem.QueryViolation, []string{"query"},
			"query is too complex: more than %d operators, keywords and brackets", maxStructuralTokens)
	}
	return nil
}

// structuralTokens counts the tokens that can open a nesting level, with
// the real lexer, which has no recursion of its own. Names, literals,
// commas, dots (a.b.c is one flat name), closing brackets and comments
// are not counted.
func structuralTokens(query string) (int, error) {
	res, err := pg.Scan(query)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, t := range res.GetTokens() {
		switch t.GetToken() {
		case pg.Token_IDENT, pg.Token_UIDENT, pg.Token_FCONST, pg.Token_SCONST,
			pg.Token_USCONST, pg.Token_BCONST, pg.Token_XCONST, pg.Token_ICONST,
			pg.Token_PARAM, pg.Token_SQL_COMMENT, pg.Token_C_COMMENT,
			pg.Token_ASCII_44, pg.Token_ASCII_41, pg.Token_ASCII_93, pg.Token_ASCII_59,
			pg.Token_ASCII_46:
			continue
		}
		n++
	}
	return n, nil
}

// parseOne parses query, requires exactly one SELECT statement and walks
// its whole tree. It returns the tree and the functions it names that the
// catalog must vet.
func (p *Policy) parseOne(query string) (*pg.ParseResult, []FuncRef, *problem.Problem) {
	tree, err := pg.Parse(query)
	if err != nil {
		var perr *pgparser.Error
		if errors.As(err, &perr) {
			return nil, nil, syntaxProblem(err)
		}
		// The C parser succeeded but its tree is deeper than the
		// protobuf decoder's recursion limit.
		return nil, nil, violation("query is nested too deeply").
			WithCause(fmt.Errorf("sqlquery: parse: %w", err))
	}
	switch n := len(tree.GetStmts()); {
	case n == 0:
		return nil, nil, problem.New(problem.Validation, "query contains no statement", "query")
	case n > 1:
		return nil, nil, violation("only one statement is allowed")
	}
	root := tree.GetStmts()[0].GetStmt()
	sel := root.GetSelectStmt()
	if sel == nil {
		return nil, nil, violation(fmt.Sprintf("statement type %s is not allowed", nodeName(root)))
	}
	w := walker{p: p}
	if prob := w.walk(sel.ProtoReflect(), 1); prob != nil {
		return nil, nil, prob
	}
	return tree, w.funcs, nil
}

// recheck parses the SQL about to run, checks it like the caller's query,
// and requires that it is the tree that was checked (locations aside;
// checked is that tree as encode wrote it) and holds no comment. It guards
// against a deparser that writes something other than what it was given.
func (p *Policy) recheck(prep *Prepared, checked []byte) *problem.Problem {
	tree, _, prob := p.parseOne(prep.SQL)
	if prob != nil {
		if prob.Code == problem.Validation {
			// The regenerated text is ours: failing to parse it is a
			// refusal of the query, not the caller's syntax error.
			return violation(notFaithful).WithCause(prob)
		}
		return prob
	}
	if enc, err := encode(tree); err != nil || !sameEncoding(tree.ProtoReflect().Descriptor(), enc, checked) {
		return violation(notFaithful).
			WithCause(errors.New("sqlquery: regenerated query parses to a different tree"))
	}
	if hasComment(prep.SQL) {
		return violation("query could not be regenerated without comments")
	}
	return nil
}

// hasComment reports whether sql holds a comment token. Only text with
// "--" or "/*" somewhere (even inside a literal) can, so the lexer runs
// only then.
func hasComment(sql string) bool {
	if !strings.Contains(sql, "--") && !strings.Contains(sql, "/*") {
		return false
	}
	res, err := pg.Scan(sql)
	if err != nil {
		return true
	}
	for _, t := range res.GetTokens() {
		if t.GetToken() == pg.Token_SQL_COMMENT || t.GetToken() == pg.Token_C_COMMENT {
			return true
		}
	}
	return false
}

// syntaxProblem reports a parser or lexer error. Its message may quote the
// query, so it is echoed through problem.Quote; the cursor position, when
// known, goes to metadata.
func syntaxProblem(err error) *problem.Problem {
	msg := err.Error()
	prob := problem.New(problem.Validation, "query is not valid SQL: "+problem.Quote(msg), "query")
	var perr *pgparser.Error
	if errors.As(err, &perr) && perr.Cursorpos > 0 {
		prob.WithMetadata("position", perr.Cursorpos)
	}
	return prob.WithCause(err)
}

// notFaithful is the detail when the SQL regenerated from the checked tree
// is not that tree. It is a limitation of the deparser, not of the
// caller's query, so the detail suggests a way around it.
const notFaithful = "query could not be regenerated faithfully from its parse tree; try an equivalent spelling"

// violation is a policy refusal of the query argument.
func violation(detail string) *problem.Problem {
	return problem.New(problem.QueryViolation, detail, "query")
}
